// layers/backout.h: the backout (nanochat's): before the final norm, the stream leaving the last
// block gives back a learned share of the one leaving a block in the middle,
//   out (N, C) = x - lambda * mid
// on N rows of C channels, lambda one bf16 on the device (read there: a captured decoding step
// takes the latest update's). Backward, from dout = d loss / d out (N, C): x's gradient is dout
// itself; mid's, -lambda * dout, is kept (dmid) until the backward reaches the block that left
// mid, which adds it to its stream's gradient (backout_add); dlambda += -sum_{N,C} dout * mid, in
// a fixed order: a grid that N and C alone fix writes one partial sum per block, then one block
// adds them in order.
#ifndef FLASHGPT_BACKOUT_H
#define FLASHGPT_BACKOUT_H

#include <stddef.h>
#include "common/cuda_check.h"

// out, x, mid (N, C) bf16, out may be x (in place); lambda (1) bf16. C % 8 == 0, buffers 16-byte
// aligned.
void backout_forward(bf16* out, const bf16* x, const bf16* mid, const bf16* lambda, int N, int C,
                     cudaStream_t stream);

// dmid (N, C) bf16 = -lambda * dout (overwritten); dlambda (1) bf16 +=. scratch:
// backout_scratch_bytes(N, C).
void backout_backward(bf16* dmid, bf16* dlambda, const bf16* dout, const bf16* mid, const bf16* lambda, int N, int C,
                      void* scratch, cudaStream_t stream);
size_t backout_scratch_bytes(int N, int C);

// dres (N, C) bf16 += dmid: mid's gradient into the stream's where the backward reaches it.
void backout_add(bf16* dres, const bf16* dmid, int N, int C, cudaStream_t stream);

#endif
