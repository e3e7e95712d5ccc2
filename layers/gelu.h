// layers/gelu.h: GELU on its own, tanh form: gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// With --recompute gelu the trainer uses it in the forward and again in the backward, so the
// recomputed MLP output (B, T, 4C) has the forward's bits; otherwise the fused epilogue of
// layers/matmul.h computes GELU. Its backward is a matmul epilogue too (matmul_backward), but
// after an FP8 matmul, which takes no GELU epilogue there, both are these passes.
#ifndef FLASHGPT_GELU_H
#define FLASHGPT_GELU_H

#include <stddef.h>
#include "common/cuda_check.h"

// out (n) = gelu(inp (n)), fp32 inside; n % 8 == 0, both 16-byte aligned; out may alias inp.
void gelu_forward(bf16* out, const bf16* inp, size_t n, cudaStream_t stream);

// grad (n) *= gelu'(pre (n)) in place, fp32 inside, rounded once; n % 8 == 0, both 16-byte aligned.
void gelu_backward(bf16* grad, const bf16* pre, size_t n, cudaStream_t stream);

#endif
