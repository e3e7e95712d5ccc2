// device/wgmma.cuh: Hopper (sm_90a) warpgroup tensor-core building blocks: 128-byte swizzled
// shared-memory tiles (filled by TMA, device/tma.cuh), the 64-bit shared-memory matrix descriptors
// that point wgmma at them, the bf16 wgmma.mma_async m64nNk16 (fp32 accumulators) for N = 64, 128,
// and what warpgroup-specialised kernels need beside them: register budgets, named barriers, the
// proxy fence, values kept where ptxas would not keep them (warp_uniform, opaque). The flash
// attention's wgmma kernels are built on them (attention/README.md).
//
// Swizzled tile (ROWS, COLS) bf16, COLS a multiple of 64: stored as COLS/64 "panels" of
// (ROWS, 64), panel after panel; a panel row is 128 bytes, and the 16-byte chunk c (0..7) of row r
// sits at chunk position c ^ (r % 8). Every panel starts on a 1024-byte boundary, so the XOR
// equals the hardware's 128-byte swizzle (address bits [4,7) ^= bits [7,10)), and 8 rows make
// one 1024-byte swizzle atom.
//
// Matrix descriptor (PTX ISA, "Matrix Descriptor Format"), 64 bits:
//   [0,14)  start address >> 4        [16,30) leading dimension byte offset (LBO) >> 4
//   [32,46) stride dimension byte offset (SBO) >> 4
//   [49,52) base offset: 0, every swizzle atom starts on a 1024-byte boundary
//   [62,64) swizzle mode: 1 = 128-byte swizzle
// K-major operand (A = Q, B = K for S = Q K^T: each row holds consecutive k): SBO = 1024, the step
//   from one 8-row group to the next; LBO is unused with swizzling (set to 1, as the ISA assumes);
//   k-step kk of 16 elements starts 32 bytes further into the row (bytes 32*(kk%4) of panel kk/4).
// MN-major operand (B = V for O = P V: V is (key, dim), so each row holds consecutive n, one k;
//   likewise A = dS for dQ = dS K from a tile of dS^T, each row one key, consecutive queries):
//   imm-trans = 1; SBO = 1024, the step from 8 keys to the next 8; LBO = the step from one
//   64-column panel to the next (used when N > 64); k-step kk of 16 keys starts 16 rows down.
//
// Accumulator D of m64nNk16 (fp32, N/2 registers per thread), warp w = warp index % 4 of the
// warpgroup, g = lane / 4, t = lane % 4:  d[4i + e] is row 16w + g + 8*(e >> 1), column
// 8i + 2t + (e & 1). A from registers (4 x bf16x2): warp w holds rows 16w..16w+15 in the
// mma.m16n8k16 A layout, a0 (g, 2t..) a1 (g+8, 2t..) a2 (g, 2t+8..) a3 (g+8, 2t+8..): so n-tiles
// 2kk and 2kk+1 of an accumulator, packed to bf16 (c_to_a), are the A fragment of k-step kk.
#ifndef FLASHGPT_DEVICE_WGMMA_CUH
#define FLASHGPT_DEVICE_WGMMA_CUH

#include <stdint.h>
#include "common/cuda_check.h"
#include "device/mma.cuh"

// Byte offset of element (r, c) in a swizzled (ROWS, COLS) tile; c a multiple of 8.
template <int ROWS>
__host__ __device__ __forceinline__ uint32_t swizzled_offset(int r, int c) {
    return (c / 64) * ROWS * 128 + r * 128 + ((((c % 64) / 8) ^ (r % 8)) << 4);
}

// The byte offset, in a swizzled (ROWS, COLS) tile, that lane `lane` hands ldmatrix.x4 so that
// the four 8x8 matrices it loads are the A fragment (a0..a3, see the top comment) of k-step kk
// for the 16 rows from row0: lanes 0-7 point at rows 0-7 and lanes 8-15 at rows 8-15 of columns
// 16kk.., lanes 16-31 likewise at columns 16kk + 8..
template <int ROWS>
__host__ __device__ __forceinline__ uint32_t a_fragment_ldmatrix_offset(int row0, int lane, int kk) {
    return swizzled_offset<ROWS>(row0 + lane % 16, 16 * kk + 8 * (lane / 16));
}

