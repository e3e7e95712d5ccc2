// device/smem_tile.cuh: padded shared-memory tiles, for mma.sync kernels (device/mma.cuh). A
// tile holds ROWS rows of COLS bf16 (a block of Q, K, V, dO, ... in the flash kernels) with each
// row padded by 8 elements (16 bytes): the padding shifts consecutive rows by 4 banks, so the 8
// row addresses of every ldmatrix and the 8 rows written by a C fragment fall on distinct banks
// (no conflicts, no swizzle to get wrong). Tiles are filled with cp.async (device/smem.cuh); rows
// past the matrix's end are zero-filled.
#ifndef FLASHGPT_DEVICE_SMEM_TILE_CUH
#define FLASHGPT_DEVICE_SMEM_TILE_CUH

#include <stdint.h>
#include "common/cuda_check.h"
#include "device/bf16.cuh"
#include "device/smem.cuh"

template <int COLS> struct PaddedRow { static constexpr int stride = COLS + 8; };

// Starts loading rows [0, ROWS) of a global matrix (first row at g, rows g_stride apart) into
// a padded tile; rows >= rows_valid become zeros. Every thread of the block takes part.
template <int ROWS, int COLS, int NTHREADS>
__device__ __forceinline__ void load_tile_async(bf16* tile, const bf16* g, long long g_stride, int rows_valid) {
    constexpr int CHUNKS = COLS / 8;
    for (int i = threadIdx.x; i < ROWS * CHUNKS; i += NTHREADS) {
        int r = i / CHUNKS, c = (i % CHUNKS) * 8;
        bool valid = r < rows_valid;
        cp_async_16(tile + r * PaddedRow<COLS>::stride + c, g + (valid ? r : 0) * g_stride + c, valid);
    }
}

// The next block of a loop over keys and values (the flash kernels' K/V loop): advances the K and
// V pointers (rows k_stride and v_stride apart) by ROWS rows and starts loading that block into
// `stage` of the double-buffered tiles sK and sV; rows >= rows_valid become zeros.
template <int ROWS, int COLS, int NTHREADS>
__device__ __forceinline__ void load_next_kv_block(bf16* sK, bf16* sV, int stage, const bf16*& k_ptr, long long k_stride,
                                                   const bf16*& v_ptr, long long v_stride, int rows_valid) {
    constexpr int S = PaddedRow<COLS>::stride;
    k_ptr += ROWS * k_stride;
    v_ptr += ROWS * v_stride;
    load_tile_async<ROWS, COLS, NTHREADS>(sK + stage * ROWS * S, k_ptr, k_stride, rows_valid);
    load_tile_async<ROWS, COLS, NTHREADS>(sV + stage * ROWS * S, v_ptr, v_stride, rows_valid);
    cp_async_commit();
}

// Starts loading n_valid floats (the rest zero) of a per-row vector such as L or D.
template <int N, int NTHREADS>
__device__ __forceinline__ void load_vec_async(float* v, const float* g, int n_valid) {
    for (int i = threadIdx.x; i < N; i += NTHREADS) cp_async_4(v + i, g + (i < n_valid ? i : 0), i < n_valid);
}

// Writes one 16x8 C fragment as bf16 at rows r0.., cols c0.. of a padded tile, its upper 8 rows
// times scale_lo and its lower 8 rows times scale_hi.
template <int COLS>
__device__ __forceinline__ void store_c_tile(bf16* tile, int r0, int c0, const float c[4], float scale_lo, float scale_hi) {
    int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    constexpr int S = PaddedRow<COLS>::stride;
    *reinterpret_cast<uint32_t*>(tile + (r0 + g) * S + c0 + 2 * t) = pack_bf16(c[0] * scale_lo, c[1] * scale_lo);
    *reinterpret_cast<uint32_t*>(tile + (r0 + g + 8) * S + c0 + 2 * t) = pack_bf16(c[2] * scale_hi, c[3] * scale_hi);
}

// One warp copies ROWS rows of a padded tile (from row r0) to global memory, 16 bytes per lane
// per step; only rows < rows_valid are written.
template <int ROWS, int COLS>
__device__ __forceinline__ void store_rows_warp(bf16* g, long long g_stride, const bf16* tile, int r0, int rows_valid) {
    constexpr int CHUNKS = COLS / 8;
    int lane = threadIdx.x % 32;
    for (int i = lane; i < ROWS * CHUNKS; i += 32) {
        int r = i / CHUNKS, c = (i % CHUNKS) * 8;
        if (r < rows_valid)
            *reinterpret_cast<int4*>(g + r * g_stride + c) =
                *reinterpret_cast<const int4*>(tile + (r0 + r) * PaddedRow<COLS>::stride + c);
    }
}

#endif
