// layers/classifier.cu: softmax + cross-entropy + its gradient, one block per row of the logits
// (N, Vp), Vp % 8 == 0, each row read once and written once. A block holds its row in registers
// (CLASSIFIER_CACHE_PACKS packs of 8 bf16 per thread: 51 200 columns, GPT-2's 50 304 fit) and
// takes the row max; then exp(logit - max) of every column (fp32, independent of one another),
// summed, and kept in the same registers as fp16 (times 2^15); then the gradient goes from those
// over the bf16 row. Columns past the cache (larger vocabularies) are read in a loop with a running max
// and sum per thread, and read again for the gradient. No probabilities are stored.
// With a soft cap (a template parameter, so that GPT-2's uncapped kernel is the code it was), each
// logit x becomes z = cap tanh(x / cap) before the softmax: the row max is the cap of the max
// (tanh rises), the exponentials are of z, and the gradient pass reads the row's logits again
// (from L2: the row was read moments before) for each column's dz/dx = 1 - tanh^2, the registers
// being full of exponentials.
#include <math.h>
#include <cuda_fp16.h>
#include "layers/classifier.h"
#include "device/bf16.cuh"
#include "device/launch.cuh"
#include "device/math.cuh"
#include "device/reduce.cuh"

// 256 threads x 25 packs x 8 = 51 200 columns in registers (100 of a thread's 128), so that two
// blocks share an SM (two rows: 200 KB of its 256 KB of registers): one loads its row while the
// other computes. 512 x 13 in 64 registers spills.
#define CLASSIFIER_THREADS 256
#define CLASSIFIER_CACHE_PACKS 25
#define LOG2E ((float)M_LOG2E)
// The exponentials and their sum are kept as 2^EXP_SCALE_LOG2 * exp(logit - max): in fp16 (at
// most 65504) that keeps 11 significant bits down to 2^-29 of the max instead of 2^-14.
#define EXP_SCALE_LOG2 15

// 8 columns (pack p of a row: columns 8p..8p+7) as four 32-bit words, column 2j in the low half
// of word j: bf16 logits, or fp16 exponentials. A bf16x8 held across the kernel would take a
// register per bf16: twice as many.
struct alignas(16) Pack { uint32_t w[4]; };

// Column k of a pack of bf16, as a float: a bf16 is the upper half of a float.
__device__ inline float column(Pack v, int k) {
    return __uint_as_float(k % 2 ? v.w[k / 2] & 0xffff0000u : v.w[k / 2] << 16);
}

// Pack p of a row with its columns >= V (the padding) set to -inf, so that the max and the
// exponentials need no test: exp(-inf - max) = 0. Packs of padding alone are not read.
__device__ inline Pack load_pack(const Pack* x, int p, int V) {
    const uint32_t NEG_INF_LO = 0x0000ff80u, NEG_INF_HI = 0xff800000u;  // bf16 -inf in a half
    Pack v = 8 * p < V ? x[p] : Pack{{NEG_INF_LO | NEG_INF_HI, NEG_INF_LO | NEG_INF_HI,
                                      NEG_INF_LO | NEG_INF_HI, NEG_INF_LO | NEG_INF_HI}};
    if (8 * p < V && 8 * p + 8 > V) {  // the pack where the padding begins
        for (int j = 0; j < 4; j++) {
            if (8 * p + 2 * j >= V) v.w[j] = (v.w[j] & 0xffff0000u) | NEG_INF_LO;
            if (8 * p + 2 * j + 1 >= V) v.w[j] = (v.w[j] & 0x0000ffffu) | NEG_INF_HI;
        }
    }
    return v;
}

// The soft cap z = cap tanh(x / cap) and its dz/dx = 1 - tanh^2, tanh on the special-function
// unit in one instruction, to about 2^-11 relative: z is within cap 2^-11, below the 2^-9 to which
// the bf16 logit itself is known, and dz/dx (at most 1) within 2^-10, below the bf16 rounding of
// the gradient it scales. With ex2 and a reciprocal in its place the capped kernel is 2.7x slower
// (16.8 against 6.1 ms on d12's logits at B 64, T 1024; 3.2 uncapped). x = -inf (the padding)
// stays -inf, +inf becomes cap.
struct Softcap {
    float cap, inv_cap;
    __device__ float operator()(float x) const { return x == -INFINITY ? x : cap * fast_tanh(x * inv_cap); }
    __device__ float derivative(float x) const {
        float t = fast_tanh(x * inv_cap);
        return fmaf(-t, t, 1.0f);
    }
};
static Softcap make_softcap(float cap) { return Softcap{cap, cap > 0.0f ? 1.0f / cap : 0.0f}; }

