// layers/rotary.h: QK-norm and rotary position embeddings, fused, in place on the attention's
// fused qkv (N, 3, NH, HS) bf16 (N = B * T rows; attention/README.md). Each head's query and key
// (q[n, h] and k[n, h], HS values each) is RMS-normed over HS without weights (eps RMSNORM_EPS,
// layers/rmsnorm.h), y = x * rstd, then rotated by its row's position p = positions[n] with the
// "rotate half" pairing of GPT-NeoX and Llama: element i < HS/2 pairs with element i + HS/2,
//   out[i]        = y[i] cos(p f_i) - y[i + HS/2] sin(p f_i)
//   out[i + HS/2] = y[i + HS/2] cos(p f_i) + y[i] sin(p f_i),      f_i = base^(-2i / HS).
// V is untouched. rstd (N, 2, NH) fp32 (the queries' heads, then the keys') is kept for the
// backward, which recovers y from the rotated output (the rotation is orthogonal): no copy of the
// queries and keys before the norm is kept.
//
// Positions are global, one per row, an int32 array (N) on the device: row t of a sequence on
// one GPU is at t; under context parallelism row t of rank r's local sequence (two zigzag chunks
// of c = T_local / 2 rows, attention/ring.h) is at zigzag_chunk(r, t / c, ranks) * c + t % c; a
// decoding step's row at its sequence's position. Angles are reduced to one turn in fp64, so
// every position up to 2^24 rotates as exactly as position 0 (fp32 angles lose a radian there).
#ifndef FLASHGPT_ROTARY_H
#define FLASHGPT_ROTARY_H

#include "common/cuda_check.h"

// NULL when the kernels take head size HS and this base, else why not: HS must be 16, 32, 64,
// 128, 256 or 512 (each half of a head a whole number of 16-byte packs, spread over a power of
// two of lanes), base finite and above 1 (frequencies that fall with i).
const char* rotary_unsupported(int HS, float base);

// qkv (N, 3, NH, HS) in place: queries and keys normed and rotated; rstd (N, 2, NH) fp32;
// positions (N) int32 on the device. qkv 16-byte aligned. Either part alone: rstd NULL, no norm
// (QK-norm off); positions NULL, no rotation (rotary off); not both.
void qk_norm_rotary_forward(bf16* qkv, float* rstd, const int* positions, int N, int NH, int HS, float base,
                            cudaStream_t stream);

// dqkv (N, 3, NH, HS) in place: the gradients of the rotated queries and keys (from attention's
// backward) become those of the queries and keys before the norm; the values' gradients are
// untouched. qkv, rstd: what the forward left; positions and base as in the forward (rstd and
// positions NULL where the forward's were).
void qk_norm_rotary_backward(bf16* dqkv, const bf16* qkv, const float* rstd, const int* positions, int N, int NH,
                             int HS, float base, cudaStream_t stream);

#endif
