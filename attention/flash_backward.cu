// attention/flash_backward.cu: the FlashAttention backward pass on mma.sync tensor cores (sm_80 on).
//   in:  Q, K, V, O, dO (B, T, NH, HS) bf16 and the forward's L (B, NH, T) fp32, by their views
//   out: dQ, dK, dV (B, T, NH, HS) bf16 by their views (attention/params.h), every element written
//   scratch: D (B, NH, T), the dQ accumulator (B, NH, T, HS) and the rest of flash_backward_steps.cu
// The probabilities are recomputed block by block from Q, K and L (P = exp(scale*QK^T - L)),
// never read from memory. Three steps:
//   1. prepass (flash_backward_steps.cu): D = rowsum(dO * O) per query row (and the dQ
//      accumulator zeroed);
//   2. one thread block per K/V block of BLOCK_N keys loops over the Q blocks that see it,
//      keeping dK and dV in registers: dV += P^T dO, dK += dS^T Q, with dS = P * (dP - D),
//      dP = dO V^T; FLASH_DQ_ATOMIC adds dQ += dS K to the fp32 accumulator with atomics;
//   3. the accumulator becomes bf16 dQ (flash_backward_steps.cu). FLASH_DQ_SEPARATE
//      (any deterministic dQ: this family has no fixed-point path) instead runs a second kernel
//      (flash_backward_dq_separate), one thread block per Q block looping over the K/V blocks,
//      which computes dQ on its own in a fixed order: the same bits every run, for 7 matmuls
//      instead of 5 (S and dP are recomputed there).
// MASKED (a key window per row, params.h's AttentionMask): each kernel walks only the blocks
// that its first and last rows' windows reach (a K/V block's last query is hi of its last key, a
// Q block's first key lo of its first query), a warp passes over the sub-blocks and blocks its
// rows' windows miss, and the blocks that cut a window are masked.
#include <math.h>
#include "attention/flash.h"
#include "attention/mask.h"
#include "attention/softmax.cuh"
#include "device/mma.cuh"
#include "device/smem_tile.cuh"

// Row 0 of head h of sequence b in a view. h * head may pass 2^31; both are non-negative, and
// their unsigned 32 x 32 -> 64-bit product takes fewer registers in these kernels than a signed one.
__device__ __forceinline__ bf16* head_rows(const AttentionTensor& v, int b, int h) {
    return v.ptr + b * v.batch + (unsigned long long)(unsigned)h * (unsigned)v.head;
}

// Step 2. Thread block: BLOCK_N = 16*NWARPS keys of one (b, h); warp w owns keys 16w..16w+15,
// so it computes the transposed products S^T = K Q^T and dP^T = V dO^T (its keys as rows),
// whose fragments feed dV and dK directly. The warp's K and V rows stay in registers as A
// fragments for the whole loop, so per Q block only Q and dO are read from shared memory.
// Q, dO, L and D blocks of BLOCK_M queries are double-buffered; a warp works through a block in
// sub-blocks of SUB_M queries, which bounds the S^T and dP^T registers while BLOCK_M sets the
// number of barriers and the dQ tile. With ATOMIC_DQ (FLASH_DQ_ATOMIC) the block also writes dS^T
// to shared memory (double-buffered too) and, after the one barrier that starts the next Q block,
// every warp adds a (32, HS*BLOCK_M/32/NWARPS) piece of that block's dQ = dS K to the
// accumulator (add_dq), so the dQ matmul and its atomics overlap the next block's work instead
// of waiting at a second barrier. The kernel: the tile order, the loads of K, V and each Q block,
// the loop over the Q blocks (kv_q_block: per sub-block S^T and dP^T, P^T and dS^T, dV and dK),
// the last block's dQ, and the epilogue (kv_store_dk_dv).

// The kernel's shared memory, in this order.
template <int HS, int BLOCK_M, int NWARPS, bool ATOMIC_DQ>
struct KvTiles {
    static constexpr int BLOCK_N = 16 * NWARPS, S = PaddedRow<HS>::stride, SDS = PaddedRow<BLOCK_M>::stride;
    bf16* sK;     // (BLOCK_N, HS), later the dK staging area
    bf16* sV;     // (BLOCK_N, HS), later the dV staging area
    bf16* sQ;     // 2 stages of (BLOCK_M, HS)
    bf16* sdO;    // 2 stages of (BLOCK_M, HS)
    bf16* sdS;    // 2 stages of (BLOCK_N, BLOCK_M): dS^T, ATOMIC_DQ only
    float* sL;    // 2 stages of (BLOCK_M)
    float* sD;    // 2 stages of (BLOCK_M)
    __device__ __forceinline__ explicit KvTiles(unsigned char* smem) {
        sK = reinterpret_cast<bf16*>(smem);
        sV = sK + BLOCK_N * S;
        sQ = sV + BLOCK_N * S;
        sdO = sQ + 2 * BLOCK_M * S;
        sdS = sdO + 2 * BLOCK_M * S;
        sL = reinterpret_cast<float*>(sdS + (ATOMIC_DQ ? 2 * BLOCK_N * SDS : 0));
        sD = sL + 2 * BLOCK_M;
    }
};

