// device/rotary.cuh: the math of QK-norm and rotary embeddings (layers/rotary.h) on one lane's
// share of a head of HS values, for layers/rotary.cu's kernels and for the decode attention's
// own query and key (attention/decode.h): one code, so both give the same bits. A lane holds the
// packs of 8 at 8j and HS/2 + 8j, both halves of the rotation pairs 8j .. 8j + 7, so that a
// rotation needs nothing from another lane; a head's HS / 16 lanes ("lanes", a power of two) are
// an aligned group of the warp, and its sums go over them by xor shuffles, in a fixed order.
#ifndef FLASHGPT_DEVICE_ROTARY_CUH
#define FLASHGPT_DEVICE_ROTARY_CUH

#include <math.h>
#include "device/bf16.cuh"

// The sum over the aligned group of `lanes` lanes (a power of two) that holds this lane: a xor
// butterfly, the same bits in every lane of the group. Every lane of the warp calls it.
__device__ inline float group_reduce_sum(float v, int lanes) {
    for (int offset = lanes / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// The frequencies' ratios for head size HS: ratio = base^(-2/HS) between neighbouring pairs,
// ratio8 = base^(-16/HS) between neighbouring lanes, each rounded once, in fp64.
static inline void rotary_ratios(int HS, float base, double* ratio, double* ratio8) {
    *ratio = pow((double)base, -2.0 / HS);
    *ratio8 = pow((double)base, -16.0 / HS);
}

// cos and sin of the angles p f_i of the pairs i = 8j .. 8j + 7, f_i = base^(-2i/HS). p f_i
// reaches 2^24 radians, where an fp32 product is a radian off: the angle is taken in turns in
// fp64, p f_i / 2pi, and only its fraction (within half a turn, exact in fp64) goes to fp32 and
// __sincosf (2^-21.4 absolute error on [-pi, pi]). f_i / 2pi here carries at most ~80 fp64
// roundings (1e-14 relative), 2e-7 radians at 2^24.
__device__ inline void rotary_angles(float* c, float* s, int position, int j, double ratio, double ratio8) {
    double turns_per_position = 1.0 / (2.0 * M_PI);   // f_0 = 1
    for (int t = 0; t < j; t++) turns_per_position *= ratio8;
    #pragma unroll
    for (int k = 0; k < 8; k++) {
        double turns = position * turns_per_position;
        float fraction = (float)(turns - rint(turns));
        __sincosf(fraction * (float)(2.0 * M_PI), &s[k], &c[k]);
        turns_per_position *= ratio;
    }
}

// The lane's pairs of one head, lo8 (8j ..) and hi8 (HS/2 + 8j ..), in place: RMS-normed over
// the head's HS values without weights, y = x * rstd, rstd = 1 / sqrt(mean(x^2) + eps) (norm;
// else y = x), then rotated by the angles c, s (cos 1 and sin 0: not rotated), rounded to bf16
// once. Returns rstd (1 without the norm). Every lane of the warp calls it (the norm's sum).
__device__ inline float qk_norm_rotate(bf16x8& lo8, bf16x8& hi8, const float* c, const float* s, int lanes,
                                       float inv_HS, bool norm, float eps) {
    float lo[8], hi[8], sum_sq = 0.0f;
    for (int k = 0; k < 8; k++) {
        lo[k] = (float)lo8.v[k];
        hi[k] = (float)hi8.v[k];
        sum_sq += lo[k] * lo[k] + hi[k] * hi[k];
    }
    const float scale = norm ? rsqrtf(group_reduce_sum(sum_sq, lanes) * inv_HS + eps) : 1.0f;
    for (int k = 0; k < 8; k++) {
        float y_lo = lo[k] * scale, y_hi = hi[k] * scale;
        lo8.v[k] = (bf16)(y_lo * c[k] - y_hi * s[k]);
        hi8.v[k] = (bf16)(y_hi * c[k] + y_lo * s[k]);
    }
    return scale;
}

#endif
