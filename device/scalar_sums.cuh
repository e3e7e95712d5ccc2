// device/scalar_sums.cuh: the gradients of K learned scalars, each a sum over the N * C values of
// a layer, in a fixed order: a grid-stride walk whose grid N and C alone fix, each block's K
// partial sums into scratch (scalar_sums_store), then one block adds them in order
// (scalar_sums_add_kernel). The same bits on every run, whatever the GPU.
#ifndef FLASHGPT_DEVICE_SCALAR_SUMS_CUH
#define FLASHGPT_DEVICE_SCALAR_SUMS_CUH

#include "device/bf16.cuh"
#include "device/reduce.cuh"

#define SCALAR_SUMS_THREADS 256
#define SCALAR_SUMS_MAX_BLOCKS 1024

// The N * C values as packs of 8 bf16, after checking the layer's call: N >= 0, C a multiple of 8,
// the three buffers 16-byte aligned (who: the function, for the error).
static inline size_t scalar_sums_packs(const char* who, int N, int C, const void* a, const void* b, const void* c) {
    if (N < 0 || C % 8 != 0 || !aligned16(a) || !aligned16(b) || !aligned16(c))
        die("%s: needs N >= 0, C (%d) a multiple of 8 and 16-byte aligned buffers", who, C);
    return (size_t)N * C / 8;
}

// The walk's grid over `packs` packs of 8: a block per SCALAR_SUMS_THREADS packs, at most
// SCALAR_SUMS_MAX_BLOCKS.
static inline int scalar_sums_blocks(size_t packs) {
    long long blocks = ceil_div((long long)packs, SCALAR_SUMS_THREADS);
    return blocks < SCALAR_SUMS_MAX_BLOCKS ? (int)blocks : SCALAR_SUMS_MAX_BLOCKS;
}

// The scratch the K sums take: K floats per block of the largest grid.
static inline size_t scalar_sums_scratch_bytes(int K) { return (size_t)K * SCALAR_SUMS_MAX_BLOCKS * sizeof(float); }

// The block's K sums (each thread's share in sums) into partials[K block + k].
template <int K> __device__ inline void scalar_sums_store(float* partials, float (&sums)[K]) {
    for (int k = 0; k < K; k++) {
        float s = block_reduce_sum(sums[k]);
        if (threadIdx.x == 0) partials[K * blockIdx.x + k] = s;
    }
}

// One block of SCALAR_SUMS_THREADS: the partial sums of `count` blocks added in a fixed order
// into the gradients (accumulated: d[k] += sum k).
template <int K>
__global__ void __launch_bounds__(SCALAR_SUMS_THREADS) scalar_sums_add_kernel(bf16* d0, bf16* d1, const float* partials,
                                                                              int count) {
    static_assert(K == 1 || K == 2, "one or two scalars");
    bf16* grads[2] = {d0, d1};
    for (int k = 0; k < K; k++) {
        float sum = 0.0f;
        for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[K * i + k];
        sum = block_reduce_sum(sum);
        if (threadIdx.x == 0) *grads[k] = (bf16)((float)*grads[k] + sum);
    }
}

#endif
