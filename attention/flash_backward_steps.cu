// attention/flash_backward_steps.cu: the steps around the backward kernels that both families
// (flash_backward.cu, flash_backward_wgmma.cu) share, and the scratch they work in (fixed-point
// dQ is the wgmma family's alone):
//   scratch: D (B, NH, T) fp32, the fixed-point scale per row (B, NH, T) fp32, the K/V bounds
//            per head (B*NH, 2) fp32, then the dQ accumulator (B, NH, T, HS), fp32 or int32
//   prepass: D = rowsum(dO * O) per query row, dO and O read by their views; with an accumulator
//            (FLASH_DQ_ATOMIC, _FIXED) the accumulator zeroed, and for FLASH_DQ_FIXED first the
//            fixed-point scale of each row (from the K/V bounds, K and V read by their views)
//   convert: the accumulated dQ (unscaled) becomes bf16 dQ, written by its view
//
// FLASH_DQ_FIXED accumulates in fixed point so that adding the K/V blocks' pieces in any order
// gives the same bits (integer addition is associative): dQ[i, :] is held as integers in units of
// 2^-shift[i], the row's own power of two, chosen from a bound no partial sum can pass:
//   dQ[i, d] = sum_j dS[i, j] K[j, d],  dS[i, j] = P[i, j] (dO[i] . V[j] - D[i]),  sum_j P[i, j] = 1
//   |any partial sum over j| <= max|K| (|dO[i]| max_j |V[j]| + |D[i]|) = bound[i] < 2^e
// so with shift = 29 - e every piece and every running total lies within 2^29 units, a quarter of
// int32's range (the slack covers the rounding of P and of dS to bf16). A unit is at most 2^-28
// of the bound, so n pieces, each rounded by up to half a unit, put an rms error of about
// 0.3 sqrt(n) 2^-28 L relative on dQ, where L is how loose the bound is (the cancellation in
// those sums, |dO . V| against |dO| |V|, max |K| against the typical |K|): 2e-6 for L = 100 and
// 256 pieces (T = 32K), 3e-4 for L = 10^4 and 1000 pieces, below the 1e-3 rms of rounding the
// result to bf16.
#include <float.h>
#include "attention/flash.h"
#include "device/bf16.cuh"

// Element (b, t, h, d) of a view (the head's offset may pass 2^31 elements).
__device__ __forceinline__ bf16* element(const AttentionTensor& v, int b, int t, int h, int d) {
    return v.ptr + b * v.batch + t * v.row + (long long)h * v.head + d;
}

static size_t padded(size_t bytes) { return ceil_div((long long)bytes, 256) * 256; }   // keeps the next 256-aligned
static size_t row_bytes(AttentionShape s) { return padded((size_t)s.B * s.NH * s.T * sizeof(float)); }
static size_t bound_bytes(AttentionShape s) { return padded((size_t)s.B * s.NH * 2 * sizeof(float)); }

size_t flash_attention_scratch_bytes(AttentionShape s) {
    return 2 * row_bytes(s) + bound_bytes(s) + (size_t)s.B * s.NH * s.T * s.HS * 4;
}

BackwardScratch flash_backward_scratch(AttentionShape s, void* scratch) {
    char* base = (char*)scratch;
    BackwardScratch w;
    w.delta = (float*)base;
    w.dq_fixed_scale = (float*)(base + row_bytes(s));
    w.kv_bound = (float*)(base + 2 * row_bytes(s));
    w.dq_accum = base + 2 * row_bytes(s) + bound_bytes(s);
    return w;
}

