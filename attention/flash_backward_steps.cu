// attention/flash_backward_steps.cu: the steps around the backward kernels that both families
// (flash_backward.cu, flash_backward_wgmma.cu) share, and the scratch they work in:
//   scratch: D (B, NH, T) fp32, then the dQ accumulator (B, NH, T, HS) fp32
//   prepass: D = rowsum(dO * O) per query row, the dQ accumulator zeroed (fast mode)
//   convert: the accumulated dQ (fp32, unscaled) becomes bf16 dQ in dqkv (B, T, 3, NH, HS)
#include "attention/flash.h"
#include "attention/mma.cuh"

static size_t delta_bytes(AttentionShape s) {
    return ceil_div((long long)s.B * s.NH * s.T * sizeof(float), 256) * 256;   // keeps dQ 256-aligned
}

size_t flash_attention_scratch_bytes(AttentionShape s) {
    return delta_bytes(s) + (size_t)s.B * s.NH * s.T * s.HS * sizeof(float);
}

// D[b, h, t] = sum_d dO[b, t, h, d] * O[b, t, h, d]; HS/8 threads per row, 8 elements each.
// With dq_accum, also zeroes the accumulator row dq_accum[b, h, t, :].
template <int HS>
__global__ void flash_backward_prepass_kernel(float* delta, float* dq_accum, const bf16* dout, const bf16* out,
                                              int T, int NH, int n_rows) {
    constexpr int LANES = HS / 8;
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int row = (int)(idx / LANES), part = (int)(idx % LANES);   // row of (B, T, NH)
    bool valid = row < n_rows;
    float sum = 0.0f;
    if (valid) {
        int4 dov = *reinterpret_cast<const int4*>(dout + (long long)row * HS + part * 8);
        int4 ov = *reinterpret_cast<const int4*>(out + (long long)row * HS + part * 8);
        const __nv_bfloat162* d2 = reinterpret_cast<const __nv_bfloat162*>(&dov);
        const __nv_bfloat162* o2 = reinterpret_cast<const __nv_bfloat162*>(&ov);
        for (int i = 0; i < 4; i++) {
            float2 a = __bfloat1622float2(d2[i]), c = __bfloat1622float2(o2[i]);
            sum += a.x * c.x + a.y * c.y;
        }
    }
    for (int off = LANES / 2; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (!valid) return;
    int h = row % NH, t = (row / NH) % T, b = row / (NH * T);
    long long bht = ((long long)b * NH + h) * T + t;
    if (part == 0) delta[bht] = sum;
    if (dq_accum) {
        float4* z = reinterpret_cast<float4*>(dq_accum + bht * HS + part * 8);
        z[0] = make_float4(0.f, 0.f, 0.f, 0.f);
        z[1] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
}

// dqkv[b, t, 0, h, :] = bf16(scale * dq_accum[b, h, t, :]); HS/8 threads per row.
template <int HS>
__global__ void flash_backward_dq_convert_kernel(bf16* dqkv, const float* dq_accum, int T, int NH, int n_rows,
                                                 float scale) {
    constexpr int LANES = HS / 8;
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int row = (int)(idx / LANES), part = (int)(idx % LANES);   // row of (B, T, NH)
    if (row >= n_rows) return;
    int h = row % NH, t = (row / NH) % T, b = row / (NH * T);
    const float4* src = reinterpret_cast<const float4*>(dq_accum + (((long long)b * NH + h) * T + t) * HS + part * 8);
    float4 x = src[0], y = src[1];
    int4 v;
    v.x = (int)pack_bf16(x.x * scale, x.y * scale);
    v.y = (int)pack_bf16(x.z * scale, x.w * scale);
    v.z = (int)pack_bf16(y.x * scale, y.y * scale);
    v.w = (int)pack_bf16(y.z * scale, y.w * scale);
    *reinterpret_cast<int4*>(dqkv + ((long long)(row / NH) * 3 * NH + h) * HS + part * 8) = v;
}

float* flash_backward_delta(AttentionShape s, void* scratch) { return (float*)scratch; }

float* flash_backward_dq_accum(AttentionShape s, void* scratch) {
    return (float*)((char*)scratch + delta_bytes(s));
}

static const int STEP_THREADS = 256;

void flash_backward_prepass(AttentionShape s, float* delta, float* dq_accum, const bf16* dout, const bf16* out,
                            cudaStream_t stream) {
    int n_rows = s.B * s.T * s.NH;
    int blocks = (int)ceil_div((long long)n_rows * (s.HS / 8), STEP_THREADS);
    if (s.HS == 64) flash_backward_prepass_kernel<64><<<blocks, STEP_THREADS, 0, stream>>>(delta, dq_accum, dout, out, s.T, s.NH, n_rows);
    else            flash_backward_prepass_kernel<128><<<blocks, STEP_THREADS, 0, stream>>>(delta, dq_accum, dout, out, s.T, s.NH, n_rows);
    cudaCheckLaunch();
}

void flash_backward_dq_convert(AttentionShape s, bf16* dqkv, const float* dq_accum, cudaStream_t stream) {
    int n_rows = s.B * s.T * s.NH;
    int blocks = (int)ceil_div((long long)n_rows * (s.HS / 8), STEP_THREADS);
    if (s.HS == 64) flash_backward_dq_convert_kernel<64><<<blocks, STEP_THREADS, 0, stream>>>(dqkv, dq_accum, s.T, s.NH, n_rows, s.scale);
    else            flash_backward_dq_convert_kernel<128><<<blocks, STEP_THREADS, 0, stream>>>(dqkv, dq_accum, s.T, s.NH, n_rows, s.scale);
    cudaCheckLaunch();
}
