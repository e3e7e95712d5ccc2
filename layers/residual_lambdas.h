// layers/residual_lambdas.h: the residual and x0 lambdas before a block (modded-nanogpt's,
// nanochat's): the stream the block takes is
//   res (N, C) = lambda_r * x + lambda_0 * x0
// on N rows of C channels, x the stream the block before left (the first block's is x0 itself),
// x0 the stem's output, lambda_r and lambda_0 the block's learned scalars (one bf16 each on the
// device, read there: a captured decoding step takes the latest update's). Backward, from dres =
// d loss / d res (N, C):
//   dx = lambda_r * dres              the block before's stream gradient, over dres
//   dx0 += lambda_0 * dres            fp32 (N, C), summed over the blocks
//   dlambda_r += sum_{N,C} dres * x,  dlambda_0 += sum_{N,C} dres * x0
// and for the first block, whose x is x0, dres becomes x0's whole gradient, dx0 +
// (lambda_r + lambda_0) * dres. The two sums are deterministic: a grid fixed by N and C writes
// one partial pair per block, then one block adds them in a fixed order.
#ifndef FLASHGPT_RESIDUAL_LAMBDAS_H
#define FLASHGPT_RESIDUAL_LAMBDAS_H

#include <stddef.h>
#include "common/cuda_check.h"

// res, x, x0 (N, C) bf16, res may be x (in place); lambda_r, lambda_0 (1) bf16 on the device.
// C % 8 == 0, buffers 16-byte aligned.
void residual_lambdas_forward(bf16* res, const bf16* x, const bf16* x0, const bf16* lambda_r, const bf16* lambda_0,
                              int N, int C, cudaStream_t stream);

// dres (N, C) bf16 in place: d loss / d res in, d loss / d x out (first: d loss / d x0 whole);
// dx0 (N, C) fp32 +=, read and not added to when first; dlambda_r, dlambda_0 (1) bf16 +=; x, x0
// and the lambdas as the forward took them. scratch: residual_lambdas_scratch_bytes(N, C).
void residual_lambdas_backward(bf16* dres, float* dx0, bf16* dlambda_r, bf16* dlambda_0, const bf16* x,
                               const bf16* x0, const bf16* lambda_r, const bf16* lambda_0, int first, int N, int C,
                               void* scratch, cudaStream_t stream);
size_t residual_lambdas_scratch_bytes(int N, int C);

#endif