// dQ (BLOCK_M, HS) of the Q block at q0 += dS K = (dS^T)^T K, from its dS^T in ds_tile: warp ->
// rows 32*strip.. (two m-tiles, so every K fragment feeds both), columns c0..c0+DQ_COLS, added to
// the accumulator (B, NH, T, HS) of head bh with atomics.
template <int HS, int BLOCK_M, int NWARPS>
__device__ __forceinline__ void add_dq(float* dq_accum, const bf16* ds_tile, const bf16* sK, int q0, int bh, int T,
                                       int warp, int g, int t) {
    constexpr int BLOCK_N = 16 * NWARPS, S = PaddedRow<HS>::stride, SDS = PaddedRow<BLOCK_M>::stride;
    constexpr int STRIPS = BLOCK_M / 32;
    constexpr int DQ_COLS = HS * STRIPS / NWARPS;
    static_assert(DQ_COLS % 16 == 0, "dQ tiles of whole 16-column pairs");
    int strip = warp % STRIPS, c0 = (warp / STRIPS) * DQ_COLS;
    float dq[2][DQ_COLS / 8][4] = {};
    for (int kk = 0; kk < BLOCK_N / 16; kk++) {
        uint32_t dsa[2][4];
        for (int mt = 0; mt < 2; mt++) load_a_trans(dsa[mt], ds_tile, SDS, strip * 32 + mt * 16, kk * 16);
        for (int dp = 0; dp < DQ_COLS / 16; dp++) {
            uint32_t kb[4];
            load_b_kn(kb, sK, S, kk * 16, c0 + dp * 16);
            for (int mt = 0; mt < 2; mt++) {
                mma_bf16(dq[mt][2 * dp], dsa[mt], kb[0], kb[1]);
                mma_bf16(dq[mt][2 * dp + 1], dsa[mt], kb[2], kb[3]);
            }
        }
    }
    for (int mt = 0; mt < 2; mt++)
        for (int half = 0; half < 2; half++) {
            int query = q0 + strip * 32 + mt * 16 + g + 8 * half;
            if (query >= T) continue;
            float* dst = dq_accum + ((long long)bh * T + query) * HS + c0 + 2 * t;
            for (int dt = 0; dt < DQ_COLS / 8; dt++) {
#if __CUDA_ARCH__ >= 900
                atomicAdd(reinterpret_cast<float2*>(dst + dt * 8),
                          make_float2(dq[mt][dt][2 * half], dq[mt][dt][2 * half + 1]));
#else
                atomicAdd(dst + dt * 8, dq[mt][dt][2 * half]);
                atomicAdd(dst + dt * 8 + 1, dq[mt][dt][2 * half + 1]);
#endif
            }
        }
}

// dK (times scale) and dV through this warp's rows of sK and sV, then whole-row stores of the
// warp's 16 keys from warp_k0.
template <int HS>
__device__ __forceinline__ void kv_store_dk_dv(const AttentionParams& p, bf16* sK, bf16* sV, const float (&dk)[HS / 8][4],
                                               const float (&dv)[HS / 8][4], int b, int h, int warp, int warp_k0, int T) {
    for (int dt = 0; dt < HS / 8; dt++) {
        store_c_tile<HS>(sK, warp * 16, dt * 8, dk[dt], p.shape.scale, p.shape.scale);
        store_c_tile<HS>(sV, warp * 16, dt * 8, dv[dt], 1.0f, 1.0f);
    }
    __syncwarp();
    store_rows_warp<16, HS>(head_rows(p.dk, b, h) + warp_k0 * p.dk.row, p.dk.row, sK, warp * 16, T - warp_k0);
    store_rows_warp<16, HS>(head_rows(p.dv, b, h) + warp_k0 * p.dv.row, p.dv.row, sV, warp * 16, T - warp_k0);
}

