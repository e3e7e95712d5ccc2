// layers/fp8.cu: the amax of a bf16 tensor and its quantisation into FP8 (layers/fp8.h).
//
// amax: a grid-stride pass, 16-byte loads, four in flight per thread; |x| is taken on the bf16
// bits (the sign cleared), whose order as integers is that of the values, a NaN above them all;
// each thread block's maximum goes to *amax by one atomicMax on the float's bits (the same order
// for values >= 0): one atomic a block, not a warp, as they all meet at one address. Exact and
// order-free, so the same bits on every run.
//
// quantise: each warp takes a tile of 64 x 64 elements, each lane 8 rows x 16 columns of it: rows
// 8 (lane % 8) .. + 8 and two chunks of 8 columns, 8 (lane / 8) and 32 + 8 (lane / 8), so that
// a warp's 16-byte loads of a row are 64 contiguous bytes, its stores of q 32 bytes a row and of
// q_t (8 rows of a column: 8 bytes a lane) 64 bytes a column. The 16 loads go out before the
// first conversion. The transpose is done in registers: 4 rows of 4 bytes become 4 columns of 4
// bytes by byte permutes, no shared memory. Conversion: bf16 -> fp32, times the scale (exact: a
// power of two), then cvt.rn.satfinite to E4M3 or E5M2 two at a time. With delayed scaling each
// lane also keeps the largest |x| of its elements, reduced over the block into the state's amax.
// The last thread block to finish (a counter in the state, after a fence) ends the quantisation:
// the amax into the history, the next scale, scale_inv of this one, amax and the counter back to
// 0. Bytes: x read once (twice with current scaling, whose amax pass reads it first), q and q_t
// written once each.
#include <float.h>
#include <stdint.h>
#include <cuda_fp8.h>
#include "layers/fp8.h"
#include "device/bf16.cuh"

#define AMAX_THREADS 256
#define QUANTISE_WARPS 8   // a thread block's warps, each a tile
#define TILE 64            // a warp's tile: TILE rows x TILE columns

// The scale of layers/fp8.h: 2^floor(log2(fp8_max / amax)), at most 2^126; 1 for amax 0, NaN
// for an infinite or NaN amax. fp8_max / amax is at least 448 / FLT_MAX, a normal float, so its
// exponent bits alone are the power of two below it.
__device__ inline float scale_from_amax(float amax, float fp8_max_value) {
    if (!(amax <= FLT_MAX)) return __uint_as_float(0x7fc00000u);
    if (amax == 0.0f) return 1.0f;
    float ratio = fminf(fp8_max_value / amax, 0x1p126f);
    return __uint_as_float(__float_as_uint(ratio) & 0x7f800000u);
}

// |x| of 8 bf16 as bits, the two halves of the word holding the maxima of elements 0, 2, 4, 6 and
// 1, 3, 5, 7.
__device__ inline uint32_t abs_max8(uint4 v) {
    const uint32_t magnitude = 0x7fff7fffu;
    return __vmaxu2(__vmaxu2(v.x & magnitude, v.y & magnitude), __vmaxu2(v.z & magnitude, v.w & magnitude));
}

// The float bits of the larger half of a word of two bf16 magnitudes.
__device__ inline uint32_t larger_half(uint32_t m) { return max(m >> 16, m & 0xffffu) << 16; }

// The largest of every thread's bits in the block (blockDim.x a multiple of 32, at most 1024),
// for thread 0; a barrier for all.
__device__ inline uint32_t block_max_for_thread0(uint32_t bits) {
    __shared__ uint32_t warp_max[32];
    bits = __reduce_max_sync(0xffffffffu, bits);
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = bits;
    __syncthreads();
    if (threadIdx.x == 0)
        for (int w = 1; w < (int)blockDim.x / 32; w++) bits = max(bits, warp_max[w]);
    return bits;
}

template <Fp8Format F> __device__ inline uint32_t fp8x4(float a, float b, float c, float d) {
    const __nv_fp8_interpretation_t kind = F == FP8_E4M3 ? __NV_E4M3 : __NV_E5M2;
    uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, kind);
    uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, kind);
    return lo | hi << 16;
}

// 8 bf16 (element 0 in the low half of v.x) times scale -> 8 FP8 bytes, element 0 the lowest.
template <Fp8Format F> __device__ inline uint2 quantise8(uint4 v, float scale) {
    auto even = [scale](uint32_t w) { return __uint_as_float(w << 16) * scale; };
    auto odd = [scale](uint32_t w) { return __uint_as_float(w & 0xffff0000u) * scale; };
    return make_uint2(fp8x4<F>(even(v.x), odd(v.x), even(v.y), odd(v.y)),
                      fp8x4<F>(even(v.z), odd(v.z), even(v.w), odd(v.w)));
}

