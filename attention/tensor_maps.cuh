// attention/tensor_maps.cuh: the TMA tensor maps (device/tma.cuh) of the flash wgmma kernels: a
// view of attention/params.h, whose tiles are rows of one head, and the backward's dQ
// accumulator (B, NH, T, HS), into which the kernel adds its pieces.
#ifndef FLASHGPT_ATTENTION_TENSOR_MAPS_CUH
#define FLASHGPT_ATTENTION_TENSOR_MAPS_CUH

#include "attention/params.h"
#include "device/tma.cuh"

// A view (B, T, NH, HS) of params.h as the 4-D tensor (HS, NH, T, B): a box is one
// 64-column panel of `rows` consecutive rows of one head; rows past T are zeros. The view's
// strides are multiples of 8 elements (16 bytes, as TMA requires).
static inline void make_heads_tensor_map(CUtensorMap* map, const AttentionTensor* x, AttentionShape s, int rows) {
    uint64_t dims[4] = {(uint64_t)s.HS, (uint64_t)s.NH, (uint64_t)s.T, (uint64_t)s.B};
    uint64_t strides[3] = {2ull * x->head, 2ull * x->row, 2ull * x->batch};
    make_tensor_map(map, x->ptr, 4, dims, strides, 2, rows);
}

// The dQ accumulator (B, NH, T, HS) of 4-byte values, fp32 or int32 (fixed != 0), as the 4-D
// tensor (32, T, HS/32, B*NH): dimension 0 is 32 consecutive columns (one 128-byte swizzled
// panel), dimension 2 which panel (strides out of order are fine for TMA). A box, (32, rows, 2,
// 1), is 64 columns of `rows` rows of one head, laid out in shared memory as two panels of
// (rows, 32) values. Rows past T are skipped.
static inline void make_dq_accum_tensor_map(CUtensorMap* map, const void* dq_accum, int fixed, AttentionShape s,
                                            int rows) {
    uint64_t dims[4] = {32, (uint64_t)s.T, (uint64_t)s.HS / 32, (uint64_t)s.B * s.NH};
    uint64_t strides[3] = {4ull * s.HS, 128, 4ull * s.HS * s.T};
    uint32_t box[4] = {32, (uint32_t)rows, 2, 1};
    encode_tensor_map(map, fixed ? CU_TENSOR_MAP_DATA_TYPE_INT32 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32, dq_accum, 4, dims,
                      strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
}

#endif