// MASKED: the last query that sees each of a thread's keys (rows g and g + 8 of its warp), and
// each of its warp's first and last keys.
struct KeyRowsHi { int key[2], warp_first, warp_last; };

// One Q block (from q0, in `stage`), sub-block by sub-block of SUB_M queries: S^T and dP^T,
// then P^T and dS^T, then dV += P^T dO and dK += dS^T Q; with ATOMIC_DQ, dS^T to shared memory
// for the block's dQ (add_dq, at the start of the next block).
template <int HS, int BLOCK_M, int SUB_M, int NWARPS, bool ATOMIC_DQ, bool KV_IN_REGS, bool MASKED>
__device__ __forceinline__ void kv_q_block(float (&dk)[HS / 8][4], float (&dv)[HS / 8][4],
                                           const uint32_t (&k_frag)[KV_IN_REGS ? HS / 16 : 1][4],
                                           const uint32_t (&v_frag)[KV_IN_REGS ? HS / 16 : 1][4],
                                           const KvTiles<HS, BLOCK_M, NWARPS, ATOMIC_DQ>& tiles, int stage, int q0,
                                           int warp_k0, int warp, int g, int t, int T, int causal, float scale_log2,
                                           const KeyRowsHi& hi) {
    using Tiles = KvTiles<HS, BLOCK_M, NWARPS, ATOMIC_DQ>;
    constexpr int BLOCK_N = Tiles::BLOCK_N, S = Tiles::S, SDS = Tiles::SDS;
    const bf16* q_tile = tiles.sQ + stage * BLOCK_M * S;
    const bf16* do_tile = tiles.sdO + stage * BLOCK_M * S;
    const float* l_blk = tiles.sL + stage * BLOCK_M;
    const float* d_blk = tiles.sD + stage * BLOCK_M;
    bf16* ds_tile = tiles.sdS + stage * BLOCK_N * SDS;
    for (int m0 = 0; m0 < BLOCK_M; m0 += SUB_M) {   // the sub-block: queries q0+m0..
        int qs = q0 + m0;
        // Causal: on the diagonal a warp may find all its keys after every query of the sub-block;
        // masked, at the end every query after all of its keys' windows.
        if ((causal && warp_k0 > qs + SUB_M - 1) || (MASKED && qs > hi.warp_last)) {
            if (ATOMIC_DQ) {
                const float zero[4] = {0.f, 0.f, 0.f, 0.f};
                for (int nt = 0; nt < SUB_M / 8; nt++)
                    store_c_tile<BLOCK_M>(ds_tile, warp * 16, m0 + nt * 8, zero, 1.0f, 1.0f);
            }
            continue;
        }
        // S^T = K Q^T and dP^T = V dO^T: (16 keys, SUB_M queries) per warp; K and V as A
        // fragments, kept in registers (KV_IN_REGS) or read per k-step.
        float st[SUB_M / 8][4] = {}, dpt[SUB_M / 8][4] = {};
        for (int kk = 0; kk < HS / 16; kk++) {
            uint32_t ka[4], va[4];
            if constexpr (KV_IN_REGS) {
                for (int r = 0; r < 4; r++) { ka[r] = k_frag[kk][r]; va[r] = v_frag[kk][r]; }
            } else {
                load_a(ka, tiles.sK, S, warp * 16, kk * 16);
                load_a(va, tiles.sV, S, warp * 16, kk * 16);
            }
            for (int np = 0; np < SUB_M / 16; np++) {
                uint32_t qb[4], dob[4];
                load_b_nk(qb, q_tile, S, m0 + np * 16, kk * 16);
                mma_bf16(st[2 * np], ka, qb[0], qb[1]);
                mma_bf16(st[2 * np + 1], ka, qb[2], qb[3]);
                load_b_nk(dob, do_tile, S, m0 + np * 16, kk * 16);
                mma_bf16(dpt[2 * np], va, dob[0], dob[1]);
                mma_bf16(dpt[2 * np + 1], va, dob[2], dob[3]);
            }
        }
        // P^T = exp(scale*S^T - L) and dS^T = P^T * (dP^T - D), L and D per query (column).
        // Masked: queries past T, keys past T and (causal) keys after the query; with a key
        // window, queries past a key's window.
        if (qs + SUB_M > T || warp_k0 + 16 > T || (causal && warp_k0 + 15 > qs) ||
            (MASKED && qs + SUB_M - 1 > hi.warp_first)) {
            VisibleColumns seen[2];
            if constexpr (MASKED) {
                seen[0] = queries_in_window(warp_k0 + g, qs + 2 * t, T, hi.key[0], causal);
                seen[1] = queries_in_window(warp_k0 + g + 8, qs + 2 * t, T, hi.key[1], causal);
            } else {
                seen[0] = queries_seeing(warp_k0 + g, qs + 2 * t, T, causal);
                seen[1] = queries_seeing(warp_k0 + g + 8, qs + 2 * t, T, causal);
            }
            mask_tile<SUB_M / 8>(&st[0][0], seen);
        }
        probabilities_by_column<SUB_M / 8>(&st[0][0], [&](int nt) {
            float2 l = *reinterpret_cast<const float2*>(l_blk + m0 + nt * 8 + 2 * t);
            return make_float2(l.x * (float)M_LOG2E, l.y * (float)M_LOG2E);
        }, scale_log2);
        score_grads_by_column<SUB_M / 8>(&dpt[0][0], &st[0][0], [&](int nt) {
            return *reinterpret_cast<const float2*>(d_blk + m0 + nt * 8 + 2 * t);
        });
        // dV += P^T dO and dK += dS^T Q (scale applied once at the end): (16 keys, HS).
        for (int kq = 0; kq < SUB_M / 16; kq++) {
            uint32_t pa[4], dsa[4];
            c_to_a(pa, st[2 * kq], st[2 * kq + 1]);
            c_to_a(dsa, dpt[2 * kq], dpt[2 * kq + 1]);
            for (int dp = 0; dp < HS / 16; dp++) {
                uint32_t dob[4], qb[4];
                load_b_kn(dob, do_tile, S, m0 + kq * 16, dp * 16);
                mma_bf16(dv[2 * dp], pa, dob[0], dob[1]);
                mma_bf16(dv[2 * dp + 1], pa, dob[2], dob[3]);
                load_b_kn(qb, q_tile, S, m0 + kq * 16, dp * 16);
                mma_bf16(dk[2 * dp], dsa, qb[0], qb[1]);
                mma_bf16(dk[2 * dp + 1], dsa, qb[2], qb[3]);
            }
        }
        if (ATOMIC_DQ)
            for (int nt = 0; nt < SUB_M / 8; nt++)
                store_c_tile<BLOCK_M>(ds_tile, warp * 16, m0 + nt * 8, dpt[nt], 1.0f, 1.0f);
    }
}

