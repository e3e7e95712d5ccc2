// common/cuda_check.h: what every CUDA file needs: the bf16 type, ceil_div, and the checks on
// every CUDA and cuBLAS call, which end the program through die() naming the call's place.
#ifndef FLASHGPT_CUDA_CHECK_H
#define FLASHGPT_CUDA_CHECK_H

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>
#include "common/error.h"

typedef __nv_bfloat16 bf16;

static inline void cuda_check(cudaError_t e, const char* file, int line) {
    if (e != cudaSuccess) die("CUDA: %s at %s:%d", cudaGetErrorString(e), file, line);
}
#define cudaCheck(call) cuda_check((call), __FILE__, __LINE__)

static inline void cublas_check(cublasStatus_t s, const char* file, int line) {
    if (s != CUBLAS_STATUS_SUCCESS) die("cuBLAS: %s at %s:%d", cublasGetStatusString(s), file, line);
}
#define cublasCheck(call) cublas_check((call), __FILE__, __LINE__)

// After a kernel launch: catches bad launch configurations at once.
#define cudaCheckLaunch() cudaCheck(cudaGetLastError())

static inline __host__ __device__ long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

#endif