// What the softmax sees of a logit: x itself, or its cap.
template <bool CAPPED> __device__ inline float score(float x, const Softcap& cap) {
    if constexpr (CAPPED) return cap(x);
    else return x;
}

// The max of a pack of bf16, two columns at a time in bf16 (exact).
__device__ inline float pack_max(Pack v) {
    __nv_bfloat162 m = *reinterpret_cast<__nv_bfloat162*>(&v.w[0]);
    for (int j = 1; j < 4; j++) m = __hmax2(m, *reinterpret_cast<__nv_bfloat162*>(&v.w[j]));
    return fmaxf(__low2float(m), __high2float(m));
}

// 2^(score(v) log2(e) - m2) of a pack of bf16 (m2 = max * log2(e), less EXP_SCALE_LOG2 for the
// kept ones): summed in fp32 into sum (a tree, so the exponentials overlap), and returned as
// fp16, which keeps 11 significant bits to bf16's 8.
template <bool CAPPED> __device__ inline Pack pack_exp(Pack v, float m2, float& sum, const Softcap& cap) {
    float e[8];
    for (int k = 0; k < 8; k++) e[k] = fast_exp2(fmaf(score<CAPPED>(column(v, k), cap), LOG2E, -m2));
    sum = ((e[0] + e[1]) + (e[2] + e[3])) + ((e[4] + e[5]) + (e[6] + e[7]));
    Pack out;
    for (int j = 0; j < 4; j++) {
        __half2 h = __floats2half2_rn(e[2 * j], e[2 * j + 1]);
        out.w[j] = *reinterpret_cast<uint32_t*>(&h);
    }
    return out;
}

// The gradient of pack p from its exponentials e (pack_exp): e * e_scale = softmax * dloss_scale,
// capped: times dz/dx of its logits x; target_d in the target's column, computed from its logit
// in fp32 (p - 1 for p near 1 would keep few of the bits of an fp16 p); 0 in the padding.
template <bool CAPPED>
__device__ inline bf16x8 pack_gradient(Pack e, Pack x, const Softcap& cap, int p, int V, float e_scale, int target,
                                       float target_d) {
    float d[8];
    for (int j = 0; j < 4; j++) {
        float2 f = __half22float2(*reinterpret_cast<__half2*>(&e.w[j]));
        d[2 * j] = f.x * e_scale;
        d[2 * j + 1] = f.y * e_scale;
    }
    if constexpr (CAPPED)
        for (int k = 0; k < 8; k++) d[k] *= cap.derivative(column(x, k));
    if ((unsigned)(target - 8 * p) < 8u)  // the target's pack
        for (int k = 0; k < 8; k++) d[k] = 8 * p + k == target ? target_d : d[k];
    if (8 * p + 8 > V)  // 0 already, unless the row holds NaN or inf
        for (int k = 0; k < 8; k++) d[k] = 8 * p + k < V ? d[k] : 0.0f;
    bf16x8 out;
    for (int k = 0; k < 8; k++) out.v[k] = (bf16)d[k];
    return out;
}