template <int HS, int BLOCK_M, int SUB_M, int NWARPS, bool ATOMIC_DQ, bool MASKED>
__global__ void __launch_bounds__(NWARPS * 32)
flash_backward_kv_kernel(const AttentionParams p, float* dq_accum, const float* delta, const AttentionMask mask) {
    using Tiles = KvTiles<HS, BLOCK_M, NWARPS, ATOMIC_DQ>;
    constexpr int NTHREADS = NWARPS * 32, BLOCK_N = Tiles::BLOCK_N, S = Tiles::S, SDS = Tiles::SDS;
    static_assert(BLOCK_M % SUB_M == 0 && SUB_M % 16 == 0, "Q sub-blocks of whole 16-query tiles");
    extern __shared__ __align__(16) unsigned char smem[];
    const Tiles tiles(smem);

    const int T = p.shape.T, NH = p.shape.NH, BH = p.shape.B * NH, causal = p.shape.causal;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    // Causal work shrinks with the key index: the first K/V blocks are issued first.
    int kv_block = blockIdx.x / BH;
    int bh = blockIdx.x % BH, b = bh / NH, h = bh % NH;
    int k0 = kv_block * BLOCK_N;
    int warp_k0 = k0 + warp * 16;             // first key of this warp
    // Causal: Q blocks entirely before this K/V block never see it; masked, nor those after the
    // window of its last key (hi never decreases along the keys).
    int first_q_block = causal ? k0 / BLOCK_M : 0;
    int n_q_blocks = (int)ceil_div(T, BLOCK_M);
    KeyRowsHi hi;   // keys past T take key T - 1's
    if constexpr (MASKED) {
        const KeyWindow window(mask, b, T);
        n_q_blocks = window.end_block(min(k0 + BLOCK_N - 1, T - 1), BLOCK_M);
        hi.warp_first = window.hi(min(warp_k0, T - 1));
        hi.warp_last = window.hi(min(warp_k0 + 15, T - 1));
        hi.key[0] = window.hi(min(warp_k0 + g, T - 1));
        hi.key[1] = window.hi(min(warp_k0 + g + 8, T - 1));
    }
    // The Q and dO blocks being loaded, from the first on, advanced a block at a time by
    // load_q_block: fewer registers than offsets from the head's row 0.
    const bf16* q_ptr = head_rows(p.q, b, h) + first_q_block * BLOCK_M * p.q.row;
    const bf16* do_ptr = head_rows(p.dout, b, h) + first_q_block * BLOCK_M * p.dout.row;
    const float* l_ptr = p.lse.ptr + b * p.lse.batch + (long long)h * p.lse.head;
    const float* d_ptr = delta + (long long)bh * T;

    auto load_q_block = [&](int i, int stage) {
        int q0 = i * BLOCK_M;
        load_tile_async<BLOCK_M, HS, NTHREADS>(tiles.sQ + stage * BLOCK_M * S, q_ptr, p.q.row, T - q0);
        load_tile_async<BLOCK_M, HS, NTHREADS>(tiles.sdO + stage * BLOCK_M * S, do_ptr, p.dout.row, T - q0);
        q_ptr += BLOCK_M * p.q.row;
        do_ptr += BLOCK_M * p.dout.row;
        load_vec_async<BLOCK_M, NTHREADS>(tiles.sL + stage * BLOCK_M, l_ptr + q0, T - q0);
        load_vec_async<BLOCK_M, NTHREADS>(tiles.sD + stage * BLOCK_M, d_ptr + q0, T - q0);
    };
    load_tile_async<BLOCK_N, HS, NTHREADS>(tiles.sK, head_rows(p.k, b, h) + k0 * p.k.row, p.k.row, T - k0);
    load_tile_async<BLOCK_N, HS, NTHREADS>(tiles.sV, head_rows(p.v, b, h) + k0 * p.v.row, p.v.row, T - k0);
    cp_async_commit();
    load_q_block(first_q_block, 0);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();   // K and V in place; the first Q block may still be on its way
    // HS 64: the warp's K and V rows as A fragments, 32 registers kept for the whole loop.
    // HS 128 would need 64 next to 128 for dK and dV: there they are read again per sub-block.
    constexpr bool KV_IN_REGS = HS == 64;
    uint32_t k_frag[KV_IN_REGS ? HS / 16 : 1][4], v_frag[KV_IN_REGS ? HS / 16 : 1][4];
    if constexpr (KV_IN_REGS)
        for (int kk = 0; kk < HS / 16; kk++) {
            load_a(k_frag[kk], tiles.sK, S, warp * 16, kk * 16);
            load_a(v_frag[kk], tiles.sV, S, warp * 16, kk * 16);
        }

    float dk[HS / 8][4] = {}, dv[HS / 8][4] = {};
    const float scale_log2 = p.shape.scale * (float)M_LOG2E;

    for (int i = first_q_block; i < n_q_blocks; i++) {
        int stage = (i - first_q_block) & 1, q0 = i * BLOCK_M;
        cp_async_wait<0>();
        // One barrier per Q block: block i is in place for every thread; every thread is done
        // with block i-1's Q/dO (so its stage takes block i+1, loading while block i is used)
        // and has written block i-1's dS^T (so its dQ can be added now, overlapping block i).
        __syncthreads();
        if (i + 1 < n_q_blocks) {
            load_q_block(i + 1, stage ^ 1);
            cp_async_commit();
        }
        if (ATOMIC_DQ && i > first_q_block)
            add_dq<HS, BLOCK_M, NWARPS>(dq_accum, tiles.sdS + (stage ^ 1) * BLOCK_N * SDS, tiles.sK, q0 - BLOCK_M, bh, T,
                                        warp, g, t);
        kv_q_block<HS, BLOCK_M, SUB_M, NWARPS, ATOMIC_DQ, KV_IN_REGS, MASKED>(dk, dv, k_frag, v_frag, tiles, stage, q0,
                                                                              warp_k0, warp, g, t, T, causal,
                                                                              scale_log2, hi);
    }
    __syncthreads();   // the last dS^T in place; after this, every warp is done with sV
    if (ATOMIC_DQ) {
        int last = n_q_blocks - 1;
        add_dq<HS, BLOCK_M, NWARPS>(dq_accum, tiles.sdS + ((last - first_q_block) & 1) * BLOCK_N * SDS, tiles.sK,
                                    last * BLOCK_M, bh, T, warp, g, t);
        __syncthreads();   // every warp is done with sK
    }
    kv_store_dk_dv<HS>(p, tiles.sK, tiles.sV, dk, dv, b, h, warp, warp_k0, T);
}

