// device/launch.cuh: the launch that lets a kernel start while the one before it ends
// (programmatic dependent launch), and the two calls by which its kernels take part.
#ifndef FLASHGPT_DEVICE_LAUNCH_CUH
#define FLASHGPT_DEVICE_LAUNCH_CUH

#include "common/cuda_check.h"

// A kernel launched by launch_overlapped may start while the kernel before it on the stream (or
// in the CUDA graph captured from it) is still running. Its blocks run freely up to
// grid_dependency_wait(), which returns once that kernel has completed and its writes are
// visible; so work that reads nothing the kernel before writes (loading the weights, say)
// overlaps that kernel's tail and the launch. Every block of such a kernel calls
// grid_dependency_wait() before it reads what the kernel before may write or writes what that
// kernel may read, and before it exits (no block returns early): then a kernel's completion
// implies its predecessors'. grid_dependents_launch() lets the next kernel start before this one
// ends; a kernel calls it only after its own wait, so that when the next one starts, every
// kernel before this one has completed. After a launch without the attribute the wait returns
// at once. Before Hopper (code for sm_80) neither call exists and the kernels run one after the
// other: the launch leaves the attribute out.
__device__ inline void grid_dependency_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ inline void grid_dependents_launch() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether this build's kernels wait in grid_dependency_wait: those compiled for Hopper or later
// (PTX of compute_90 on). Code for an earlier GPU also runs on a Hopper, compiled there from its
// PTX, without the wait, so it must not start early. Every kernel is built for the same GPU, so
// the first one asked answers for all.
template <typename Kernel> static bool kernels_wait_for_dependencies(Kernel kernel) {
    static int answer = -1;
    if (answer < 0) {
        cudaFuncAttributes attributes;
        cudaCheck(cudaFuncGetAttributes(&attributes, kernel));
        answer = attributes.ptxVersion >= 90;
    }
    return answer;
}

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
    config.numAttrs = kernels_wait_for_dependencies(kernel) ? 1 : 0;
    cudaCheck(cudaLaunchKernelEx(&config, kernel, ((Params)args)...));
}

#endif
