// layers/layernorm.cu: LayerNorm forward and backward, one warp per row of (N, C), fp32 math;
// each lane moves 8 channels (a pack) at a time, so C % 8 == 0 and the buffers are 16-byte aligned.
// The backward is deterministic: each block sums dweight, dbias over its rows (every warp into its
// own shared-memory slice, then the slices in order) into partials (blocks, 2, C) in scratch, and
// column_sums_add reduces the partials in a fixed order.
#include "layers/layernorm.h"
#include "device/bf16.cuh"
#include "device/reduce.cuh"
#include "device/smem.cuh"
#include "layers/kernel_common.cuh"

#define LN_WARPS 8                // warps per block, one row at a time each
#define LN_BWD_ROWS_PER_BLOCK 64  // rows whose dweight, dbias one backward block sums

static void check_shape(const char* who, int C, const void* a, const void* b, const void* c,
                        const void* d) {
    if (C % 8 != 0 || !aligned16(a) || !aligned16(b) || !aligned16(c) || !aligned16(d))
        die("%s: needs C (%d) a multiple of 8 and 16-byte aligned buffers", who, C);
}

__global__ void layernorm_forward_kernel(bf16x8* out, float* mean, float* rstd, const bf16x8* inp,
                                         const bf16x8* weight, const bf16x8* bias, int N, int C) {
    int row = blockIdx.x * LN_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    int packs = C / 8;
    const bf16x8* x = inp + (size_t)row * packs;
    float sum = 0.0f;
    for (int p = lane; p < packs; p += 32) {
        bf16x8 v = x[p];
        for (int k = 0; k < 8; k++) sum += (float)v.v[k];
    }
    float m = warp_reduce_sum(sum) / C;
    float sum_sq = 0.0f;  // second pass over the row: no cancellation in the variance
    for (int p = lane; p < packs; p += 32) {
        bf16x8 v = x[p];
        for (int k = 0; k < 8; k++) {
            float d = (float)v.v[k] - m;
            sum_sq += d * d;
        }
    }
    float s = rsqrtf(warp_reduce_sum(sum_sq) / C + LAYERNORM_EPS);
    bf16x8* y = out + (size_t)row * packs;
    for (int p = lane; p < packs; p += 32) {
        bf16x8 v = x[p], w = weight[p], b = bias[p], o;
        for (int k = 0; k < 8; k++)
            o.v[k] = (bf16)(((float)v.v[k] - m) * s * (float)w.v[k] + (float)b.v[k]);
        y[p] = o;
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp,
                       const bf16* weight, const bf16* bias, int N, int C, cudaStream_t stream) {
    check_shape("layernorm_forward", C, out, inp, weight, bias);
    if (N == 0) return;
    layernorm_forward_kernel<<<ceil_div(N, LN_WARPS), LN_WARPS * 32, 0, stream>>>(
        (bf16x8*)out, mean, rstd, (const bf16x8*)inp, (const bf16x8*)weight, (const bf16x8*)bias, N, C);
    cudaCheckLaunch();
}

// With xhat = (x - mean) * rstd and dnorm = dout * weight:
// dinp += rstd * (dnorm - mean_C(dnorm) - xhat * mean_C(dnorm * xhat));
// partials[block] = (sum over the block's rows of dout * xhat, of dout), each (C).
__global__ void layernorm_backward_kernel(float* partials, bf16x8* dinp, const bf16x8* dout,
                                          const bf16x8* inp, const bf16x8* weight, const float* mean,
                                          const float* rstd, int N, int C) {
    // (LN_WARPS, 2, 8, C / 8): channel 8p + k of a warp's sum at [k * packs + p], so that the 32
    // lanes, on consecutive packs p, hit 32 different banks.
    extern __shared__ float warp_sums[];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, packs = C / 8;
    for (int i = threadIdx.x; i < LN_WARPS * 2 * C; i += blockDim.x) warp_sums[i] = 0.0f;
    __syncthreads();
    float* dweight_sum = warp_sums + warp * 2 * C;
    float* dbias_sum = dweight_sum + C;
    int row_end = min(N, (int)(blockIdx.x + 1) * LN_BWD_ROWS_PER_BLOCK);
    for (int row = blockIdx.x * LN_BWD_ROWS_PER_BLOCK + warp; row < row_end; row += LN_WARPS) {
        const bf16x8* dy = dout + (size_t)row * packs;
        const bf16x8* x = inp + (size_t)row * packs;
        bf16x8* dx = dinp + (size_t)row * packs;
        float m = mean[row], s = rstd[row];
        float sum_dnorm = 0.0f, sum_dnorm_xhat = 0.0f;
        for (int p = lane; p < packs; p += 32) {
            bf16x8 g8 = dy[p], x8 = x[p], w8 = weight[p];
            for (int k = 0; k < 8; k++) {
                float g = (float)g8.v[k], xhat = ((float)x8.v[k] - m) * s;
                float dnorm = g * (float)w8.v[k];
                sum_dnorm += dnorm;
                sum_dnorm_xhat += dnorm * xhat;
                dweight_sum[k * packs + p] += g * xhat;
                dbias_sum[k * packs + p] += g;
            }
        }
        float mean_dnorm = warp_reduce_sum(sum_dnorm) / C;
        float mean_dnorm_xhat = warp_reduce_sum(sum_dnorm_xhat) / C;
        for (int p = lane; p < packs; p += 32) {
            bf16x8 g8 = dy[p], x8 = x[p], w8 = weight[p], d8 = dx[p];
            for (int k = 0; k < 8; k++) {
                float xhat = ((float)x8.v[k] - m) * s;
                float dnorm = (float)g8.v[k] * (float)w8.v[k];
                d8.v[k] = (bf16)((float)d8.v[k] + (dnorm - mean_dnorm - xhat * mean_dnorm_xhat) * s);
            }
            dx[p] = d8;
        }
    }
    __syncthreads();
    float* block_sums = partials + (size_t)blockIdx.x * 2 * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        int at = (c % 8) * packs + c / 8;
        float dweight_acc = 0.0f, dbias_acc = 0.0f;
        for (int w = 0; w < LN_WARPS; w++) {
            dweight_acc += warp_sums[w * 2 * C + at];
            dbias_acc += warp_sums[w * 2 * C + C + at];
        }
        block_sums[c] = dweight_acc;
        block_sums[C + c] = dbias_acc;
    }
}

