// attention/attention.h: the attention interface the model calls, one function per pass. An
// AttentionPlan, made once from the model's options, says which attention runs; behind it:
//   flash: never stores the T×T matrix; keeps the log-sum-exp L (B, NH, T) fp32 for backward.
//   naive: the textbook path; stores the probabilities P (B, NH, T, T) bf16 for backward.
//   ring:  context parallelism (attention/ring.h): the flash kernels on each rank's chunks of
//          a sequence against the keys and values travelling a ring of ranks.
// All read Q, K, V out of the model's fused activation qkv (B, T, 3, NH, HS), write O
// (B, T, NH, HS), and the backward writes dqkv in the same fused layout; the kernels beneath take
// any strides (attention/params.h).
#ifndef FLASHGPT_ATTENTION_H
#define FLASHGPT_ATTENTION_H

#include <stddef.h>
#include "attention/decode.h"
#include "attention/mask.h"
#include "attention/params.h"
#include "attention/ring.h"

typedef enum { ATTENTION_FLASH = 0, ATTENTION_NAIVE = 1 } AttentionKind;

// "flash" or "naive".
const char* attention_kind_name(AttentionKind kind);

typedef struct {
    AttentionKind kind;
    int deterministic;           // the backward gives the same bits on every run (naive always does)
    const AttentionRing* ring;   // NULL: each row of the batch is a sequence. Else a row is a rank's
                                 // two zigzag chunks of one (flash only)
    AttentionMask mask;          // the key window of every row (params.h, attention/mask.h): its
                                 // document, a sliding window, or both; all zero: plain causal.
                                 // Under the ring its arrays hold each row's whole sequence
                                 // (ring_document_bounds)
} AttentionPlan;

// NULL when the plan computes the shape s (B rows of T tokens), else a one-line reason.
const char* attention_unsupported(const AttentionPlan* plan, AttentionShape s);
// NULL when every path (flash, naive, decoding) takes head size HS, else the reason of the first
// that does not: the head sizes a model runs at in every program (generation runs flash alone).
const char* attention_head_size_unsupported(int HS);
// Bytes the forward keeps per layer for the backward: L (flash, ring) or P (naive).
size_t attention_saved_bytes(const AttentionPlan* plan, AttentionShape s);
// Bytes of scratch one forward or backward call needs (shared by all layers).
size_t attention_scratch_bytes(const AttentionPlan* plan, AttentionShape s);

void attention_forward(const AttentionPlan* plan, AttentionShape s,
                       bf16* out,            // (B, T, NH, HS)
                       void* saved,          // attention_saved_bytes
                       const bf16* qkv,      // (B, T, 3, NH, HS)
                       void* scratch,        // attention_scratch_bytes
                       cudaStream_t stream);

void attention_backward(const AttentionPlan* plan, AttentionShape s,
                        bf16* dqkv,           // (B, T, 3, NH, HS), overwritten
                        const bf16* dout,     // (B, T, NH, HS)
                        const bf16* out,      // (B, T, NH, HS)
                        const void* saved,
                        const bf16* qkv,      // (B, T, 3, NH, HS)
                        void* scratch,        // attention_scratch_bytes
                        cudaStream_t stream);

// Generation with a KV cache (the kernel: attention/decode.h): the new query of each of cache.B
// sequences against its cache of cache.T rows, on views; the query of sequence b is at
// positions[b] (device, < cache.T) and sees the keys 0..positions[b], or with the plan's window
// its last `window` of them. The same function as that row of the causal forward; one kernel
// serves both kinds. A sample is one document: a plan with documents is refused. qk (NULL:
// none): QK-norm and rotary of the query and of its own key row, which the call reads raw and
// writes back transformed (decode.h's DecodeQK). The scratch (attention_decode_scratch_bytes) is
// zeroed once before its first use and left zeroed by every call, so that calls on one stream,
// and the replays of a graph captured from them, share it.
const char* attention_decode_unsupported(const AttentionPlan* plan, AttentionShape cache);
size_t attention_decode_scratch_bytes(const AttentionPlan* plan, AttentionShape cache);
void attention_decode(const AttentionPlan* plan, const AttentionParams* p, const int* positions, const DecodeQK* qk,
                      void* scratch, cudaStream_t stream);

#endif
