// device/mma.cuh: tensor-core building blocks (sm_80 on): the bf16 mma.sync m16n8k16 with fp32
// accumulators, the ldmatrix loads that fill its operand fragments from a row-major
// shared-memory tile, and the packing of fp32 accumulators back into bf16 operands.
//
// Fragment layouts of m16n8k16 (g = lane / 4, t = lane % 4), each register two bf16 or one float:
//   A 16x16 (row-major):  a0 (g, 2t..2t+1)  a1 (g+8, 2t..)  a2 (g, 2t+8..)  a3 (g+8, 2t+8..)
//   B 16x8  (k x n):      b0 (k 2t..2t+1, n g)  b1 (k 2t+8..2t+9, n g)
//   C 16x8  (fp32):       c0 c1 (g, 2t..2t+1)  c2 c3 (g+8, 2t..2t+1)
// A C fragment of a 16x16 block (two n-tiles) is therefore exactly the A fragment of that
// block once packed to bf16: that is how P and dS go from one matmul into the next.
#ifndef FLASHGPT_DEVICE_MMA_CUH
#define FLASHGPT_DEVICE_MMA_CUH

#include <stdint.h>
#include "common/cuda_check.h"
#include "device/bf16.cuh"
#include "device/smem.cuh"

// c += a * b, one 16x8x16 tile per warp.
__device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const bf16* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const bf16* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)) : "memory");
}

// The four loaders below read 16x16 blocks of a row-major shared tile whose rows are `stride`
// elements apart. Lanes 8i..8i+7 give the row addresses of 8x8 matrix i, which lands in r[i].

// A fragment of the block at rows r0.., cols c0.. of a tile holding A (m x k).
__device__ __forceinline__ void load_a(uint32_t a[4], const bf16* tile, int stride, int r0, int c0) {
    int lane = threadIdx.x % 32;
    ldmatrix_x4(a, tile + (r0 + (lane & 15)) * stride + c0 + (lane >> 4) * 8);
}

// A fragment of A (m x k) at rows m0.., k k0.., from a tile holding A transposed (k x m).
__device__ __forceinline__ void load_a_trans(uint32_t a[4], const bf16* tile, int stride, int m0, int k0) {
    int lane = threadIdx.x % 32;
    ldmatrix_x4_trans(a, tile + (k0 + (lane & 7) + (lane >> 4) * 8) * stride + m0 + ((lane >> 3) & 1) * 8);
}

// B fragments of two n-tiles (n0.., n0+8..) for k k0.., from a tile holding B transposed
// (n x k, e.g. K for S = Q K^T): b[0], b[1] for n-tile n0; b[2], b[3] for n-tile n0+8.
__device__ __forceinline__ void load_b_nk(uint32_t b[4], const bf16* tile, int stride, int n0, int k0) {
    int lane = threadIdx.x % 32;
    ldmatrix_x4(b, tile + (n0 + (lane & 7) + (lane >> 4) * 8) * stride + k0 + ((lane >> 3) & 1) * 8);
}

// The same two n-tiles from a tile holding B itself (k x n, e.g. V for O = P V).
__device__ __forceinline__ void load_b_kn(uint32_t b[4], const bf16* tile, int stride, int k0, int n0) {
    int lane = threadIdx.x % 32;
    ldmatrix_x4_trans(b, tile + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * stride + n0 + (lane >> 4) * 8);
}

// A fragment for k-step kk of a product whose left operand sits in C fragments c[n-tile][4]
// (the probabilities P or the score gradients dS of one warp's 16 rows).
__device__ __forceinline__ void c_to_a(uint32_t a[4], const float c_lo[4], const float c_hi[4]) {
    a[0] = pack_bf16(c_lo[0], c_lo[1]);
    a[1] = pack_bf16(c_lo[2], c_lo[3]);
    a[2] = pack_bf16(c_hi[0], c_hi[1]);
    a[3] = pack_bf16(c_hi[2], c_hi[3]);
}

#endif