// 4 rows of 4 bytes (a word a row, column k in byte k) -> 4 columns (a word a column, row k in
// byte k).
__device__ inline void transpose4x4(uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3, uint32_t col[4]) {
    uint32_t a = __byte_perm(r0, r1, 0x5140), b = __byte_perm(r0, r1, 0x7362);   // r0.0 r1.0 r0.1 r1.1, .2 .3
    uint32_t c = __byte_perm(r2, r3, 0x5140), d = __byte_perm(r2, r3, 0x7362);
    col[0] = __byte_perm(a, c, 0x5410);
    col[1] = __byte_perm(a, c, 0x7632);
    col[2] = __byte_perm(b, d, 0x5410);
    col[3] = __byte_perm(b, d, 0x7632);
}

__global__ void __launch_bounds__(AMAX_THREADS) amax_kernel(float* amax, const uint4* x, size_t packs) {
    uint32_t m = 0;
    size_t stride = (size_t)gridDim.x * blockDim.x, i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < packs; i += 4 * stride) {
        uint4 a = x[i], b = x[i + stride], c = x[i + 2 * stride], d = x[i + 3 * stride];
        m = __vmaxu2(m, __vmaxu2(__vmaxu2(abs_max8(a), abs_max8(b)), __vmaxu2(abs_max8(c), abs_max8(d))));
    }
    for (; i < packs; i += stride) m = __vmaxu2(m, abs_max8(x[i]));
    uint32_t bits = block_max_for_thread0(larger_half(m));
    if (threadIdx.x == 0 && bits != 0) atomicMax(reinterpret_cast<unsigned int*>(amax), bits);
}

// The end of a quantisation made with scale, by one thread once every block is done: the amax
// into the history (newest first, the oldest dropped), the next delayed scale from the history's
// largest (NaN the largest of all: the bits' order), 1 / scale, amax and the counter to 0.
__device__ void finish_quantisation(Fp8Scale* state, float scale, float fp8_max_value) {
    volatile Fp8Scale* s = state;
    float amax = s->amax;
    uint32_t largest = __float_as_uint(amax);
    for (int i = FP8_HISTORY - 1; i > 0; i--) {
        float older = s->history[i - 1];
        s->history[i] = older;
        largest = max(largest, __float_as_uint(older));
    }
    s->history[0] = amax;
    s->scale = scale_from_amax(__uint_as_float(largest), fp8_max_value);
    s->scale_inv = 1.0f / scale;
    s->amax = 0.0f;
    s->blocks_done = 0;
}

// q (rows, cols) and q_t (cols, rows), either NULL, = x (rows, cols) in format F; the scale is the
// state's (DELAYED) or the one of the state's amax, which the amax pass has found.
template <Fp8Format F, bool DELAYED>
__global__ void __launch_bounds__(QUANTISE_WARPS * 32)
    quantise_kernel(uint8_t* q, uint8_t* q_t, const bf16* x, int rows, int cols, Fp8Scale* state) {
    const float fp8_max_value = F == FP8_E4M3 ? FP8_E4M3_MAX : FP8_E5M2_MAX;
    const float scale = DELAYED ? state->scale : scale_from_amax(state->amax, fp8_max_value);
    int lane = threadIdx.x % 32, tiles_c = (cols + TILE - 1) / TILE;
    int tile = blockIdx.x * QUANTISE_WARPS + threadIdx.x / 32;
    int row0 = tile / tiles_c * TILE + 8 * (lane % 8);
    int col0[2] = {tile % tiles_c * TILE + 8 * (lane / 8), tile % tiles_c * TILE + 32 + 8 * (lane / 8)};
    uint32_t magnitudes = 0;
    // rows and cols are multiples of 8: a chunk of 8 x 8 lies wholly inside or wholly outside.
    if (row0 < rows) {
        uint4 v[2][8];
        #pragma unroll
        for (int j = 0; j < 2; j++) {
            if (col0[j] >= cols) continue;
            #pragma unroll
            for (int r = 0; r < 8; r++) v[j][r] = *(const uint4*)(x + (size_t)(row0 + r) * cols + col0[j]);
        }
        #pragma unroll
        for (int j = 0; j < 2; j++) {
            if (col0[j] >= cols) continue;
            uint2 w[8];
            #pragma unroll
            for (int r = 0; r < 8; r++) {
                if (DELAYED) magnitudes = __vmaxu2(magnitudes, abs_max8(v[j][r]));
                w[r] = quantise8<F>(v[j][r], scale);
                if (q) *(uint2*)(q + (size_t)(row0 + r) * cols + col0[j]) = w[r];
            }
            if (q_t) {
                uint32_t top[4], bottom[4];   // rows 0-3 and 4-7 of 4 columns
                transpose4x4(w[0].x, w[1].x, w[2].x, w[3].x, top);
                transpose4x4(w[4].x, w[5].x, w[6].x, w[7].x, bottom);
                #pragma unroll
                for (int c = 0; c < 4; c++)
                    *(uint2*)(q_t + (size_t)(col0[j] + c) * rows + row0) = make_uint2(top[c], bottom[c]);
                transpose4x4(w[0].y, w[1].y, w[2].y, w[3].y, top);
                transpose4x4(w[4].y, w[5].y, w[6].y, w[7].y, bottom);
                #pragma unroll
                for (int c = 0; c < 4; c++)
                    *(uint2*)(q_t + (size_t)(col0[j] + 4 + c) * rows + row0) = make_uint2(top[c], bottom[c]);
            }
        }
    }
    // The block's largest |x| (0 unless DELAYED). The barrier inside also makes every warp of the
    // block have read the scale (or the amax it came from) before the block counts itself done
    // and the last block overwrites them.
    uint32_t bits = block_max_for_thread0(larger_half(magnitudes));
    if (threadIdx.x != 0) return;
    if (bits != 0) atomicMax(reinterpret_cast<unsigned int*>(&state->amax), bits);
    // The block's amax is in before it counts itself done; the last block then reads the amax of
    // all (the stores of q and q_t are for the kernels after this one).
    __threadfence();
    if (atomicAdd(&state->blocks_done, 1u) == gridDim.x - 1) {
        __threadfence();
        finish_quantisation(state, scale, fp8_max_value);
    }
}

