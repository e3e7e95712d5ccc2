// distributed/zero_shard.h: ZeRO-1's arithmetic: which part of the flat parameter array each
// rank owns, updates and keeps fp32 master weights and AdamW moments for.
//
// The P parameters are padded at the end to W equal chunks of shard_size elements, shard_size
// a multiple of the alignment: rank r owns [r * shard_size, (r + 1) * shard_size) of the padded
// array, and of the real parameters [begin, end), the part of that range below P (possibly
// empty for the last ranks when P is small). So the parameter and gradient buffers are allocated
// with padded_count elements, the tail zeroed once; NCCL's all-gather then moves equal chunks,
// and rank r's chunk sits at r * shard_size, so it works in place.
// The zero padding adds nothing to a gradient norm and AdamW leaves it zero.
//
// Resume on any world size: a checkpoint holds the full master weights and moments in parameter
// order (the ranks gather them before writing), so a run on M ranks reads [begin, end) of them
// for its shard (load_optimizer_state); nothing in the file depends on the world size that
// wrote it.
#ifndef FLASHGPT_ZERO_SHARD_H
#define FLASHGPT_ZERO_SHARD_H

#include <stddef.h>
#include "common/error.h"

#ifdef __cplusplus
extern "C" {
#endif

// 128 elements: every chunk starts on a 256-byte boundary in bf16, 512 in fp32.
#define ZERO_SHARD_ALIGN 128

typedef struct {
    size_t param_count;    // P
    size_t padded_count;   // world_size * shard_size >= P
    size_t shard_size;     // elements per rank, a multiple of the alignment
    size_t begin, end;     // this rank's real parameters, [begin, end) within [0, P)
} ZeroShard;

// Rank rank's shard of param_count parameters over world_size ranks, chunks a multiple of
// align elements. Returns 0, or -1 with err on a rank outside [0, world_size), a world size
// below 1 or an alignment of 0.
int zero_shard_init(ZeroShard* s, size_t param_count, int world_size, int rank, size_t align,
                    char* err);

// A tensor's part in a shard: the tensor [tensor_begin, tensor_begin + tensor_count) of the
// flat array meets [begin, end) in count elements, from flat index param_index, which is
// shard_offset into the shard's own arrays (master weights and moments).
typedef struct {
    size_t param_index;
    size_t shard_offset;
    size_t count;          // 0: the tensor has nothing in this shard
} ZeroShardPart;

ZeroShardPart zero_shard_part(const ZeroShard* s, size_t tensor_begin, size_t tensor_count);

#ifdef __cplusplus
}
#endif

#endif
