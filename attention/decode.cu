// attention/decode.cu: attention for generation with a KV cache: one new query against the keys
// and values already computed, read by strides out of the fused qkv (T, 3, NH, HS) of one
// sequence (the cache is that buffer: row t holds position t's Q, K and V).
//   in:  qkv rows 0..pos; the query is row pos's Q, the keys and values rows 0..pos (causal)
//   out: O (NH, HS) of position pos
// Flash-decoding: the keys are cut into chunks of DECODE_CHUNK, so a long cache keeps many
// thread blocks busy; one thread block per (head, chunk) computes the chunk's scores into shared
// memory, their max m and sum l of exp(s - m),
// and the unnormalised o = sum_j exp(s_j - m) v_j; a second kernel merges the chunks exactly,
// O = sum_c e^(m_c - M) o_c / sum_c e^(m_c - M) l_c with M = max_c m_c. One query reads every
// cached key and value once: the pass is memory-bound, (pos + 1) * 2 * NH * HS * 2 bytes.
#include <math.h>
#include "attention/attention.h"
#include "layers/kernel_common.cuh"

#define DECODE_CHUNK 256
#define DECODE_THREADS 256

// Per (head, chunk): m, l, then o (HS), fp32, in scratch.
static size_t partial_floats(int HS) { return 2 + (size_t)HS; }

size_t attention_decode_scratch_bytes(AttentionShape s) {
    return (size_t)s.NH * ceil_div(s.T, DECODE_CHUNK) * partial_floats(s.HS) * sizeof(float);
}

__global__ void __launch_bounds__(DECODE_THREADS)
decode_chunk_kernel(float* partials, const bf16* qkv, int pos, int NH, int HS, float scale) {
    __shared__ float scores[DECODE_CHUNK];
    extern __shared__ float shared[];   // q (HS), then the groups' o partial sums (DECODE_THREADS * 8)
    float* q = shared;
    float* o_sums = shared + HS;
    int h = blockIdx.x, chunk = blockIdx.y, n_chunks = gridDim.y;
    int first = chunk * DECODE_CHUNK, n = min(DECODE_CHUNK, pos + 1 - first);
    size_t row_stride = 3 * (size_t)NH * HS;
    const bf16* q_row = qkv + (size_t)pos * row_stride + (size_t)h * HS;
    const bf16* k_base = qkv + (size_t)first * row_stride + (size_t)(NH + h) * HS;
    const bf16* v_base = k_base + (size_t)NH * HS;
    for (int d = threadIdx.x; d < HS; d += blockDim.x) q[d] = (float)q_row[d] * scale;
    __syncthreads();
    // Scores: a thread per key, 16-byte loads along the key's row.
    float m = -INFINITY;
    int j = threadIdx.x;
    if (j < n) {
        const bf16x8* k = (const bf16x8*)(k_base + (size_t)j * row_stride);
        float s = 0.0f;
        for (int p = 0; p < HS / 8; p++) {
            bf16x8 k8 = k[p];
            for (int e = 0; e < 8; e++) s += q[8 * p + e] * (float)k8.v[e];
        }
        scores[j] = s;
        m = s;
    }
    m = block_reduce_max(m);
    float p = j < n ? expf(scores[j] - m) : 0.0f;
    if (j < n) scores[j] = p;
    float l = block_reduce_sum(p);   // its barriers also make every p visible
    // o: thread (pack, g) sums 8 dimensions (one 16-byte pack) over the keys g, g + G, ... (G =
    // DECODE_THREADS / (HS / 8) groups), so consecutive threads read a V row in whole; the
    // groups' sums are then added in a fixed order.
    int packs = HS / 8, pack = threadIdx.x % packs, g = threadIdx.x / packs, groups = DECODE_THREADS / packs;
    float o[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    #pragma unroll 4
    for (int k = g; k < n; k += groups) {
        bf16x8 v8 = ((const bf16x8*)(v_base + (size_t)k * row_stride))[pack];
        for (int e = 0; e < 8; e++) o[e] += scores[k] * (float)v8.v[e];
    }
    for (int e = 0; e < 8; e++) o_sums[g * HS + 8 * pack + e] = o[e];
    __syncthreads();
    float* out = partials + ((size_t)h * n_chunks + chunk) * (2 + HS);
    if (threadIdx.x < HS) {
        float sum = 0.0f;
        for (int k = 0; k < groups; k++) sum += o_sums[k * HS + threadIdx.x];
        out[2 + threadIdx.x] = sum;
    }
    if (threadIdx.x == 0) {
        out[0] = m;
        out[1] = l;
    }
}

// One block per head, a thread per dimension: the exact merge of the chunks.
__global__ void decode_merge_kernel(bf16* out, const float* partials, int n_chunks, int HS) {
    int h = blockIdx.x, d = threadIdx.x;
    const float* p = partials + (size_t)h * n_chunks * (2 + HS);
    float M = -INFINITY;
    for (int c = 0; c < n_chunks; c++) M = fmaxf(M, p[c * (2 + HS)]);
    float l = 0.0f, o = 0.0f;
    for (int c = 0; c < n_chunks; c++) {
        float w = expf(p[c * (2 + HS)] - M);
        l += w * p[c * (2 + HS) + 1];
        o += w * p[c * (2 + HS) + 2 + d];
    }
    out[(size_t)h * HS + d] = (bf16)(o / l);
}

const char* attention_decode_unsupported(AttentionShape s) {
    if (s.HS % 8 != 0 || s.HS < 8 || s.HS > DECODE_THREADS || DECODE_THREADS % s.HS != 0)
        return "decode attention: the head size must be a multiple of 8 that divides 256";
    if (s.B != 1) return "decode attention: one sequence at a time (B = 1)";
    return NULL;
}

void attention_decode(AttentionShape s, bf16* out, const bf16* qkv, int pos, void* scratch, cudaStream_t stream) {
    const char* why = attention_decode_unsupported(s);
    if (why) die("%s", why);
    if (pos < 0 || pos >= s.T) die("attention_decode: position %d outside the cache of %d rows", pos, s.T);
    if (!aligned16(qkv)) die("attention_decode: qkv must be 16-byte aligned");
    int n_chunks = (int)ceil_div(pos + 1, DECODE_CHUNK);
    float* partials = (float*)scratch;
    size_t smem = (s.HS + DECODE_THREADS * 8) * sizeof(float);
    decode_chunk_kernel<<<dim3(s.NH, n_chunks), DECODE_THREADS, smem, stream>>>(partials, qkv, pos, s.NH, s.HS,
                                                                                s.scale);
    cudaCheckLaunch();
    decode_merge_kernel<<<s.NH, s.HS, 0, stream>>>(out, partials, n_chunks, s.HS);
    cudaCheckLaunch();
}