float fp8_max(Fp8Format format) { return format == FP8_E4M3 ? FP8_E4M3_MAX : FP8_E5M2_MAX; }

void fp8_tensor_init(Fp8Tensor* t, Fp8Format format, Fp8Scaling scaling) {
    t->format = format;
    t->scaling = scaling;
    t->has_history = 0;
    cudaCheck(cudaMalloc((void**)&t->state, sizeof(Fp8Scale)));
    cudaCheck(cudaMemset(t->state, 0, sizeof(Fp8Scale)));
}

void fp8_tensor_free(Fp8Tensor* t) {
    cudaCheck(cudaFree(t->state));
    t->state = NULL;
}

static int multiprocessors(void) {
    static int count = 0;
    if (!count) {
        int device;
        cudaCheck(cudaGetDevice(&device));
        cudaCheck(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    }
    return count;
}

void fp8_amax(float* amax, const bf16* x, size_t n, cudaStream_t stream) {
    if (n % 8 != 0 || !aligned16(x)) die("fp8_amax: needs n (%zu) a multiple of 8 and x 16-byte aligned", n);
    if (n == 0) return;
    size_t packs = n / 8;
    long long blocks = ceil_div((long long)packs, AMAX_THREADS), most = 8LL * multiprocessors();
    amax_kernel<<<(unsigned)(blocks < most ? blocks : most), AMAX_THREADS, 0, stream>>>(amax, (const uint4*)x, packs);
    cudaCheckLaunch();
}

void fp8_quantise(Fp8Tensor* t, uint8_t* q, uint8_t* q_t, const bf16* x, int rows, int cols, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0 || rows % 16 != 0 || cols % 16 != 0)
        die("fp8_quantise: needs rows (%d) and cols (%d) positive multiples of 16", rows, cols);
    if (!q && !q_t) die("fp8_quantise: neither q nor q_t to write");
    if (!aligned16(x) || (q && !aligned16(q)) || (q_t && !aligned16(q_t)))
        die("fp8_quantise: needs x, q and q_t 16-byte aligned");
    int delayed = t->scaling == FP8_SCALING_DELAYED && t->has_history;
    // The amax pass adds to the state's amax, which is 0 between quantisations.
    if (!delayed) fp8_amax(&t->state->amax, x, (size_t)rows * cols, stream);
    long long tiles = ceil_div(rows, TILE) * ceil_div(cols, TILE);
    void (*kernel)(uint8_t*, uint8_t*, const bf16*, int, int, Fp8Scale*) =
        t->format == FP8_E4M3 ? (delayed ? quantise_kernel<FP8_E4M3, true> : quantise_kernel<FP8_E4M3, false>)
                              : (delayed ? quantise_kernel<FP8_E5M2, true> : quantise_kernel<FP8_E5M2, false>);
    kernel<<<(unsigned)ceil_div(tiles, QUANTISE_WARPS), QUANTISE_WARPS * 32, 0, stream>>>(q, q_t, x, rows, cols,
                                                                                          t->state);
    cudaCheckLaunch();
    t->has_history = 1;
}
