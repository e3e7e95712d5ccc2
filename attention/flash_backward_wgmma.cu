// attention/flash_backward_wgmma.cu: the FlashAttention backward pass on Hopper's warpgroup
// tensor cores (wgmma, sm_90a). Same function as flash_backward.cu:
//   in:  dO, O (B, T, NH, HS) bf16; L (B, NH, T) fp32 from the forward; qkv (B, T, 3, NH, HS)
//   out: dqkv (B, T, 3, NH, HS) bf16, every element written
// Around the kernel, the shared steps of flash_backward_steps.cu: D = rowsum(dO * O) before,
// the fp32 dQ accumulator to bf16 after.
// One thread block per K/V block of 128 keys: a producer warpgroup that copies Q, dO, L and D
// into two stages (full/empty mbarriers), and two consumer warpgroups; consumer w owns keys
// 64w..64w+63 and keeps their dK and dV in registers while the block walks over the Q blocks
// that see it (BLOCK_M = 8192 / HS queries each). Per Q block, per consumer:
//   S^T = K Q^T, dP^T = V dO^T             (64 keys x BLOCK_M queries, both operands in smem)
//   P^T = exp(scale S^T - L), dS^T = P^T (dP^T - D)     (registers; L, D per query = column)
//   dV += P^T dO, dK += dS^T Q              (P^T, dS^T from registers: the accumulators repacked)
//   dQ += dS K                              (dS^T through smem, so issued in the next Q block,
//                                            when both consumers' dS^T are there; the 64 x 64
//                                            piece of this warpgroup, added to the accumulator
//                                            by TMA bulk reductions: fp32, or fixed point for the
//                                            same bits on every run)
// The transposed products put the keys in the rows, the M side of wgmma, so P^T and dS^T come
// out of S^T and dP^T as A operands of the dV and dK products without leaving registers. The
// tiles of Q, K, V and dO arrive by TMA (device/tma.cuh) in the swizzled layout of
// device/wgmma.cuh.
// With FLASH_DQ_SEPARATE (short T, where it measured faster) that kernel runs without the dQ
// part (dK and dV only, prepass without the accumulator), then a second kernel, one thread block
// per Q block looping over the K/V blocks in order, which computes dQ on its own and writes it
// as bf16: no atomics, the same bits on every run, for 7 matmuls instead of 5 (S and dP are
// recomputed there).
// MASKED (a key window per row, params.h's AttentionMask): a K/V block walks the Q blocks from
// the first that sees it to the one of its last key's window's last query, a dQ block the K/V
// blocks from its first row's first key, and the blocks that cut a window are masked.
#include <math.h>
#include <string.h>
#include "attention/flash.h"
#include "attention/grid_order.cuh"
#include "attention/mask.h"
#include "attention/softmax.cuh"
#include "attention/tensor_maps.cuh"
#include "device/smem.cuh"
#include "device/tma.cuh"
#include "device/wgmma.cuh"

// BLOCK_M x HS = 8192 for both head sizes, so the dQ tile of a Q block splits into two 64 x 64
// pieces, one per consumer warpgroup: for HS 64 the two halves of the queries, for HS 128 the
// two halves of the dimensions. DQ (flash.h) says how they are added: FLASH_DQ_ATOMIC as fp32,
// FLASH_DQ_FIXED as integers (each row times its 2^shift, flash_backward_steps.cu);
// FLASH_DQ_SEPARATE computes dK and dV only (no dS^T tile, no dQ product; map_dq unused).
// Three warpgroups: warpgroup 0 is the producer (one warp: a thread issues the TMA copies, all
// lanes copy L and D; few registers), warpgroups 1 and 2 the consumers (the math, with the
// registers the producer gave back), then the epilogue writes dK and dV. They meet only at
// mbarriers: full[s] says stage s holds its Q block, empty[s] that every consumer thread is done
// with it; between the consumers, ds[b] that dS^T buffer b holds both halves of a Q block's dS^T,
// ds[2 + b] that both dQ products have read them.
template <int HS, FlashDq DQ>
struct KvBlock {
    static constexpr int BLOCK_N = 128, BLOCK_M = 8192 / HS, CONSUMERS = 256;
    static constexpr bool ATOMIC_DQ = DQ != FLASH_DQ_SEPARATE, FIXED = DQ == FLASH_DQ_FIXED;   // dQ here; in fixed point
    static constexpr int KV_BYTES = BLOCK_N * HS * (int)sizeof(bf16), Q_BYTES = BLOCK_M * HS * (int)sizeof(bf16);
    static constexpr int DS_BYTES = ATOMIC_DQ ? BLOCK_N * BLOCK_M * (int)sizeof(bf16) : 0;
    static constexpr int DQ_BYTES = ATOMIC_DQ ? 64 * 64 * (int)sizeof(float) : 0;
    // K, V, 2 stages of Q and dO, 2 buffers of dS^T and 2 dQ pieces (ATOMIC_DQ), 2 stages of L,
    // D and the fixed-point scales, the scheduling anchor, and room to align the start to 1024
    // bytes.
    static constexpr int SMEM = 2 * KV_BYTES + 4 * Q_BYTES + 2 * DS_BYTES + 2 * DQ_BYTES +
                                6 * BLOCK_M * (int)sizeof(float) + 256 * (int)sizeof(uint32_t) + 1024;

    unsigned char* sK;     // (BLOCK_N, HS), later dK
    unsigned char* sV;     // (BLOCK_N, HS), later dV
    unsigned char* sQ;     // 2 stages of (BLOCK_M, HS)
    unsigned char* sdO;    // 2 stages of (BLOCK_M, HS)
    unsigned char* sdS;    // 2 buffers of dS^T (BLOCK_N, BLOCK_M)
    unsigned char* sdQ;    // a dQ piece (64, 64) of 4-byte values per consumer warpgroup
    float* sL;             // 2 stages of (BLOCK_M)
    float* sD;             // 2 stages of (BLOCK_M)
    float* sF;             // FIXED: 2 stages of (BLOCK_M), dq_fixed_scale
    uint32_t* sched_anchor;   // (256), see the consumer
    uint64_t* bar_kv;      // K and V have landed
    uint64_t* bar_full;    // [2]
    uint64_t* bar_empty;   // [2]
    uint64_t* bar_ds;      // [4]
    int b, h, bh, k0;      // the tile: keys k0.. of head h of sequence b
    int first_q_block, n_q_blocks;

    // Swizzle atoms must start on 1024-byte boundaries; the launcher adds 1024 bytes for this.
    __device__ KvBlock(unsigned char* smem_raw, uint64_t* bars) {
        sK = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
        sV = sK + KV_BYTES;
        sQ = sV + KV_BYTES;
        sdO = sQ + 2 * Q_BYTES;
        sdS = sdO + 2 * Q_BYTES;
        sdQ = sdS + 2 * DS_BYTES;
        sL = reinterpret_cast<float*>(sdQ + 2 * DQ_BYTES);
        sD = sL + 2 * BLOCK_M;
        sF = sD + 2 * BLOCK_M;
        sched_anchor = reinterpret_cast<uint32_t*>(sF + 2 * BLOCK_M);
        bar_kv = bars;
        bar_full = bars + 1;
        bar_empty = bars + 3;
        bar_ds = bars + 5;
    }
};

