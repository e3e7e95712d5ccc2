// layers/residual.cu: the residual connection, out (n) = a (n) + b (n), one thread per 8 elements.
#include "layers/residual.h"
#include "layers/kernel_common.cuh"

__global__ void residual_forward_kernel(bf16x8* out, const bf16x8* a, const bf16x8* b, size_t packs) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= packs) return;
    bf16x8 x = a[i], y = b[i], z;
    for (int k = 0; k < 8; k++) z.v[k] = (bf16)((float)x.v[k] + (float)y.v[k]);
    out[i] = z;
}

void residual_forward(bf16* out, const bf16* a, const bf16* b, size_t n, cudaStream_t stream) {
    if (n % 8 != 0 || !aligned16(out) || !aligned16(a) || !aligned16(b))
        die("residual_forward: needs n (%zu) a multiple of 8 and 16-byte aligned buffers", n);
    if (n == 0) return;
    const int block = 256;
    residual_forward_kernel<<<ceil_div(n / 8, block), block, 0, stream>>>(
        (bf16x8*)out, (const bf16x8*)a, (const bf16x8*)b, n / 8);
    cudaCheckLaunch();
}
