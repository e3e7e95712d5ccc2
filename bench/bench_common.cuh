// bench/bench_common.cuh: what the GPU benchmarks share: the device, or a line saying why the
// benchmark is skipped; random bf16 data made on the GPU, an allocation that reports running out
// of memory instead of ending the program, and the median time of passes that take turns.
#ifndef FLASHGPT_BENCH_COMMON_CUH
#define FLASHGPT_BENCH_COMMON_CUH

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "common/cuda_check.h"

#define BENCH_WARMUP 3   // calls of each pass before the timed ones
#define BENCH_REPS 10    // timed calls of each pass; the median is kept

// 1 and device 0's properties in prop, or 0 after printing "NAME: skipped (why)": no CUDA device
// here, or (fp8) none with FP8 tensor cores (compute capability 8.9 and up).
static inline int bench_device(const char* name, int fp8, cudaDeviceProp* prop) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("%s: skipped (no CUDA device)\n", name);
        return 0;
    }
    cudaCheck(cudaGetDeviceProperties(prop, 0));
    if (fp8 && prop->major * 10 + prop->minor < 89) {
        printf("%s: skipped (%s has no FP8 tensor cores)\n", name, prop->name);
        return 0;
    }
    return 1;
}

// Uniform in [-scale, scale) from a hash of the index: random data without a host copy.
__global__ void bench_fill_uniform_kernel(bf16* x, size_t n, uint64_t seed, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        x[i] = (bf16)(((float)(z >> 40) * (2.0f / (1 << 24)) - 1.0f) * scale);
    }
}

static inline void bench_fill_uniform(bf16* x, size_t n, uint64_t seed, float scale) {
    bench_fill_uniform_kernel<<<1024, 256>>>(x, n, seed, scale);
    cudaCheckLaunch();
}

// 0 when the device runs out of memory (the error cleared), 1 on success.
static inline int bench_try_malloc(void** p, size_t bytes) {
    cudaError_t e = cudaMalloc(p, bytes > 0 ? bytes : 1);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        *p = NULL;
        return 0;
    }
    cudaCheck(e);
    return 1;
}

static int bench_compare_floats(const void* a, const void* b) {
    float x = *(const float*)a, y = *(const float*)b;
    return (x > y) - (x < y);
}

// median[i]: the median milliseconds of one call of run(i, context) on stream, i < passes. The
// passes take turns, so that the clock, which falls under the power cap as a run goes on, weighs
// on each alike.
static inline void bench_median_ms(int passes, void (*run)(int pass, void* context), void* context,
                                   cudaStream_t stream, float* median) {
    cudaEvent_t start, stop;
    cudaCheck(cudaEventCreate(&start));
    cudaCheck(cudaEventCreate(&stop));
    float* ms = (float*)malloc((size_t)passes * BENCH_REPS * sizeof(float));
    if (!ms) die("out of host memory");
    for (int r = -BENCH_WARMUP; r < BENCH_REPS; r++)
        for (int i = 0; i < passes; i++) {
            cudaCheck(cudaEventRecord(start, stream));
            run(i, context);
            cudaCheck(cudaEventRecord(stop, stream));
            cudaCheck(cudaEventSynchronize(stop));
            if (r >= 0) cudaCheck(cudaEventElapsedTime(&ms[i * BENCH_REPS + r], start, stop));
        }
    cudaCheck(cudaEventDestroy(start));
    cudaCheck(cudaEventDestroy(stop));
    for (int i = 0; i < passes; i++) {
        qsort(ms + i * BENCH_REPS, BENCH_REPS, sizeof(float), bench_compare_floats);
        median[i] = ms[i * BENCH_REPS + BENCH_REPS / 2];
    }
    free(ms);
}

#endif
