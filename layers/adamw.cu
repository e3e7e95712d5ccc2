// layers/adamw.cu: one AdamW step, one thread per parameter: fp32 master weights and moments
// m, v (n); bf16 gradients in, bf16 parameters out (master rounded to nearest).
#include <math.h>
#include "layers/adamw.h"

__global__ void adamw_kernel(bf16* params, float* master, const bf16* grads, float* m, float* v,
                             size_t n, float lr, float b1, float b2, float bias_correction1,
                             float bias_correction2, float eps, float weight_decay, const float* grad_scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = (float)grads[i] * *grad_scale;
    float mi = b1 * m[i] + (1.0f - b1) * g;
    float vi = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float p = master[i];
    float m_hat = mi / bias_correction1, v_hat = vi / bias_correction2;
    p -= lr * (m_hat / (sqrtf(v_hat) + eps) + weight_decay * p);
    master[i] = p;
    params[i] = __float2bfloat16(p);
}

void adamw_update(bf16* params, float* master, const bf16* grads, float* m, float* v, size_t n,
                  float lr, float b1, float b2, int t, float eps, float weight_decay,
                  const float* grad_scale, cudaStream_t stream) {
    if (n == 0) return;
    float bias_correction1 = (float)(1.0 - pow((double)b1, t));
    float bias_correction2 = (float)(1.0 - pow((double)b2, t));
    const int block = 256;
    adamw_kernel<<<ceil_div(n, block), block, 0, stream>>>(params, master, grads, m, v, n, lr, b1, b2,
                                                           bias_correction1, bias_correction2, eps,
                                                           weight_decay, grad_scale);
    cudaCheckLaunch();
}
