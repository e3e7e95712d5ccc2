// attention/flash.h: the FlashAttention kernels (forward and backward) behind attention.h, on
// the pointers and strides of attention/params.h. The forward writes O and the log-sum-exp L
// (natural log, of scaled scores); the backward recomputes the probabilities from Q, K and L
// and writes dQ, dK and dV, every element. Each call takes a mask beside its params (params.h's
// AttentionMask, a key window per row; NULL or inactive: the shape's causal flag alone): every
// kernel has an unmasked and a masked variant, and the unmasked one is the plain causal or
// non-causal kernel, untouched by the other's work.
//
// Two families compute the same functions:
//   *_mma:   warp-level mma.sync tensor cores, any GPU from sm_80 (flash_forward.cu, flash_backward.cu)
//   *_wgmma: Hopper's warpgroup wgmma, builds for sm_90a on an sm_90 GPU (flash_*_wgmma.cu)
// flash_attention_forward / _backward take wgmma where it runs (flash.cu); tests and benchmarks
// call each family by name to compare them.
#ifndef FLASHGPT_FLASH_H
#define FLASHGPT_FLASH_H

#include <stddef.h>
#include "attention/params.h"

// NULL when the flash kernels handle the shape, else a one-line reason.
const char* flash_attention_unsupported(AttentionShape s);
// NULL when they handle the call: its shape and mask, and pointers and strides their 16-byte
// loads take.
const char* flash_attention_params_unsupported(const AttentionParams* p, const AttentionMask* mask);
// 1 when this build holds the wgmma kernels (sm_90a code) for the current GPU.
int flash_attention_wgmma_available(void);

void flash_attention_forward(const AttentionParams* p, const AttentionMask* mask, cudaStream_t stream);

// Bytes of scratch one flash_attention_backward call needs (either family).
size_t flash_attention_scratch_bytes(AttentionShape s);

// deterministic != 0: the same bits on every run (no floating-point atomics).
void flash_attention_backward(const AttentionParams* p, const AttentionMask* mask, void* scratch, int deterministic,
                              cudaStream_t stream);

// How a backward computes dQ, which every K/V block of keys adds to:
typedef enum {
    FLASH_DQ_ATOMIC,     // the blocks' pieces added to an fp32 accumulator: fast; the order of the
                         // adds varies from run to run, and with it the last bits
    FLASH_DQ_FIXED,      // the same pieces added in fixed point (flash_backward_steps.cu): integer
                         // adds, the same bits on every run; wgmma only (mma.sync takes SEPARATE)
    FLASH_DQ_SEPARATE,   // a kernel of its own, one thread block per Q block, no adds: the same
                         // bits on every run, for 7 matmuls instead of 5
} FlashDq;

// The two families, the dQ path named; the call must be supported (the callers above check it).
void flash_attention_forward_mma(const AttentionParams* p, const AttentionMask* mask, cudaStream_t stream);
void flash_attention_forward_wgmma(const AttentionParams* p, const AttentionMask* mask, cudaStream_t stream);
void flash_attention_backward_mma(const AttentionParams* p, const AttentionMask* mask, void* scratch, FlashDq dq,
                                  cudaStream_t stream);
void flash_attention_backward_wgmma(const AttentionParams* p, const AttentionMask* mask, void* scratch, FlashDq dq,
                                    cudaStream_t stream);

// Steps both backward families share (flash_backward_steps.cu), in the scratch above.
typedef struct {
    float* delta;            // D = rowsum(dO * O) (B, NH, T)
    float* dq_fixed_scale;   // FLASH_DQ_FIXED: 2^shift per dQ row (B, NH, T), round(dQ * 2^shift) is added
    float* kv_bound;         // FLASH_DQ_FIXED: (B * NH, 2), max |K| and max |V row|^2 of each head
    void* dq_accum;          // the accumulated dQ (B, NH, T, HS), unscaled: fp32, or int32 (FIXED)
} BackwardScratch;
BackwardScratch flash_backward_scratch(AttentionShape s, void* scratch);
// D; with FLASH_DQ_ATOMIC also the accumulator zeroed; with FLASH_DQ_FIXED also the fixed-point
// scales (from the K/V bounds) and the accumulator zeroed.
void flash_backward_prepass(const AttentionParams* p, BackwardScratch w, FlashDq dq, cudaStream_t stream);
// dQ from the accumulator: bf16(scale * dq_accum), divided by the row's dq_fixed_scale for
// FLASH_DQ_FIXED.
void flash_backward_dq_convert(const AttentionParams* p, BackwardScratch w, FlashDq dq, cudaStream_t stream);

#endif
