// device/tma.cuh: Hopper's tensor memory accelerator (TMA) and the shared-memory barriers
// (mbarrier) that say when its copies have landed, for wgmma kernels (sm_90a, device/wgmma.cuh).
//
// One thread issues a copy of a whole tile, global -> shared, described by a tensor map (made on
// the host by make_tensor_map): the hardware computes the addresses, zero-fills what lies outside
// the tensor, and writes the tile in the 128-byte swizzled layout of wgmma.cuh. The copy counts
// its bytes against an mbarrier; a thread that expects them calls mbarrier_arrive_expect_tx, and
// every consumer waits on the barrier's phase (it flips each time the expected bytes and
// arrivals have all come), so a barrier per buffer stage is reused with phases 0, 1, 0, ...
// The other way, shared -> global, a bulk reduction adds a tile into a tensor (fp32 or int32, as
// the tensor map says: the flash backward's dQ).
#ifndef FLASHGPT_DEVICE_TMA_CUH
#define FLASHGPT_DEVICE_TMA_CUH

#include <stdint.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include "common/cuda_check.h"
#include "device/smem.cuh"

// A tensor map over a tensor of `rank` dimensions, innermost first: dims[i] elements,
// strides[i - 1] bytes between consecutive indices of dimension i >= 1 (multiples of 16), and the
// box one copy moves, box[i] elements of dimension i.
static inline void encode_tensor_map(CUtensorMap* map, CUtensorMapDataType type, const void* base, int rank,
                                     const uint64_t* dims, const uint64_t* strides, const uint32_t* box,
                                     CUtensorMapSwizzle swizzle) {
    // The driver's encoder, reached through the runtime so that nothing links against libcuda.
    static PFN_cuTensorMapEncodeTiled_v12000 encode = NULL;
    if (!encode) {
        cudaDriverEntryPointQueryResult found;
        cudaCheck(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void**)&encode, 12000,
                                                   cudaEnableDefault, &found));
        if (found != cudaDriverEntryPointSuccess) die("the CUDA driver has no cuTensorMapEncodeTiled");
    }
    cuuint64_t d[5], st[4];
    cuuint32_t bx[5], ones[5];
    for (int i = 0; i < rank; i++) {
        d[i] = dims[i];
        if (i > 0) st[i - 1] = strides[i - 1];
        bx[i] = box[i];
        ones[i] = 1;
    }
    CUresult r = encode(map, type, rank, (void*)base, d, st, bx, ones, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) die("cuTensorMapEncodeTiled failed (CUresult %d)", (int)r);
}

// A bf16 tensor whose box is 64 elements of dimension 0 (one 128-byte swizzled panel) by
// box_rows of dimension row_dim, one index of every other dimension.
static inline void make_tensor_map(CUtensorMap* map, const bf16* base, int rank, const uint64_t* dims,
                                   const uint64_t* strides, int row_dim, int box_rows) {
    uint32_t box[5];
    for (int i = 0; i < rank; i++) box[i] = i == 0 ? 64 : i == row_dim ? box_rows : 1;
    encode_tensor_map(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, base, rank, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
}

// mbarrier: init by one thread, then fence_barrier_init and a __syncthreads before any use.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// This thread's arrival, announcing `bytes` more to come from TMA copies in this phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(smem_addr(bar)), "r"(bytes) : "memory");
}
// Returns once the phase with this parity has completed. The barrier by pointer, or by its
// shared-memory address (smem_addr), which a loop can keep in a register.
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, int parity) {
    asm volatile("{\n.reg .pred done;\nWAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT;\n}\n" :: "r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, int parity) { mbarrier_wait(smem_addr(bar), parity); }
// Whether the phase with this parity has completed, without waiting (acquire, as the wait).
__device__ __forceinline__ bool mbarrier_test_wait(uint32_t bar, int parity) {
    uint32_t done;
    asm volatile("{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    return done != 0;
}

// Announces `bytes` more to come from TMA copies in the current phase, without arriving.
__device__ __forceinline__ void mbarrier_expect_tx(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.expect_tx.shared::cta.b64 [%0], %1;\n" :: "r"(smem_addr(bar)), "r"(bytes) : "memory");
}
// This thread's arrival (release: its earlier reads and writes of shared memory come first).
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) { mbarrier_arrive(smem_addr(bar)); }

// Copies the box at coordinates (c0, c1, ...) (innermost first) of the tensor map to dst,
// counting its bytes against bar. `map` must be a __grid_constant__ kernel parameter.
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, int c3, uint64_t* bar) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3, %4, %5}], [%6];\n"
                 :: "r"(smem_addr(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
                    "r"(smem_addr(bar)) : "memory");
}
// Adds the tile at src (shared memory, laid out as the box) into the box at (c0, c1, c2, c3) of
// the tensor, element by element and atomically; writes outside the tensor are dropped. The
// thread's earlier shared-memory stores must be fenced for the async proxy
// (fence_proxy_async_shared) by every thread that wrote src. Committed as one bulk group.
__device__ __forceinline__ void tma_reduce_add_4d(const CUtensorMap* map, int c0, int c1, int c2, int c3, const void* src) {
    asm volatile("cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2, %3, %4}], [%5];\n"
                 :: "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(src)) : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Waits until at most n of this thread's bulk groups still read their shared-memory source.
template <int n> __device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" :: "n"(n) : "memory");
}
// Waits until at most n of this thread's bulk groups are still running at all.
template <int n> __device__ __forceinline__ void bulk_wait() {
    asm volatile("cp.async.bulk.wait_group %0;\n" :: "n"(n) : "memory");
}

#endif
