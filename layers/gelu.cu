// layers/gelu.cu: GELU (tanh form) and its backward over n bf16 values, one thread per 8 (a
// 16-byte pack), computed in fp32 and rounded once.
#include "layers/gelu.h"
#include "layers/kernel_common.cuh"

__global__ void gelu_forward_kernel(bf16x8* out, const bf16x8* inp, size_t packs) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= packs) return;
    const float s = 0.7978845608028654f;  // sqrt(2/pi)
    bf16x8 x8 = inp[i], y8;
    for (int k = 0; k < 8; k++) {
        float x = (float)x8.v[k];
        y8.v[k] = (bf16)(0.5f * x * (1.0f + tanhf(s * (x + 0.044715f * x * x * x))));
    }
    out[i] = y8;
}

// dinp = dout * gelu'(pre_gelu), 8 elements per thread; gelu in its tanh form:
// gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
__global__ void gelu_backward_kernel(bf16x8* dinp, const bf16x8* dout, const bf16x8* pre_gelu,
                                     size_t packs) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= packs) return;
    const float s = 0.7978845608028654f;  // sqrt(2/pi)
    bf16x8 g = dout[i], pre = pre_gelu[i], out;
    for (int k = 0; k < 8; k++) {
        float x = (float)pre.v[k];
        float th = tanhf(s * (x + 0.044715f * x * x * x));
        float dgelu = 0.5f * (1.0f + th)
                    + 0.5f * x * (1.0f - th * th) * s * (1.0f + 3.0f * 0.044715f * x * x);
        out.v[k] = (bf16)((float)g.v[k] * dgelu);
    }
    dinp[i] = out;
}

void gelu_forward(bf16* out, const bf16* inp, size_t n, cudaStream_t stream) {
    if (n % 8 != 0 || !aligned16(out) || !aligned16(inp))
        die("gelu_forward: needs n (%zu) a multiple of 8 and 16-byte aligned buffers", n);
    if (n == 0) return;
    const int block = 256;
    gelu_forward_kernel<<<ceil_div(n / 8, block), block, 0, stream>>>((bf16x8*)out, (const bf16x8*)inp, n / 8);
    cudaCheckLaunch();
}

void gelu_backward(bf16* dinp, const bf16* dout, const bf16* inp, size_t n, cudaStream_t stream) {
    if (n % 8 != 0 || !aligned16(dinp) || !aligned16(dout) || !aligned16(inp))
        die("gelu_backward: needs n (%zu) a multiple of 8 and 16-byte aligned buffers", n);
    if (n == 0) return;
    const int block = 256;
    gelu_backward_kernel<<<ceil_div(n / 8, block), block, 0, stream>>>((bf16x8*)dinp, (const bf16x8*)dout,
                                                                       (const bf16x8*)inp, n / 8);
    cudaCheckLaunch();
}