// The producer warp: K and V once, then per Q block its Q and dO (one copy per 64-column panel,
// rows past T as zeros), L and D (and the fixed-point scales) into the stage the consumers have
// freed.
template <int HS, FlashDq DQ>
__device__ __forceinline__ void kv_producer(const KvBlock<HS, DQ>& kb, const CUtensorMap* map_k, const CUtensorMap* map_v,
                                            const CUtensorMap* map_q, const CUtensorMap* map_do,
                                            const AttentionParams& params, const float* delta,
                                            const float* dq_fixed_scale) {
    using K = KvBlock<HS, DQ>;
    constexpr int BLOCK_N = K::BLOCK_N, BLOCK_M = K::BLOCK_M;
    const int T = params.shape.T, b = kb.b, h = kb.h;
    int lane = threadIdx.x;
    if (lane == 0) {
        mbarrier_arrive_expect_tx(kb.bar_kv, 2 * K::KV_BYTES);
        #pragma unroll
        for (int panel = 0; panel < HS / 64; panel++) {
            tma_load_4d(kb.sK + panel * BLOCK_N * 128, map_k, panel * 64, h, kb.k0, b, kb.bar_kv);
            tma_load_4d(kb.sV + panel * BLOCK_N * 128, map_v, panel * 64, h, kb.k0, b, kb.bar_kv);
        }
    }
    const float* lse = params.lse.ptr + b * params.lse.batch + (long long)h * params.lse.head;
    const long long bht = (long long)kb.bh * T;
    for (int i = kb.first_q_block; i < kb.n_q_blocks; i++) {
        int n = i - kb.first_q_block, stage = n & 1, q0 = i * BLOCK_M;
        if (n >= 2) mbarrier_wait(&kb.bar_empty[stage], ((n - 2) >> 1) & 1);
        if (lane == 0) {
            mbarrier_expect_tx(&kb.bar_full[stage], 2 * K::Q_BYTES);
            #pragma unroll
            for (int panel = 0; panel < HS / 64; panel++) {
                tma_load_4d(kb.sQ + stage * K::Q_BYTES + panel * BLOCK_M * 128, map_q, panel * 64, h, q0, b, &kb.bar_full[stage]);
                tma_load_4d(kb.sdO + stage * K::Q_BYTES + panel * BLOCK_M * 128, map_do, panel * 64, h, q0, b, &kb.bar_full[stage]);
            }
        }
        // L (in log2 units, as the exponentials take it) and D by plain loads (rows of any
        // length T are not aligned for TMA), zeros past T; the arrival (a release) makes the
        // stores visible to whoever waits on full. L, whose pointer comes from the params struct
        // (of no address space the compiler knows), is read through __ldg: with a plain load
        // the compiler waits for each L before the next, and the HS 64 backward ran 6-8% slower.
        for (int j = lane; j < BLOCK_M; j += 32) {
            bool valid = q0 + j < T;
            kb.sL[stage * BLOCK_M + j] = valid ? __ldg(&lse[q0 + j]) * (float)M_LOG2E : 0.0f;
            kb.sD[stage * BLOCK_M + j] = valid ? delta[bht + q0 + j] : 0.0f;
            if (K::FIXED) kb.sF[stage * BLOCK_M + j] = valid ? dq_fixed_scale[bht + q0 + j] : 0.0f;
        }
        mbarrier_arrive(&kb.bar_full[stage]);
    }
}

// A consumer thread's place, and what it keeps in registers across the Q blocks: warpgroup wg
// (0 or 1) owns keys wg_k0.. (64 of them), warp `warp` 16 of those, the thread keys key0 and
// key0 + 8 (the accumulator layout); the addresses of the stage barriers and of its word of the
// scheduling anchor. The fast kernel keeps the lane and the barriers' addresses in registers
// across the loop (opaque): ptxas otherwise reads threadIdx and the shared-memory window again
// in every Q block and waits for them (HS 128: 3-5% of the backward). Without the dQ part the
// loop measured 1-2% slower with them kept.
template <int HS, FlashDq DQ>
struct KvConsumerThread {
    int wg, warp, lane, t, wg_k0, key0;
    uint32_t full_addr, empty_addr, anchor_addr;

    __device__ __forceinline__ explicit KvConsumerThread(const KvBlock<HS, DQ>& kb) {
        wg = warp_uniform(threadIdx.x / 128 - 1), warp = warp_uniform((threadIdx.x / 32) % 4);
        lane = threadIdx.x % 32;
        full_addr = smem_addr(&kb.bar_full[0]), empty_addr = smem_addr(&kb.bar_empty[0]);
        if constexpr (KvBlock<HS, DQ>::ATOMIC_DQ) {
            lane = (int)opaque(lane);
            full_addr = opaque(full_addr);
            empty_addr = opaque(empty_addr);
        }
        t = lane % 4;
        anchor_addr = smem_addr(kb.sched_anchor) + 4 * (128 * wg + 32 * warp + lane);
        wg_k0 = kb.k0 + wg * 64;
        key0 = wg_k0 + warp * 16 + lane / 4;
    }
};

// ATOMIC_DQ: a consumer warpgroup's dQ pieces. Its piece of a Q block (64 x 64) is queries
// 64*dq_qh.., dimensions 64*dq_dh.. of it, dS K over the block's 128 keys, from the dS^T tile
// both warpgroups store (two buffers; bar_ds[b] says buffer b holds both halves, bar_ds[2 + b]
// that both dQ products have read them). The product of block n is issued in block n + 1; each
// warp then stages its 16 rows of the piece in sdQ_warp, and in the block after that one lane
// adds them to dq_accum with a bulk reduction, once the stores are visible to the async proxy
// (the reduction adds fp32 or int32 as the tensor map says).
template <int HS, FlashDq DQ>
struct DqPieces {
    using K = KvBlock<HS, DQ>;
    static constexpr int BLOCK_N = K::BLOCK_N, BLOCK_M = K::BLOCK_M, DS_BYTES = K::DS_BYTES;
    static constexpr bool FIXED = K::FIXED;
    const K& kb;
    const KvConsumerThread<HS, DQ>& th;
    const CUtensorMap* map_dq;
    unsigned char* sdQ_warp;
    int dq_qh, dq_dh;
    uint32_t sK_addr, ds_full_addr, ds_empty_addr;

