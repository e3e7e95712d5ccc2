// attention/naive.h: textbook attention behind attention.h. The forward materializes the scores
// S = scale * Q K^T (B, NH, T, T), turns them into probabilities P in place and keeps P (bf16)
// for the backward; the backward reads P instead of recomputing it. Q, K, V are read by strides
// out of the fused activation qkv (B, T, 3, NH, HS), so no permute copies are needed. All matmuls
// go through cuBLAS (bf16 in, fp32 accumulation); softmax and its backward use fp32 math.
// Deterministic by construction: no atomics, fixed-order reductions.
#ifndef FLASHGPT_NAIVE_H
#define FLASHGPT_NAIVE_H

#include <stddef.h>
#include "attention/attention.h"

// NULL when the shape is supported (head size a multiple of 8 up to 256), else a one-line reason.
const char* naive_attention_unsupported(AttentionShape s);

void naive_attention_forward(AttentionShape s,
                             bf16* out,          // (B, T, NH, HS)
                             bf16* probs,        // (B, NH, T, T), kept for the backward
                             const bf16* qkv,    // (B, T, 3, NH, HS)
                             cudaStream_t stream);

// Bytes of scratch one naive_attention_backward call needs: dP (B, NH, T, T) in fp32.
size_t naive_attention_scratch_bytes(AttentionShape s);

void naive_attention_backward(AttentionShape s,
                              bf16* dqkv,         // (B, T, 3, NH, HS), overwritten
                              const bf16* dout,   // (B, T, NH, HS)
                              const bf16* probs,  // (B, NH, T, T) from naive_attention_forward
                              const bf16* qkv,    // (B, T, 3, NH, HS)
                              void* scratch,      // naive_attention_scratch_bytes
                              cudaStream_t stream);

#endif
