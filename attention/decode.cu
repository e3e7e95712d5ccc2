// attention/decode.cu: attention for generation with a KV cache (attention/decode.h): the one
// new query of each of B sequences against the keys and values cached for it, read by the
// strides of the views (attention/params.h).
// Flash-decoding in one launch: the keys are cut into chunks of DECODE_CHUNK, so a long cache
// keeps every SM busy; one thread block per (head, chunk, sequence) keeps its chunk's softmax as
// a log-sum-exp and a normalised output in scratch, and the last block of a (sequence, head) to
// finish merges its chunks exactly by their log-sum-exps. A (sequence, head) whose keys fit in
// one chunk has its output written by its one block. One query reads every cached key and value
// once: the pass is memory-bound, (position + 1) * 2 * NH * HS * 2 bytes per sequence. WINDOWED
// (a sliding window of `window` keys): the query sees only its last `window` keys, the chunks
// before them end at once and the rows before them are never read, so a step reads at most
// window * 2 * NH * HS * 2 bytes per sequence.
// Inside a block, a group of HS / 8 consecutive threads reads a key's row (a 16-byte pack of 8
// dims each: 128 contiguous bytes at HS 64) and keeps an online softmax over its keys, with
// DECODE_UNROLL keys' K and V loads in flight per thread; the groups merge by warp shuffles, the
// warps through shared memory, each in a fixed order (deterministic). Scores are in base 2 (q is
// scaled by scale * log2(e)), and so are the log-sum-exps in scratch.
// With QK-norm or rotary (decode.h's DecodeQK) the step's QKV layer leaves q and the new key raw:
// every block norms and rotates its head's q after the wait, a group's lanes r and r ^ HS/16
// exchanging the halves of their rotation pairs, and the block of the own row's chunk does the
// same to that key, then writes it back, so the next steps read it as the prompt's keys.
#include <math.h>
#include "attention/decode.h"
#include "device/bf16.cuh"
#include "device/launch.cuh"
#include "device/reduce.cuh"
#include "device/rotary.cuh"

// 256 keys per block of 256 threads: a 16K cache of 12 heads is 768 blocks (~6 per SM of an
// H200's 132, 3 resident at a time), a 2K cache 96 (more keys per block would leave most SMs
// idle there), and a cache of up to 256 keys one block per head, with no merge. At HS 64 each
// thread reads 8 keys' packs of K and of V, in two rounds of DECODE_UNROLL.
#define DECODE_CHUNK 256
#define DECODE_THREADS 256
#define DECODE_WARPS (DECODE_THREADS / 32)
#define DECODE_UNROLL 4
#define GRID_YZ_MAX 65535
#define LOG2E 1.4426950408889634f

// The scratch of B * NH sequence-heads of n_chunks chunks each: the chunks' normalised outputs
// o (B, NH, n_chunks, HS) fp32, their log-sum-exps lse (B, NH, n_chunks) fp32 (base 2), then done (B, NH):
// how many chunks of a sequence-head have written theirs (zero between calls).
struct DecodeScratch {
    float* o;
    float* lse;
    unsigned* done;
};

static size_t partials(AttentionShape s) { return (size_t)s.B * s.NH * ceil_div(s.T, DECODE_CHUNK); }

static DecodeScratch scratch_views(void* scratch, AttentionShape s) {
    DecodeScratch d;
    d.o = (float*)scratch;
    d.lse = d.o + partials(s) * s.HS;
    d.done = (unsigned*)(d.lse + partials(s));
    return d;
}

size_t decode_attention_scratch_bytes(AttentionShape s) {
    return partials(s) * (s.HS + 1) * sizeof(float) + (size_t)s.B * s.NH * sizeof(unsigned);
}