// scratch: partials (blocks, 2, C), then the scratch of column_sums_add.
static size_t partials_bytes(int N, int C) {
    return ceil_div(ceil_div(N, LN_BWD_ROWS_PER_BLOCK) * 2 * C * sizeof(float), 256) * 256;
}

size_t layernorm_backward_scratch_bytes(int N, int C) {
    return partials_bytes(N, C) + column_sums_scratch_bytes(ceil_div(N, LN_BWD_ROWS_PER_BLOCK), C);
}

void layernorm_backward(bf16* dinp, bf16* dweight, bf16* dbias, const bf16* dout,
                        const bf16* inp, const bf16* weight, const float* mean,
                        const float* rstd, int N, int C, void* scratch, cudaStream_t stream) {
    check_shape("layernorm_backward", C, dinp, dout, inp, weight);
    if (N == 0) return;
    int blocks = ceil_div(N, LN_BWD_ROWS_PER_BLOCK);
    float* partials = (float*)scratch;
    float* column_scratch = (float*)((char*)scratch + partials_bytes(N, C));
    size_t smem = (size_t)LN_WARPS * 2 * C * sizeof(float);
    raise_smem_limit<layernorm_backward_kernel>("layernorm_backward", smem);
    layernorm_backward_kernel<<<blocks, LN_WARPS * 32, smem, stream>>>(
        partials, (bf16x8*)dinp, (const bf16x8*)dout, (const bf16x8*)inp, (const bf16x8*)weight,
        mean, rstd, N, C);
    cudaCheckLaunch();
    column_sums_add(dweight, partials, blocks, C, 2 * C, column_scratch, stream);
    column_sums_add(dbias, partials + C, blocks, C, 2 * C, column_scratch, stream);
}
