// layers/gelu.cu: GELU (tanh form) and its backward over n bf16 values, one thread per 8 (a
// 16-byte pack), computed in fp32 and rounded once.
#include "layers/gelu.h"
#include "device/bf16.cuh"
#include "layers/kernel_common.cuh"

__global__ void gelu_forward_kernel(bf16x8* out, const bf16x8* inp, size_t packs) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= packs) return;
    bf16x8 x8 = inp[i], y8;
    for (int k = 0; k < 8; k++) y8.v[k] = (bf16)gelu_tanh((float)x8.v[k]);
    out[i] = y8;
}

__global__ void gelu_backward_kernel(bf16x8* grad, const bf16x8* pre, size_t packs) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= packs) return;
    bf16x8 g8 = grad[i], x8 = pre[i];
    for (int k = 0; k < 8; k++) g8.v[k] = (bf16)((float)g8.v[k] * gelu_tanh_grad((float)x8.v[k]));
    grad[i] = g8;
}

void gelu_forward(bf16* out, const bf16* inp, size_t n, cudaStream_t stream) {
    if (n % 8 != 0 || !aligned16(out) || !aligned16(inp))
        die("gelu_forward: needs n (%zu) a multiple of 8 and 16-byte aligned buffers", n);
    if (n == 0) return;
    const int block = 256;
    gelu_forward_kernel<<<ceil_div(n / 8, block), block, 0, stream>>>((bf16x8*)out, (const bf16x8*)inp, n / 8);
    cudaCheckLaunch();
}

void gelu_backward(bf16* grad, const bf16* pre, size_t n, cudaStream_t stream) {
    if (n % 8 != 0 || !aligned16(grad) || !aligned16(pre))
        die("gelu_backward: needs n (%zu) a multiple of 8 and 16-byte aligned buffers", n);
    if (n == 0) return;
    const int block = 256;
    gelu_backward_kernel<<<ceil_div(n / 8, block), block, 0, stream>>>((bf16x8*)grad, (const bf16x8*)pre, n / 8);
    cudaCheckLaunch();
}
