// layers/cuda_common.h: what every CUDA file needs: the bf16 type, error checks on every
// CUDA / cuBLAS call, and small integer helpers.
#ifndef FLASHGPT_CUDA_COMMON_H
#define FLASHGPT_CUDA_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>

typedef __nv_bfloat16 bf16;

static inline void cuda_check(cudaError_t e, const char* file, int line) {
    if (e != cudaSuccess) {
        fprintf(stderr, "error: CUDA: %s at %s:%d\n", cudaGetErrorString(e), file, line);
        exit(1);
    }
}
#define cudaCheck(call) cuda_check((call), __FILE__, __LINE__)

static inline void cublas_check(cublasStatus_t s, const char* file, int line) {
    if (s != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "error: cuBLAS: %s at %s:%d\n", cublasGetStatusString(s), file, line);
        exit(1);
    }
}
#define cublasCheck(call) cublas_check((call), __FILE__, __LINE__)

// After a kernel launch: catches bad launch configurations at once.
#define cudaCheckLaunch() cudaCheck(cudaGetLastError())

static inline __host__ __device__ long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

#endif