// kv_bound[bh] = (max |K[b, :, h, :]|, max_t |V[b, t, h, :]|^2), which must start at 0: one thread
// block per KV_ROWS keys of one head, HS/8 threads per key, one atomicMax per thread block
// (non-negative floats order as their bits; the maximum is the same in any order).
static const int KV_ROWS = 512;
template <int HS>
__global__ void flash_backward_kv_bound_kernel(float* kv_bound, const AttentionTensor K, const AttentionTensor V,
                                               int T, int NH) {
    constexpr int LANES = HS / 8, ROWS_PER_PASS = 256 / LANES;
    int bh = blockIdx.y, b = bh / NH, h = bh % NH, part = threadIdx.x % LANES;
    int t_end = min(T, (int)(blockIdx.x + 1) * KV_ROWS);
    float k_max = 0.0f, v_max2 = 0.0f;
    for (int t0 = blockIdx.x * KV_ROWS; t0 < t_end; t0 += ROWS_PER_PASS) {   // the same trip count in every warp
        int t = t0 + threadIdx.x / LANES;
        float v2 = 0.0f;
        if (t < t_end) {
            const bf16* k = element(K, b, t, h, part * 8);
            const bf16* v = element(V, b, t, h, part * 8);
            int4 kp = *reinterpret_cast<const int4*>(k), vp = *reinterpret_cast<const int4*>(v);
            const __nv_bfloat162* k2 = reinterpret_cast<const __nv_bfloat162*>(&kp);
            const __nv_bfloat162* v2p = reinterpret_cast<const __nv_bfloat162*>(&vp);
            for (int i = 0; i < 4; i++) {
                float2 kf = __bfloat1622float2(k2[i]), vf = __bfloat1622float2(v2p[i]);
                k_max = fmaxf(k_max, fmaxf(fabsf(kf.x), fabsf(kf.y)));
                v2 += vf.x * vf.x + vf.y * vf.y;
            }
        }
        for (int off = LANES / 2; off > 0; off /= 2) v2 += __shfl_xor_sync(0xffffffffu, v2, off);
        v_max2 = fmaxf(v_max2, v2);
    }
    for (int off = 16; off > 0; off /= 2) {
        k_max = fmaxf(k_max, __shfl_xor_sync(0xffffffffu, k_max, off));
        v_max2 = fmaxf(v_max2, __shfl_xor_sync(0xffffffffu, v_max2, off));
    }
    __shared__ float warp_max[8][2];
    if (threadIdx.x % 32 == 0) {
        warp_max[threadIdx.x / 32][0] = k_max;
        warp_max[threadIdx.x / 32][1] = v_max2;
    }
    __syncthreads();
    if (threadIdx.x < 2) {
        float m = 0.0f;
        for (int w = 0; w < 8; w++) m = fmaxf(m, warp_max[w][threadIdx.x]);
        atomicMax(reinterpret_cast<unsigned int*>(kv_bound + 2 * bh + threadIdx.x), __float_as_uint(m));
    }
}

// 2^shift for a dQ row whose partial sums stay below `bound` < 2^e: shift = 29 - e (see the top),
// at most 126 so that 2^shift and 2^-shift are normal floats. NaN for a bound that is not finite
// (an inf in the head's K or V, an inf or NaN in the row's dO or D; a NaN in K or V reaches D of
// every row that sees it): the row then comes out NaN, as floating-point sums would make it,
// where rounding to an integer would have turned NaN into 0.
__device__ __forceinline__ float dq_fixed_scale_for(float bound) {
    if (!(bound <= FLT_MAX)) return NAN;
    int e;
    frexpf(bound, &e);   // bound = m 2^e, 1/2 <= m < 1 (e = 0 for 0)
    return __int_as_float((127 + min(29 - e, 126)) << 23);
}

// D[b, h, t] = sum_d dO[b, t, h, d] * O[b, t, h, d]; HS/8 threads per row, 8 elements each, the
// rows in (B, T, NH) order, that of the model's activations. With dq_accum, also the accumulator
// row dq_accum[b, h, t, :] zeroed, and with kv_bound (FIXED) the row's fixed-point scale from
// |dO[b, t, h, :]|, D and the head's K/V bounds.
template <int HS>
__global__ void flash_backward_prepass_kernel(float* delta, float* dq_fixed_scale, const float* kv_bound,
                                              void* dq_accum, const AttentionTensor dO, const AttentionTensor O,
                                              int T, int NH, int n_rows) {
    constexpr int LANES = HS / 8;
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int row = (int)(idx / LANES), part = (int)(idx % LANES);   // row of (B, T, NH)
    bool valid = row < n_rows;
    int h = row % NH, t = (row / NH) % T, b = row / (NH * T);
    float sum = 0.0f, do2 = 0.0f;
    if (valid) {
        int4 dov = *reinterpret_cast<const int4*>(element(dO, b, t, h, part * 8));
        int4 ov = *reinterpret_cast<const int4*>(element(O, b, t, h, part * 8));
        const __nv_bfloat162* d2 = reinterpret_cast<const __nv_bfloat162*>(&dov);
        const __nv_bfloat162* o2 = reinterpret_cast<const __nv_bfloat162*>(&ov);
        for (int i = 0; i < 4; i++) {
            float2 a = __bfloat1622float2(d2[i]), c = __bfloat1622float2(o2[i]);
            sum += a.x * c.x + a.y * c.y;
            do2 += a.x * a.x + a.y * a.y;
        }
    }
    for (int off = LANES / 2; off > 0; off /= 2) {
        sum += __shfl_xor_sync(0xffffffffu, sum, off);
        do2 += __shfl_xor_sync(0xffffffffu, do2, off);
    }
    if (!valid) return;
    long long bht = ((long long)b * NH + h) * T + t;
    if (part == 0) {
        delta[bht] = sum;
        if (kv_bound) {
            const float* head = kv_bound + 2 * ((long long)b * NH + h);
            dq_fixed_scale[bht] = dq_fixed_scale_for(head[0] * (sqrtf(do2) * sqrtf(head[1]) + fabsf(sum)));
        }
    }
    if (dq_accum) {   // zero bits: 0.0f and 0 alike
        int4* z = reinterpret_cast<int4*>((int*)dq_accum + bht * HS + part * 8);
        z[0] = make_int4(0, 0, 0, 0);
        z[1] = make_int4(0, 0, 0, 0);
    }
}

