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
// at once.
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
