// layers/global_norm.h: the squared L2 norm of the gradients, deterministic (two passes:
// per-block partial sums into scratch, then one block sums them in a fixed order).
#ifndef FLASHGPT_GLOBAL_NORM_H
#define FLASHGPT_GLOBAL_NORM_H

#include <stddef.h>
#include "common/cuda_check.h"

// *out (device fp32) = sum of grads[i]^2 over grads (n); scratch: global_norm_scratch_bytes(n).
void global_norm_squared(float* out, const bf16* grads, size_t n, void* scratch,
                         cudaStream_t stream);
size_t global_norm_scratch_bytes(size_t n);

#endif