// Deterministic dQ: thread block per Q block of 16*NWARPS rows (warp w owns 16 of them, with
// their Q and dO fragments in registers), looping over the K/V blocks in order:
// S = Q K^T, dP = dO V^T, dS = P * (dP - D), dQ += dS K, all in registers.
template <int HS, int NWARPS, int BLOCK_N, bool MASKED>
__global__ void __launch_bounds__(NWARPS * 32)
flash_backward_dq_kernel(const AttentionParams p, const float* delta, const AttentionMask mask) {
    constexpr int NTHREADS = NWARPS * 32;
    constexpr int BLOCK_M = 16 * NWARPS;
    constexpr int S = PaddedRow<HS>::stride;
    extern __shared__ __align__(16) unsigned char smem[];
    bf16* sQ = reinterpret_cast<bf16*>(smem);     // (BLOCK_M, HS), later the dQ staging area
    bf16* sdO = sQ + BLOCK_M * S;                  // (BLOCK_M, HS)
    bf16* sK = sdO + BLOCK_M * S;                  // 2 stages of (BLOCK_N, HS)
    bf16* sV = sK + 2 * BLOCK_N * S;               // 2 stages of (BLOCK_N, HS)

    const int T = p.shape.T, NH = p.shape.NH, BH = p.shape.B * NH, causal = p.shape.causal;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    int n_q_blocks = (int)ceil_div(T, BLOCK_M), q_block = n_q_blocks - 1 - blockIdx.x / BH;
    int bh = blockIdx.x % BH, b = bh / NH, h = bh % NH;
    int q0 = q_block * BLOCK_M, warp_q0 = q0 + warp * 16;
    // Masked, as the forward: from the block of the first row's first key; this thread's rows'
    // first keys and the warp's first and last rows' (rows past T take row T - 1's).
    int first_kv_block = 0, row_lo[2], warp_lo_first = 0, warp_lo_last = 0;
    if constexpr (MASKED) {
        const KeyWindow window(mask, b, T);
        first_kv_block = window.first_block(q0, BLOCK_N);
        warp_lo_first = window.lo(min(warp_q0, T - 1));
        warp_lo_last = window.lo(min(warp_q0 + 15, T - 1));
        for (int half = 0; half < 2; half++) row_lo[half] = window.lo(min(warp_q0 + g + 8 * half, T - 1));
    }
    // The K and V blocks being loaded, advanced a block at a time: fewer registers than offsets
    // from the head's row 0.
    const bf16* k_ptr = head_rows(p.k, b, h) + first_kv_block * BLOCK_N * p.k.row;
    const bf16* v_ptr = head_rows(p.v, b, h) + first_kv_block * BLOCK_N * p.v.row;
    int n_kv_blocks = (int)ceil_div(causal ? min(q0 + BLOCK_M, T) : T, BLOCK_N);

    load_tile_async<BLOCK_M, HS, NTHREADS>(sQ, head_rows(p.q, b, h) + q0 * p.q.row, p.q.row, T - q0);
    load_tile_async<BLOCK_M, HS, NTHREADS>(sdO, head_rows(p.dout, b, h) + q0 * p.dout.row, p.dout.row, T - q0);
    load_tile_async<BLOCK_N, HS, NTHREADS>(sK, k_ptr, p.k.row, T - first_kv_block * BLOCK_N);
    load_tile_async<BLOCK_N, HS, NTHREADS>(sV, v_ptr, p.v.row, T - first_kv_block * BLOCK_N);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    uint32_t q_frag[HS / 16][4], do_frag[HS / 16][4];
    for (int kk = 0; kk < HS / 16; kk++) {
        load_a(q_frag[kk], sQ, S, warp * 16, kk * 16);
        load_a(do_frag[kk], sdO, S, warp * 16, kk * 16);
    }
    // L (in log2 units) and D of this thread's rows g and g+8. Rows past T (Q and dO zero, so
    // dS 0) are never stored, and a row of dS adds to its own row of dQ only: they need no mask.
    float l2[2], d[2];
    const float* lse = p.lse.ptr + b * p.lse.batch + (long long)h * p.lse.head;
    for (int half = 0; half < 2; half++) {
        int row = warp_q0 + g + 8 * half;
        l2[half] = row < T ? lse[row] * (float)M_LOG2E : 0.0f;
        d[half] = row < T ? delta[(long long)bh * T + row] : 0.0f;
    }
    const float scale_log2 = p.shape.scale * (float)M_LOG2E;
    float dq[HS / 8][4] = {};

    for (int j = first_kv_block; j < n_kv_blocks; j++) {
        int stage = (j - first_kv_block) & 1, kv0 = j * BLOCK_N;
        cp_async_wait<0>();
        __syncthreads();   // block j in place, block j-1 done with: its stage takes block j+1
        if (j + 1 < n_kv_blocks)
            load_next_kv_block<BLOCK_N, HS, NTHREADS>(sK, sV, stage ^ 1, k_ptr, p.k.row, v_ptr, p.v.row, T - (kv0 + BLOCK_N));
        const bf16* k_tile = sK + stage * BLOCK_N * S;
        const bf16* v_tile = sV + stage * BLOCK_N * S;

        if (!(causal && kv0 > warp_q0 + 15) && !(MASKED && kv0 + BLOCK_N - 1 < warp_lo_first)) {
            // 16 keys at a time: S = Q K^T and dP = dO V^T, then dS = P * (dP - D) packed to bf16
            // at once, so that S and dP are live in fp32 for 16 keys, not the block: fewer registers.
            bool need_mask = kv0 + BLOCK_N > T || (causal && kv0 + BLOCK_N - 1 > warp_q0) ||
                             (MASKED && kv0 < warp_lo_last);
            uint32_t dsa[BLOCK_N / 16][4];
            #pragma unroll   // sc and dp stay in registers only while every index is a constant
            for (int np = 0; np < BLOCK_N / 16; np++) {
                float sc[2][4] = {}, dp[2][4] = {};
                for (int kk = 0; kk < HS / 16; kk++) {
                    uint32_t kb[4], vb[4];
                    load_b_nk(kb, k_tile, S, np * 16, kk * 16);
                    mma_bf16(sc[0], q_frag[kk], kb[0], kb[1]);
                    mma_bf16(sc[1], q_frag[kk], kb[2], kb[3]);
                    load_b_nk(vb, v_tile, S, np * 16, kk * 16);
                    mma_bf16(dp[0], do_frag[kk], vb[0], vb[1]);
                    mma_bf16(dp[1], do_frag[kk], vb[2], vb[3]);
                }
                if (need_mask) {
                    int row = warp_q0 + g, key0 = kv0 + np * 16 + 2 * t;
                    VisibleColumns seen[2];
                    if constexpr (MASKED) {
                        seen[0] = keys_in_window(row, key0, T, row_lo[0], causal);
                        seen[1] = keys_in_window(row + 8, key0, T, row_lo[1], causal);
                    } else {
                        seen[0] = keys_seen(row, key0, T, causal);
                        seen[1] = keys_seen(row + 8, key0, T, causal);
                    }
                    mask_tile<2>(&sc[0][0], seen);
                }
                probabilities_by_row<2>(&sc[0][0], l2, scale_log2);
                score_grads_by_row<2>(&dp[0][0], &sc[0][0], d);   // dP becomes dS
                c_to_a(dsa[np], dp[0], dp[1]);
            }
            for (int kk = 0; kk < BLOCK_N / 16; kk++)
                for (int dp2 = 0; dp2 < HS / 16; dp2++) {
                    uint32_t kb[4];
                    load_b_kn(kb, k_tile, S, kk * 16, dp2 * 16);
                    mma_bf16(dq[2 * dp2], dsa[kk], kb[0], kb[1]);
                    mma_bf16(dq[2 * dp2 + 1], dsa[kk], kb[2], kb[3]);
                }
        }
    }

    for (int dt = 0; dt < HS / 8; dt++) store_c_tile<HS>(sQ, warp * 16, dt * 8, dq[dt], p.shape.scale, p.shape.scale);
    __syncwarp();
    store_rows_warp<16, HS>(head_rows(p.dq, b, h) + warp_q0 * p.dq.row, p.dq.row, sQ, warp * 16, T - warp_q0);
}

