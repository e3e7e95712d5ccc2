// layers/rotary.cu: QK-norm and rotary embeddings in place on qkv (N, 3, NH, HS), forward and
// backward, one warp per row, fp32 math. A row's queries and keys are 2 NH vectors of HS values
// one after the other (the query heads, then the key heads). A group of HS / 16 lanes takes one
// vector, lane j of the group its packs of 8 at 8j and HS/2 + 8j: both halves of the rotation
// pairs 8j .. 8j + 7, so that a rotation needs nothing from another lane and a lane's 8 angles
// serve every vector of the row. The warp takes 32 / (HS / 16) vectors at a time; a group's sums
// (the mean square, the backward's dot product) go over its lanes by xor shuffles, in a fixed order.
// Each part can be off (template parameters): without the norm y = x, without the rotation
// cos 1 and sin 0, both exact, so either part alone is the fused pass with the other removed.
// The forward's math on a lane's pairs is device/rotary.cuh's, which the decode attention shares.
#include <math.h>
#include "layers/rotary.h"
#include "layers/rmsnorm.h"
#include "device/bf16.cuh"
#include "device/rotary.cuh"

#define ROTARY_WARPS 8   // warps per block, one row each

// c, s: the angles of the lane's pairs in row's position, or no rotation (cos 1, sin 0).
template <bool ROTATE>
__device__ inline void row_angles(float* c, float* s, const int* positions, int row, int j, double ratio,
                                  double ratio8) {
    if constexpr (ROTATE) {
        rotary_angles(c, s, positions[row], j, ratio, ratio8);
    } else {
        for (int k = 0; k < 8; k++) {
            c[k] = 1.0f;
            s[k] = 0.0f;
        }
    }
}

template <bool NORM, bool ROTATE>
__global__ void __launch_bounds__(ROTARY_WARPS * 32)
qk_norm_rotary_forward_kernel(bf16* qkv, float* rstd, const int* positions, int N, int NH, int HS, double ratio,
                              double ratio8) {
    int row = blockIdx.x * ROTARY_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;   // the whole warp
    // lanes = HS / 16 is a power of two: shifts and masks divide by it
    const int lanes = HS / 16, lanes_log2 = __ffs(lanes) - 1, j = lane & (lanes - 1), vectors = 2 * NH;
    const float inv_HS = 1.0f / HS;
    float c[8], s[8];
    row_angles<ROTATE>(c, s, positions, row, j, ratio, ratio8);
    bf16* x = qkv + (size_t)row * 3 * NH * HS;
    float* row_rstd = rstd + (size_t)row * vectors;
    for (int first = 0; first < vectors; first += 32 >> lanes_log2) {
        const int v = first + (lane >> lanes_log2);
        const bool active = v < vectors;   // the last round may leave groups without a vector
        const int lo_at = v * HS + 8 * j, hi_at = lo_at + HS / 2;   // the lane's halves of vector v
        bf16x8 lo8 = {}, hi8 = {};
        if (active) {
            lo8 = *(const bf16x8*)(x + lo_at);
            hi8 = *(const bf16x8*)(x + hi_at);
        }
        const float scale = qk_norm_rotate(lo8, hi8, c, s, lanes, inv_HS, NORM, RMSNORM_EPS);
        if (active) {
            *(bf16x8*)(x + lo_at) = lo8;
            *(bf16x8*)(x + hi_at) = hi8;
            if (NORM && j == 0) row_rstd[v] = scale;
        }
    }
}

// out = R y (R the rotation of each pair), y = x * rstd. Back through R: dy = R^T dout, and the
// normed y = R^T out from the stored output. Back through the norm (as layers/rmsnorm.cu):
// dx = rstd * (dy - y * mean_HS(dy * y)).
template <bool NORM, bool ROTATE>
__global__ void __launch_bounds__(ROTARY_WARPS * 32)
qk_norm_rotary_backward_kernel(bf16* dqkv, const bf16* qkv, const float* rstd, const int* positions, int N, int NH,
                               int HS, double ratio, double ratio8) {
    int row = blockIdx.x * ROTARY_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    // lanes = HS / 16 is a power of two: shifts and masks divide by it
    const int lanes = HS / 16, lanes_log2 = __ffs(lanes) - 1, j = lane & (lanes - 1), vectors = 2 * NH;
    const float inv_HS = 1.0f / HS;
    float c[8], s[8];
    row_angles<ROTATE>(c, s, positions, row, j, ratio, ratio8);
    bf16* dx = dqkv + (size_t)row * 3 * NH * HS;
    const bf16* out = qkv + (size_t)row * 3 * NH * HS;
    const float* row_rstd = rstd + (size_t)row * vectors;
    for (int first = 0; first < vectors; first += 32 >> lanes_log2) {
        const int v = first + (lane >> lanes_log2);
        const bool active = v < vectors;
        const int lo_at = v * HS + 8 * j, hi_at = lo_at + HS / 2;
        bf16x8 dlo8 = {}, dhi8 = {}, lo8 = {}, hi8 = {};
        float scale = 0.0f;
        if (active) {
            dlo8 = *(const bf16x8*)(dx + lo_at);
            dhi8 = *(const bf16x8*)(dx + hi_at);
            lo8 = *(const bf16x8*)(out + lo_at);
            hi8 = *(const bf16x8*)(out + hi_at);
            scale = NORM ? row_rstd[v] : 1.0f;
        }
        float dy_lo[8], dy_hi[8], y_lo[8], y_hi[8], dot = 0.0f;
        for (int k = 0; k < 8; k++) {
            float dlo = (float)dlo8.v[k], dhi = (float)dhi8.v[k], lo = (float)lo8.v[k], hi = (float)hi8.v[k];
            dy_lo[k] = dlo * c[k] + dhi * s[k];
            dy_hi[k] = dhi * c[k] - dlo * s[k];
            y_lo[k] = lo * c[k] + hi * s[k];
            y_hi[k] = hi * c[k] - lo * s[k];
            dot += dy_lo[k] * y_lo[k] + dy_hi[k] * y_hi[k];
        }
        const float mean_dot = NORM ? group_reduce_sum(dot, lanes) * inv_HS : 0.0f;
        for (int k = 0; k < 8; k++) {
            dlo8.v[k] = (bf16)((dy_lo[k] - y_lo[k] * mean_dot) * scale);
            dhi8.v[k] = (bf16)((dy_hi[k] - y_hi[k] * mean_dot) * scale);
        }
        if (active) {
            *(bf16x8*)(dx + lo_at) = dlo8;
            *(bf16x8*)(dx + hi_at) = dhi8;
        }
    }
}

