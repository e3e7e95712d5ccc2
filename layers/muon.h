// layers/muon.h: Muon's step on a batch of 2-D weight matrices (count matrices of (rows, cols),
// row-major, one after another: the matrices gpt/param_table.h cuts a tensor kind's slices into):
// Nesterov momentum, orthogonalised by five Newton-Schulz iterations as bf16 matmuls on
// tensor cores (cuBLASLt, batched over the matrices), applied to the fp32 master weights; as
// options, NorMuon's normalisation of the orthogonalised update and cautious weight decay.
//
// Newton-Schulz (layers/newton_schulz.h: the quintic's or Polar Express's coefficients): X = M /
// (norm_scale ||M||_F + eps) (per matrix, so every singular value is at most 1), taken with its
// shorter side first (X = M, or M^T when rows > cols), then at each iteration k
//   A = X X^T,  X = a_k X + (b_k A + c_k A A) X,
// which drives every singular value towards 1: the result is close to U V^T of M = U S V^T. Each
// product is rounded to bf16.
#ifndef FLASHGPT_MUON_H
#define FLASHGPT_MUON_H

#include <stddef.h>
#include "common/cuda_check.h"
#include "layers/matmul.h"
#include "layers/newton_schulz.h"

// x (count, rows, cols) bf16, 16-byte aligned, rows * cols a multiple of 8: each matrix
// orthogonalised as above with the coefficients ns, in place of x or into the scratch; returns
// where the result is (valid until the scratch is used again). x is overwritten. scratch:
// newton_schulz_scratch_bytes(count, rows, cols).
const bf16* newton_schulz(bf16* x, int count, int rows, int cols, const NewtonSchulzCoefficients* ns, void* scratch,
                          const MatmulStream* ms);
size_t newton_schulz_scratch_bytes(int count, int rows, int cols);

// One step's settings: the rates of the step, and the variant of Muon.
typedef struct {
    float lr, momentum, weight_decay;
    const float* grad_scale;                 // the gradients' factor (clipping): one float of device memory
    const NewtonSchulzCoefficients* ns;
    int cautious;                            // the decay only where the update and the weight agree in sign
    float normuon_beta2;                     // NorMuon's (with a second moment; see muon_update)
} MuonStep;

// One Muon step on count matrices (rows, cols): params, grads (count, rows, cols) bf16; master and
// the momentum m (count, rows, cols) fp32; every pointer 16-byte aligned, rows * cols a multiple
// of 8. With g = grads * *grad_scale:
//   m = momentum m + (1 - momentum) g;  u = (1 - momentum) g + momentum m   (Nesterov)
//   o = newton_schulz(u)
// NorMuon (second not NULL; Zhang et al. 2025, arXiv 2510.05491, as modded-nanogpt and nanochat
// run it): a second moment per row of o (per column where rows < cols: the longer side's, n =
// max(rows, cols) of them a matrix) evens out the rows' sizes while keeping ||o||_F:
//   q_i = mean of o_i's squares;  second_i = beta2 second_i + (1 - beta2) q_i
//   o_i = o_i / sqrt(max(second_i, 1e-10)) * ||o||_F / ||o scaled so||_F   (the norm floored at 1e-10)
// Matrix j's moments are second[j rows cols, j rows cols + n): a place as long as its matrix, as
// in an array laid out like m (the model keeps them in Adam's v, which Muon's matrices leave unused).
// Then, decay = lr weight_decay, or with cautious 0 where o and master differ in sign:
//   master = master - decay master - lr sqrt(max(1, rows / cols)) o
//   params = master rounded to nearest bf16
// The momentum and u are one pass over the matrices, the update another (NorMuon: and a pass
// reading o). scratch: muon_scratch_bytes(count, rows, cols).
void muon_update(bf16* params, float* master, const bf16* grads, float* m, float* second, int count, int rows,
                 int cols, const MuonStep* step, void* scratch, const MatmulStream* ms);
size_t muon_scratch_bytes(int count, int rows, int cols);

#endif