template <int HS, int NWARPS, int BLOCK_N, bool MASKED>
static void launch_dq(const AttentionParams* p, const AttentionMask* mask, const float* delta, cudaStream_t stream) {
    constexpr int BLOCK_M = 16 * NWARPS, S = PaddedRow<HS>::stride;
    constexpr int smem = (2 * BLOCK_M + 4 * BLOCK_N) * S * (int)sizeof(bf16);
    constexpr auto kernel = flash_backward_dq_kernel<HS, NWARPS, BLOCK_N, MASKED>;
    raise_smem_limit<kernel>("flash_attention_backward_mma", smem);
    int n_q_blocks = (int)ceil_div(p->shape.T, BLOCK_M);
    kernel<<<n_q_blocks * p->shape.B * p->shape.NH, NWARPS * 32, smem, stream>>>(*p, delta, attention_mask_or_none(mask));
    cudaCheckLaunch();
}

// Q blocks of 64 rows (4 warps), K/V blocks of 64 keys (32 for HS 128).
template <bool MASKED>
static void flash_backward_dq_separate(const AttentionParams* p, const AttentionMask* mask, const float* delta,
                                       cudaStream_t stream) {
    if (p->shape.HS == 64) launch_dq<64, 4, 64, MASKED>(p, mask, delta, stream);
    else                   launch_dq<128, 4, 32, MASKED>(p, mask, delta, stream);
}