// Descriptor of an operand at shared-memory address `start` (bytes), 128-byte swizzle.
__host__ __device__ __forceinline__ uint64_t smem_desc(uint32_t start, uint32_t lbo_bytes, uint32_t sbo_bytes) {
    return (uint64_t)((start & 0x3FFFF) >> 4) | (uint64_t)((lbo_bytes & 0x3FFFF) >> 4) << 16 |
           (uint64_t)((sbo_bytes & 0x3FFFF) >> 4) << 32 | 1ull << 62;
}

// The descriptor `bytes` further into shared memory: an add to the start address field, which
// never carries into the fields above it (shared memory is below 256 KiB). Every k-step of a
// tile is its tile's descriptor plus a constant, so a product's descriptors cost an add each.
__host__ __device__ __forceinline__ uint64_t desc_add(uint64_t desc, uint32_t bytes) {
    return (desc >> 32) << 32 | (uint32_t)((uint32_t)desc + (bytes >> 4));
}

// K-major operand of k-step kk (16 elements of k) from the swizzled tile at shared address
// `tile` with ROWS rows, starting at row start_row (a multiple of 8).
template <int ROWS>
__host__ __device__ __forceinline__ uint64_t desc_k_major(uint32_t tile, int start_row, int kk) {
    return desc_add(smem_desc(tile, 16, 1024), (kk / 4) * ROWS * 128 + start_row * 128 + (kk % 4) * 32);
}

// MN-major operand of k-step kk (rows 16kk..16kk+15) from the swizzled tile at shared address
// `tile` with ROWS rows.
template <int ROWS>
__host__ __device__ __forceinline__ uint64_t desc_mn_major(uint32_t tile, int kk) {
    return desc_add(smem_desc(tile, ROWS * 128, 1024), kk * 16 * 128);
}

// Orders the warpgroup's earlier accesses to accumulator and A-fragment registers before the
// next wgmma (shared memory written by the generic proxy needs fence_proxy_async_shared).
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most n committed wgmma groups of this warpgroup are still running.
template <int n> __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(n) : "memory");
}

// The compiler does not know that wgmma writes (and reads) registers after the asm statement that
// issues it: after wgmma_wait, this pins each register so no use is moved above the wait and no
// register is reused while a wgmma may still read it. Before a wait, it keeps the computation of
// the values above that point in the program.
template <int N> __device__ __forceinline__ void pin_registers(float (&r)[N]) {
    #pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(r[i]) :: "memory");
}
template <int N> __device__ __forceinline__ void pin_registers(uint32_t (&r)[N][4]) {
    #pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+r"(r[i][0]), "+r"(r[i][1]), "+r"(r[i][2]), "+r"(r[i][3]) :: "memory");
}

#define WGMMA_D8(d, i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), \
                       "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define WGMMA_D32(d) WGMMA_D8(d, 0), WGMMA_D8(d, 8), WGMMA_D8(d, 16), WGMMA_D8(d, 24)
#define WGMMA_D64(d) WGMMA_D32(d), WGMMA_D8(d, 32), WGMMA_D8(d, 40), WGMMA_D8(d, 48), WGMMA_D8(d, 56)
#define WGMMA_REGS32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define WGMMA_REGS64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

// d (64 x N) = (accumulate ? d : 0) + A B, A and B in shared memory (descriptors); TRANS_A /
// TRANS_B = 1 when that operand is MN-major (see above), 0 when K-major.
// One per warpgroup: all 128 threads issue it with the same descriptors.
template <int N, int TRANS_A = 0, int TRANS_B = 0>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t a, uint64_t b, int accumulate) {
    static_assert(N == 64 || N == 128, "m64n64k16 and m64n128k16 only");
    if constexpr (N == 64)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WGMMA_REGS32 ", %32, %33, p, 1, 1, %35, %36;\n}\n"
                     : WGMMA_D32(d) : "l"(a), "l"(b), "r"(accumulate), "n"(TRANS_A), "n"(TRANS_B));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WGMMA_REGS64 ", %64, %65, p, 1, 1, %67, %68;\n}\n"
                     : WGMMA_D64(d) : "l"(a), "l"(b), "r"(accumulate), "n"(TRANS_A), "n"(TRANS_B));
}

// d (64 x N) = (accumulate ? d : 0) + A B, A (64 x 16) in registers, B in shared memory:
// MN-major (TRANS_B = 1) or K-major (0).
template <int N, int TRANS_B = 1>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t a[4], uint64_t b, int accumulate = 1) {
    static_assert(N == 64 || N == 128, "m64n64k16 and m64n128k16 only");
    if constexpr (N == 64)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WGMMA_REGS32
                     ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
                     : WGMMA_D32(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate), "n"(TRANS_B));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WGMMA_REGS64
                     ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
                     : WGMMA_D64(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate), "n"(TRANS_B));
}

