// layers/kernel_common.cuh: what the layers' kernels share beyond device/: GELU (tanh form) and
// its derivative, and column sums in a fixed order (deterministic), the bias gradients.
#ifndef FLASHGPT_KERNEL_COMMON_CUH
#define FLASHGPT_KERNEL_COMMON_CUH

#include "common/cuda_check.h"

// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
__device__ inline float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

// Its derivative: 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 0.044715 x^2), t the tanh above.
__device__ inline float gelu_tanh_grad(float x) {
    float t = tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * 0.7978845608028654f * (1.0f + 0.134145f * x * x);
}

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

#endif
