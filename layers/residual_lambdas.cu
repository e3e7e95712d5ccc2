// layers/residual_lambdas.cu: the residual and x0 lambdas, forward and backward
// (layers/residual_lambdas.h), on packs of 8 bf16 (a 16-byte load) of the N * C values, fp32
// math; the lambdas' gradients in the fixed order of device/scalar_sums.cuh.
#include "layers/residual_lambdas.h"
#include "device/bf16.cuh"
#include "device/scalar_sums.cuh"

#define LAMBDAS_THREADS 256

// res = lambda_r x + lambda_0 x0, a pack of 8 per thread.
__global__ void residual_lambdas_forward_kernel(bf16x8* res, const bf16x8* x, const bf16x8* x0, const bf16* lambda_r,
                                                const bf16* lambda_0, size_t packs) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= packs) return;
    float r = (float)*lambda_r, z = (float)*lambda_0;
    bf16x8 a = x[i], b = x0[i], out;
    for (int k = 0; k < 8; k++) out.v[k] = (bf16)(r * (float)a.v[k] + z * (float)b.v[k]);
    res[i] = out;
}

// dres = lambda_r dres (FIRST: dx0 + (lambda_r + lambda_0) dres), dx0 += lambda_0 dres (not
// FIRST), and the block's sums of dres x and dres x0 into partials[2 block], [2 block + 1].
template <bool FIRST>
__global__ void __launch_bounds__(SCALAR_SUMS_THREADS)
residual_lambdas_backward_kernel(float* partials, bf16x8* dres, float4* dx0, const bf16x8* x, const bf16x8* x0,
                                 const bf16* lambda_r, const bf16* lambda_0, size_t packs) {
    float r = (float)*lambda_r, z = (float)*lambda_0, sums[2] = {0.0f, 0.0f};
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < packs; i += stride) {
        bf16x8 d = dres[i], a = x[i], b = x0[i], out;
        float4 acc[2] = {dx0[2 * i], dx0[2 * i + 1]};
        float* acc8 = (float*)acc;
        for (int k = 0; k < 8; k++) {
            float g = (float)d.v[k];
            sums[0] += g * (float)a.v[k];
            sums[1] += g * (float)b.v[k];
            if (FIRST) {
                out.v[k] = (bf16)(acc8[k] + (r + z) * g);
            } else {
                acc8[k] += z * g;
                out.v[k] = (bf16)(r * g);
            }
        }
        dres[i] = out;
        if (!FIRST) {
            dx0[2 * i] = acc[0];
            dx0[2 * i + 1] = acc[1];
        }
    }
    scalar_sums_store<2>(partials, sums);
}

size_t residual_lambdas_scratch_bytes(int N, int C) { return scalar_sums_scratch_bytes(2); }

void residual_lambdas_forward(bf16* res, const bf16* x, const bf16* x0, const bf16* lambda_r, const bf16* lambda_0,
                              int N, int C, cudaStream_t stream) {
    size_t packs = scalar_sums_packs("residual_lambdas_forward", N, C, res, x, x0);
    if (packs == 0) return;
    residual_lambdas_forward_kernel<<<(unsigned)ceil_div((long long)packs, LAMBDAS_THREADS), LAMBDAS_THREADS, 0,
                                      stream>>>((bf16x8*)res, (const bf16x8*)x, (const bf16x8*)x0, lambda_r, lambda_0,
                                                packs);
    cudaCheckLaunch();
}

void residual_lambdas_backward(bf16* dres, float* dx0, bf16* dlambda_r, bf16* dlambda_0, const bf16* x,
                               const bf16* x0, const bf16* lambda_r, const bf16* lambda_0, int first, int N, int C,
                               void* scratch, cudaStream_t stream) {
    size_t packs = scalar_sums_packs("residual_lambdas_backward", N, C, dres, x, x0);
    if (!aligned16(dx0)) die("residual_lambdas_backward: needs a 16-byte aligned dx0");
    if (packs == 0) return;
    int blocks = scalar_sums_blocks(packs);
    float* partials = (float*)scratch;
    if (first)
        residual_lambdas_backward_kernel<true><<<blocks, SCALAR_SUMS_THREADS, 0, stream>>>(
            partials, (bf16x8*)dres, (float4*)dx0, (const bf16x8*)x, (const bf16x8*)x0, lambda_r, lambda_0, packs);
    else
        residual_lambdas_backward_kernel<false><<<blocks, SCALAR_SUMS_THREADS, 0, stream>>>(
            partials, (bf16x8*)dres, (float4*)dx0, (const bf16x8*)x, (const bf16x8*)x0, lambda_r, lambda_0, packs);
    cudaCheckLaunch();
    scalar_sums_add_kernel<2><<<1, SCALAR_SUMS_THREADS, 0, stream>>>(dlambda_r, dlambda_0, partials, blocks);
    cudaCheckLaunch();
}