// acc (64 x N) = A B^T over the head dimension HS, one commit group; both operands K-major tiles
// in shared memory: A the 64 rows from row a_row of a tile of A_ROWS rows, B a whole tile of N
// rows. S = Q K^T of the forward; S^T = K Q^T, dP^T = V dO^T, S and dP of the backward.
template <int HS, int A_ROWS, int N>
__device__ __forceinline__ void wgmma_a_bt(float (&acc)[N / 2], uint32_t a_tile, int a_row, uint32_t b_tile) {
    #pragma unroll
    for (int kk = 0; kk < HS / 16; kk++)
        wgmma_ss<N>(acc, desc_k_major<A_ROWS>(a_tile, a_row, kk), desc_k_major<N>(b_tile, 0, kk), kk > 0);
    wgmma_commit();
}

// The A fragments of the 64 x HS operand at rows row0.. of a swizzled tile of ROWS rows at
// `tile`, one per k-step: warp w of the warpgroup loads rows row0 + 16w.. with ldmatrix.x4.
template <int ROWS, int HS>
__device__ __forceinline__ void load_a_fragments(uint32_t (&a)[HS / 16][4], const unsigned char* tile, int row0) {
    int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    #pragma unroll
    for (int kk = 0; kk < HS / 16; kk++)
        ldmatrix_x4(a[kk], reinterpret_cast<const bf16*>(tile + a_fragment_ldmatrix_offset<ROWS>(row0 + 16 * warp, lane, kk)));
}

// acc (64 x N) = A B^T over the head dimension HS, one commit group; A in registers (the
// fragments of load_a_fragments), B a whole K-major tile of N rows in shared memory.
template <int HS, int N>
__device__ __forceinline__ void wgmma_ra_bt(float (&acc)[N / 2], const uint32_t (&a)[HS / 16][4], uint32_t b_tile) {
    #pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) wgmma_rs<N, 0>(acc, a[kk], desc_k_major<N>(b_tile, 0, kk), kk > 0);
    wgmma_commit();
}

#undef WGMMA_D8
#undef WGMMA_D32
#undef WGMMA_D64
#undef WGMMA_REGS32
#undef WGMMA_REGS64

// Register budgets of warpgroup specialisation: every warp of a warpgroup gives registers back
// to its thread block (a producer that only issues copies) or takes them (a consumer that holds
// tiles). Keep the claims within what is given back: a claim the block cannot meet waits.
template <int n> __device__ __forceinline__ void warpgroup_release_registers() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(n));
}
template <int n> __device__ __forceinline__ void warpgroup_claim_registers() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(n));
}

// v as the compiler sees a value that is the same in every lane of the warp (lane 0's): warpgroup
// and warp indices derived from threadIdx.x, so that what is computed from them, the descriptors
// above, stays in the warp's uniform registers instead of being moved there before each wgmma.
__device__ __forceinline__ int warp_uniform(int v) { return __shfl_sync(0xffffffffu, v, 0); }

// Two 32-bit values to shared-memory address addr (8-byte aligned), for stores whose addresses a
// loop computes itself (see `opaque`).
__device__ __forceinline__ void st_shared_v2(uint32_t addr, int x, int y) {
    asm volatile("st.shared.v2.b32 [%0], {%1, %2};\n" :: "r"(addr), "r"(x), "r"(y) : "memory");
}

// v as a value the compiler cannot recompute: a lane index or a shared-memory address that a loop
// keeps in a register, where ptxas would otherwise read the special register it comes from
// (threadIdx, the block's shared-memory window) again in every iteration and wait for it.
__device__ __forceinline__ uint32_t opaque(uint32_t v) {
    asm volatile("" : "+r"(v));
    return v;
}

// A barrier among `threads` threads (whole warps) of the block, named by id 1..15 (0 is
// __syncthreads), so that some warps can meet while others go on.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" :: "r"(id), "r"(threads) : "memory");
}
// This thread's arrival at such a barrier, without waiting for the others: the barrier
// completes once `threads` threads arrived or synced, so it hands a turn to the warps that sync.
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;\n" :: "r"(id), "r"(threads) : "memory");
}

// Makes this thread's generic-proxy writes to shared memory (ordinary stores) visible to
// the async proxy that wgmma reads through; a barrier must follow before another thread's wgmma.
__device__ __forceinline__ void fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

#endif
