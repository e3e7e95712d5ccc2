// attention/attention.h: the attention interface the model calls. Two implementations:
//   flash: never stores the T×T matrix; keeps the log-sum-exp L (B, NH, T) fp32 for backward.
//   naive: the textbook path; stores the probabilities P (B, NH, T, T) bf16 for backward.
// Both read Q, K, V by strides straight out of the fused activation qkv (B, T, 3, NH, HS)
// and write O (B, T, NH, HS); backward writes dqkv in the same fused layout.
#ifndef FLASHGPT_ATTENTION_H
#define FLASHGPT_ATTENTION_H

#include <stddef.h>
#include "common/cuda_check.h"

typedef enum { ATTENTION_FLASH = 0, ATTENTION_NAIVE = 1 } AttentionKind;

// "flash" or "naive".
const char* attention_kind_name(AttentionKind kind);

typedef struct {
    int B, T, NH, HS;
    int causal;     // 1: position t attends to positions <= t only
    float scale;    // softmax scale; 1/sqrt(HS) for GPT-2
} AttentionShape;

// NULL when the shape is supported, else a one-line reason (e.g. an unsupported head size).
const char* attention_unsupported(AttentionKind kind, AttentionShape s);

// Bytes the forward keeps per layer for the backward: L (flash) or P (naive).
size_t attention_saved_bytes(AttentionKind kind, AttentionShape s);
// Bytes of scratch one backward call needs (shared by all layers).
size_t attention_scratch_bytes(AttentionKind kind, AttentionShape s);

void attention_forward(AttentionKind kind, AttentionShape s,
                       bf16* out,            // (B, T, NH, HS)
                       void* saved,          // attention_saved_bytes
                       const bf16* qkv,      // (B, T, 3, NH, HS)
                       cudaStream_t stream);

// deterministic != 0: the same bits on every run (no floating-point atomics).
void attention_backward(AttentionKind kind, AttentionShape s,
                        bf16* dqkv,           // (B, T, 3, NH, HS), overwritten
                        const bf16* dout,     // (B, T, NH, HS)
                        const bf16* out,      // (B, T, NH, HS)
                        const void* saved,
                        const bf16* qkv,      // (B, T, 3, NH, HS)
                        void* scratch,        // attention_scratch_bytes
                        int deterministic,
                        cudaStream_t stream);

// Generation with a KV cache: the query of row pos of qkv (s.T rows of one sequence, B = 1, the
// fused layout above) against the keys and values of rows 0..pos, written to out (NH, HS).
// The same function as row pos of the causal forward; one kernel serves both kinds.
const char* attention_decode_unsupported(AttentionShape s);   // NULL when supported
size_t attention_decode_scratch_bytes(AttentionShape s);
void attention_decode(AttentionShape s, bf16* out, const bf16* qkv, int pos, void* scratch, cudaStream_t stream);

#endif
