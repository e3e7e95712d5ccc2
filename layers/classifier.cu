// layers/classifier.cu: softmax + cross-entropy + its gradient, one block per row of the logits
// (N, Vp), Vp % 8 == 0, each row read once and written once. A block holds its row in registers
// (CLASSIFIER_CACHE_PACKS packs of 8 bf16 per thread: 51 200 columns, GPT-2's 50 304 fit) and
// takes the row max; then exp(logit - max) of every column (fp32, independent of one another),
// summed, and kept in the same registers as fp16 (times 2^15); then the gradient goes from those
// over the bf16 row. Columns past the cache (larger vocabularies) are read in a loop with a running max
// and sum per thread, and read again for the gradient. No probabilities are stored.
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

// The max of a pack of bf16, two columns at a time in bf16 (exact).
__device__ inline float pack_max(Pack v) {
    __nv_bfloat162 m = *reinterpret_cast<__nv_bfloat162*>(&v.w[0]);
    for (int j = 1; j < 4; j++) m = __hmax2(m, *reinterpret_cast<__nv_bfloat162*>(&v.w[j]));
    return fmaxf(__low2float(m), __high2float(m));
}

// 2^(v log2(e) - m2) of a pack of bf16 (m2 = max * log2(e), less EXP_SCALE_LOG2 for the kept
// ones): summed in fp32 into sum (a tree, so the exponentials overlap), and returned as fp16,
// which keeps 11 significant bits to bf16's 8.
__device__ inline Pack pack_exp(Pack v, float m2, float& sum) {
    float e[8];
    for (int k = 0; k < 8; k++) e[k] = fast_exp2(fmaf(column(v, k), LOG2E, -m2));
    sum = ((e[0] + e[1]) + (e[2] + e[3])) + ((e[4] + e[5]) + (e[6] + e[7]));
    Pack out;
    for (int j = 0; j < 4; j++) {
        __half2 h = __floats2half2_rn(e[2 * j], e[2 * j + 1]);
        out.w[j] = *reinterpret_cast<uint32_t*>(&h);
    }
    return out;
}

// The gradient of pack p from its exponentials e (pack_exp): e * e_scale = softmax * dloss_scale;
// target_d in the target's column, computed from its logit in fp32 (p - 1 for p near 1 would
// keep few of the bits of an fp16 p); 0 in the padding.
__device__ inline bf16x8 pack_gradient(Pack e, int p, int V, float e_scale, int target,
                                       float target_d) {
    float d[8];
    for (int j = 0; j < 4; j++) {
        float2 f = __half22float2(*reinterpret_cast<__half2*>(&e.w[j]));
        d[2 * j] = f.x * e_scale;
        d[2 * j + 1] = f.y * e_scale;
    }
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
__global__ void __launch_bounds__(CLASSIFIER_THREADS, 2)
classifier_kernel(Pack* logits, float* losses, const int* targets, int V, int Vp,
                  float dloss_scale, int write_dlogits) {
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

    // Packs past the cache: a running max and a sum of exp(v - tail_max), rescaled once per pack.
    float tail_max = -INFINITY, tail_sum = 0.0f;
    for (int p = cached + threadIdx.x; p < real_packs; p += CLASSIFIER_THREADS) {
        Pack v = load_pack(x, p, V);
        float m_new = fmaxf(tail_max, pack_max(v)), pack_sum;
        pack_exp(v, m_new * LOG2E, pack_sum);
        tail_sum = tail_sum * fast_exp2((tail_max - m_new) * LOG2E) + pack_sum;
        tail_max = m_new;
    }

    const float row_max = block_reduce_max(fmaxf(m, tail_max));
    const float m2 = row_max * LOG2E - EXP_SCALE_LOG2;
    const float max_minus_target = row_max - target_logit;  // loss = this + log(sum / 2^15)
    float sum = tail_sum * fast_exp2(tail_max * LOG2E - m2);  // 0 without a tail
    #pragma unroll
    for (int i = 0; i < CLASSIFIER_CACHE_PACKS; i++) {
        float pack_sum;
        // m2 + 0 * sum: each pack waits for the one before (one FFMA), else ptxas starts on all
        // of them at once and needs more registers than there are.
        cache[i] = pack_exp(cache[i], fmaf(0.0f, sum, m2), pack_sum);  // exponentials from here on
        sum += pack_sum;
    }
    sum = block_reduce_sum(sum);
    if (has_target)
        losses[blockIdx.x] = target >= 0 ? max_minus_target + logf(sum) - EXP_SCALE_LOG2 * (float)M_LN2 : NAN;
    if (!write_dlogits) return;

    const float e_scale = dloss_scale / sum;
    const float target_d = (fast_exp2(EXP_SCALE_LOG2 - max_minus_target * LOG2E) / sum - 1.0f) * dloss_scale;
    #pragma unroll
    for (int i = 0; i < CLASSIFIER_CACHE_PACKS; i++) {
        int p = threadIdx.x + i * CLASSIFIER_THREADS;
        if (p < packs) ((bf16x8*)x)[p] = pack_gradient(cache[i], p, V, e_scale, target, target_d);
    }
    for (int p = cached + threadIdx.x; p < packs; p += CLASSIFIER_THREADS) {
        float unused;
        Pack e = pack_exp(load_pack(x, p, V), m2, unused);
        ((bf16x8*)x)[p] = pack_gradient(e, p, V, e_scale, target, target_d);
    }
}

void classifier_forward_backward(bf16* logits, float* losses, const int* targets, int N, int V,
                                 int Vp, float dloss_scale, int write_dlogits, cudaStream_t stream) {
    if (Vp % 8 != 0 || V > Vp || !aligned16(logits))
        die("classifier: needs Vp (%d) a multiple of 8, V (%d) <= Vp and 16-byte aligned logits", Vp, V);
    if (N == 0) return;
    classifier_kernel<<<N, CLASSIFIER_THREADS, 0, stream>>>((Pack*)logits, losses, targets, V, Vp,
                                                            dloss_scale, write_dlogits);
    cudaCheckLaunch();
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

// One block per row: the column of the largest logit / temperature + Gumbel noise (the Gumbel-max
// draw from softmax(logits / temperature)), or of the largest logit at temperature 0; the
// lowest such column on ties.
__global__ void __launch_bounds__(CLASSIFIER_THREADS)
classifier_sample_kernel(int* tokens, const bf16* logits, int V, int Vp, float temperature, const uint64_t* seeds,
                         const int* positions) {
    grid_dependency_wait();   // the logits come from the kernel before
    int row = blockIdx.x;
    uint64_t seed = *seeds;
    const bf16* x = logits + (size_t)row * Vp;
    int position = positions[row];
    float best = -INFINITY;
    int best_col = 0;
    for (int col = threadIdx.x; col < V; col += blockDim.x) {
        float score = (float)x[col];
        if (temperature >= MIN_TEMPERATURE)
            score = score / temperature - logf(-logf(uniform_draw(seed, row, position, col)));
        if (score > best) { best = score; best_col = col; }
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

void classifier_sample(int* tokens, const bf16* logits, int N, int V, int Vp, float temperature, const uint64_t* seed,
                       const int* positions, cudaStream_t stream) {
    launch_overlapped(classifier_sample_kernel, dim3(N), dim3(CLASSIFIER_THREADS), 0, stream, tokens, logits, V, Vp,
                      temperature, seed, positions);
}