// The K/V kernel, with the atomic dQ or without dQ, from a dynamic shared-memory size of kv_smem
// bytes.
template <int HS, int BLOCK_M, int SUB_M, int NWARPS, bool ATOMIC_DQ, bool MASKED>
static void launch_kv(const AttentionParams* p, const AttentionMask* mask, BackwardScratch w, int kv_smem,
                      cudaStream_t stream) {
    constexpr int BLOCK_N = 16 * NWARPS;
    constexpr auto kernel = flash_backward_kv_kernel<HS, BLOCK_M, SUB_M, NWARPS, ATOMIC_DQ, MASKED>;
    raise_smem_limit<kernel>("flash_attention_backward_mma", kv_smem);
    int n_kv_blocks = (int)ceil_div(p->shape.T, BLOCK_N);
    kernel<<<n_kv_blocks * p->shape.B * p->shape.NH, NWARPS * 32, kv_smem, stream>>>(*p, (float*)w.dq_accum, w.delta,
                                                                                      attention_mask_or_none(mask));
    cudaCheckLaunch();
}

template <int HS, int BLOCK_M, int SUB_M, int NWARPS, bool MASKED>
static void launch_backward(const AttentionParams* p, const AttentionMask* mask, void* scratch, FlashDq dq,
                            cudaStream_t stream) {
    BackwardScratch w = flash_backward_scratch(p->shape, scratch);
    flash_backward_prepass(p, w, dq, stream);
    constexpr int BLOCK_N = 16 * NWARPS, S = PaddedRow<HS>::stride;
    int kv_smem = (2 * BLOCK_N + 4 * BLOCK_M) * S * (int)sizeof(bf16) + 4 * BLOCK_M * (int)sizeof(float);
    if (dq == FLASH_DQ_SEPARATE) {
        launch_kv<HS, BLOCK_M, SUB_M, NWARPS, false, MASKED>(p, mask, w, kv_smem, stream);
        flash_backward_dq_separate<MASKED>(p, mask, w.delta, stream);
        return;
    }
    kv_smem += 2 * BLOCK_N * PaddedRow<BLOCK_M>::stride * (int)sizeof(bf16);   // dS^T
    launch_kv<HS, BLOCK_M, SUB_M, NWARPS, true, MASKED>(p, mask, w, kv_smem, stream);
    flash_backward_dq_convert(p, w, dq, stream);
}

