// attention/decode.cu: attention for generation with a KV cache (attention/decode.h): the one
// new query of each of B sequences against the T keys and values cached for it, read by the
// strides of the views (attention/params.h).
// Flash-decoding: the keys are cut into chunks of DECODE_CHUNK, so a long cache keeps many
// thread blocks busy; one thread block per (head, chunk, sequence) computes the chunk's scores
// into shared memory and keeps the chunk's softmax as its log-sum-exp and normalised output; a
// second kernel merges the chunks exactly by their log-sum-exps. One query reads every cached
// key and value once: the pass is memory-bound, T * 2 * NH * HS * 2 bytes per sequence.
#include <math.h>
#include "attention/decode.h"
#include "layers/kernel_common.cuh"

#define DECODE_CHUNK 256
#define DECODE_THREADS 256
#define GRID_YZ_MAX 65535

// Per (sequence, head, chunk): the log-sum-exp, then o (HS), fp32, in scratch.
static size_t partial_floats(int HS) { return 1 + (size_t)HS; }

size_t decode_attention_scratch_bytes(AttentionShape s) {
    return (size_t)s.B * s.NH * ceil_div(s.T, DECODE_CHUNK) * partial_floats(s.HS) * sizeof(float);
}

__global__ void __launch_bounds__(DECODE_THREADS) decode_chunk_kernel(float* partials, const AttentionParams p,
                                                                      const int* positions) {
    __shared__ float scores[DECODE_CHUNK];
    extern __shared__ float shared[];   // q (HS), then the groups' o partial sums (DECODE_THREADS * 8)
    int HS = p.shape.HS;
    float* q = shared;
    float* o_sums = shared + HS;
    int h = blockIdx.x, chunk = blockIdx.y, seq = blockIdx.z, n_chunks = gridDim.y;
    int keys = positions ? positions[seq] + 1 : p.shape.T;
    int first = chunk * DECODE_CHUNK, n = min(DECODE_CHUNK, keys - first);
    if (n <= 0) return;   // past this sequence's keys: the merge reads no further
    const bf16* q_row = p.q.ptr + seq * p.q.batch + (long long)h * p.q.head;
    const bf16* k_base = p.k.ptr + seq * p.k.batch + first * p.k.row + (long long)h * p.k.head;
    const bf16* v_base = p.v.ptr + seq * p.v.batch + first * p.v.row + (long long)h * p.v.head;
    for (int d = threadIdx.x; d < HS; d += blockDim.x) q[d] = (float)q_row[d] * p.shape.scale;
    __syncthreads();
    // Scores: a thread per key, 16-byte loads along the key's row.
    float m = -INFINITY;
    int j = threadIdx.x;
    if (j < n) {
        const bf16x8* k = (const bf16x8*)(k_base + j * p.k.row);
        float s = 0.0f;
        for (int pk = 0; pk < HS / 8; pk++) {
            bf16x8 k8 = k[pk];
            for (int e = 0; e < 8; e++) s += q[8 * pk + e] * (float)k8.v[e];
        }
        scores[j] = s;
        m = s;
    }
    m = block_reduce_max(m);
    float e_s = j < n ? expf(scores[j] - m) : 0.0f;
    if (j < n) scores[j] = e_s;
    float l = block_reduce_sum(e_s);   // its barriers also make every exp visible
    // o: thread (pack, g) sums 8 dimensions (one 16-byte pack) over the keys g, g + G, ... (G =
    // DECODE_THREADS / (HS / 8) groups), so consecutive threads read a V row in whole; the
    // groups' sums are then added in a fixed order.
    int packs = HS / 8, pack = threadIdx.x % packs, g = threadIdx.x / packs, groups = DECODE_THREADS / packs;
    float o[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    #pragma unroll 4
    for (int k = g; k < n; k += groups) {
        bf16x8 v8 = ((const bf16x8*)(v_base + k * p.v.row))[pack];
        for (int e = 0; e < 8; e++) o[e] += scores[k] * (float)v8.v[e];
    }
    for (int e = 0; e < 8; e++) o_sums[g * HS + 8 * pack + e] = o[e];
    __syncthreads();
    float* out = partials + (((size_t)seq * gridDim.x + h) * n_chunks + chunk) * (1 + HS);
    if (threadIdx.x < HS) {
        float sum = 0.0f;
        for (int k = 0; k < groups; k++) sum += o_sums[k * HS + threadIdx.x];
        out[1 + threadIdx.x] = sum / l;
    }
    if (threadIdx.x == 0) out[0] = m + logf(l);
}

// One block per (head, sequence), a thread per dimension: the exact merge of the chunks by
// their log-sum-exps L_c, O = sum_c e^(L_c - M) O_c / sum_c e^(L_c - M) with M = max_c L_c, in
// two passes whose terms do not wait on one another (a long cache has hundreds of chunks).
__global__ void decode_merge_kernel(AttentionTensor out, const float* partials, int n_chunks, int HS,
                                    const int* positions) {
    int h = blockIdx.x, seq = blockIdx.y, d = threadIdx.x;
    const float* p = partials + ((size_t)seq * gridDim.x + h) * n_chunks * (1 + HS);
    int used = positions ? (positions[seq] + DECODE_CHUNK) / DECODE_CHUNK : n_chunks;
    float M = -INFINITY;
    for (int c = 0; c < used; c++) M = fmaxf(M, p[(size_t)c * (1 + HS)]);
    float l = 0.0f, o = 0.0f;
    for (int c = 0; c < used; c++) {
        float w = expf(p[(size_t)c * (1 + HS)] - M);
        l += w;
        o += w * p[(size_t)c * (1 + HS) + 1 + d];
    }
    out.ptr[seq * out.batch + (long long)h * out.head + d] = (bf16)(o / l);
}

const char* decode_attention_unsupported(AttentionShape s) {
    if (s.HS % 8 != 0 || s.HS < 8 || s.HS > DECODE_THREADS || DECODE_THREADS % s.HS != 0)
        return "decode attention: the head size must be a multiple of 8 that divides 256";
    if (s.B > GRID_YZ_MAX || ceil_div(s.T, DECODE_CHUNK) > GRID_YZ_MAX)
        return "decode attention: at most 65535 sequences of at most 65535 * 256 keys";
    return NULL;
}

void decode_attention(const AttentionParams* p, const int* positions, void* scratch, cudaStream_t stream) {
    const char* why = decode_attention_unsupported(p->shape);
    if (why) die("%s", why);
    // The keys and values come in 16-byte loads.
    if (!attention_tensor_packed(&p->k) || !attention_tensor_packed(&p->v))
        die("attention_decode: k and v must be 16-byte aligned, their strides multiples of 8 elements");
    AttentionShape s = p->shape;
    int n_chunks = (int)ceil_div(s.T, DECODE_CHUNK);
    float* partials = (float*)scratch;
    size_t smem = (s.HS + DECODE_THREADS * 8) * sizeof(float);
    decode_chunk_kernel<<<dim3(s.NH, n_chunks, s.B), DECODE_THREADS, smem, stream>>>(partials, *p, positions);
    cudaCheckLaunch();
    decode_merge_kernel<<<dim3(s.NH, s.B), s.HS, 0, stream>>>(p->o, partials, n_chunks, s.HS, positions);
    cudaCheckLaunch();
}

// One block per (sequence, head), 16-byte copies: HS / 8 threads each for K and V.
__global__ void kv_cache_append_kernel(AttentionTensor k, AttentionTensor v, AttentionTensor k_new,
                                       AttentionTensor v_new, int NH, int HS, const int* positions) {
    int b = blockIdx.x / NH, h = blockIdx.x % NH, packs = HS / 8, i = threadIdx.x % packs;
    int pos = positions[b];
    int from_v = threadIdx.x >= packs;
    const AttentionTensor* dst = from_v ? &v : &k;
    const AttentionTensor* src = from_v ? &v_new : &k_new;
    const bf16x8* from = (const bf16x8*)(src->ptr + b * src->batch + (long long)h * src->head);
    bf16x8* to = (bf16x8*)(dst->ptr + b * dst->batch + pos * dst->row + (long long)h * dst->head);
    to[i] = from[i];
}

void kv_cache_append(const AttentionTensor* k, const AttentionTensor* v, const AttentionTensor* k_new,
                     const AttentionTensor* v_new, int B, int NH, int HS, const int* positions, cudaStream_t stream) {
    if (!attention_tensor_packed(k) || !attention_tensor_packed(v) || !attention_tensor_packed(k_new) ||
        !attention_tensor_packed(v_new) || HS % 8 != 0)
        die("kv_cache_append: the views must be 16-byte aligned, their strides and HS multiples of 8");
    kv_cache_append_kernel<<<B * NH, 2 * (HS / 8), 0, stream>>>(*k, *v, *k_new, *v_new, NH, HS, positions);
    cudaCheckLaunch();
}
