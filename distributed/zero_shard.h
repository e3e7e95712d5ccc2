// distributed/zero_shard.h: ZeRO-1's arithmetic: which parameters of the flat array each rank
// owns, updates and keeps the fp32 optimizer state of (master weights and the moments).
//
// The flat array is a list of tensors (ZeroTensor: an element count and a unit). Two ways to cut
// it over W ranks:
// - flat (AdamW): the P parameters are padded at the end to W equal chunks of shard_size
//   elements, shard_size a multiple of the alignment: rank r owns [r * shard_size, (r + 1) *
//   shard_size) of the padded array, and of the real parameters [begin, end), the part of that
//   range below P (possibly empty for the last ranks when P is small). The parameter and
//   gradient buffers are allocated with padded_count elements, the tail zeroed once; NCCL's
//   all-gather then moves equal chunks, and rank r's chunk sits at r * shard_size, so it works
//   in place. The zero padding adds nothing to a gradient norm and AdamW leaves it zero.
// - by units (Muon): each tensor is cut into whole units (a matrix of a layer, for the
//   tensors Muon updates: one rank orthogonalises it whole), and rank r owns the units
//   [r u / W, (r + 1) u / W) of a tensor of u units. Its parts lie one after another in its
//   optimizer arrays, each from an aligned offset; shard_size differs between ranks, and the
//   parameter buffers need no padding (padded_count = P). The ranks' parts are gathered by one
//   broadcast each.
// Either way zero_shard_part gives any rank's part of a tensor: where it starts in the flat
// array and in that rank's optimizer arrays, and how long it is.
//
// Resume on any world size: a checkpoint holds the full optimizer arrays in parameter order (the
// ranks gather their parts before writing), so a run on M ranks reads its own parts of them
// (gpt_read_optimizer_state); nothing in the file depends on the world size that wrote it.
#ifndef FLASHGPT_ZERO_SHARD_H
#define FLASHGPT_ZERO_SHARD_H

#include <stddef.h>
#include "common/error.h"

#ifdef __cplusplus
extern "C" {
#endif

// 128 elements: every chunk starts on a 256-byte boundary in bf16, 512 in fp32.
#define ZERO_SHARD_ALIGN 128

// A tensor of the flat array: count elements, cut (by units) into pieces of unit elements, the
// last one shorter when unit does not divide count.
typedef struct {
    size_t count, unit;
} ZeroTensor;

typedef struct {
    size_t param_count;    // P: the tensors' counts added up
    size_t padded_count;   // flat: world_size * shard_size >= P; by units: P
    size_t shard_size;     // elements of this rank's optimizer arrays (flat: a multiple of align)
    size_t owned;          // real parameters this rank updates
    size_t begin, end;     // flat: this rank's real parameters, [begin, end) within [0, P)
    size_t align;
    int world_size, rank;
    int by_units;
} ZeroShard;

// Rank rank's shard of the n tensors over world_size ranks, flat or by_units, chunks and parts
// aligned to align elements. Returns 0, or -1 with err on a rank outside [0, world_size), a
// world size below 1, an alignment of 0 or, by units, a unit of 0.
int zero_shard_init(ZeroShard* s, const ZeroTensor* tensors, int n, int world_size, int rank, int by_units,
                    size_t align, char* err);

// Rank rank's part of tensor i (of the n tensors s was made with): count elements from flat
// index param_index, which is shard_offset into that rank's optimizer arrays.
typedef struct {
    size_t param_index;
    size_t shard_offset;
    size_t count;          // 0: the tensor has nothing in this shard
} ZeroShardPart;

ZeroShardPart zero_shard_part(const ZeroShard* s, const ZeroTensor* tensors, int i, int rank);

// Rank rank's part of the elements [lo, hi) of the flat array, a range inside tensor i: the
// piece of a range of finished gradients that the reduce-scatter sends to its owner. Over the
// ranks the pieces of a range are disjoint and cover it.
ZeroShardPart zero_shard_piece(const ZeroShard* s, const ZeroTensor* tensors, int i, int rank, size_t lo, size_t hi);

#ifdef __cplusplus
}
#endif

#endif
