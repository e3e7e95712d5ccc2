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

// The clip from squared norms of parts of the gradients (parts (count), device fp32): *norm =
// sqrt of their sum (added in order), *grad_scale = clip / *norm when clip > 0 and the norm
// exceeds it, else 1; both one float of device memory, rounded as the host's fp32 would, so that
// the update reads the factor without the norm visiting the host.
void grad_clip_scale(float* norm, float* grad_scale, const float* parts, int count, float clip,
                     cudaStream_t stream);

#endif