    __device__ __forceinline__ DqPieces(const K& block, const KvConsumerThread<HS, DQ>& thread, const CUtensorMap* map,
                                        uint32_t sK_tile)
        : kb(block), th(thread), map_dq(map), sK_addr(sK_tile) {
        dq_qh = HS == 64 ? th.wg : 0, dq_dh = HS == 64 ? 0 : th.wg;
        sdQ_warp = kb.sdQ + th.wg * K::DQ_BYTES + th.warp * 16 * 64 * (int)sizeof(float);
        ds_full_addr = opaque(smem_addr(&kb.bar_ds[0])), ds_empty_addr = ds_full_addr + 16;
    }
    // The staged piece of the Q block from q_start goes out.
    __device__ __forceinline__ void reduce(int q_start) const {
        fence_proxy_async_shared();
        __syncwarp();
        if (th.lane == 0) {
            tma_reduce_add_4d(map_dq, 0, q_start + dq_qh * 64 + th.warp * 16, dq_dh * 2, kb.bh, sdQ_warp);
            bulk_commit();
        }
    }
    // dS^T of block n (keys, queries) into buffer n % 2, once both warpgroups' dQ products of
    // block n-2 have read it, then this thread's arrival on it. A fragment register r of k-step
    // kk holds rows +8*(r&1), columns 16kk + 8*(r>>1) + 2t.
    __device__ __forceinline__ void store_ds(int n, const uint32_t (&dsa)[BLOCK_M / 16][4]) const {
        if (n >= 2) mbarrier_wait(ds_empty_addr + 8 * (n % 2), ((n - 2) >> 1) & 1);
        unsigned char* sdS_blk = kb.sdS + (n % 2) * DS_BYTES;
        #pragma unroll
        for (int kk = 0; kk < BLOCK_M / 16; kk++)
            #pragma unroll
            for (int r = 0; r < 4; r++) {
                int row = th.key0 - kb.k0 + 8 * (r & 1), col = 16 * kk + 8 * (r >> 1);
                *reinterpret_cast<uint32_t*>(sdS_blk + swizzled_offset<BLOCK_N>(row, col) + 4 * th.t) = dsa[kk][r];
            }
        fence_proxy_async_shared();
        mbarrier_arrive(ds_full_addr + 8 * (n % 2));
    }
    // Block n's piece (64 x 64) = dS[queries of the piece, all 128 keys] K[all keys, dims of the
    // piece]: A from the dS^T tile, B from the K tile, both MN-major (one 64-wide panel each).
    __device__ __forceinline__ void issue(float (&dq)[32], int n) const {
        const uint32_t sdS_addr = smem_addr(kb.sdS + (n % 2) * DS_BYTES);
        #pragma unroll
        for (int kk = 0; kk < BLOCK_N / 16; kk++)
            wgmma_ss<64, 1, 1>(dq, desc_mn_major<BLOCK_N>(sdS_addr + dq_qh * BLOCK_N * 128, kk),
                               desc_mn_major<BLOCK_N>(sK_addr + dq_dh * BLOCK_N * 128, kk), kk > 0);
    }
    // The warp's 16 rows of the piece into sdQ_warp (once the reduction before has read them), as
    // the tensor map's box: two panels of 32 columns in the 128-byte swizzle; FIXED: in units of
    // each row's 2^-shift, `fixed` (rows 16*warp + g and + 8 of the piece's Q block). dq[4n + e]
    // is row 16*warp + g + 8*(e>>1), column 8n + 2t + (e&1).
    __device__ __forceinline__ void stage(const float (&dq)[32], const float (&fixed)[2]) const {
        const int lane = th.lane, t = th.t;
        if (lane == 0) bulk_wait_read<0>();
        __syncwarp();
        // The same stores written two ways, each the faster for its head size: HS 64 by one
        // address per thread, computed here (opaque), the 16-byte chunk of
        // column 8n + 2t in row r being (2n % 8) ^ r ^ (t/2), with explicit shared-memory stores
        // (6-7% faster than the other way); HS 128 by plain stores at offsets ptxas keeps
        // across the loop (3-5% faster than the other way).
        if constexpr (HS == 64) {
            const uint32_t row_addr = opaque(smem_addr(sdQ_warp)) + (lane / 4) * 128 + (((lane / 4) ^ (t >> 1)) << 4) + (t & 1) * 8;
            #pragma unroll
            for (int nn = 0; nn < 8; nn++)
                #pragma unroll
                for (int half = 0; half < 2; half++) {
                    uint32_t addr = (row_addr ^ ((2 * nn % 8) << 4)) + half * 8 * 128 + (nn / 4) * 16 * 128;
                    float x = dq[4 * nn + 2 * half], y = dq[4 * nn + 2 * half + 1];
                    if constexpr (FIXED)
                        st_shared_v2(addr, __float2int_rn(x * fixed[half]), __float2int_rn(y * fixed[half]));
                    else
                        st_shared_v2(addr, __float_as_int(x), __float_as_int(y));
                }
        } else {
            #pragma unroll
            for (int nn = 0; nn < 8; nn++)
                #pragma unroll
                for (int half = 0; half < 2; half++) {
                    int row = lane / 4 + 8 * half, col = (8 * nn) % 32 + 2 * t;
                    int offset = (nn / 4) * 16 * 128 + row * 128 + (((col / 4) ^ (row % 8)) << 4) + (col % 4) * 4;
                    float x = dq[4 * nn + 2 * half], y = dq[4 * nn + 2 * half + 1];
                    if constexpr (FIXED)
                        *reinterpret_cast<int2*>(sdQ_warp + offset) =
                            make_int2(__float2int_rn(x * fixed[half]), __float2int_rn(y * fixed[half]));
                    else
                        *reinterpret_cast<float2*>(sdQ_warp + offset) = make_float2(x, y);
                }
        }
    }
    // FIXED: the scales of this block's rows of its piece (from the stage's sF), for the next
    // block, which converts it (the stage may be refilled by then).
    __device__ __forceinline__ void keep_scales(float (&fixed)[2], const float* f_stage) const {
        const float* f_blk = f_stage + dq_qh * 64 + 16 * th.warp + th.lane / 4;
        fixed[0] = f_blk[0];
        fixed[1] = f_blk[8];
    }
};

// MASKED: the last query that sees each of a consumer thread's keys (key0 and key0 + 8), and
// that of its warp's first key (keys past T take key T - 1's).
struct KeysHi { int key[2], warp_first; };

