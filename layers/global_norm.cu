// layers/global_norm.cu: sum of squares of the gradients (n), deterministic: a fixed grid (a
// function of n only) writes one partial sum per block into scratch, then one block adds them;
// and the clip's factor from such sums.
#include "layers/global_norm.h"
#include "device/reduce.cuh"

#define NORM_THREADS 512
#define NORM_MAX_BLOCKS 1024

static int norm_blocks(size_t n) {
    long long blocks = ceil_div(n, NORM_THREADS);
    return blocks < NORM_MAX_BLOCKS ? (int)blocks : NORM_MAX_BLOCKS;
}

// partials (gridDim.x) = sums of squares over a grid-stride walk of grads (n).
__global__ void norm_partials_kernel(float* partials, const bf16* grads, size_t n) {
    float acc = 0.0f;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float g = (float)grads[i];
        acc += g * g;
    }
    acc = block_reduce_sum(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// One block: *out = sum of partials (count).
__global__ void norm_final_kernel(float* out, const float* partials, int count) {
    float acc = 0.0f;
    for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
    acc = block_reduce_sum(acc);
    if (threadIdx.x == 0) *out = acc;
}

size_t global_norm_scratch_bytes(size_t n) {
    return NORM_MAX_BLOCKS * sizeof(float);
}

void global_norm_squared(float* out, const bf16* grads, size_t n, void* scratch,
                         cudaStream_t stream) {
    if (n == 0) {
        cudaCheck(cudaMemsetAsync(out, 0, sizeof(float), stream));
        return;
    }
    int blocks = norm_blocks(n);
    norm_partials_kernel<<<blocks, NORM_THREADS, 0, stream>>>((float*)scratch, grads, n);
    cudaCheckLaunch();
    norm_final_kernel<<<1, NORM_THREADS, 0, stream>>>(out, (float*)scratch, blocks);
    cudaCheckLaunch();
}

__global__ void grad_clip_kernel(float* norm, float* grad_scale, const float* parts, int count, float clip) {
    float norm2 = parts[0];
    for (int i = 1; i < count; i++) norm2 = __fadd_rn(norm2, parts[i]);
    float n = __fsqrt_rn(norm2);
    *norm = n;
    *grad_scale = clip > 0.0f && n > clip ? __fdiv_rn(clip, n) : 1.0f;
}

void grad_clip_scale(float* norm, float* grad_scale, const float* parts, int count, float clip,
                     cudaStream_t stream) {
    grad_clip_kernel<<<1, 1, 0, stream>>>(norm, grad_scale, parts, count, clip);
    cudaCheckLaunch();
}
