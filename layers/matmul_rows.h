// layers/matmul_rows.h: the linear layer on a few rows (a decoding step's, one row per
// sequence), with what surrounds it in a transformer block fused in: the layernorm or RMSNorm
// before it, and the bias, GELU or ReLU^2, residual and the KV cache's write after it. On so few rows the layer is
// bound by reading the weights once, which cuBLAS's kernels for large matrices do not reach;
// these kernels read each weight once, start reading before the kernel before them has ended
// (device/launch.cuh's launch_overlapped), and do the math on tensor cores.
#ifndef FLASHGPT_MATMUL_ROWS_H
#define FLASHGPT_MATMUL_ROWS_H

#include "common/cuda_check.h"

// What surrounds the linear layer in a transformer block, in the order it is applied; a part
// left zero (NULL, 0) is not applied, so a layer names only its own parts.
typedef struct {
    const bf16* ln_weight;     // (C): layernorm (eps 1e-5) of each input row first; NULL: none
    const bf16* ln_bias;       // (C), with ln_weight
    int rms_norm;              // or RMSNorm without weights (layers/rmsnorm.h) of each input row
    const bf16* bias;          // (OC) or NULL
    int gelu;                  // GELU (tanh form) after the bias
    int relu2;                 // or relu(h)^2, h rounded to bf16 first (layers/matmul.h's)
    const bf16* residual;      // (N, OC) added last, or NULL
    // The KV cache: when cache is not NULL, columns cache_from.. of row n also go to
    // cache[n * cache_batch + positions[n] * cache_row + (column - cache_from)] (positions on the
    // GPU): the new keys and values of sequence n at its position.
    bf16* cache;
    long long cache_batch, cache_row;
    int cache_from;
    const int* positions;
} RowsEpilogue;

// out (N, OC) = epilogue(norm?(inp (N, C)) @ weight (OC, C)^T), fp32 inside, rounded to bf16
// once. C % 8 == 0; inp, weight and the layernorm's weight and bias 16-byte aligned; out does not
// alias inp or residual; not both norms, not both activations.
void matmul_rows_forward(bf16* out, const bf16* inp, const bf16* weight, const RowsEpilogue* epilogue, int N,
                         int C, int OC, cudaStream_t stream);

#endif