// P^T = exp(scale S^T - L) while dP^T still runs, then dS^T = P^T (dP^T - D) once it is done,
// both packed as A fragments (pa, dsa) of the gradient products: the softmax step of a Q block
// from q0, whose L and D are l_blk and d_blk. Masked scores become -inf, so their P^T is 0:
// queries past T, keys past T and (causal) keys after the query; MASKED, queries past a key's
// window. Only blocks on the diagonal or at the end of the sequence need it (MASKED: also those
// past the window of the warp's first key), and the branch keeps the others free of its cost.
template <int HS, FlashDq DQ, bool MASKED>
__device__ __forceinline__ void kv_score_grads(const KvConsumerThread<HS, DQ>& th, const float* l_blk, const float* d_blk,
                                               int q0, int T, int causal, float scale_log2, const KeysHi& hi,
                                               float (&st)[KvBlock<HS, DQ>::BLOCK_M / 2],
                                               float (&dpt)[KvBlock<HS, DQ>::BLOCK_M / 2],
                                               uint32_t (&pa)[KvBlock<HS, DQ>::BLOCK_M / 16][4],
                                               uint32_t (&dsa)[KvBlock<HS, DQ>::BLOCK_M / 16][4]) {
    constexpr int BLOCK_M = KvBlock<HS, DQ>::BLOCK_M;
    const int t = th.t, wg_k0 = th.wg_k0;
    // L and D of this thread's columns (queries nt*8 + 2t, +1): HS 128 loads them before the
    // waits below, so that the exponentials and dS^T do not wait for shared memory; HS 64
    // has no registers for that (it would spill) and loads each pair where it is used.
    constexpr bool EARLY = HS == 128;
    auto load_pair = [&](const float* blk, int nt) { return *reinterpret_cast<const float2*>(blk + nt * 8 + 2 * t); };
    float2 l2[BLOCK_M / 8], d2[BLOCK_M / 8];
    #pragma unroll
    for (int nt = 0; nt < BLOCK_M / 8; nt++)
        if constexpr (EARLY) l2[nt] = load_pair(l_blk, nt);

    wgmma_wait<1>();
    pin_registers(st);
    if (q0 + BLOCK_M > T || wg_k0 + 64 > T || (causal && wg_k0 + 63 > q0) || (MASKED && q0 + BLOCK_M - 1 > hi.warp_first)) {
        VisibleColumns seen[2];
        #pragma unroll
        for (int half = 0; half < 2; half++)
            seen[half] = MASKED ? queries_in_window(th.key0 + 8 * half, q0 + 2 * t, T, hi.key[half], causal)
                                : queries_seeing(th.key0 + 8 * half, q0 + 2 * t, T, causal);
        mask_tile<BLOCK_M / 8>(st, seen);
    }
    probabilities_by_column<BLOCK_M / 8>(st, [&](int nt) { if constexpr (EARLY) return l2[nt]; else return load_pair(l_blk, nt); }, scale_log2);
    #pragma unroll
    for (int nt = 0; nt < BLOCK_M / 8; nt++)
        if constexpr (EARLY) d2[nt] = load_pair(d_blk, nt);
    // dS^T = P^T (dP^T - D) once dP^T is done. ptxas would place that wait as early as it may,
    // above the exponentials, which would then no longer run under dP^T; it keeps the wait
    // below memory operations, so this store (never read) of a value that needs all of P^T
    // holds it there.
    uint32_t anchor = 0;
    #pragma unroll
    for (int i = 0; i < BLOCK_M / 2; i++) anchor ^= __float_as_uint(st[i]);
    asm volatile("st.shared.u32 [%0], %1;\n" :: "r"(th.anchor_addr), "r"(anchor) : "memory");
    wgmma_wait<0>();
    pin_registers(dpt);
    score_grads_by_column<BLOCK_M / 8>(dpt, st, [&](int nt) { if constexpr (EARLY) return d2[nt]; else return load_pair(d_blk, nt); });
    // Packed here, after dS^T, so that S^T and dP^T are dead before the products that read the
    // fragments are issued: with P^T, dP^T and the A fragments live at once, HS 64 needs more
    // than the 240 registers a consumer has, and ptxas then serialises every wgmma (measured
    // 12-17% slower at T >= 8K).
    #pragma unroll
    for (int kk = 0; kk < BLOCK_M / 16; kk++) {
        c_to_a(pa[kk], &st[8 * kk], &st[8 * kk + 4]);
        c_to_a(dsa[kk], &dpt[8 * kk], &dpt[8 * kk + 4]);
    }
}

// dV += P^T dO and dK += dS^T Q (scale applied once at the end): P^T and dS^T from registers,
// dO and Q (the Q block's tiles at sdO_addr, sQ_addr) as MN-major B operands (rows = queries =
// the k of these products).
template <int HS, int BLOCK_M>
__device__ __forceinline__ void issue_dv(float (&dv)[HS / 2], const uint32_t (&pa)[BLOCK_M / 16][4], uint32_t sdO_addr) {
    #pragma unroll
    for (int kk = 0; kk < BLOCK_M / 16; kk++) wgmma_rs<HS>(dv, pa[kk], desc_mn_major<BLOCK_M>(sdO_addr, kk));
}
template <int HS, int BLOCK_M>
__device__ __forceinline__ void issue_dk(float (&dk)[HS / 2], const uint32_t (&dsa)[BLOCK_M / 16][4], uint32_t sQ_addr) {
    #pragma unroll
    for (int kk = 0; kk < BLOCK_M / 16; kk++) wgmma_rs<HS>(dk, dsa[kk], desc_mn_major<BLOCK_M>(sQ_addr, kk));
}

// The gradient products of a Q block (its Q and dO tiles at sQ_addr, sdO_addr) without dQ:
// dV += P^T dO and dK += dS^T Q; once both are done the stage goes back to the producer.
template <int HS, FlashDq DQ>
__device__ __forceinline__ void kv_grad_products(const KvConsumerThread<HS, DQ>& th, int stage, uint32_t sQ_addr,
                                                 uint32_t sdO_addr, uint32_t (&pa)[KvBlock<HS, DQ>::BLOCK_M / 16][4],
                                                 uint32_t (&dsa)[KvBlock<HS, DQ>::BLOCK_M / 16][4], float (&dk)[HS / 2],
                                                 float (&dv)[HS / 2]) {
    constexpr int BLOCK_M = KvBlock<HS, DQ>::BLOCK_M;
    wgmma_fence();
    issue_dv<HS, BLOCK_M>(dv, pa, sdO_addr);
    issue_dk<HS, BLOCK_M>(dk, dsa, sQ_addr);
    wgmma_commit();
    wgmma_wait<0>();
    pin_registers(dv);
    pin_registers(dk);
    pin_registers(pa);
    pin_registers(dsa);
    mbarrier_arrive(th.empty_addr + 8 * stage);
}

// The same with the dQ pieces (Q block n of the consumer's walk): dQ of the block before (its
// dS^T is in place: the other consumer stored its half most of a block ago), then dV, then dK;
// the piece is converted and staged under dV and dK. The consumers no longer meet within a
// block, so each runs at its own pace (HS 64 6-12% faster than with a barrier at each block's
// dS^T, HS 128 1-3%). The first block has no block before it: its dQ product reads buffer 1,
// whatever it holds, and is dropped, so that every path issues the same wgmma groups (ptxas
// serialises every wgmma otherwise). Returns whether the next Q block has landed, asked now so
// that the answer is in at the top of the loop (the wait there, asked only then, held 7% of the
// HS 128 consumers' samples).
template <int HS, FlashDq DQ>
__device__ __forceinline__ bool kv_grad_products_with_dq(const KvBlock<HS, DQ>& kb, const KvConsumerThread<HS, DQ>& th,
                                                         const DqPieces<HS, DQ>& pieces, int n, int stage,
                                                         uint32_t sQ_addr, uint32_t sdO_addr,
                                                         uint32_t (&pa)[KvBlock<HS, DQ>::BLOCK_M / 16][4],
                                                         uint32_t (&dsa)[KvBlock<HS, DQ>::BLOCK_M / 16][4],
                                                         float (&dk)[HS / 2], float (&dv)[HS / 2], float (&fixed)[2]) {
    constexpr int BLOCK_M = KvBlock<HS, DQ>::BLOCK_M;
    float dq[32];
    if (n > 0) mbarrier_wait(pieces.ds_full_addr + 8 * ((n - 1) % 2), ((n - 1) >> 1) & 1);
    wgmma_fence();
    pieces.issue(dq, n + 1);
    wgmma_commit();
    issue_dv<HS, BLOCK_M>(dv, pa, sdO_addr);
    wgmma_commit();
    pieces.store_ds(n, dsa);
    wgmma_fence();
    issue_dk<HS, BLOCK_M>(dk, dsa, sQ_addr);
    wgmma_commit();
    wgmma_wait<2>();   // dQ done, dV and dK running
    pin_registers(dq);
    if (n > 0) {
        mbarrier_arrive(pieces.ds_empty_addr + 8 * ((n - 1) % 2));
        pieces.stage(dq, fixed);
    }
    if constexpr (KvBlock<HS, DQ>::FIXED) pieces.keep_scales(fixed, kb.sF + stage * BLOCK_M);
    wgmma_wait<0>();
    pin_registers(dv);
    pin_registers(dk);
    pin_registers(pa);
    pin_registers(dsa);
    mbarrier_arrive(th.empty_addr + 8 * stage);   // this thread is done with the stage
    return mbarrier_test_wait(th.full_addr + 8 * (stage ^ 1), ((n + 1) >> 1) & 1);
}

