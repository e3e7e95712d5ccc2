// attention/ring.h: context parallelism's attention. One sequence of T tokens is cut into 2N
// chunks of c = T / 2N; rank r of a group of N holds chunks r and 2N-1-r ("zigzag", so every
// rank does the same causal work) as its local sequence of 2c rows. Attention runs as a ring:
// each rank's queries meet its own keys (causal), then every other rank's keys and values as
// they travel around the ring, block by block (which blocks, in which order: the walk of
// attention/ring_walk.h). Each block is the flash kernel without a mask on views of the local
// queries and the travelling keys and values (attention/params.h), its output merged into an
// fp32 accumulator with the log-sum-exp (attention/softmax.cuh).
// With a key window (params.h's AttentionMask: documents, a sliding window) the positions stay
// global: the mask's arrays hold each local row's whole sequence, and every block is a masked
// call at its chunks' positions: the two diagonal blocks (a local chunk against itself) causal,
// the others, all of whose keys come before their queries, not. A block that a window puts out
// of every row's reach is left out of the walk; one that documents put out of reach, inside the
// kernels (its bounds are on the GPU), its rows left with L = -inf, which the merge passes over.
// The backward runs the same blocks through the flash backward with the final O and L, so each
// block's probabilities are the global ones: dQ stays local, dK and dV travel the ring with
// their keys and values and come home after N passes.
// How buffers move between ranks is the caller's (AttentionRing.pass and its transport): NCCL
// send/recv, or, with all N ranks in one process on one GPU (simulated: the tests), copies in
// memory; the program gives distributed/ring_transport.h's, and attention/ includes no NCCL.
#ifndef FLASHGPT_RING_H
#define FLASHGPT_RING_H

#include <stddef.h>
#include "attention/params.h"
#include "attention/ring_walk.h"

// A context-parallel group as this process sees it.
typedef struct AttentionRing AttentionRing;
struct AttentionRing {
    int size;          // N ranks in the group
    int first, count;  // the group's ranks held here: one rank (count 1), or all N (simulated)
    // Enqueues on stream, for every rank i held here: the next rank's buffer `to` receives rank
    // i's buffer `from`, `bytes` each; the buffers of the ranks held here lie `stride` bytes apart.
    void (*pass)(void* transport, const void* from, void* to, size_t stride, size_t bytes, cudaStream_t stream);
    void* transport;   // what pass is given: the state of the caller's transport
};

// A batch of B sequences of T tokens (B, T), on the host, as the model's rows hold it under the
// ring: into rows (B * count, 2c), c = T / 2 size, row b * count + i being rank first + i's local
// sequence of sequence b, its two zigzag chunks one after the other.
void zigzag_split(const AttentionRing* g, const int* batch, int B, int T, int* rows);

// NULL when the ring runs the local shape s, else why not. s is the model's: B = batch * count
// rows of T = 2c tokens, row b * count + i holding rank first + i's local sequence of batch b.
const char* ring_attention_unsupported(const AttentionRing* g, AttentionShape s);
// Bytes of workspace one call needs (shared by the layers), ring_document_bounds' included.
size_t ring_attention_workspace_bytes(const AttentionRing* g, AttentionShape s);

// The documents of each local row's whole sequence (attention/mask.h), as the ring's mask takes
// them: doc_start and doc_end (rows, N * n) device, from the ranks' tokens (rows, n) device,
// rows as ring_attention_forward's, <|endoftext|> (the id eot) starting a document. Every rank's
// tokens travel the ring once (a rank's sequence starts in the chunks of others); no host work.
void ring_document_bounds(const AttentionRing* g, const int* tokens, int rows, int n, int eot, int* doc_start,
                          int* doc_end, void* workspace, cudaStream_t stream);

// out (rows, 2c, NH, HS) and lse (rows, NH, 2c) of every local row, from qkv (rows, 2c, 3, NH, HS).
// mask: NULL or inactive, causal; else the key window, its arrays (rows, 2c * N) each local
// row's whole sequence (ring_document_bounds), its positions 0.
void ring_attention_forward(const AttentionRing* g, AttentionShape s, const AttentionMask* mask, bf16* out,
                            float* lse, const bf16* qkv, void* workspace, cudaStream_t stream);

// dqkv (rows, 2c, 3, NH, HS), overwritten, from dout, the forward's out and lse, and qkv, under
// the forward's mask.
void ring_attention_backward(const AttentionRing* g, AttentionShape s, const AttentionMask* mask, bf16* dqkv,
                             const bf16* dout, const bf16* out, const float* lse, const bf16* qkv, void* workspace,
                             int deterministic, cudaStream_t stream);

#endif
