// layers/adamw.h: one AdamW step with bf16 parameters and fp32 master weights and moments.
#ifndef FLASHGPT_ADAMW_H
#define FLASHGPT_ADAMW_H

#include <stddef.h>
#include "common/cuda_check.h"

// params (n) bf16, master, m, v (n) fp32, grads (n) bf16. g = grads * *grad_scale (clipping; one
// float of device memory, so that the clip's factor never visits the host);
// m, v updated; master -= lr * (mhat / (sqrt(vhat) + eps) + weight_decay * master), with the
// bias corrections 1 - b^t computed from t >= 1; params = master rounded to nearest bf16.
void adamw_update(bf16* params, float* master, const bf16* grads, float* m, float* v, size_t n,
                  float lr, float b1, float b2, int t, float eps, float weight_decay,
                  const float* grad_scale, cudaStream_t stream);

#endif