// A consumer warpgroup: dK and dV of its 64 keys over every Q block that sees them (and, with
// ATOMIC_DQ, the dQ pieces), left in dk and dv (accumulator layout, dK unscaled). Per Q block:
// S^T and dP^T issued, the dQ piece of two blocks before sent, the softmax step
// (kv_score_grads), then the gradient products.
template <int HS, FlashDq DQ, bool MASKED>
__device__ __forceinline__ void kv_consumer(const KvBlock<HS, DQ>& kb, const CUtensorMap* map_dq,
                                            const AttentionParams& params, const AttentionMask& mask, float (&dk)[HS / 2],
                                            float (&dv)[HS / 2]) {
    using K = KvBlock<HS, DQ>;
    constexpr int BLOCK_N = K::BLOCK_N, BLOCK_M = K::BLOCK_M, Q_BYTES = K::Q_BYTES;
    constexpr bool ATOMIC_DQ = K::ATOMIC_DQ;
    const int T = params.shape.T, causal = params.shape.causal;
    const int first_q_block = kb.first_q_block, n_q_blocks = kb.n_q_blocks;
    const KvConsumerThread<HS, DQ> th(kb);
    const int wg = th.wg;
    KeysHi hi;
    if constexpr (MASKED) {
        const KeyWindow window(mask, kb.b, T);
        for (int half = 0; half < 2; half++) hi.key[half] = window.hi(min(th.key0 + 8 * half, T - 1));
        hi.warp_first = window.hi(min(th.wg_k0 + th.warp * 16, T - 1));
    }
    #pragma unroll
    for (int i = 0; i < HS / 2; i++) dk[i] = dv[i] = 0.0f;
    const float scale_log2 = params.shape.scale * (float)M_LOG2E;
    const uint32_t sK_addr = smem_addr(kb.sK), sV_addr = smem_addr(kb.sV);
    const DqPieces<HS, DQ> pieces(kb, th, map_dq, sK_addr);
    float fixed[2] = {1.0f, 1.0f};   // FIXED: the scales of the rows of the piece to stage next
    mbarrier_wait(kb.bar_kv, 0);
    bool full_ready = false;   // ATOMIC_DQ: block i's stage already tested full at the end of block i-1

    for (int i = first_q_block; i < n_q_blocks; i++) {
        int n = i - first_q_block, stage = n & 1, q0 = i * BLOCK_M;
        if (!full_ready) mbarrier_wait(th.full_addr + 8 * stage, (n >> 1) & 1);   // Q, dO, L, D of block i have landed
        const uint32_t sQ_addr = smem_addr(kb.sQ + stage * Q_BYTES), sdO_addr = smem_addr(kb.sdO + stage * Q_BYTES);

        // S^T = K Q^T and dP^T = V dO^T, 64 keys x BLOCK_M queries, both operands in shared memory.
        // Declared here, not above the loop: their first wgmma ignores the old values (scale-d = 0),
        // so nothing of them lives from one Q block to the next.
        float st[BLOCK_M / 2], dpt[BLOCK_M / 2];   // S^T, then P^T; dP^T, then dS^T
        uint32_t pa[BLOCK_M / 16][4], dsa[BLOCK_M / 16][4];   // P^T, dS^T as A fragments
        wgmma_fence();
        wgmma_a_bt<HS, BLOCK_N, BLOCK_M>(st, sK_addr, wg * 64, sQ_addr);
        wgmma_a_bt<HS, BLOCK_N, BLOCK_M>(dpt, sV_addr, wg * 64, sdO_addr);
        // The dQ piece staged at the end of the previous block (block i-2's) goes out while these
        // run: its fence waits for the stores, off the path of the products.
        if (ATOMIC_DQ && n > 1) pieces.reduce(q0 - 2 * BLOCK_M);
        kv_score_grads<HS, DQ, MASKED>(th, kb.sL + stage * BLOCK_M, kb.sD + stage * BLOCK_M, q0, T, causal, scale_log2, hi,
                                       st, dpt, pa, dsa);
        if constexpr (!ATOMIC_DQ) kv_grad_products(th, stage, sQ_addr, sdO_addr, pa, dsa, dk, dv);
        else full_ready = kv_grad_products_with_dq(kb, th, pieces, n, stage, sQ_addr, sdO_addr, pa, dsa, dk, dv, fixed);
    }
    if (ATOMIC_DQ) {
        // The last block's dQ piece: the piece before it goes out, then this one.
        int last = n_q_blocks - 1 - first_q_block;
        if (last > 0) pieces.reduce((n_q_blocks - 2) * BLOCK_M);
        mbarrier_wait(pieces.ds_full_addr + 8 * (last % 2), (last >> 1) & 1);
        float dq[32];
        wgmma_fence();
        pieces.issue(dq, last);
        wgmma_commit();
        wgmma_wait<0>();
        pin_registers(dq);
        pieces.stage(dq, fixed);
        pieces.reduce((n_q_blocks - 1) * BLOCK_M);
        if (th.lane == 0) bulk_wait<0>();                 // every reduction has landed
    }
}

// dK (times scale) and dV as bf16 through the consumers' rows of sK and sV (every wgmma reading
// them is done after the first barrier), then whole 16-byte row pieces to their views.
template <int HS, FlashDq DQ>
__device__ __forceinline__ void kv_epilogue(const KvBlock<HS, DQ>& kb, const AttentionParams& params,
                                            const float (&dk)[HS / 2], const float (&dv)[HS / 2]) {
    using K = KvBlock<HS, DQ>;
    constexpr int BLOCK_N = K::BLOCK_N, CONSUMERS = K::CONSUMERS;
    const int ct = threadIdx.x - 128, lane = threadIdx.x % 32, t = lane % 4;   // ct: 0..255 over the consumers
    const int row0 = ct / 128 * 64 + (ct / 32) % 4 * 16 + lane / 4;          // the thread's keys (+ 8), from k0
    const float scale = params.shape.scale;
    named_barrier_sync(1, CONSUMERS);
    #pragma unroll
    for (int n = 0; n < HS / 8; n++)
        #pragma unroll
        for (int half = 0; half < 2; half++) {
            int row = row0 + 8 * half, col = 8 * n;
            *reinterpret_cast<uint32_t*>(kb.sK + swizzled_offset<BLOCK_N>(row, col) + 4 * t) =
                pack_bf16(dk[4 * n + 2 * half] * scale, dk[4 * n + 2 * half + 1] * scale);
            *reinterpret_cast<uint32_t*>(kb.sV + swizzled_offset<BLOCK_N>(row, col) + 4 * t) =
                pack_bf16(dv[4 * n + 2 * half], dv[4 * n + 2 * half + 1]);
        }
    named_barrier_sync(1, CONSUMERS);
    constexpr int CHUNKS = HS / 8;
    const int T = params.shape.T, k0 = kb.k0;
    bf16* dk_ptr = params.dk.ptr + kb.b * params.dk.batch + (long long)kb.h * params.dk.head;
    bf16* dv_ptr = params.dv.ptr + kb.b * params.dv.batch + (long long)kb.h * params.dv.head;
    #pragma unroll
    for (int k = 0; k < BLOCK_N * CHUNKS / CONSUMERS; k++) {
        int idx = ct + k * CONSUMERS, r = idx / CHUNKS, c = (idx % CHUNKS) * 8;
        if (k0 + r < T) {
            *reinterpret_cast<int4*>(dk_ptr + (k0 + r) * params.dk.row + c) =
                *reinterpret_cast<const int4*>(kb.sK + swizzled_offset<BLOCK_N>(r, c));
            *reinterpret_cast<int4*>(dv_ptr + (k0 + r) * params.dv.row + c) =
                *reinterpret_cast<const int4*>(kb.sV + swizzled_offset<BLOCK_N>(r, c));
        }
    }
}

