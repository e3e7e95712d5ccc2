// layers/smear.h: the smear (nanochat's), a gated look-back of one token at the embedding: on rows
// of T tokens of C channels,
//   out_t = x_t + gate_t * x_{t-1},  gate_t = lambda * sigmoid(z_t),  z_t = x_t[:G] . weight
// for t > 0 of each row, out_0 = x_0; weight (G) the gate's (G of x's first channels: gpt/config.h's
// SMEAR_GATE_CHANNELS), lambda its learned scale (both bf16 on the device, read there: a captured
// decoding step takes the latest update's). A decoding step's token takes the x of the token before
// it in its sequence from prev (B, C), which the step then sets to its own x. Backward, from dout:
//   dx_t = dout_t + gate_{t+1} dout_{t+1}  (t + 1 in the row)
//   dgate_t = dout_t . x_{t-1},  dz_t = dgate_t lambda s_t (1 - s_t),  s_t = sigmoid(z_t)
//   dx_t[:G] += dz_t weight,  dweight += sum_t dz_t x_t[:G],  dlambda += sum_t dgate_t s_t
// Every sum runs in a fixed order (no atomics): the same bits on every run.
#ifndef FLASHGPT_SMEAR_H
#define FLASHGPT_SMEAR_H

#include <stddef.h>
#include "common/cuda_check.h"

// out, x (rows * T, C) bf16, distinct; weight (G), lambda (1) bf16. C % 8 == 0, G <= C, buffers
// 16-byte aligned.
void smear_forward(bf16* out, const bf16* x, const bf16* weight, const bf16* lambda, int rows, int T, int C, int G,
                   cudaStream_t stream);

// A decoding step's B tokens, each after the token whose x is its row of prev: out (B, C) = x +
// gate * prev, then prev = x. out, x and prev distinct.
void smear_step(bf16* out, const bf16* x, bf16* prev, const bf16* weight, const bf16* lambda, int B, int C, int G,
                cudaStream_t stream);

// dx (rows * T, C) bf16 (overwritten), dweight (G) and dlambda (1) bf16 += from dout; x, weight
// and lambda as the forward took them. dx and dout distinct. scratch: smear_scratch_bytes(rows * T).
void smear_backward(bf16* dx, bf16* dweight, bf16* dlambda, const bf16* dout, const bf16* x, const bf16* weight,
                    const bf16* lambda, int rows, int T, int C, int G, void* scratch, cudaStream_t stream);
size_t smear_scratch_bytes(int N);

#endif
