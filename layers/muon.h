// layers/muon.h: Muon's step on a batch of 2-D weight matrices (count matrices of (rows, cols),
// row-major, one after another: the matrices gpt/param_table.h cuts a tensor kind's slices into):
// Nesterov momentum, orthogonalised by five Newton-Schulz iterations as bf16 matmuls on
// tensor cores (cuBLASLt, batched over the matrices), applied to the fp32 master weights.
//
// Newton-Schulz: X = M / ||M||_F (per matrix, so every singular value is at most 1), taken with
// its shorter side first (X = M, or M^T when rows > cols), then five times
//   A = X X^T,  X = a X + (b A + c A A) X,   (a, b, c) = (3.4445, -4.7750, 2.0315),
// a quintic that drives every singular value into about [0.7, 1.2] fast, rather than to exactly
// 1 slowly: the result is close to U V^T of M = U S V^T. Each product is rounded to bf16.
#ifndef FLASHGPT_MUON_H
#define FLASHGPT_MUON_H

#include <stddef.h>
#include "common/cuda_check.h"
#include "layers/matmul.h"

#define NEWTON_SCHULZ_STEPS 5
#define NEWTON_SCHULZ_A 3.4445f
#define NEWTON_SCHULZ_B (-4.7750f)
#define NEWTON_SCHULZ_C 2.0315f
// Added to the norm: a zero matrix stays zero.
#define NEWTON_SCHULZ_EPS 1e-7f

// x (count, rows, cols) bf16, 16-byte aligned, rows * cols a multiple of 8: each matrix
// orthogonalised as above, in place of x or into the scratch; returns where the result is
// (valid until the scratch is used again). x is overwritten. scratch:
// newton_schulz_scratch_bytes(count, rows, cols).
const bf16* newton_schulz(bf16* x, int count, int rows, int cols, void* scratch, const MatmulStream* ms);
size_t newton_schulz_scratch_bytes(int count, int rows, int cols);

// One Muon step on count matrices (rows, cols): params, grads (count, rows, cols) bf16; master and
// the momentum m (count, rows, cols) fp32; every pointer 16-byte aligned, rows * cols a
// multiple of 8. With g = grads * grad_scale (clipping):
//   m = momentum m + (1 - momentum) g;  u = (1 - momentum) g + momentum m   (Nesterov)
//   master = master - lr weight_decay master - lr sqrt(max(1, rows / cols)) newton_schulz(u)
//   params = master rounded to nearest bf16
// The momentum and u are one pass over the matrices, the update another.
// scratch: muon_scratch_bytes(count, rows, cols).
void muon_update(bf16* params, float* master, const bf16* grads, float* m, int count, int rows, int cols, float lr,
                 float momentum, float weight_decay, float grad_scale, void* scratch, const MatmulStream* ms);
size_t muon_scratch_bytes(int count, int rows, int cols);

#endif
