// device/smem.cuh: shared memory: the address PTX takes, the cp.async copies that fill it from
// global memory without passing through registers (so the loads of the next block overlap the
// math on this one), and the one way a kernel is allowed more of it than the default 48 KiB.
#ifndef FLASHGPT_DEVICE_SMEM_CUH
#define FLASHGPT_DEVICE_SMEM_CUH

#include <stdint.h>
#include "common/cuda_check.h"

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

// 16-byte copy; with valid == 0 nothing is read and the destination gets zeros.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(smem_addr(dst)), "l"(src), "r"(valid ? 16 : 0) : "memory");
}

__device__ __forceinline__ void cp_async_4(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                 :: "r"(smem_addr(dst)), "l"(src), "r"(valid ? 4 : 0) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most n of this thread's committed groups are still in flight.
template <int n> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(n) : "memory");
}

// Lets `kernel` use `bytes` of dynamic shared memory per thread block, raised once to the
// largest size asked for (the call costs microseconds, which would show on every launch of a
// short kernel). Asking for more than this GPU gives a block (its opt-in limit, less the
// kernel's static shared memory: 227 KiB on Hopper, 163 KiB on an A100)
// ends the program with a message naming `who`. One GPU per process: the limit is the kernel's
// on the device current at the first call.
template <auto kernel> static void raise_smem_limit(const char* who, size_t bytes) {
    static size_t allowed = 0;
    if (bytes <= allowed) return;
    int device, optin;
    cudaFuncAttributes attributes;
    cudaCheck(cudaGetDevice(&device));
    cudaCheck(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    cudaCheck(cudaFuncGetAttributes(&attributes, kernel));
    size_t limit = (size_t)optin > attributes.sharedSizeBytes ? (size_t)optin - attributes.sharedSizeBytes : 0;
    if (bytes > limit)
        die("%s: needs %zu bytes of shared memory per thread block, more than the %zu this GPU gives it", who,
            bytes, limit);
    cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    allowed = bytes;
}

#endif
