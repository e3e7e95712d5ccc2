// layers/rmsnorm.cu: RMSNorm without weights, forward and backward, one warp per row of (N, C),
// fp32 math; each lane moves 8 channels (a pack) at a time, so C % 8 == 0 and the buffers are
// 16-byte aligned. Each kernel reads its row twice, the second time from cache.
#include "layers/rmsnorm.h"
#include "device/bf16.cuh"
#include "device/reduce.cuh"

#define RMSNORM_WARPS 8   // warps per block, one row each

__global__ void rmsnorm_forward_kernel(bf16x8* out, float* rstd, const bf16x8* inp, int N, int C) {
    int row = blockIdx.x * RMSNORM_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    int packs = C / 8;
    const bf16x8* x = inp + (size_t)row * packs;
    float sum_sq = 0.0f;
    for (int p = lane; p < packs; p += 32) {
        bf16x8 v = x[p];
        for (int k = 0; k < 8; k++) sum_sq += (float)v.v[k] * (float)v.v[k];
    }
    float s = rsqrtf(warp_reduce_sum(sum_sq) / C + RMSNORM_EPS);
    bf16x8* y = out + (size_t)row * packs;
    for (int p = lane; p < packs; p += 32) {
        bf16x8 v = x[p], o;
        for (int k = 0; k < 8; k++) o.v[k] = (bf16)((float)v.v[k] * s);
        y[p] = o;
    }
    if (lane == 0 && rstd) rstd[row] = s;
}

// With out_hat = x * rstd: d out_hat_c / d x_k = rstd (delta_ck - out_hat_c out_hat_k / C), so
// dinp += rstd * (dout - out_hat * mean_C(dout * out_hat)).
__global__ void rmsnorm_backward_kernel(bf16x8* dinp, const bf16x8* dout, const bf16x8* inp,
                                       const float* rstd, int N, int C) {
    int row = blockIdx.x * RMSNORM_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    int packs = C / 8;
    const bf16x8* dy = dout + (size_t)row * packs;
    const bf16x8* x = inp + (size_t)row * packs;
    bf16x8* dx = dinp + (size_t)row * packs;
    float s = rstd[row];
    float sum_dot = 0.0f;
    for (int p = lane; p < packs; p += 32) {
        bf16x8 g8 = dy[p], x8 = x[p];
        for (int k = 0; k < 8; k++) sum_dot += (float)g8.v[k] * ((float)x8.v[k] * s);
    }
    float mean_dot = warp_reduce_sum(sum_dot) / C;
    for (int p = lane; p < packs; p += 32) {
        bf16x8 g8 = dy[p], x8 = x[p], d8 = dx[p];
        for (int k = 0; k < 8; k++) {
            float xhat = (float)x8.v[k] * s;
            d8.v[k] = (bf16)((float)d8.v[k] + ((float)g8.v[k] - xhat * mean_dot) * s);
        }
        dx[p] = d8;
    }
}

static void check_shape(const char* who, int C, const void* a, const void* b, const void* c) {
    if (C % 8 != 0 || !aligned16(a) || !aligned16(b) || !aligned16(c))
        die("%s: needs C (%d) a multiple of 8 and 16-byte aligned buffers", who, C);
}

void rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, int N, int C, cudaStream_t stream) {
    check_shape("rmsnorm_forward", C, out, inp, inp);
    if (N == 0) return;
    rmsnorm_forward_kernel<<<ceil_div(N, RMSNORM_WARPS), RMSNORM_WARPS * 32, 0, stream>>>(
        (bf16x8*)out, rstd, (const bf16x8*)inp, N, C);
    cudaCheckLaunch();
}

void rmsnorm_backward(bf16* dinp, const bf16* dout, const bf16* inp, const float* rstd, int N, int C,
                      cudaStream_t stream) {
    check_shape("rmsnorm_backward", C, dinp, dout, inp);
    if (N == 0) return;
    rmsnorm_backward_kernel<<<ceil_div(N, RMSNORM_WARPS), RMSNORM_WARPS * 32, 0, stream>>>(
        (bf16x8*)dinp, (const bf16x8*)dout, (const bf16x8*)inp, rstd, N, C);
    cudaCheckLaunch();
}
