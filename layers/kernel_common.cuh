// layers/kernel_common.cuh: what the layers' kernels share: 16-byte packs of bf16, reductions
// in a fixed order (deterministic), column sums (the bias gradients), and the launch that lets a
// kernel start while the one before it ends.
#ifndef FLASHGPT_KERNEL_COMMON_CUH
#define FLASHGPT_KERNEL_COMMON_CUH

#include <stdint.h>
#include "common/cuda_check.h"

// Eight bf16 that move in one 16-byte load or store: memory-bound kernels need that many bytes
// in flight per thread. The address must be 16-byte aligned (aligned16).
struct alignas(16) bf16x8 { bf16 v[8]; };
static inline int aligned16(const void* p) { return (uintptr_t)p % 16 == 0; }

// Reductions with a fixed order (xor butterfly): the same bits on every run, in every lane.
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
// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
__device__ inline float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

__device__ inline float warp_reduce_sum(float v) { return warp_reduce(v, SumOp()); }
__device__ inline float warp_reduce_max(float v) { return warp_reduce(v, MaxOp()); }
__device__ inline float block_reduce_sum(float v) { return block_reduce(v, SumOp(), 0.0f); }
__device__ inline float block_reduce_max(float v) { return block_reduce(v, MaxOp(), -INFINITY); }

// Deterministic column sums of a row-major (rows, cols) matrix with row stride ld, in two passes
// with fp32 accumulation in a fixed order. Block (x, y), 32 x 8 threads, sums the rows
// [y * rows_per_block, (y + 1) * rows_per_block) of the columns [32x, 32x + 32): thread (tx, ty)
// takes every 8th row, then the 8 partial sums are added in order. The sum of the block goes
// to partials[y * cols + c], or, in the last pass (add_to != NULL, one block row), into add_to[c].
#define COLUMN_SUMS_ROWS_PER_BLOCK 256
template <typename T>
__global__ void column_sums_kernel(float* partials, bf16* add_to, const T* in, int rows, int cols,
                                   int ld, int rows_per_block) {
    __shared__ float sums[8][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    int row_begin = blockIdx.y * rows_per_block;
    int row_end = min(rows, row_begin + rows_per_block);
    float acc = 0.0f;
    if (c < cols) {
        #pragma unroll 8
        for (int r = row_begin + threadIdx.y; r < row_end; r += 8) acc += (float)in[(size_t)r * ld + c];
    }
    sums[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y != 0 || c >= cols) return;
    for (int y = 1; y < 8; y++) acc += sums[y][threadIdx.x];
    if (add_to) add_to[c] = (bf16)((float)add_to[c] + acc);
    else partials[(size_t)blockIdx.y * cols + c] = acc;
}
static inline size_t column_sums_scratch_bytes(int rows, int cols) {
    return (size_t)ceil_div(rows, COLUMN_SUMS_ROWS_PER_BLOCK) * cols * sizeof(float);
}
// out (cols) += column sums of in (rows, cols; row stride ld); scratch: column_sums_scratch_bytes.
template <typename T>
static void column_sums_add(bf16* out, const T* in, int rows, int cols, int ld, float* scratch,
                            cudaStream_t stream) {
    int blocks_x = (int)ceil_div(cols, 32);
    // gridDim.y stops at 65535: past 65535 * 256 rows each block takes more rows.
    int rows_per_block = (int)ceil_div(rows, 65535);
    if (rows_per_block < COLUMN_SUMS_ROWS_PER_BLOCK) rows_per_block = COLUMN_SUMS_ROWS_PER_BLOCK;
    int blocks_y = (int)ceil_div(rows, rows_per_block);
    dim3 block(32, 8);
    column_sums_kernel<T><<<dim3(blocks_x, blocks_y), block, 0, stream>>>(
        scratch, NULL, in, rows, cols, ld, rows_per_block);
    cudaCheckLaunch();
    column_sums_kernel<float><<<blocks_x, block, 0, stream>>>(
        NULL, out, scratch, blocks_y, cols, cols, blocks_y);
    cudaCheckLaunch();
}

// Programmatic dependent launch: a kernel launched by launch_overlapped may start while the
// kernel before it on the stream (or in the CUDA graph captured from it) is still running. Its
// blocks run freely up to grid_dependency_wait(), which returns once that kernel has completed
// and its writes are visible; so work that reads nothing the kernel before writes (loading the
// weights, say) overlaps that kernel's tail and the launch. Every block of such a kernel calls
// grid_dependency_wait() before it reads or writes what other kernels of the stream touch, and
// before it exits: then a kernel's completion implies its predecessors'. After a launch without
// the attribute the wait returns at once. grid_dependents_launch() lets the next kernel start
// before this one ends.
__device__ inline void grid_dependency_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ inline void grid_dependents_launch() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

template <typename... Params, typename... Args>
static void launch_overlapped(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                              cudaStream_t stream, Args... args) {
    cudaLaunchAttribute overlap;
    overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    overlap.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    config.attrs = &overlap;
    config.numAttrs = 1;
    cudaCheck(cudaLaunchKernelEx(&config, kernel, ((Params)args)...));
}

#endif
