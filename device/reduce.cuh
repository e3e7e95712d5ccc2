// device/reduce.cuh: reductions over a warp and over a thread block, in a fixed order (xor
// butterfly): the same bits on every run, in every lane.
#ifndef FLASHGPT_DEVICE_REDUCE_CUH
#define FLASHGPT_DEVICE_REDUCE_CUH

#include <math.h>

struct SumOp { __device__ float operator()(float a, float b) const { return a + b; } };
struct MaxOp { __device__ float operator()(float a, float b) const { return fmaxf(a, b); } };

template <typename Op> __device__ inline float warp_reduce(float v, Op op) {
    for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}
// Over the block (blockDim.x a multiple of 32); every thread gets the result. `none`: the value
// that changes nothing (0 for a sum, -inf for a max), for the lanes past the block's warps.
template <typename Op> __device__ inline float block_reduce(float v, Op op, float none) {
    __shared__ float warp_results[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_reduce(v, op);
    __syncthreads();  // an earlier call may still be reading warp_results
    if (lane == 0) warp_results[warp] = v;
    __syncthreads();
    return warp_reduce(lane < blockDim.x / 32 ? warp_results[lane] : none, op);
}

__device__ inline float warp_reduce_sum(float v) { return warp_reduce(v, SumOp()); }
__device__ inline float warp_reduce_max(float v) { return warp_reduce(v, MaxOp()); }
__device__ inline float block_reduce_sum(float v) { return block_reduce(v, SumOp(), 0.0f); }
__device__ inline float block_reduce_max(float v) { return block_reduce(v, MaxOp(), -INFINITY); }

#endif