template <int HS, FlashDq DQ, bool MASKED>
__global__ void __launch_bounds__(384, 1)
flash_backward_wgmma_kernel(const __grid_constant__ CUtensorMap map_k,    // K, boxes of BLOCK_N rows
                            const __grid_constant__ CUtensorMap map_v,    // V, boxes of BLOCK_N rows
                            const __grid_constant__ CUtensorMap map_q,    // Q, boxes of BLOCK_M rows
                            const __grid_constant__ CUtensorMap map_do,   // dO, boxes of BLOCK_M rows
                            const __grid_constant__ CUtensorMap map_dq,   // dq_accum, boxes of 16 rows x 64 columns
                            const AttentionParams params, const float* delta, const float* dq_fixed_scale,
                            int head_group, const AttentionMask mask) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)   // wgmma exists only in sm_90a code; elsewhere the body is empty
    using K = KvBlock<HS, DQ>;
    extern __shared__ unsigned char smem_raw[];
    __shared__ uint64_t bars[9];   // kv, full[2], empty[2], ds[4]
    K kb(smem_raw, bars);
    // Causal work shrinks with the key index: the first K/V blocks are issued first; heads in
    // groups (grid_order.cuh).
    const int T = params.shape.T, NH = params.shape.NH;
    GridTile tile = grid_tile(blockIdx.x, (int)ceil_div(T, K::BLOCK_N), params.shape.B * NH, head_group);
    kb.bh = tile.bh, kb.b = tile.bh / NH, kb.h = tile.bh % NH;
    kb.k0 = tile.rank * K::BLOCK_N;
    // Causal: Q blocks entirely before this K/V block never see it; masked, nor those after the
    // window of its last key (hi never decreases along the keys).
    kb.first_q_block = params.shape.causal ? kb.k0 / K::BLOCK_M : 0;
    kb.n_q_blocks = MASKED ? KeyWindow(mask, kb.b, T).end_block(min(kb.k0 + K::BLOCK_N - 1, T - 1), K::BLOCK_M)
                           : (int)ceil_div(T, K::BLOCK_M);

    if (threadIdx.x == 0) {
        mbarrier_init(kb.bar_kv, 1);
        for (int s = 0; s < 2; s++) {
            mbarrier_init(&kb.bar_full[s], 32);
            mbarrier_init(&kb.bar_empty[s], K::CONSUMERS);
        }
        for (int b = 0; b < 4; b++) mbarrier_init(&kb.bar_ds[b], K::CONSUMERS);
        fence_barrier_init();
    }
    __syncthreads();
    if (threadIdx.x < 128) {
        warpgroup_release_registers<24>();
        if (threadIdx.x < 32) kv_producer(kb, &map_k, &map_v, &map_q, &map_do, params, delta, dq_fixed_scale);
        return;
    }
    warpgroup_claim_registers<240>();
    float dk[HS / 2], dv[HS / 2];   // dK, dV of this warpgroup's keys (accumulator layout)
    kv_consumer<HS, DQ, MASKED>(kb, &map_dq, params, mask, dk, dv);
    kv_epilogue(kb, params, dk, dv);
#endif
}

template <int HS, FlashDq DQ, bool MASKED>
static void launch_backward_wgmma(const AttentionParams* p, const AttentionMask* mask, BackwardScratch w,
                                  cudaStream_t stream) {
    using K = KvBlock<HS, DQ>;
    constexpr auto kernel = flash_backward_wgmma_kernel<HS, DQ, MASKED>;
    raise_smem_limit<kernel>("flash_attention_backward_wgmma", K::SMEM);
    AttentionShape s = p->shape;
    CUtensorMap map_k, map_v, map_q, map_do, map_dq;
    make_heads_tensor_map(&map_k, &p->k, s, K::BLOCK_N);
    make_heads_tensor_map(&map_v, &p->v, s, K::BLOCK_N);
    make_heads_tensor_map(&map_q, &p->q, s, K::BLOCK_M);
    make_heads_tensor_map(&map_do, &p->dout, s, K::BLOCK_M);
    if (K::ATOMIC_DQ) make_dq_accum_tensor_map(&map_dq, w.dq_accum, K::FIXED, s, 16);
    else memset(&map_dq, 0, sizeof(map_dq));
    int BH = s.B * s.NH, n_kv_blocks = (int)ceil_div(s.T, K::BLOCK_N);
    // What a head's blocks stream: Q and dO, L and D, and the dQ they add to.
    size_t head_bytes = (size_t)s.T * (2 * HS * sizeof(bf16) + 2 * sizeof(float) + (K::ATOMIC_DQ ? HS * sizeof(float) : 0));
    kernel<<<n_kv_blocks * BH, 384, K::SMEM, stream>>>(map_k, map_v, map_q, map_do, map_dq, *p, w.delta, w.dq_fixed_scale,
                                                       grid_head_group(head_bytes, BH, n_kv_blocks, 1),
                                                       attention_mask_or_none(mask));
    cudaCheckLaunch();
}

