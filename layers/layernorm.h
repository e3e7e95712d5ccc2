// layers/layernorm.h: LayerNorm over the last dimension, eps 1e-5.
// out (N, C) = (inp - mean) * rstd * weight (C) + bias (C); mean, rstd (N) fp32 kept for backward.
#ifndef FLASHGPT_LAYERNORM_H
#define FLASHGPT_LAYERNORM_H

#include <stddef.h>
#include "common/cuda_check.h"

#define LAYERNORM_EPS 1e-5f

// out (N, C); mean, rstd (N) fp32; inp (N, C); weight, bias (C).
void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp,
                       const bf16* weight, const bf16* bias, int N, int C, cudaStream_t stream);

// dinp (N, C) +=; dweight, dbias (C) +=; dout, inp (N, C); weight (C); mean, rstd (N).
// Deterministic: per-block partial sums in scratch (layernorm_backward_scratch_bytes(N, C)),
// then one reduction in a fixed order.
void layernorm_backward(bf16* dinp, bf16* dweight, bf16* dbias, const bf16* dout,
                        const bf16* inp, const bf16* weight, const float* mean,
                        const float* rstd, int N, int C, void* scratch, cudaStream_t stream);
size_t layernorm_backward_scratch_bytes(int N, int C);

#endif