// One block per row. Thread t owns the packs t + i * CLASSIFIER_THREADS of the row: the first
// CLASSIFIER_CACHE_PACKS of them in registers, any past those in loops.
template <bool CAPPED>
__global__ void __launch_bounds__(CLASSIFIER_THREADS, 2)
classifier_kernel(Pack* logits, float* losses, const int* targets, int V, int Vp,
                  float dloss_scale, int write_dlogits, Softcap cap) {
    Pack* x = logits + (size_t)blockIdx.x * (Vp / 8);
    const int cached = CLASSIFIER_CACHE_PACKS * CLASSIFIER_THREADS;  // packs in registers
    const int real_packs = (int)ceil_div(V, 8);  // packs with a real column
    const int packs = Vp / 8;
    // A target outside the vocabulary gives a NaN loss (which the trainer reports) and no -1 in
    // the gradient. The thread that holds the target's column reads its logit and writes the
    // loss. A thread reads and writes its own packs only: the row is overwritten in place.
    int target = targets[blockIdx.x];
    if (target < 0 || target >= V) target = -1;
    const bool has_target =
        threadIdx.x == (target >= 0 ? target / 8 % CLASSIFIER_THREADS : 0);  // writes the loss
    const float target_logit = has_target && target >= 0 ? (float)((const bf16*)x)[target] : 0.0f;

    Pack cache[CLASSIFIER_CACHE_PACKS];
    #pragma unroll
    for (int i = 0; i < CLASSIFIER_CACHE_PACKS; i++)
        cache[i] = load_pack(x, threadIdx.x + i * CLASSIFIER_THREADS, V);
    float m = -INFINITY;
    #pragma unroll
    for (int i = 0; i < CLASSIFIER_CACHE_PACKS; i++) m = fmaxf(m, pack_max(cache[i]));

    // Packs past the cache: a running max (of the scores) and a sum of exp(score(v) - tail_max),
    // rescaled once per pack.
    float tail_max = -INFINITY, tail_sum = 0.0f;
    for (int p = cached + threadIdx.x; p < real_packs; p += CLASSIFIER_THREADS) {
        Pack v = load_pack(x, p, V);
        float m_new = fmaxf(tail_max, score<CAPPED>(pack_max(v), cap)), pack_sum;
        pack_exp<CAPPED>(v, m_new * LOG2E, pack_sum, cap);
        tail_sum = tail_sum * fast_exp2((tail_max - m_new) * LOG2E) + pack_sum;
        tail_max = m_new;
    }

    const float row_max = block_reduce_max(fmaxf(score<CAPPED>(m, cap), tail_max));
    const float m2 = row_max * LOG2E - EXP_SCALE_LOG2;
    // loss = this + log(sum / 2^15)
    const float max_minus_target = row_max - score<CAPPED>(target_logit, cap);
    float sum = tail_sum * fast_exp2(tail_max * LOG2E - m2);  // 0 without a tail
    #pragma unroll
    for (int i = 0; i < CLASSIFIER_CACHE_PACKS; i++) {
        float pack_sum;
        // m2 + 0 * sum: each pack waits for the one before (one FFMA), else ptxas starts on all
        // of them at once and needs more registers than there are.
        cache[i] = pack_exp<CAPPED>(cache[i], fmaf(0.0f, sum, m2), pack_sum, cap);  // exponentials from here on
        sum += pack_sum;
    }
    sum = block_reduce_sum(sum);
    if (has_target)
        losses[blockIdx.x] = target >= 0 ? max_minus_target + logf(sum) - EXP_SCALE_LOG2 * (float)M_LN2 : NAN;
    if (!write_dlogits) return;

    const float e_scale = dloss_scale / sum;
    float target_d = (fast_exp2(EXP_SCALE_LOG2 - max_minus_target * LOG2E) / sum - 1.0f) * dloss_scale;
    if constexpr (CAPPED) target_d *= cap.derivative(target_logit);
    #pragma unroll
    for (int i = 0; i < CLASSIFIER_CACHE_PACKS; i++) {
        int p = threadIdx.x + i * CLASSIFIER_THREADS;
        Pack logits_again = {};   // for the capped gradient's dz/dx; this thread alone writes pack p
        if constexpr (CAPPED) logits_again = load_pack(x, p, V);
        if (p < packs) ((bf16x8*)x)[p] = pack_gradient<CAPPED>(cache[i], logits_again, cap, p, V, e_scale, target,
                                                               target_d);
    }
    for (int p = cached + threadIdx.x; p < packs; p += CLASSIFIER_THREADS) {
        float unused;
        Pack v = load_pack(x, p, V);
        Pack e = pack_exp<CAPPED>(v, m2, unused, cap);
        ((bf16x8*)x)[p] = pack_gradient<CAPPED>(e, v, cap, p, V, e_scale, target, target_d);
    }
}

// ----------------------------------------------------------------------------------------------
// Drawing the next token on the GPU

