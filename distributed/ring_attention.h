// distributed/ring_attention.h: context parallelism's attention. One sequence of T tokens is
// cut into 2N chunks of c = T / 2N; rank r of a group of N holds chunks r and 2N-1-r
// ("zigzag", so every rank does the same causal work) as its local sequence of 2c rows.
// Attention runs as a ring: each rank's queries meet its own keys (causal), then every other
// rank's keys and values as they travel around the ring, block by block:
//   from a rank s < r: both local chunks against s's first chunk (all of it visible)
//   from a rank s > r: the local second chunk against both of s's chunks (all visible)
// (the rest lies above the diagonal and is skipped). Each block is the flash kernel without a
// mask on a pair of chunks, its output merged into an fp32 accumulator with the log-sum-exp:
//   L = log(e^L1 + e^L2),  O = e^(L1 - L) O1 + e^(L2 - L) O2.
// The backward runs the same blocks through the flash backward with the final O and L, so each
// block's probabilities are the global ones: dQ stays local, dK and dV travel the ring with
// their keys and values and come home after N passes.
// The ring moves K and V (and in the backward their fp32 gradients) with NCCL send/recv, or,
// with all N ranks in one process on one GPU (simulated: the tests), as copies in memory; the
// code is the same but for that move (ring_pass in ring_attention.cu).
#ifndef FLASHGPT_RING_ATTENTION_H
#define FLASHGPT_RING_ATTENTION_H

#include <stddef.h>
#include "attention/attention.h"
#include "distributed/nccl_comm.h"

// A context-parallel group as this process sees it.
typedef struct {
    int size;          // N ranks in the group
    int first, count;  // the group's ranks held here: one rank (count 1) with NCCL, all N when simulated
    NcclComm* comm;    // the group's communicator; NULL when simulated
} RingGroup;

// The chunk of the full sequence that half h (0, 1) of rank r's local sequence is.
static inline int zigzag_chunk(int rank, int half, int size) { return half ? 2 * size - 1 - rank : rank; }

// NULL when the ring runs the local shape s, else why not. s is the model's: B = batch * count
// rows of T = 2c tokens, row b * count + i holding rank first + i's local sequence of batch b.
const char* ring_attention_unsupported(const RingGroup* g, AttentionShape s);
// Bytes of workspace one call needs (shared by the layers).
size_t ring_attention_workspace_bytes(const RingGroup* g, AttentionShape s);

// out (rows, NH, HS) and lse (rows, NH, 2c) of every local row, from qkv (rows, 2c, 3, NH, HS).
void ring_attention_forward(const RingGroup* g, AttentionShape s, bf16* out, float* lse, const bf16* qkv,
                            void* workspace, cudaStream_t stream);

// dqkv (rows, 2c, 3, NH, HS), overwritten, from dout, the forward's out and lse, and qkv.
void ring_attention_backward(const RingGroup* g, AttentionShape s, bf16* dqkv, const bf16* dout, const bf16* out,
                             const float* lse, const bf16* qkv, void* workspace, int deterministic,
                             cudaStream_t stream);

#endif
