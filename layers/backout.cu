// layers/backout.cu: the backout, forward and backward (layers/backout.h), on packs of 8 bf16 (a
// 16-byte load) of the N * C values, fp32 math; lambda's gradient in the fixed order of
// device/scalar_sums.cuh.
#include "layers/backout.h"
#include "device/bf16.cuh"
#include "device/scalar_sums.cuh"

#define BACKOUT_THREADS 256

// out = x - lambda mid, a pack of 8 per thread.
__global__ void backout_forward_kernel(bf16x8* out, const bf16x8* x, const bf16x8* mid, const bf16* lambda,
                                       size_t packs) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= packs) return;
    float l = (float)*lambda;
    bf16x8 a = x[i], b = mid[i], o;
    for (int k = 0; k < 8; k++) o.v[k] = (bf16)((float)a.v[k] - l * (float)b.v[k]);
    out[i] = o;
}

// dmid = -lambda dout, and the block's sum of -dout mid into partials[block].
__global__ void __launch_bounds__(SCALAR_SUMS_THREADS)
backout_backward_kernel(float* partials, bf16x8* dmid, const bf16x8* dout, const bf16x8* mid, const bf16* lambda,
                        size_t packs) {
    float l = (float)*lambda, sum[1] = {0.0f};
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < packs; i += stride) {
        bf16x8 d = dout[i], m = mid[i], o;
        for (int k = 0; k < 8; k++) {
            float g = (float)d.v[k];
            sum[0] -= g * (float)m.v[k];
            o.v[k] = (bf16)(-l * g);
        }
        dmid[i] = o;
    }
    scalar_sums_store<1>(partials, sum);
}

// dres += dmid, a pack of 8 per thread.
__global__ void backout_add_kernel(bf16x8* dres, const bf16x8* dmid, size_t packs) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= packs) return;
    bf16x8 a = dres[i], b = dmid[i];
    for (int k = 0; k < 8; k++) a.v[k] = (bf16)((float)a.v[k] + (float)b.v[k]);
    dres[i] = a;
}

size_t backout_scratch_bytes(int N, int C) { return scalar_sums_scratch_bytes(1); }

void backout_forward(bf16* out, const bf16* x, const bf16* mid, const bf16* lambda, int N, int C,
                     cudaStream_t stream) {
    size_t packs = scalar_sums_packs("backout_forward", N, C, out, x, mid);
    if (packs == 0) return;
    backout_forward_kernel<<<(unsigned)ceil_div((long long)packs, BACKOUT_THREADS), BACKOUT_THREADS, 0, stream>>>(
        (bf16x8*)out, (const bf16x8*)x, (const bf16x8*)mid, lambda, packs);
    cudaCheckLaunch();
}

void backout_backward(bf16* dmid, bf16* dlambda, const bf16* dout, const bf16* mid, const bf16* lambda, int N, int C,
                      void* scratch, cudaStream_t stream) {
    size_t packs = scalar_sums_packs("backout_backward", N, C, dmid, dout, mid);
    if (packs == 0) return;
    int blocks = scalar_sums_blocks(packs);
    backout_backward_kernel<<<blocks, SCALAR_SUMS_THREADS, 0, stream>>>((float*)scratch, (bf16x8*)dmid,
                                                                    (const bf16x8*)dout, (const bf16x8*)mid, lambda,
                                                                    packs);
    cudaCheckLaunch();
    scalar_sums_add_kernel<1><<<1, SCALAR_SUMS_THREADS, 0, stream>>>(dlambda, nullptr, (const float*)scratch, blocks);
    cudaCheckLaunch();
}

void backout_add(bf16* dres, const bf16* dmid, int N, int C, cudaStream_t stream) {
    size_t packs = scalar_sums_packs("backout_add", N, C, dres, dmid, dmid);
    if (packs == 0) return;
    backout_add_kernel<<<(unsigned)ceil_div((long long)packs, BACKOUT_THREADS), BACKOUT_THREADS, 0, stream>>>(
        (bf16x8*)dres, (const bf16x8*)dmid, packs);
    cudaCheckLaunch();
}
