// attention/softmax.cuh: the softmax steps every flash kernel shares, on tensor-core accumulator
// tiles. A tile is 16 rows of NT n8-tiles, s[4 * nt + e] in the thread (g = lane / 4, t = lane % 4)
// at tile row g + 8 * (e >> 1), tile column 8 * nt + 2t + (e & 1): the C layout of mma.sync
// m16n8 and of one warp's 16 rows of a wgmma accumulator alike. The forward and the dQ kernels
// hold scores with queries as rows (S); the K/V kernels of the backward hold them with keys as
// rows (S^T), so the masks and the per-query L and D come in both orientations. A masked call (the
// key windows of params.h's AttentionMask) takes its masks from KeyWindow: lo of a query row,
// hi of a key row, and keys_in_window / queries_in_window for the tiles those cut.
//   forward:  m, l by the online softmax; P = 2^(S*scale*log2(e) - m*scale*log2(e))
//   backward: P = 2^(S*scale*log2(e) - L*log2(e)),  dS = P ∘ (dP - D),  D = rowsum(dO ∘ O)
//   merge:    two softmaxes over disjoint keys, (L1, O1) and (L2, O2), each O normalised:
//             L = log(e^L1 + e^L2),  O = e^(L1 - L) O1 + e^(L2 - L) O2
#ifndef FLASHGPT_SOFTMAX_CUH
#define FLASHGPT_SOFTMAX_CUH

#include <math.h>
#include "attention/params.h"
#include "device/math.cuh"

// The columns a thread's row sees, relative to its first column (8 * 0 + 2t): tile column c
// (8 * nt + (e & 1)) is visible when lo <= c < hi.
struct VisibleColumns { int lo, hi; };

// Rows are queries, columns keys from key0 (the thread's first key, tile column 2t): a query
// sees the keys below T, and causal, those up to its own position.
__device__ __forceinline__ VisibleColumns keys_seen(int query, int key0, int T, int causal) {
    return {0, (causal ? min(query + 1, T) : T) - key0};
}

// Rows are keys, columns queries from query0 (tile column 2t): a key below T is seen by the
// queries below T, and causal, those at or after its position; a key past T by none.
__device__ __forceinline__ VisibleColumns queries_seeing(int key, int query0, int T, int causal) {
    if (key >= T) return {0, 0};
    return {causal ? key - query0 : 0, T - query0};
}

// The key window of sequence b of a masked call (params.h), in the call's own rows and keys:
// lo(t), the first key query t sees (T: none), and hi(t), the last query that sees key t (-1:
// none), for t below T. The mask's arrays are read at the positions query0 + t and key0 + t.
struct KeyWindow {
    const int* doc_start;   // the sequence's, or NULL
    const int* doc_end;
    int window, T, query0, key0;
    __device__ __forceinline__ KeyWindow(const AttentionMask& m, int b, int T_) {
        long long first = (long long)b * T_;
        doc_start = m.doc_start ? m.doc_start + first : nullptr;
        doc_end = m.doc_end ? m.doc_end + first : nullptr;
        window = m.window;
        T = T_;
        query0 = m.query0;
        key0 = m.key0;
    }
    __device__ __forceinline__ int lo(int t) const {
        int q = query0 + t;
        int x = window > 0 ? max(q - window + 1, 0) : 0;
        if (doc_start) x = max(x, __ldg(doc_start + q));
        return min(max(x - key0, 0), T);
    }
    __device__ __forceinline__ int hi(int t) const {
        int d = key0 + t - query0;   // the key's position among the queries' (d + window - 1 may overflow)
        int x = window > 0 ? d + min(window - 1, T - 1 - d) : T - 1;
        if (doc_end) x = min(x, __ldg(doc_end + key0 + t) - query0);
        return max(x, -1);
    }
    // The K/V block of `block` keys where the walk of the Q block from row q0 starts: that of its
    // first row's first key, or, when that row sees none, the last block, so that every walk
    // has a block (whose keys the masks then hide).
    __device__ __forceinline__ int first_block(int q0, int block) const { return min(lo(q0), T - 1) / block; }
    // One past the Q block of `block` rows where the walk of the K/V block whose last key is k
    // ends: that of the key's last query, or, when no query sees it, the first block (every walk
    // has a block).
    __device__ __forceinline__ int end_block(int k, int block) const { return max(hi(k), 0) / block + 1; }
};

// Masked, rows are queries, columns keys from key0: a query sees the keys from lo, its
// window's first, to itself (causal) or to the last, below T.
__device__ __forceinline__ VisibleColumns keys_in_window(int query, int key0, int T, int lo, int causal) {
    return {lo - key0, (causal ? min(query + 1, T) : T) - key0};
}

// Masked, rows are keys, columns queries from query0: a key below T is seen by the queries from
// itself (causal) or the first to hi, its window's last (below T); a key past T by none.
__device__ __forceinline__ VisibleColumns queries_in_window(int key, int query0, int T, int hi, int causal) {
    if (key >= T) return {0, 0};
    return {(causal ? key : 0) - query0, hi + 1 - query0};
}