// A 16-byte pack of 8 bf16 as floats (a bf16 is the top half of a float's bits).
__device__ inline void unpack8(uint4 x, float f[8]) {
    const unsigned w[4] = {x.x, x.y, x.z, x.w};
    #pragma unroll
    for (int i = 0; i < 4; i++) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

// The keys sequence seq's query sees: 0..positions[seq], clamped to the cache, so that a position
// past it (a caller's bug) still leaves the counters zero.
__device__ inline int keys_seen_by(const int* positions, int seq, int T) {
    return min(__ldcg(positions + seq) + 1, T);
}

// A 16-byte load from L2, issued where it stands: ptxas moves a plain load below a branch that
// comes before its first use (here the return that the positions decide), which would put its
// wait after theirs instead of beside it; it does not move a volatile one.
__device__ __forceinline__ uint4 load_16_now(const void* p) {
    uint4 v;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

// DecodeQK as the kernel takes it: the norm's eps (0: none), and the rotation's frequency ratios
// (device/rotary.cuh's rotary_ratios) where it rotates.
struct DecodeQKArgs {
    float norm_eps;
    int rotate;
    double ratio, ratio8;
};

// This thread's pack x8 of a head (dims [8r, 8r + 8), r its rank in a group of HS / 8 lanes)
// normed and rotated as layers/rotary.h's forward: lanes r and r ^ HS/16 hold the two halves of
// the pairs [8j, 8j + 8), j = r mod HS/16, and each computes both as layers/rotary.cu's lane j
// does, with the angles c, s of those pairs, then keeps its own half. Every lane of the warp
// calls it.
__device__ inline uint4 qk_transform_pack(uint4 x8, int r, const float* c, const float* s, int HS,
                                          const DecodeQKArgs& qk) {
    const int lanes = HS / 16;
    uint4 other;
    other.x = __shfl_xor_sync(0xffffffffu, x8.x, lanes);
    other.y = __shfl_xor_sync(0xffffffffu, x8.y, lanes);
    other.z = __shfl_xor_sync(0xffffffffu, x8.z, lanes);
    other.w = __shfl_xor_sync(0xffffffffu, x8.w, lanes);
    const bool low = r < lanes;
    bf16x8 lo8, hi8;
    const uint4 lo = low ? x8 : other, hi = low ? other : x8;
    memcpy(&lo8, &lo, sizeof(lo8));
    memcpy(&hi8, &hi, sizeof(hi8));
    qk_norm_rotate(lo8, hi8, c, s, lanes, 1.0f / HS, qk.norm_eps > 0.0f, qk.norm_eps);
    uint4 lo_out, hi_out;
    memcpy(&lo_out, &lo8, sizeof(lo_out));
    memcpy(&hi_out, &hi8, sizeof(hi_out));
    return low ? lo_out : hi_out;
}

// Block (head, chunk, sequence): keys [chunk * DECODE_CHUNK, + DECODE_CHUNK) of the sequence's
// 0..positions[seq] (WINDOWED: of its last `window`). Group g of HS / 8 threads takes the keys g,
// g + groups, ...; thread r of the group holds dims [8r, 8r + 8) of q, and of o for its keys.
// Three blocks per SM (80 registers): 768 threads with 128 bytes of K and V in flight each.
// QK (decode.h's qk): every block transforms q after its wait; the block whose chunk holds the
// query's own row transforms that row's key in the warp of the group that scores it, which
// writes it back. No other block reads that row in this call: the chunks' keys are disjoint, and
// the window, never empty, ends there, so that chunk is always used.
template <bool WINDOWED, bool QK>
__global__ void __launch_bounds__(DECODE_THREADS, 3) decode_kernel(const AttentionParams p, const int* positions,
                                                                DecodeScratch scratch, int window, DecodeQKArgs qk) {
    // The warps' (m, l, o[HS]) (HS <= DECODE_THREADS); in the merge of the chunks, the strides'
    // (l, o[HS]): DECODE_THREADS / (HS / 4) of them, at most DECODE_THREADS / 2 (HS 8).
    __shared__ float part_m[DECODE_WARPS], part_l[DECODE_THREADS / 2];
    __shared__ __align__(16) float part_o[DECODE_WARPS * DECODE_THREADS];
    __shared__ int is_last;
    int HS = p.shape.HS, T = p.shape.T;
    int h = blockIdx.x, chunk = blockIdx.y, seq = blockIdx.z, NH = gridDim.x, n_chunks = gridDim.y;
    int first = chunk * DECODE_CHUNK;
    int G = HS / 8, r = threadIdx.x % G, g = threadIdx.x / G, groups = DECODE_THREADS / G;
    const bf16* k_base = p.k.ptr + seq * p.k.batch + first * p.k.row + (long long)h * p.k.head + 8 * r;
    const bf16* v_base = p.v.ptr + seq * p.v.batch + first * p.v.row + (long long)h * p.v.head + 8 * r;
    // The first round of keys, by the positions as they read before the wait (a guess: the
    // kernel before may write them). The rows before the query's, which earlier steps wrote, go
    // out before the wait and overlap the kernel before; the query's own row and q come from that
    // kernel, and go out right after the wait, beside the positions read again. Only that read
    // decides; when it differs from the guess, the first round is loaded again. Every load that
    // may precede a write goes around L1 (__ldcg, load_16_now), so none leaves a stale line there.
    const int guess_keys = keys_seen_by(positions, seq, T);
    const int guess_n = min(DECODE_CHUNK, guess_keys - first), own = guess_keys - 1 - first;   // own: the query's row
    // WINDOWED: the chunk's keys start at j_lo (relative to first), the window's first or 0.
    const int guess_j_lo = WINDOWED ? max(guess_keys - window - first, 0) : 0;
    uint4 k8[DECODE_UNROLL], v8[DECODE_UNROLL];
    #pragma unroll
    for (int u = 0; u < DECODE_UNROLL; u++) {
        int j = u * groups + g;
        k8[u] = v8[u] = make_uint4(0, 0, 0, 0);
        if (j < guess_n && j < own && (!WINDOWED || j >= guess_j_lo)) {
            k8[u] = __ldcg((const uint4*)(k_base + j * p.k.row));
            v8[u] = __ldcg((const uint4*)(v_base + j * p.v.row));
        }
    }
    const bf16* k_own = k_base + max(own, 0) * p.k.row;
    const bf16* v_own = v_base + max(own, 0) * p.v.row;
    grid_dependency_wait();   // every block, even one past its sequence's keys (device/launch.cuh)
    grid_dependents_launch();
    uint4 q8 = load_16_now(p.q.ptr + seq * p.q.batch + (long long)h * p.q.head + 8 * r);
    // QK: the query's own key, raw, goes out here too, in the warp that transforms it (below), by
    // the positions' guess.
    uint4 k_own8 = make_uint4(0, 0, 0, 0);
    if (QK && own >= 0 && own < guess_n && threadIdx.x / 32 == own % groups * G / 32) k_own8 = load_16_now(k_own);
    #pragma unroll
    for (int u = 0; u < DECODE_UNROLL; u++)
        if (u * groups + g == own && own < guess_n) {
            if (!QK) k8[u] = load_16_now(k_own);   // QK: the own key comes transformed, below
            v8[u] = load_16_now(v_own);
        }
    const int keys = keys_seen_by(positions, seq, T), n = min(DECODE_CHUNK, keys - first);
    if (n <= 0) return;   // past this sequence's keys: the chunks counted are those that hold keys
    // WINDOWED: before the window, likewise; the chunks used are first_used..used - 1.
    const int lo = WINDOWED ? max(keys - window, 0) : 0, j_lo = WINDOWED ? max(lo - first, 0) : 0;
    if (WINDOWED && n <= j_lo) return;
    const int first_used = WINDOWED ? lo / DECODE_CHUNK : 0;
    const int used = (keys + DECODE_CHUNK - 1) / DECODE_CHUNK;
    const bool first_round_loaded = keys == guess_keys;
    // QK: q transformed, and in the chunk of the query's own row (own_now < n, the last chunk),
    // that row's key k_own8, in the warp of the group that takes it (group own_now % groups),
    // which writes it back. The warp's lanes have all read the row when any passes the shuffles
    // in qk_transform_pack, so the write follows every read of it.
    const int own_now = keys - 1 - first;
    if constexpr (QK) {
        const int own_group = own_now % groups;
        const bool own_warp = own_now < n && threadIdx.x / 32 == own_group * G / 32;
        bf16* k_row = (bf16*)k_base + own_now * p.k.row;
        if (own_warp && own_now != own) k_own8 = load_16_now(k_row);   // the guess was not the position
        float c[8], s[8];
        if (qk.rotate) rotary_angles(c, s, keys - 1, r & (HS / 16 - 1), qk.ratio, qk.ratio8);
        else
            for (int e = 0; e < 8; e++) {
                c[e] = 1.0f;
                s[e] = 0.0f;
            }
        q8 = qk_transform_pack(q8, r, c, s, HS, qk);
        if (own_warp) {
            k_own8 = qk_transform_pack(k_own8, r, c, s, HS, qk);
            if (g == own_group) *(uint4*)k_row = k_own8;
        }
    }
    float q[8];
    unpack8(q8, q);
    #pragma unroll
    for (int e = 0; e < 8; e++) q[e] *= p.shape.scale * LOG2E;

    // Online softmax of the group's keys: the running max m, sum l and o (unnormalised). The
    // trip count is the block's, so every lane reaches the shuffles; keys past n score -inf.
    float m = -INFINITY, l = 0.0f, o[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int base = 0; base < n; base += groups * DECODE_UNROLL) {
        #pragma unroll
        for (int u = 0; u < DECODE_UNROLL; u++) {
            int j = base + u * groups + g;
            if (base == 0 && first_round_loaded) continue;
            k8[u] = v8[u] = make_uint4(0, 0, 0, 0);
            if (j < n && (!WINDOWED || j >= j_lo)) {
                k8[u] = *(const uint4*)(k_base + j * p.k.row);
                v8[u] = *(const uint4*)(v_base + j * p.v.row);
            }
        }
        float s[DECODE_UNROLL], m_new = m;
        #pragma unroll
        for (int u = 0; u < DECODE_UNROLL; u++) {
            int j = base + u * groups + g;
            float f[8], dot = 0.0f;
            unpack8(QK && j == own_now ? k_own8 : k8[u], f);
            #pragma unroll
            for (int e = 0; e < 8; e++) dot += q[e] * f[e];
            #pragma unroll
            for (int offset = 16; offset > 0; offset >>= 1)
                if (offset < G) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
            s[u] = j < n && (!WINDOWED || j >= j_lo) ? dot : -INFINITY;
            m_new = fmaxf(m_new, s[u]);
        }
        float m_use = m_new == -INFINITY ? 0.0f : m_new;   // a group with no key yet: weights 0, not NaN
        float correction = exp2f(m - m_use);
        l *= correction;
        #pragma unroll
        for (int e = 0; e < 8; e++) o[e] *= correction;
        #pragma unroll
        for (int u = 0; u < DECODE_UNROLL; u++) {
            float f[8], w = exp2f(s[u] - m_use);
            unpack8(v8[u], f);
            l += w;
            #pragma unroll
            for (int e = 0; e < 8; e++) o[e] += w * f[e];
        }
        m = m_new;
    }

    // The warp's groups merge by a butterfly (lanes g * G + r and g' * G + r exchange; group 0's
    // lanes keep the warp's state), the warps through shared memory: thread d < HS merges dim d
    // over them in order.
    for (int offset = G; offset < 32; offset <<= 1) {
        float m_other = __shfl_xor_sync(0xffffffffu, m, offset), l_other = __shfl_xor_sync(0xffffffffu, l, offset);
        float m_new = fmaxf(m, m_other), m_use = m_new == -INFINITY ? 0.0f : m_new;
        float a = exp2f(m - m_use), b = exp2f(m_other - m_use);
        l = l * a + l_other * b;
        #pragma unroll
        for (int e = 0; e < 8; e++) o[e] = o[e] * a + __shfl_xor_sync(0xffffffffu, o[e], offset) * b;
        m = m_new;
    }
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane < G) {
        if (lane == 0) {
            part_m[warp] = m;
            part_l[warp] = l;
        }
        float4* mine = (float4*)(part_o + warp * HS + 8 * lane);
        mine[0] = make_float4(o[0], o[1], o[2], o[3]);
        mine[1] = make_float4(o[4], o[5], o[6], o[7]);
    }
    __syncthreads();
    size_t sh = (size_t)seq * NH + h;   // the sequence-head
    bf16* out = p.o.ptr + seq * p.o.batch + (long long)h * p.o.head;
    if (threadIdx.x < HS) {
        int d = threadIdx.x;
        float M = -INFINITY, sum_l = 0.0f, sum_o = 0.0f;
        #pragma unroll
        for (int i = 0; i < DECODE_WARPS; i++) M = fmaxf(M, part_m[i]);   // finite: the chunk has a key
        #pragma unroll
        for (int i = 0; i < DECODE_WARPS; i++) {
            float w = exp2f(part_m[i] - M);
            sum_l += w * part_l[i];
            sum_o += w * part_o[i * HS + d];
        }
        if (used - first_used == 1) out[d] = (bf16)(sum_o / sum_l);
        else {
            scratch.o[(sh * n_chunks + chunk) * HS + d] = sum_o / sum_l;
            if (d == 0) scratch.lse[sh * n_chunks + chunk] = M + log2f(sum_l);
        }
    }
    if (used - first_used == 1) return;

    // The last of the sequence-head's chunks to finish merges them: each block's partial is
    // visible device-wide (fence) before it counts; the last reads the others' from L2 (__ldcg).
    __threadfence();
    __syncthreads();
    unsigned* done = scratch.done + sh;
    if (threadIdx.x == 0) is_last = atomicAdd(done, 1u) == (unsigned)(used - first_used) - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    const float* lse = scratch.lse + sh * n_chunks;
    const float4* parts = (const float4*)(scratch.o + sh * n_chunks * HS);
    float M = -INFINITY;
    for (int c = first_used + threadIdx.x; c < used; c += DECODE_THREADS) M = fmaxf(M, __ldcg(lse + c));
    M = block_reduce_max(M);
    // O = sum_c 2^(L_c - M) O_c / sum_c 2^(L_c - M): thread (c0, pack) sums 4 dims over the
    // chunks c0, c0 + stride, ...; then thread d < HS adds the stride sums in order.
    int P = HS / 4, pack = threadIdx.x % P, c0 = threadIdx.x / P, stride = DECODE_THREADS / P;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float sum_l = 0.0f;
    #pragma unroll 4
    for (int c = first_used + c0; c < used; c += stride) {
        float w = exp2f(__ldcg(lse + c) - M);
        float4 x = __ldcg(parts + (size_t)c * P + pack);
        sum_l += w;
        acc.x += w * x.x;
        acc.y += w * x.y;
        acc.z += w * x.z;
        acc.w += w * x.w;
    }
    ((float4*)part_o)[c0 * P + pack] = acc;   // part_o and part_l were last read before the barriers above
    if (pack == 0) part_l[c0] = sum_l;
    __syncthreads();
    if (threadIdx.x < HS) {
        float o_d = 0.0f, l_all = 0.0f;
        for (int i = 0; i < stride; i++) {
            o_d += part_o[i * HS + threadIdx.x];
            l_all += part_l[i];
        }
        out[threadIdx.x] = (bf16)(o_d / l_all);
    }
    if (threadIdx.x == 0) *done = 0;   // every chunk has counted: the next call finds it zeroed
}

const char* decode_attention_unsupported(AttentionShape s) {
    if (s.HS % 8 != 0 || s.HS < 8 || s.HS > DECODE_THREADS || DECODE_THREADS % s.HS != 0)
        return "decode attention: the head size must be a multiple of 8 that divides 256";
    if (s.B > GRID_YZ_MAX || ceil_div(s.T, DECODE_CHUNK) > GRID_YZ_MAX)
        return "decode attention: at most 65535 sequences of at most 65535 * 256 keys";
    return NULL;
}

// The kernel of the window and transform asked for.
template <bool WINDOWED>
static void launch_windowed(bool transform, dim3 grid, cudaStream_t stream, const AttentionParams& p,
                            const int* positions, DecodeScratch scratch, int window, DecodeQKArgs qk) {
    if (transform)
        launch_overlapped(decode_kernel<WINDOWED, true>, grid, dim3(DECODE_THREADS), 0, stream, p, positions, scratch,
                          window, qk);
    else
        launch_overlapped(decode_kernel<WINDOWED, false>, grid, dim3(DECODE_THREADS), 0, stream, p, positions,
                          scratch, window, qk);
}

void decode_attention(const AttentionParams* p, const int* positions, int window, const DecodeQK* qk, void* scratch,
                      cudaStream_t stream) {
    const char* why = decode_attention_unsupported(p->shape);
    if (why) die("%s", why);
    // q, k and v come in 16-byte loads, the partials in 16-byte loads of fp32.
    if (!attention_tensor_packed(&p->q) || !attention_tensor_packed(&p->k) || !attention_tensor_packed(&p->v))
        die("attention_decode: q, k and v must be 16-byte aligned, their strides multiples of 8 elements");
    if (!aligned16(scratch)) die("attention_decode: the scratch must be 16-byte aligned");
    AttentionShape s = p->shape;
    dim3 grid(s.NH, (unsigned)ceil_div(s.T, DECODE_CHUNK), s.B);
    if (window < 0) die("attention_decode: the window must be 0 (none) or a number of keys");
    DecodeQKArgs args = {};
    if (qk) {
        if (s.HS < 16) die("attention_decode: QK-norm and rotary take head sizes of 16 or more, not %d", s.HS);
        if (!(qk->norm_eps >= 0.0f && qk->rotary_base >= 0.0f) || (qk->norm_eps == 0.0f && qk->rotary_base == 0.0f))
            die("attention_decode: the query's transform asks for neither QK-norm nor rotary (eps %g, base %g)",
                qk->norm_eps, qk->rotary_base);
        if (qk->rotary_base != 0.0f && (!(qk->rotary_base > 1.0f) || !isfinite(qk->rotary_base)))
            die("attention_decode: the rotary base must be finite and above 1, not %g", qk->rotary_base);
        args.norm_eps = qk->norm_eps;
        args.rotate = qk->rotary_base != 0.0f;
        if (args.rotate) rotary_ratios(s.HS, qk->rotary_base, &args.ratio, &args.ratio8);
    }
    DecodeScratch views = scratch_views(scratch, s);
    if (window > 0) launch_windowed<true>(qk != NULL, grid, stream, *p, positions, views, window, args);
    else launch_windowed<false>(qk != NULL, grid, stream, *p, positions, views, window, args);
}
