// layers/residual_lambdas.cu: the residual and x0 lambdas, forward and backward
// (layers/residual_lambdas.h), on packs of 8 bf16 (a 16-byte load) of the N * C values, fp32
// math. The backward's sums: a grid-stride walk of a grid that N and C alone fix, each block's
// pair of partial sums into scratch, then one block adds them in order.
#include "layers/residual_lambdas.h"
#include "device/bf16.cuh"
#include "device/reduce.cuh"

#define LAMBDAS_THREADS 256
#define LAMBDAS_MAX_BLOCKS 1024

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
__global__ void __launch_bounds__(LAMBDAS_THREADS)
residual_lambdas_backward_kernel(float* partials, bf16x8* dres, float4* dx0, const bf16x8* x, const bf16x8* x0,
                                 const bf16* lambda_r, const bf16* lambda_0, size_t packs) {
    float r = (float)*lambda_r, z = (float)*lambda_0, sum_r = 0.0f, sum_0 = 0.0f;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < packs; i += stride) {
        bf16x8 d = dres[i], a = x[i], b = x0[i], out;
        float4 acc[2] = {dx0[2 * i], dx0[2 * i + 1]};
        float* acc8 = (float*)acc;
        for (int k = 0; k < 8; k++) {
            float g = (float)d.v[k];
            sum_r += g * (float)a.v[k];
            sum_0 += g * (float)b.v[k];
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
    sum_r = block_reduce_sum(sum_r);
    sum_0 = block_reduce_sum(sum_0);
    if (threadIdx.x == 0) {
        partials[2 * blockIdx.x] = sum_r;
        partials[2 * blockIdx.x + 1] = sum_0;
    }
}

// One block: the partial pairs (count) added in a fixed order into the lambdas' gradients.
__global__ void __launch_bounds__(LAMBDAS_THREADS)
residual_lambdas_sum_kernel(bf16* dlambda_r, bf16* dlambda_0, const float* partials, int count) {
    float sum_r = 0.0f, sum_0 = 0.0f;
    for (int i = threadIdx.x; i < count; i += blockDim.x) {
        sum_r += partials[2 * i];
        sum_0 += partials[2 * i + 1];
    }
    sum_r = block_reduce_sum(sum_r);
    sum_0 = block_reduce_sum(sum_0);
    if (threadIdx.x == 0) {
        *dlambda_r = (bf16)((float)*dlambda_r + sum_r);
        *dlambda_0 = (bf16)((float)*dlambda_0 + sum_0);
    }
}

static size_t packs_of(int N, int C) { return (size_t)N * C / 8; }

// The backward's grid: a block per LAMBDAS_THREADS packs, at most LAMBDAS_MAX_BLOCKS.
static int backward_blocks(int N, int C) {
    long long blocks = ceil_div((long long)packs_of(N, C), LAMBDAS_THREADS);
    return blocks < LAMBDAS_MAX_BLOCKS ? (int)blocks : LAMBDAS_MAX_BLOCKS;
}

static void check_call(const char* who, int N, int C, const void* a, const void* b, const void* c) {
    if (N < 0 || C % 8 != 0 || !aligned16(a) || !aligned16(b) || !aligned16(c))
        die("%s: needs N >= 0, C (%d) a multiple of 8 and 16-byte aligned buffers", who, C);
}

size_t residual_lambdas_scratch_bytes(int N, int C) { return 2 * LAMBDAS_MAX_BLOCKS * sizeof(float); }

void residual_lambdas_forward(bf16* res, const bf16* x, const bf16* x0, const bf16* lambda_r, const bf16* lambda_0,
                              int N, int C, cudaStream_t stream) {
    check_call("residual_lambdas_forward", N, C, res, x, x0);
    size_t packs = packs_of(N, C);
    if (packs == 0) return;
    residual_lambdas_forward_kernel<<<(unsigned)ceil_div((long long)packs, LAMBDAS_THREADS), LAMBDAS_THREADS, 0,
                                      stream>>>((bf16x8*)res, (const bf16x8*)x, (const bf16x8*)x0, lambda_r, lambda_0,
                                                packs);
    cudaCheckLaunch();
}

void residual_lambdas_backward(bf16* dres, float* dx0, bf16* dlambda_r, bf16* dlambda_0, const bf16* x,
                               const bf16* x0, const bf16* lambda_r, const bf16* lambda_0, int first, int N, int C,
                               void* scratch, cudaStream_t stream) {
    check_call("residual_lambdas_backward", N, C, dres, x, x0);
    if (!aligned16(dx0)) die("residual_lambdas_backward: needs a 16-byte aligned dx0");
    size_t packs = packs_of(N, C);
    if (packs == 0) return;
    int blocks = backward_blocks(N, C);
    float* partials = (float*)scratch;
    if (first)
        residual_lambdas_backward_kernel<true><<<blocks, LAMBDAS_THREADS, 0, stream>>>(
            partials, (bf16x8*)dres, (float4*)dx0, (const bf16x8*)x, (const bf16x8*)x0, lambda_r, lambda_0, packs);
    else
        residual_lambdas_backward_kernel<false><<<blocks, LAMBDAS_THREADS, 0, stream>>>(
            partials, (bf16x8*)dres, (float4*)dx0, (const bf16x8*)x, (const bf16x8*)x0, lambda_r, lambda_0, packs);
    cudaCheckLaunch();
    residual_lambdas_sum_kernel<<<1, LAMBDAS_THREADS, 0, stream>>>(dlambda_r, dlambda_0, partials, blocks);
    cudaCheckLaunch();
}
