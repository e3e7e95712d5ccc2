// device/bf16.cuh: bf16 packs: eight bf16 in one 16-byte load or store, for the memory-bound
// kernels, and two floats rounded into one 32-bit bf16 pair, the operand of a tensor-core mma.
#ifndef FLASHGPT_DEVICE_BF16_CUH
#define FLASHGPT_DEVICE_BF16_CUH

#include <stdint.h>
#include "common/cuda_check.h"

// Eight bf16 that move in one 16-byte load or store: memory-bound kernels need that many bytes
// in flight per thread. The address must be 16-byte aligned (aligned16).
struct alignas(16) bf16x8 { bf16 v[8]; };
static inline int aligned16(const void* p) { return (uintptr_t)p % 16 == 0; }
static inline int aligned4(const void* p) { return (uintptr_t)p % 4 == 0; }

// Eight bf16 at an address only 4-byte aligned (aligned4), in four 4-byte accesses: a tensor of
// the flat parameter array that follows tensors of an odd count of bf16 pairs starts there.
__device__ __forceinline__ bf16x8 load_bf16x8_aligned4(const bf16* p) {
    bf16x8 r;
    for (int k = 0; k < 4; k++) reinterpret_cast<uint32_t*>(r.v)[k] = reinterpret_cast<const uint32_t*>(p)[k];
    return r;
}
__device__ __forceinline__ void store_bf16x8_aligned4(bf16* p, const bf16x8& v) {
    for (int k = 0; k < 4; k++) reinterpret_cast<uint32_t*>(p)[k] = reinterpret_cast<const uint32_t*>(v.v)[k];
}

// Two floats to a bf16 pair, the first in the low half (the lower column index).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
}

#endif