void flash_attention_backward_mma(const AttentionParams* p, const AttentionMask* mask, void* scratch, FlashDq dq,
                                  cudaStream_t stream) {
    // No fixed-point path here: on an H200 it measured 5-19% slower than the separate dQ kernel
    // at every shape, so every deterministic dQ takes that.
    if (dq == FLASH_DQ_FIXED) dq = FLASH_DQ_SEPARATE;
    // K/V blocks of 128 keys (8 warps x 16). HS 64: Q blocks of 128 queries in sub-blocks of
    // 64 (dK + dV 64 regs, K and V fragments 32, S^T + dP^T 64); HS 128: Q blocks of 64 in
    // sub-blocks of 16 (dK + dV 128 regs, S^T + dP^T 16, K and V read from shared memory).
    bool masked = attention_mask_active(mask);
    if (p->shape.HS == 64) {
        if (masked) launch_backward<64, 128, 64, 8, true>(p, mask, scratch, dq, stream);
        else        launch_backward<64, 128, 64, 8, false>(p, mask, scratch, dq, stream);
    } else {
        if (masked) launch_backward<128, 64, 16, 8, true>(p, mask, scratch, dq, stream);
        else        launch_backward<128, 64, 16, 8, false>(p, mask, scratch, dq, stream);
    }
}