// Deterministic dQ: one thread block of two warpgroups per Q block of 128 queries; warpgroup w
// owns queries 64w..64w+63 and keeps their dQ in registers while the block walks over the K/V
// blocks of BLOCK_N keys in order (the same bits on every run, no atomics). Per K/V block j,
// per warpgroup:
//   S = Q K^T, dP = dO V^T                  (64 queries x BLOCK_N keys, both operands in smem)
//   P = exp(scale S - L), dS = P (dP - D)   (registers; L, D per query = row)
//   dQ += dS K                              (dS from registers, K an MN-major B operand)
// dQ += dS_j K_j is left running into block j+1 (its wait comes after S_{j+1} is issued), so the
// tensor cores stay busy across the barrier; K has three stages for it: when block j starts,
// dQ += dS K may still read K_{j-1}, so block j+1 loads over K_{j-2}. V, read only by dP (waited
// for within its block), has two.
// MIN_BLOCKS: thread blocks per SM the register budget is sized for.
template <int HS, int BLOCK_N, int MIN_BLOCKS, bool MASKED>
__global__ void __launch_bounds__(256, MIN_BLOCKS)
flash_backward_dq_wgmma_kernel(const __grid_constant__ CUtensorMap map_q,    // Q, boxes of BLOCK_M rows
                               const __grid_constant__ CUtensorMap map_k,    // K, boxes of BLOCK_N rows
                               const __grid_constant__ CUtensorMap map_v,    // V, boxes of BLOCK_N rows
                               const __grid_constant__ CUtensorMap map_do,   // dO, boxes of BLOCK_M rows
                               const AttentionParams params, const float* delta, int n_q_blocks, int head_group,
                               const AttentionMask mask) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)   // wgmma exists only in sm_90a code; elsewhere the body is empty
    constexpr int NTHREADS = 256, BLOCK_M = 128;
    constexpr int KV_BYTES = BLOCK_N * HS * (int)sizeof(bf16), Q_BYTES = BLOCK_M * HS * (int)sizeof(bf16);
    static_assert(BLOCK_N == 64 || BLOCK_N == 128, "a warpgroup skips at most the last K/V block (see the loop)");
    extern __shared__ unsigned char smem_raw[];
    // Swizzle atoms must start on 1024-byte boundaries; the launcher adds 1024 bytes for this.
    unsigned char* sQ = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);  // (BLOCK_M, HS), later dQ
    unsigned char* sdO = sQ + Q_BYTES;                         // (BLOCK_M, HS)
    unsigned char* sK = sdO + Q_BYTES;                         // 3 stages of (BLOCK_N, HS)
    unsigned char* sV = sK + 3 * KV_BYTES;                     // 2 stages of (BLOCK_N, HS)
    uint32_t* sched_anchor = reinterpret_cast<uint32_t*>(sV + 2 * KV_BYTES);   // (NTHREADS), see the loop
    __shared__ uint64_t bar_q, bar_kv[2];                      // TMA arrivals: Q and dO; K/V block j in j % 2

    int wg = warp_uniform(threadIdx.x / 128), warp = warp_uniform((threadIdx.x / 32) % 4);
    int lane = threadIdx.x % 32, t = lane % 4;
    // Causal work grows with the query index: the last Q blocks are issued first; heads in
    // groups (grid_order.cuh).
    const int T = params.shape.T, NH = params.shape.NH, causal = params.shape.causal;
    GridTile tile = grid_tile(blockIdx.x, n_q_blocks, params.shape.B * NH, head_group);
    int q_block = n_q_blocks - 1 - tile.rank;
    int bh = tile.bh, b = bh / NH, h = bh % NH;
    int q0 = q_block * BLOCK_M;
    int wg_q0 = q0 + wg * 64;                           // first query of this warpgroup
    int row0 = wg_q0 + warp * 16 + lane / 4;            // this thread's queries: row0 and row0 + 8
    // Causal: K/V blocks entirely after the last query of this Q block are never touched;
    // masked, nor those before the window of its first query. The walk's block j is K/V block
    // first_kv_block + j.
    int first_kv_block = 0;
    int row_lo[2], warp_lo_last = 0;   // masked: this thread's rows' first keys, its warp's last row's
    if constexpr (MASKED) {
        const KeyWindow window(mask, b, T);
        first_kv_block = window.first_block(q0, BLOCK_N);
        for (int half = 0; half < 2; half++) row_lo[half] = window.lo(min(row0 + 8 * half, T - 1));
        warp_lo_last = window.lo(min(wg_q0 + warp * 16 + 15, T - 1));
    }
    int n_kv_blocks = (int)ceil_div(causal ? min(q0 + BLOCK_M, T) : T, BLOCK_N) - first_kv_block;

    // Tiles arrive by TMA, one thread issuing a copy per 64-column panel (rows past T as zeros).
    auto load_kv_block = [&](int j) {
        int key0 = (first_kv_block + j) * BLOCK_N;
        mbarrier_arrive_expect_tx(&bar_kv[j % 2], 2 * KV_BYTES);
        #pragma unroll
        for (int panel = 0; panel < HS / 64; panel++) {
            tma_load_4d(sK + j % 3 * KV_BYTES + panel * BLOCK_N * 128, &map_k, panel * 64, h, key0, b, &bar_kv[j % 2]);
            tma_load_4d(sV + j % 2 * KV_BYTES + panel * BLOCK_N * 128, &map_v, panel * 64, h, key0, b, &bar_kv[j % 2]);
        }
    };
    if (threadIdx.x == 0) {
        mbarrier_init(&bar_q, 1);
        mbarrier_init(&bar_kv[0], 1);
        mbarrier_init(&bar_kv[1], 1);
        fence_barrier_init();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mbarrier_arrive_expect_tx(&bar_q, 2 * Q_BYTES);
        #pragma unroll
        for (int panel = 0; panel < HS / 64; panel++) {
            tma_load_4d(sQ + panel * BLOCK_M * 128, &map_q, panel * 64, h, q0, b, &bar_q);
            tma_load_4d(sdO + panel * BLOCK_M * 128, &map_do, panel * 64, h, q0, b, &bar_q);
        }
        load_kv_block(0);
    }

    // L (in log2 units) and D of this thread's queries. Queries past T are zeros in sQ and sdO
    // and get L = D = 0: finite values in rows that are never stored.
    float l2[2], d[2];
    #pragma unroll
    for (int half = 0; half < 2; half++) {
        int row = row0 + 8 * half;
        l2[half] = row < T ? params.lse.ptr[b * params.lse.batch + (long long)h * params.lse.head + row] * (float)M_LOG2E : 0.0f;
        d[half] = row < T ? delta[(long long)bh * T + row] : 0.0f;
    }
    float dq[HS / 2];                     // dQ of this warpgroup's queries (accumulator layout)
    #pragma unroll
    for (int i = 0; i < HS / 2; i++) dq[i] = 0.0f;
    uint32_t dsa[BLOCK_N / 16][4];        // dS as A fragments, read by a dQ product until the next block's wait
    const float scale_log2 = params.shape.scale * (float)M_LOG2E;
    const uint32_t sQ_addr = smem_addr(sQ), sdO_addr = smem_addr(sdO), sK_addr = smem_addr(sK), sV_addr = smem_addr(sV);
    mbarrier_wait(&bar_q, 0);

    for (int j = 0; j < n_kv_blocks; j++) {
        int kv0 = (first_kv_block + j) * BLOCK_N;
        // Block j has landed once its barrier's phase completes. Then one barrier: every
        // warpgroup has waited for dP of block j-1 and for dQ += dS K of block j-2, so V of block
        // j-1 and K of block j-2 take block j+1 (and block j-1's arrival barrier is free again).
        mbarrier_wait(&bar_kv[j % 2], (j / 2) & 1);
        __syncthreads();
        if (threadIdx.x == 0 && j + 1 < n_kv_blocks) load_kv_block(j + 1);
        // Causal: with BLOCK_N = 64 the last block lies after every query of warpgroup 0. Only the
        // last block is skipped, so no K stage of a dQ product still running is refilled.
        if (causal && kv0 > wg_q0 + 63) continue;
        const uint32_t sKj_addr = sK_addr + j % 3 * KV_BYTES, sVj_addr = sV_addr + j % 2 * KV_BYTES;

        // Declared here, not above the loop: their first wgmma ignores the old values (scale-d = 0).
        float sc[BLOCK_N / 2], dp[BLOCK_N / 2];   // S, then P; dP, then dS
        wgmma_fence();
        wgmma_a_bt<HS, BLOCK_M, BLOCK_N>(sc, sQ_addr, wg * 64, sKj_addr);
        wgmma_a_bt<HS, BLOCK_M, BLOCK_N>(dp, sdO_addr, wg * 64, sVj_addr);

        // dQ of block j-1 and S done; P while dP is still running. Masked scores become -inf, so
        // their P is 0: keys past T and (causal) keys after the query; only the last block and
        // blocks on the diagonal need it (masked: also those that start before a row's window).
        wgmma_wait<1>();
        pin_registers(sc);
        pin_registers(dq);
        pin_registers(dsa);
        if (kv0 + BLOCK_N > T || (causal && kv0 + BLOCK_N - 1 > wg_q0) || (MASKED && kv0 < warp_lo_last)) {
            VisibleColumns seen[2];
            #pragma unroll
            for (int half = 0; half < 2; half++)
                seen[half] = MASKED ? keys_in_window(row0 + 8 * half, kv0 + 2 * t, T, row_lo[half], causal)
                                    : keys_seen(row0 + 8 * half, kv0 + 2 * t, T, causal);
            mask_tile<BLOCK_N / 8>(sc, seen);
        }
        probabilities_by_row<BLOCK_N / 8>(sc, l2, scale_log2);
        uint32_t anchor = 0;
        #pragma unroll
        for (int i = 0; i < BLOCK_N / 2; i++) anchor ^= __float_as_uint(sc[i]);
        // ptxas places wgmma.wait_group as early as it may, which would put the exponentials
        // after the wait, serialised with dP; it keeps the wait after memory operations, so this
        // store (never read) of a value that needs all of P holds it below them.
        asm volatile("st.shared.u32 [%0], %1;\n" :: "r"(smem_addr(sched_anchor) + threadIdx.x * 4), "r"(anchor) : "memory");
        wgmma_wait<0>();
        pin_registers(dp);
        score_grads_by_row<BLOCK_N / 8>(dp, sc, d);
        #pragma unroll
        for (int kk = 0; kk < BLOCK_N / 16; kk++) c_to_a(dsa[kk], &dp[8 * kk], &dp[8 * kk + 4]);

        // dQ += dS K (scale applied once at the end), K (keys, dims) as an MN-major B operand.
        wgmma_fence();
        #pragma unroll
        for (int kk = 0; kk < BLOCK_N / 16; kk++) wgmma_rs<HS>(dq, dsa[kk], desc_mn_major<BLOCK_N>(sKj_addr, kk));
        wgmma_commit();
    }
    wgmma_wait<0>();
    pin_registers(dq);
    pin_registers(dsa);

    // dQ (times scale) as bf16 through this warpgroup's rows of sQ (only its own wgmma read them,
    // and those are complete), then whole 16-byte row pieces to its view.
    #pragma unroll
    for (int n = 0; n < HS / 8; n++)
        #pragma unroll
        for (int half = 0; half < 2; half++) {
            int row = row0 - q0 + 8 * half, col = 8 * n;
            *reinterpret_cast<uint32_t*>(sQ + swizzled_offset<BLOCK_M>(row, col) + 4 * t) =
                pack_bf16(dq[4 * n + 2 * half] * params.shape.scale, dq[4 * n + 2 * half + 1] * params.shape.scale);
        }
    __syncthreads();
    constexpr int CHUNKS = HS / 8;
    bf16* dq_ptr = params.dq.ptr + b * params.dq.batch + (long long)h * params.dq.head;
    #pragma unroll
    for (int k = 0; k < BLOCK_M * CHUNKS / NTHREADS; k++) {
        int idx = threadIdx.x + k * NTHREADS, r = idx / CHUNKS, c = (idx % CHUNKS) * 8;
        if (q0 + r < T)
            *reinterpret_cast<int4*>(dq_ptr + (q0 + r) * params.dq.row + c) =
                *reinterpret_cast<const int4*>(sQ + swizzled_offset<BLOCK_M>(r, c));
    }
