// attention/flash.h: the FlashAttention kernels (forward and backward) behind attention.h.
// Q, K, V are read by strides out of the fused activation qkv (B, T, 3, NH, HS); the forward
// writes O (B, T, NH, HS) and the log-sum-exp L (B, NH, T) fp32 (natural log, of scaled scores);
// the backward recomputes the probabilities from Q, K and L and writes dqkv (B, T, 3, NH, HS).
#ifndef FLASHGPT_FLASH_H
#define FLASHGPT_FLASH_H

#include <stddef.h>
#include "attention/attention.h"

// NULL when the flash kernels handle the shape, else a one-line reason.
const char* flash_attention_unsupported(AttentionShape s);

void flash_attention_forward(AttentionShape s,
                             bf16* out,          // (B, T, NH, HS)
                             float* lse,         // (B, NH, T)
                             const bf16* qkv,    // (B, T, 3, NH, HS)
                             cudaStream_t stream);

// Bytes of scratch one flash_attention_backward call needs.
size_t flash_attention_scratch_bytes(AttentionShape s);

// deterministic != 0: the same bits on every run (no floating-point atomics).
void flash_attention_backward(AttentionShape s,
                              bf16* dqkv,         // (B, T, 3, NH, HS), overwritten
                              const bf16* dout,   // (B, T, NH, HS)
                              const bf16* out,    // (B, T, NH, HS)
                              const float* lse,   // (B, NH, T)
                              const bf16* qkv,    // (B, T, 3, NH, HS)
                              void* scratch,      // flash_attention_scratch_bytes
                              int deterministic,
                              cudaStream_t stream);

#endif