// dQ[b, t, h, :] = bf16(scale * dq_accum[b, h, t, :]), FIXED: divided by
// dq_fixed_scale[b, h, t] (a power of two: exact). HS/8 threads per row, rows as in the prepass.
template <int HS, bool FIXED>
__global__ void flash_backward_dq_convert_kernel(const AttentionTensor dQ, const void* dq_accum,
                                                 const float* dq_fixed_scale, int T, int NH, int n_rows, float scale) {
    constexpr int LANES = HS / 8;
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int row = (int)(idx / LANES), part = (int)(idx % LANES);   // row of (B, T, NH)
    if (row >= n_rows) return;
    int h = row % NH, t = (row / NH) % T, b = row / (NH * T);
    long long bht = ((long long)b * NH + h) * T + t;
    const int4* src = reinterpret_cast<const int4*>((const int*)dq_accum + bht * HS + part * 8);
    int4 raw[2] = {src[0], src[1]};
    const int* bits = reinterpret_cast<const int*>(raw);
    float f = FIXED ? scale / dq_fixed_scale[bht] : scale;
    uint32_t packed[4];
    for (int i = 0; i < 4; i++) {
        float x = FIXED ? (float)bits[2 * i] : __int_as_float(bits[2 * i]);
        float y = FIXED ? (float)bits[2 * i + 1] : __int_as_float(bits[2 * i + 1]);
        packed[i] = pack_bf16(x * f, y * f);
    }
    *reinterpret_cast<int4*>(element(dQ, b, t, h, part * 8)) =
        make_int4((int)packed[0], (int)packed[1], (int)packed[2], (int)packed[3]);
}

static const int STEP_THREADS = 256;

void flash_backward_prepass(const AttentionParams* p, BackwardScratch w, FlashDq dq, cudaStream_t stream) {
    AttentionShape s = p->shape;
    int n_rows = s.B * s.T * s.NH, BH = s.B * s.NH;
    int blocks = (int)ceil_div((long long)n_rows * (s.HS / 8), STEP_THREADS);
    void* dq_accum = dq == FLASH_DQ_SEPARATE ? NULL : w.dq_accum;
    const float* kv_bound = dq == FLASH_DQ_FIXED ? w.kv_bound : NULL;
    if (kv_bound) {
        cudaCheck(cudaMemsetAsync(w.kv_bound, 0, (size_t)BH * 2 * sizeof(float), stream));
        dim3 grid((unsigned)ceil_div(s.T, KV_ROWS), (unsigned)BH);
        auto bound = s.HS == 64 ? flash_backward_kv_bound_kernel<64> : flash_backward_kv_bound_kernel<128>;
        bound<<<grid, STEP_THREADS, 0, stream>>>(w.kv_bound, p->k, p->v, s.T, s.NH);
        cudaCheckLaunch();
    }
    auto prepass = s.HS == 64 ? flash_backward_prepass_kernel<64> : flash_backward_prepass_kernel<128>;
    prepass<<<blocks, STEP_THREADS, 0, stream>>>(w.delta, w.dq_fixed_scale, kv_bound, dq_accum, p->dout, p->o,
                                                 s.T, s.NH, n_rows);
    cudaCheckLaunch();
}

template <int HS>
static void launch_dq_convert(const AttentionParams* p, BackwardScratch w, FlashDq dq, cudaStream_t stream) {
    AttentionShape s = p->shape;
    int n_rows = s.B * s.T * s.NH;
    int blocks = (int)ceil_div((long long)n_rows * (HS / 8), STEP_THREADS);
    auto kernel = dq == FLASH_DQ_FIXED ? flash_backward_dq_convert_kernel<HS, true>
                                       : flash_backward_dq_convert_kernel<HS, false>;
    kernel<<<blocks, STEP_THREADS, 0, stream>>>(p->dq, w.dq_accum, w.dq_fixed_scale, s.T, s.NH, n_rows, s.scale);
    cudaCheckLaunch();
}

void flash_backward_dq_convert(const AttentionParams* p, BackwardScratch w, FlashDq dq, cudaStream_t stream) {
    if (p->shape.HS == 64) launch_dq_convert<64>(p, w, dq, stream);
    else                   launch_dq_convert<128>(p, w, dq, stream);
}