// Scores outside the visible columns of their row become -inf (so their P is 0).
template <int NT>
__device__ __forceinline__ void mask_tile(float* s, const VisibleColumns (&seen)[2]) {
    #pragma unroll
    for (int nt = 0; nt < NT; nt++)
        #pragma unroll
        for (int e = 0; e < 4; e++) {
            int col = 8 * nt + (e & 1);
            if (col < seen[e >> 1].lo || col >= seen[e >> 1].hi) s[4 * nt + e] = -INFINITY;
        }
}

// The online softmax of one block of scores, rows = queries: updates the running max m and this
// thread's share l of the running sum of each of its two rows, overwrites S with
// P = exp(scale * (S - m)), and returns in alpha the factor that takes the old sums and outputs to
// the new max. The max moves only when the block's exceeds it by more than LAZY_LOG2 powers of
// 2 (0: whenever it grows); until then P may reach 2^LAZY_LOG2 and alpha stays exactly 1, so the
// caller's rescaling of O changes nothing. Every row needs a finite score in its first block,
// unless EMPTY_ROWS: then a row without one (a masked call, its window not reached yet) keeps
// m = -inf and gets P = 0 and alpha = 0.
template <int NT, int LAZY_LOG2, bool EMPTY_ROWS = false>
__device__ __forceinline__ void online_softmax(float* s, float (&m)[2], float (&l)[2], float (&alpha)[2],
                                               float scale_log2) {
    #pragma unroll
    for (int half = 0; half < 2; half++) {
        float mx = m[half];
        #pragma unroll
        for (int nt = 0; nt < NT; nt++) mx = fmaxf(mx, fmaxf(s[4 * nt + 2 * half], s[4 * nt + 2 * half + 1]));
        // the 4 threads of a quad share a row
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        if (LAZY_LOG2 > 0 && (mx - m[half]) * scale_log2 <= (float)LAZY_LOG2) mx = m[half];
        // EMPTY_ROWS: a max of -inf is taken as 0, so that -inf - max is -inf, not NaN.
        const float base = EMPTY_ROWS && mx == -INFINITY ? 0.0f : mx;
        alpha[half] = fast_exp2((m[half] - base) * scale_log2);
        m[half] = mx;
        float neg_mx = -base * scale_log2, sum = 0.0f;
        #pragma unroll
        for (int nt = 0; nt < NT; nt++)
            #pragma unroll
            for (int e = 2 * half; e < 2 * half + 2; e++) {
                float p = fast_exp2(fmaf(s[4 * nt + e], scale_log2, neg_mx));
                s[4 * nt + e] = p;
                sum += p;
            }
        l[half] = l[half] * alpha[half] + sum;
    }
}

// The row sums of the online softmax: this thread's share l, added over the quad of the row.
__device__ __forceinline__ float quad_sum(float l) {
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    return l + __shfl_xor_sync(0xffffffffu, l, 2);
}

// Rows are queries: P = 2^(S * scale_log2 - L2) with L2 = L * log2(e) of the thread's two rows.
template <int NT>
__device__ __forceinline__ void probabilities_by_row(float* s, const float (&l2)[2], float scale_log2) {
    #pragma unroll
    for (int i = 0; i < 4 * NT; i++) s[i] = fast_exp2(fmaf(s[i], scale_log2, -l2[(i >> 1) & 1]));
}

// Rows are keys: P^T = 2^(S^T * scale_log2 - L2), L2 of columns 8 * nt + 2t and + 1 as
// l2_pair(nt) (a float2; a function, so that the caller decides when the values are loaded).
template <int NT, class Pair>
__device__ __forceinline__ void probabilities_by_column(float* s, Pair l2_pair, float scale_log2) {
    #pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        const float2 l = l2_pair(nt);
        #pragma unroll
        for (int e = 0; e < 4; e++) s[4 * nt + e] = fast_exp2(fmaf(s[4 * nt + e], scale_log2, -((e & 1) ? l.y : l.x)));
    }
}

// Rows are queries: dP becomes dS = P ∘ (dP - D), D of the thread's two rows.
template <int NT>
__device__ __forceinline__ void score_grads_by_row(float* dp, const float* p, const float (&d)[2]) {
    #pragma unroll
    for (int i = 0; i < 4 * NT; i++) dp[i] = p[i] * (dp[i] - d[(i >> 1) & 1]);
}

// Rows are keys: dP^T becomes dS^T = P^T ∘ (dP^T - D), D of columns as d_pair(nt).
template <int NT, class Pair>
__device__ __forceinline__ void score_grads_by_column(float* dp, const float* p, Pair d_pair) {
    #pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        const float2 d = d_pair(nt);
        #pragma unroll
        for (int e = 0; e < 4; e++) dp[4 * nt + e] = p[4 * nt + e] * (dp[4 * nt + e] - ((e & 1) ? d.y : d.x));
    }
}

// The log-sum-exp of two partial softmaxes, log(e^l1 + e^l2), without overflow.
__device__ __forceinline__ float lse_merge(float l1, float l2) {
    return fmaxf(l1, l2) + log1pf(expf(-fabsf(l1 - l2)));
}

#endif
