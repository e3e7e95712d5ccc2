// layers/rmsnorm.h: RMSNorm over the last dimension, without weights (the modern recipe's norm,
// and the 2026 recipe's norm of the embedding, gpt/model_ops.h's STEM_EMBEDDING_NORM).
// out (N, C) = inp * rstd, rstd (N) fp32 = 1 / sqrt(mean_C(inp^2) + RMSNORM_EPS), kept for the
// backward. layers/rotary.h norms each head's queries and keys with the same eps.
#ifndef FLASHGPT_RMSNORM_H
#define FLASHGPT_RMSNORM_H

#include "common/cuda_check.h"

// The eps only keeps a row of zeros finite: 1e-6 (Llama's) lies far below the mean square of any
// row a model normalises. A reference must pass it explicitly: PyTorch's rms_norm defaults to the
// machine epsilon of its input's type (2^-7 for bf16, which does change small rows).
#define RMSNORM_EPS 1e-6f

// out (N, C) bf16; rstd (N) fp32, or NULL where no backward follows; inp (N, C) bf16, which out
// may be (in place: each value is read by the lane that writes it, before it does). C % 8 == 0,
// buffers 16-byte aligned.
void rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, int N, int C, cudaStream_t stream);

// dinp (N, C) += rstd * (dout - out_hat * mean_C(dout * out_hat)), out_hat = inp * rstd recomputed;
// dout, inp (N, C); rstd (N) from the forward. Without weights nothing is summed over rows: no
// scratch, and every row's result is the same bits on every run with no ordered reduction.
void rmsnorm_backward(bf16* dinp, const bf16* dout, const bf16* inp, const float* rstd, int N, int C,
                      cudaStream_t stream);

#endif
