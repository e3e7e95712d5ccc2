// attention/naive.h: textbook attention behind attention.h. The forward materializes the scores
// S = scale * Q K^T (B, NH, T, T), turns them into probabilities P in place and keeps P (bf16)
// for the backward; the backward reads P instead of recomputing it. Q, K, V, O and their
// gradients are read and written by the strides of attention/params.h, so no permute copies are
// needed. All matmuls go through cuBLAS (bf16 in, fp32 accumulation); softmax and its backward
// use fp32 math. Deterministic by construction: no atomics, fixed-order reductions.
#ifndef FLASHGPT_NAIVE_H
#define FLASHGPT_NAIVE_H

#include <stddef.h>
#include "attention/params.h"

// NULL when the shape is supported (head size a multiple of 8 up to 256), else a one-line reason.
const char* naive_attention_unsupported(AttentionShape s);

// O from Q, K, V, with the key window of mask (params.h; NULL: none); probs (B, NH, T, T) is kept
// for the backward (p->lse is not used).
void naive_attention_forward(const AttentionParams* p, const AttentionMask* mask, bf16* probs, cudaStream_t stream);

// Bytes of scratch one naive_attention_backward call needs: dP (B, NH, T, T) in fp32.
size_t naive_attention_scratch_bytes(AttentionShape s);

// dQ, dK, dV from dO, Q, K, V and the forward's probs, under the forward's mask.
void naive_attention_backward(const AttentionParams* p, const AttentionMask* mask, const bf16* probs, void* scratch,
                              cudaStream_t stream);

#endif