const char* rotary_unsupported(int HS, float base) {
    const int lanes = HS / 16;
    if (HS % 16 != 0 || lanes < 1 || lanes > 32 || (lanes & (lanes - 1)) != 0)
        return "the head size must be 16, 32, 64, 128, 256 or 512";
    if (!(base > 1.0f) || !isfinite(base)) return "the rotary base must be finite and above 1";
    return NULL;
}

// Checks the call (ends the program with the reason) and gives the frequencies' ratios.
static void check_call(const char* who, const void* a, const void* b, const void* rstd, const void* positions, int N,
                       int NH, int HS, float base, double* ratio, double* ratio8) {
    const char* why = rotary_unsupported(HS, base);
    if (why) die("%s: %s (head size %d, base %g)", who, why, HS, base);
    if (!rstd && !positions) die("%s: neither the norm (rstd) nor the rotation (positions) asked for", who);
    if (N < 0 || NH < 1) die("%s: needs N >= 0 rows and NH >= 1 heads, got N %d, NH %d", who, N, NH);
    if (!aligned16(a) || !aligned16(b)) die("%s: needs 16-byte aligned buffers", who);
    rotary_ratios(HS, base, ratio, ratio8);
}

// The kernel of the parts asked for: the norm with rstd, the rotation with positions.
template <template <bool, bool> class Kernel, typename... Args>
static void launch_parts(const void* rstd, const void* positions, int N, cudaStream_t stream, Args... args) {
    dim3 grid((unsigned)ceil_div(N, ROTARY_WARPS)), block(ROTARY_WARPS * 32);
    if (rstd && positions) Kernel<true, true>::launch(grid, block, stream, args...);
    else if (rstd) Kernel<true, false>::launch(grid, block, stream, args...);
    else Kernel<false, true>::launch(grid, block, stream, args...);
    cudaCheckLaunch();
}

template <bool NORM, bool ROTATE> struct Forward {
    template <typename... Args> static void launch(dim3 grid, dim3 block, cudaStream_t stream, Args... args) {
        qk_norm_rotary_forward_kernel<NORM, ROTATE><<<grid, block, 0, stream>>>(args...);
    }
};
template <bool NORM, bool ROTATE> struct Backward {
    template <typename... Args> static void launch(dim3 grid, dim3 block, cudaStream_t stream, Args... args) {
        qk_norm_rotary_backward_kernel<NORM, ROTATE><<<grid, block, 0, stream>>>(args...);
    }
};

void qk_norm_rotary_forward(bf16* qkv, float* rstd, const int* positions, int N, int NH, int HS, float base,
                            cudaStream_t stream) {
    double ratio, ratio8;
    check_call("qk_norm_rotary_forward", qkv, qkv, rstd, positions, N, NH, HS, base, &ratio, &ratio8);
    if (N == 0) return;
    launch_parts<Forward>(rstd, positions, N, stream, qkv, rstd, positions, N, NH, HS, ratio, ratio8);
}

void qk_norm_rotary_backward(bf16* dqkv, const bf16* qkv, const float* rstd, const int* positions, int N, int NH,
                             int HS, float base, cudaStream_t stream) {
    double ratio, ratio8;
    check_call("qk_norm_rotary_backward", dqkv, qkv, rstd, positions, N, NH, HS, base, &ratio, &ratio8);
    if (N == 0) return;
    launch_parts<Backward>(rstd, positions, N, stream, dqkv, qkv, rstd, positions, N, NH, HS, ratio, ratio8);
}