// A uniform in (0, 1) from (seed, row, position, column): splitmix64's finalizer of a mix, so
// that every draw of a decoding loop is new and none depends on the launch. 23 bits, so that
// the largest value, 1 - 2^-24, is a float below 1 (with 24, it rounds to 1 and -log(-log(u))
// to +inf).
__device__ inline float uniform_draw(uint64_t seed, int row, int position, int col) {
    uint64_t x = seed ^ ((uint64_t)row * 0xD6E8FEB86659FD93ull) ^ ((uint64_t)position * 0x9E3779B97F4A7C15ull) ^
                 ((uint64_t)col * 0xBF58476D1CE4E5B9ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return ((float)(x >> 41) + 0.5f) * (1.0f / 8388608.0f);
}

// Below this the division by the temperature overflows; the draw is then the most likely token.
#define MIN_TEMPERATURE 1e-6f

// One block per row: the column of the largest score / temperature + Gumbel noise (the
// Gumbel-max draw from softmax(score / temperature)), or of the largest score at temperature 0;
// the lowest such column on ties. The score is the logit, or its soft cap.
template <bool CAPPED>
__global__ void __launch_bounds__(CLASSIFIER_THREADS)
classifier_sample_kernel(int* tokens, const bf16* logits, int V, int Vp, Softcap cap, float temperature,
                         const uint64_t* seeds, const int* positions) {
    grid_dependency_wait();   // the logits come from the kernel before
    int row = blockIdx.x;
    uint64_t seed = *seeds;
    const bf16* x = logits + (size_t)row * Vp;
    int position = positions[row];
    float best = -INFINITY;
    int best_col = 0;
    for (int col = threadIdx.x; col < V; col += blockDim.x) {
        float s = score<CAPPED>((float)x[col], cap);
        if (temperature >= MIN_TEMPERATURE)
            s = s / temperature - logf(-logf(uniform_draw(seed, row, position, col)));
        if (s > best) { best = s; best_col = col; }
    }
    __shared__ float s_best[CLASSIFIER_THREADS / 32];
    __shared__ int s_col[CLASSIFIER_THREADS / 32];
    for (int offset = 16; offset > 0; offset /= 2) {
        float b = __shfl_xor_sync(0xffffffffu, best, offset);
        int c = __shfl_xor_sync(0xffffffffu, best_col, offset);
        if (b > best || (b == best && c < best_col)) { best = b; best_col = c; }
    }
    if (threadIdx.x % 32 == 0) { s_best[threadIdx.x / 32] = best; s_col[threadIdx.x / 32] = best_col; }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < CLASSIFIER_THREADS / 32; w++)
            if (s_best[w] > best || (s_best[w] == best && s_col[w] < best_col)) { best = s_best[w]; best_col = s_col[w]; }
        tokens[row] = best_col;
    }
}

// ----------------------------------------------------------------------------------------------
// Launchers

static void check_softcap(const char* who, float softcap) {
    if (!(softcap >= 0.0f) || !isfinite(softcap))
        die("%s: the soft cap must be 0 (none) or positive, got %g", who, softcap);
}

void classifier_forward_backward_softcap(bf16* logits, float* losses, const int* targets, int N, int V, int Vp,
                                         float softcap, float dloss_scale, int write_dlogits, cudaStream_t stream) {
    if (Vp % 8 != 0 || V > Vp || !aligned16(logits))
        die("classifier: needs Vp (%d) a multiple of 8, V (%d) <= Vp and 16-byte aligned logits", Vp, V);
    check_softcap("classifier", softcap);
    if (N == 0) return;
    if (softcap > 0.0f)
        classifier_kernel<true><<<N, CLASSIFIER_THREADS, 0, stream>>>(
            (Pack*)logits, losses, targets, V, Vp, dloss_scale, write_dlogits, make_softcap(softcap));
    else
        classifier_kernel<false><<<N, CLASSIFIER_THREADS, 0, stream>>>(
            (Pack*)logits, losses, targets, V, Vp, dloss_scale, write_dlogits, make_softcap(0.0f));
    cudaCheckLaunch();
}

void classifier_forward_backward(bf16* logits, float* losses, const int* targets, int N, int V,
                                 int Vp, float dloss_scale, int write_dlogits, cudaStream_t stream) {
    classifier_forward_backward_softcap(logits, losses, targets, N, V, Vp, 0.0f, dloss_scale, write_dlogits, stream);
}

void classifier_sample_softcap(int* tokens, const bf16* logits, int N, int V, int Vp, float softcap, float temperature,
                               const uint64_t* seed, const int* positions, cudaStream_t stream) {
    check_softcap("classifier_sample", softcap);
    launch_overlapped(softcap > 0.0f ? classifier_sample_kernel<true> : classifier_sample_kernel<false>, dim3(N),
                      dim3(CLASSIFIER_THREADS), 0, stream, tokens, logits, V, Vp, make_softcap(softcap), temperature,
                      seed, positions);
}

void classifier_sample(int* tokens, const bf16* logits, int N, int V, int Vp, float temperature, const uint64_t* seed,
                       const int* positions, cudaStream_t stream) {
    classifier_sample_softcap(tokens, logits, N, V, Vp, 0.0f, temperature, seed, positions, stream);
}