#endif
}

template <int HS, int BLOCK_N, int MIN_BLOCKS, bool MASKED>
static void launch_dq_wgmma(const AttentionParams* p, const AttentionMask* mask, const float* delta, cudaStream_t stream) {
    constexpr int BLOCK_M = 128;
    // Q, dO, 3 stages of K, 2 of V, the scheduling anchor, and room to align the start to 1024 bytes.
    constexpr int smem = (2 * BLOCK_M + 5 * BLOCK_N) * HS * (int)sizeof(bf16) + 256 * (int)sizeof(float) + 1024;
    constexpr auto kernel = flash_backward_dq_wgmma_kernel<HS, BLOCK_N, MIN_BLOCKS, MASKED>;
    raise_smem_limit<kernel>("flash_attention_backward_wgmma", smem);
    AttentionShape s = p->shape;
    CUtensorMap map_q, map_k, map_v, map_do;
    make_heads_tensor_map(&map_q, &p->q, s, BLOCK_M);
    make_heads_tensor_map(&map_k, &p->k, s, BLOCK_N);
    make_heads_tensor_map(&map_v, &p->v, s, BLOCK_N);
    make_heads_tensor_map(&map_do, &p->dout, s, BLOCK_M);
    int BH = s.B * s.NH, n_q_blocks = (int)ceil_div(s.T, BLOCK_M);
    // Heads in groups by what a head's blocks stream: its K and V.
    int head_group = grid_head_group(2 * (size_t)s.T * HS * sizeof(bf16), BH, n_q_blocks, MIN_BLOCKS);
    kernel<<<n_q_blocks * BH, 256, smem, stream>>>(map_q, map_k, map_v, map_do, *p, delta, n_q_blocks, head_group,
                                                   attention_mask_or_none(mask));
    cudaCheckLaunch();
}

// The kernels of one dQ path, masked or not.
template <bool MASKED>
static void launch_backward_kernels(const AttentionParams* p, const AttentionMask* mask, BackwardScratch w, FlashDq dq,
                                    cudaStream_t stream) {
    int hs64 = p->shape.HS == 64;
    if (dq == FLASH_DQ_SEPARATE) {
        // dK and dV, then dQ on its own. The dQ kernel at one thread block per SM: at two (128
        // registers) ptxas serialises its wgmma. HS 64: K/V blocks of 128 keys; HS 128: of 64,
        // which keeps dQ (64 registers) + S, dP (64) + dS (16) within registers.
        if (hs64) {
            launch_backward_wgmma<64, FLASH_DQ_SEPARATE, MASKED>(p, mask, w, stream);
            launch_dq_wgmma<64, 128, 1, MASKED>(p, mask, w.delta, stream);
        } else {
            launch_backward_wgmma<128, FLASH_DQ_SEPARATE, MASKED>(p, mask, w, stream);
            launch_dq_wgmma<128, 64, 1, MASKED>(p, mask, w.delta, stream);
        }
    } else if (dq == FLASH_DQ_FIXED) {
        if (hs64) launch_backward_wgmma<64, FLASH_DQ_FIXED, MASKED>(p, mask, w, stream);
        else      launch_backward_wgmma<128, FLASH_DQ_FIXED, MASKED>(p, mask, w, stream);
    } else {
        if (hs64) launch_backward_wgmma<64, FLASH_DQ_ATOMIC, MASKED>(p, mask, w, stream);
        else      launch_backward_wgmma<128, FLASH_DQ_ATOMIC, MASKED>(p, mask, w, stream);
    }
}

void flash_attention_backward_wgmma(const AttentionParams* p, const AttentionMask* mask, void* scratch, FlashDq dq,
                                    cudaStream_t stream) {
    BackwardScratch w = flash_backward_scratch(p->shape, scratch);
    flash_backward_prepass(p, w, dq, stream);
    if (attention_mask_active(mask)) launch_backward_kernels<true>(p, mask, w, dq, stream);
    else                             launch_backward_kernels<false>(p, mask, w, dq, stream);
    if (dq != FLASH_DQ_SEPARATE) flash_backward_dq_convert(p, w, dq, stream);
}
