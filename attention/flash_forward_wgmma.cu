// attention/flash_forward_wgmma.cu: the FlashAttention forward pass on Hopper's warpgroup tensor
// cores (wgmma, sm_90a). Same function as flash_forward.cu, on the views of attention/params.h:
//   in:  Q, K, V (B, T, NH, HS) bf16
//   out: O (B, T, NH, HS) bf16 and L (B, NH, T) fp32, L = log sum_j exp(scale * q.k_j)
// One thread block per (Q block of 128 rows, batch*head); two consumer warpgroups own 64 query
// rows each (and HS 128 adds a producer warpgroup, see the kernel). Q and the K/V blocks sit in
// 128-byte swizzled shared memory (device/wgmma.cuh), copied there by TMA (device/tma.cuh), one
// thread issuing each tile: K/V blocks in three stages, because V of block j-1 is still being
// read while block j+1 loads. Per K/V block j a warpgroup issues S = Q K_j^T (Q from registers, K from shared
// memory) and O += P_{j-1} V_{j-1} (P from registers) back to back, computes the softmax of S
// while the second product runs, then rescales O: the exponentials overlap the tensor cores.
// MASKED (a key window per row, params.h's AttentionMask): the walk starts at the K/V block of
// the Q block's first row's first key, and the blocks that cut a row's window are masked.
#include <limits.h>
#include <math.h>
#include "attention/flash.h"
#include "attention/grid_order.cuh"
#include "attention/mask.h"
#include "attention/softmax.cuh"
#include "attention/tensor_maps.cuh"
#include "device/smem.cuh"
#include "device/tma.cuh"
#include "device/wgmma.cuh"

// The running max of a row moves only when the block's max exceeds it by more than 2^8
// (softmax.cuh): P then reaches at most 2^8, harmless in bf16 and fp32, and O is rescaled only
// when a max moved, HS/2 multiplications a thread per block that after the first blocks rarely
// change anything.
#define LAZY_RESCALE_LOG2 8

// Two layouts of the thread block, both with two consumer warpgroups of 64 query rows each:
// - without PRODUCER (HS 64, two thread blocks per SM): thread 0 also issues the TMA copies, one
//   block ahead, and a __syncthreads per K/V block says a stage is free again;
// - with PRODUCER (HS 128, one thread block per SM): a third warpgroup, the producer, gives its
//   registers to the consumers and one of its threads issues every copy, as far ahead as the
//   stages allow; the consumers meet only at mbarriers (full[s]: stage s holds its K/V block,
//   empty[s]: every consumer thread is done with it), and they take turns issuing their
//   products (named barriers 2 and 3), so that one warpgroup's softmax runs under the other's
//   wgmma.
// ForwardBlock is the thread block's tile (the grid order), its shared memory and the copies
// that fill it; the kernel is the producer's loop (forward_producer), the consumers' loop over
// the K/V blocks (forward_mainloop) and their epilogue (forward_epilogue).
template <int HS, int BLOCK_N, bool PRODUCER, bool MASKED>
struct ForwardBlock {
    // CONSUMERS threads do the math, from thread FIRST on.
    static constexpr int CONSUMERS = 256, FIRST = PRODUCER ? 128 : 0, BLOCK_M = 128;
    static constexpr int KV_BYTES = BLOCK_N * HS * (int)sizeof(bf16);
    const CUtensorMap* map_q;   // Q, boxes of BLOCK_M rows
    const CUtensorMap* map_k;   // K, boxes of BLOCK_N rows
    const CUtensorMap* map_v;   // V, boxes of BLOCK_N rows
    unsigned char* sQ;          // (BLOCK_M, HS), later O
    unsigned char* sK;          // 3 stages of (BLOCK_N, HS)
    unsigned char* sV;          // 3 stages of (BLOCK_N, HS)
    float* sched_anchor;        // (CONSUMERS), see forward_mainloop
    uint64_t* bar_q;            // TMA arrivals of Q; of K/V block j in bar_full[j % 3]
    uint64_t* bar_full;         // [3]
    uint64_t* bar_empty;        // [3], with PRODUCER only
    int T, causal;              // of the shape
    int b, h, q0, n_kv_blocks;  // the tile: Q rows q0.. of head h of sequence b, and the K/V blocks they see:
    int first_kv_block;         // blocks first_kv_block.. (0 unless MASKED), the walk's block j being this + j

    // Swizzle atoms must start on 1024-byte boundaries; the launcher adds 1024 bytes for this.
    // Causal work grows with the row index: the last Q blocks are issued first so the short ones
    // fill in the tail of the grid; heads in groups (grid_order.cuh). Causal: K/V blocks entirely
    // above the diagonal of this Q block are never touched; masked, nor those before the window
    // of its first row (lo never decreases along the rows).
    __device__ ForwardBlock(unsigned char* smem_raw, uint64_t* q_bar, uint64_t* full, uint64_t* empty,
                            const CUtensorMap* q_map, const CUtensorMap* k_map, const CUtensorMap* v_map,
                            const AttentionShape& shape, int n_q_blocks, int head_group, const AttentionMask& mask) {
        map_q = q_map, map_k = k_map, map_v = v_map;
        sQ = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
        sK = sQ + BLOCK_M * HS * sizeof(bf16);
        sV = sK + 3 * KV_BYTES;
        sched_anchor = reinterpret_cast<float*>(sV + 3 * KV_BYTES);
        bar_q = q_bar, bar_full = full, bar_empty = empty;
        T = shape.T, causal = shape.causal;
        const int NH = shape.NH;
        GridTile tile = grid_tile(blockIdx.x, n_q_blocks, shape.B * NH, head_group);
        int q_block = n_q_blocks - 1 - tile.rank;
        b = tile.bh / NH, h = tile.bh % NH;
        q0 = q_block * BLOCK_M;
        first_kv_block = MASKED ? KeyWindow(mask, b, T).first_block(q0, BLOCK_N) : 0;
        n_kv_blocks = (int)ceil_div(causal ? min(q0 + BLOCK_M, T) : T, BLOCK_N) - first_kv_block;
    }
    // (rows, HS) tile of this (b, h) from row t0: one TMA copy per 64-column panel; rows past T
    // arrive as zeros.
    __device__ __forceinline__ void load_tile(unsigned char* dst, const CUtensorMap* map, int t0, int rows, uint64_t* bar) const {
        #pragma unroll
        for (int panel = 0; panel < HS / 64; panel++) tma_load_4d(dst + panel * rows * 128, map, panel * 64, h, t0, b, bar);
    }
    __device__ __forceinline__ void load_q() const {
        mbarrier_arrive_expect_tx(bar_q, BLOCK_M * HS * sizeof(bf16));
        load_tile(sQ, map_q, q0, BLOCK_M, bar_q);
    }
    __device__ __forceinline__ void load_kv_block(int j) const {   // the walk's K/V block j into stage j % 3
        int st = j % 3;
        mbarrier_arrive_expect_tx(&bar_full[st], 2 * KV_BYTES);
        load_tile(sK + st * KV_BYTES, map_k, (first_kv_block + j) * BLOCK_N, BLOCK_N, &bar_full[st]);
        load_tile(sV + st * KV_BYTES, map_v, (first_kv_block + j) * BLOCK_N, BLOCK_N, &bar_full[st]);
    }
    __device__ __forceinline__ void init_barriers() const {
        mbarrier_init(bar_q, 1);
        for (int st = 0; st < 3; st++) {
            mbarrier_init(&bar_full[st], 1);
            mbarrier_init(&bar_empty[st], CONSUMERS);
        }
        fence_barrier_init();
    }
    // Block j is in place once its barrier's phase completes (the TMA copies counted their bytes
    // against it). Without a producer, the __syncthreads then says every warpgroup is done with
    // the stage block j+1 takes, which held block j-2: its S = Q K^T was waited for in iteration
    // j-2 and its O += P V in iteration j-1; thread 0 issues the copies.
    __device__ __forceinline__ void wait_block(int j) const {
        if (j == 0) mbarrier_wait(bar_q, 0);
        mbarrier_wait(&bar_full[j % 3], (j / 3) & 1);
        if constexpr (!PRODUCER) {
            __syncthreads();
            int next = j + 1;
            if (threadIdx.x == 0 && next < n_kv_blocks) load_kv_block(next);
        }
    }
};

// The producer (one thread): Q, then block j into stage j % 3 once the consumers are done with
// block j - 3, which held it.
template <int HS, int BLOCK_N, bool PRODUCER, bool MASKED>
__device__ __forceinline__ void forward_producer(const ForwardBlock<HS, BLOCK_N, PRODUCER, MASKED>& fb) {
    fb.load_q();
    for (int j = 0; j < fb.n_kv_blocks; j++) {
        if (j >= 3) mbarrier_wait(&fb.bar_empty[j % 3], ((j - 3) / 3) & 1);
        fb.load_kv_block(j);
    }
}

// A consumer thread: warpgroup wg owns the Q block's rows 64 wg.. (from wg_q0), warp `warp` of
// it 16 of those, and the thread rows row0 and row0 + 8 (the accumulator layout). Masked: the
// first keys of the thread's rows, and of its warp's last row (rows past T take row T - 1's).
struct ForwardRows { int wg, warp, lane, wg_q0, row0, lo[2], warp_lo_last; };

// With PRODUCER the warpgroups issue their products in turns: warpgroup 0, then 1, then 0...
// Each waits for its turn (its barrier of the 256 consumer threads: the other's arrival) and
// hands it over when its wgmma are issued; warpgroup 1 hands warpgroup 0 the first turn, and
// warpgroup 0 takes the turn after its last, so that no arrival is left over.
template <bool PRODUCER> __device__ __forceinline__ void take_turn(int wg) {
    if constexpr (PRODUCER) {
        if (wg == 0) named_barrier_sync(2, 256);
        else named_barrier_sync(3, 256);
    }
}
template <bool PRODUCER> __device__ __forceinline__ void pass_turn(int wg) {
    if constexpr (PRODUCER) {
        if (wg == 0) named_barrier_arrive(3, 256);
        else named_barrier_arrive(2, 256);
    }
}

// O += P V over the K/V block in the V stage at sV_stage, P from registers (A fragments), one
// commit group.
template <int HS, int BLOCK_N>
__device__ __forceinline__ void issue_pv(float (&o)[HS / 2], const uint32_t (&p)[BLOCK_N / 16][4], uint32_t sV_stage) {
    #pragma unroll
    for (int kk = 0; kk < BLOCK_N / 16; kk++) wgmma_rs<HS>(o, p[kk], desc_mn_major<BLOCK_N>(sV_stage, kk));
    wgmma_commit();
}

// The softmax of one block of scores S (keys from kv0): masked where `masked` (the blocks that
// hold key T or, causal, the diagonal; MASKED, also those that cut a row's window), then the
// online softmax of the thread's two rows, which leaves P in S and in alpha the factor that takes
// O to the new maxima (MASKED: a row may have no key in its first blocks).
template <int BLOCK_N, bool MASKED>
__device__ __forceinline__ void forward_softmax(float (&s)[BLOCK_N / 2], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                                const ForwardRows& at, int kv0, bool masked, int T, int causal,
                                                float scale_log2) {
    if (masked || (MASKED && kv0 < at.warp_lo_last)) {
        VisibleColumns seen[2];
        #pragma unroll
        for (int half = 0; half < 2; half++)
            seen[half] = MASKED ? keys_in_window(at.row0 + 8 * half, kv0 + 2 * (at.lane % 4), T, at.lo[half], causal)
                                : keys_seen(at.row0 + 8 * half, kv0 + 2 * (at.lane % 4), T, causal);
        mask_tile<BLOCK_N / 8>(s, seen);
    }
    online_softmax<BLOCK_N / 8, LAZY_RESCALE_LOG2, MASKED>(s, m, l, alpha, scale_log2);
}

// P as bf16 A fragments of O += P V, from the scores' accumulator.
template <int BLOCK_N>
__device__ __forceinline__ void pack_p(uint32_t (&p)[BLOCK_N / 16][4], const float (&s)[BLOCK_N / 2]) {
    #pragma unroll
    for (int kk = 0; kk < BLOCK_N / 16; kk++) c_to_a(p[kk], &s[8 * kk], &s[8 * kk + 4]);
}

// The consumers' loop over the K/V blocks: per block j, S_j = Q K_j^T and O += P_{j-1} V_{j-1}
// issued back to back, the softmax of S_j while the second runs, then O rescaled to the new
// maxima and P_j packed; after the loop the last block's P V. Leaves the unnormalised O in o
// and the rows' maxima and this thread's share of their sums in m and l.
template <int HS, int BLOCK_N, bool PRODUCER, bool MASKED>
__device__ __forceinline__ void forward_mainloop(const ForwardBlock<HS, BLOCK_N, PRODUCER, MASKED>& fb, const AttentionParams& params,
                                                 const ForwardRows& at, float (&o)[HS / 2], float (&m)[2], float (&l)[2]) {
    using F = ForwardBlock<HS, BLOCK_N, PRODUCER, MASKED>;
    constexpr int BLOCK_M = F::BLOCK_M, KV_BYTES = F::KV_BYTES;
    const int T = fb.T, causal = fb.causal, wg = at.wg;
    float s[BLOCK_N / 2];                 // S = Q K^T of this warpgroup, accumulator layout
    uint32_t p[BLOCK_N / 16][4];          // P of the previous block, A fragments of O += P V
    #pragma unroll
    for (int i = 0; i < HS / 2; i++) o[i] = 0.0f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.0f;
    float alpha[2];
    // exp(scale*(s - m)) = 2^(scale*log2(e)*s - scale*log2(e)*m): one FFMA and one EX2 per score.
    const float scale_log2 = params.shape.scale * (float)M_LOG2E;
    const uint32_t sK_addr = smem_addr(fb.sK), sV_addr = smem_addr(fb.sV);
    // S = Q K^T with this warpgroup's Q as A fragments in registers (loaded once, after bar_q):
    // with both operands in shared memory, the 64 x 64 products of HS 64 would read 128 bytes
    // a clock, all that shared memory gives.
    uint32_t qa[HS / 16][4];
    // Only the blocks from mask_from on need masks: the last one when T is not a multiple of
    // BLOCK_N (it holds key T) and, causal, those from the one holding the warpgroup's first
    // query (wg_q0 is a multiple of 64). One comparison a block instead of the whole condition.
    // Masked, j counts from the walk's first block (fb.first_kv_block).
    const int mask_from = min(T / BLOCK_N, causal ? at.wg_q0 / BLOCK_N : INT_MAX) - fb.first_kv_block;

    // Block 0: S_0 and its softmax (o is 0: alpha unused).
    if (wg == 1) pass_turn<PRODUCER>(wg);
    fb.wait_block(0);
    load_a_fragments<BLOCK_M, HS>(qa, fb.sQ, wg * 64);
    take_turn<PRODUCER>(wg);
    wgmma_fence();
    wgmma_ra_bt<HS, BLOCK_N>(s, qa, sK_addr);
    pass_turn<PRODUCER>(wg);
    wgmma_wait<0>();
    pin_registers(s);
    forward_softmax<BLOCK_N, MASKED>(s, m, l, alpha, at, fb.first_kv_block * BLOCK_N, mask_from == 0, T, causal,
                                     scale_log2);
    pack_p<BLOCK_N>(p, s);

    for (int j = 1; j < fb.n_kv_blocks; j++) {
        int kv0 = (fb.first_kv_block + j) * BLOCK_N;
        fb.wait_block(j);
        take_turn<PRODUCER>(wg);
        wgmma_fence();
        wgmma_ra_bt<HS, BLOCK_N>(s, qa, sK_addr + j % 3 * KV_BYTES);   // S_j = Q K_j^T
        issue_pv<HS, BLOCK_N>(o, p, sV_addr + (j - 1) % 3 * KV_BYTES);   // O += P_{j-1} V_{j-1}
        pass_turn<PRODUCER>(wg);
        wgmma_wait<1>();  // S done; O += P V may still run
        pin_registers(s);
        forward_softmax<BLOCK_N, MASKED>(s, m, l, alpha, at, kv0, j >= mask_from, T, causal, scale_log2);
        // ptxas places wgmma.wait_group as early as it may, which would put the softmax after
        // the wait, serialised with O += P V; it keeps the wait after memory operations, so this
        // store of the new row sums (never read) holds it below the softmax.
        pin_registers(s);
        asm volatile("st.shared.f32 [%0], %1;\n" :: "r"(smem_addr(fb.sched_anchor) + (threadIdx.x - F::FIRST) * 4), "f"(l[0] + l[1]) : "memory");
        wgmma_wait<0>();
        pin_registers(o);
        pin_registers(p);
        if constexpr (PRODUCER) mbarrier_arrive(&fb.bar_empty[(j - 1) % 3]);   // K, V of block j-1 no longer read
        if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {   // a max moved in this warp
            #pragma unroll
            for (int i = 0; i < HS / 2; i++) o[i] *= alpha[(i >> 1) & 1];
        }
        // P of this block as bf16 A fragments, into the registers O += P V has just released:
        // packed here rather than before the wait, which would need a second set and a copy.
        pack_p<BLOCK_N>(p, s);
    }
    take_turn<PRODUCER>(wg);
    wgmma_fence();
    issue_pv<HS, BLOCK_N>(o, p, sV_addr + (fb.n_kv_blocks - 1) % 3 * KV_BYTES);
    pass_turn<PRODUCER>(wg);
    if (wg == 0) take_turn<PRODUCER>(wg);
    wgmma_wait<0>();
    pin_registers(o);
}

// O = o / l and L = scale*m + log(l) (masked and not causal, a row that sees no key: O = 0 and
// L = -inf). O is staged as bf16 in this warpgroup's own rows of sQ
// (each warp read only its own 16 rows, into its Q fragments; the __syncwarp puts those reads
// before the other lanes' stores), and the same warpgroup stores those rows as whole 16-byte
// segments: a barrier of its own 128 threads suffices.
template <int HS, int BLOCK_N, bool PRODUCER, bool MASKED>
__device__ __forceinline__ void forward_epilogue(const ForwardBlock<HS, BLOCK_N, PRODUCER, MASKED>& fb, const AttentionParams& params,
                                                 const ForwardRows& at, const float (&o)[HS / 2], const float (&m)[2],
                                                 const float (&l)[2]) {
    using F = ForwardBlock<HS, BLOCK_N, PRODUCER, MASKED>;
    constexpr int BLOCK_M = F::BLOCK_M;
    const int T = fb.T, b = fb.b, h = fb.h, q0 = fb.q0, wg = at.wg;
    int t = at.lane % 4;
    float inv[2];
    #pragma unroll
    for (int half = 0; half < 2; half++) {
        float sum = quad_sum(l[half]);
        inv[half] = MASKED && sum == 0.0f ? 0.0f : 1.0f / sum;
        int row = at.row0 + 8 * half;
        if (t == 0 && row < T) params.lse.ptr[b * params.lse.batch + (long long)h * params.lse.head + row] = m[half] * params.shape.scale + logf(sum);
    }
    __syncwarp();
    #pragma unroll
    for (int dt = 0; dt < HS / 8; dt++)
        #pragma unroll
        for (int half = 0; half < 2; half++) {
            int r = at.row0 - q0 + 8 * half, c = dt * 8;
            *reinterpret_cast<uint32_t*>(fb.sQ + swizzled_offset<BLOCK_M>(r, c) + 4 * t) =
                pack_bf16(o[4 * dt + 2 * half] * inv[half], o[4 * dt + 2 * half + 1] * inv[half]);
        }
    if (wg == 0) named_barrier_sync(4, 128);
    else named_barrier_sync(5, 128);
    constexpr int CHUNKS = HS / 8;
    #pragma unroll
    for (int k = 0; k < 64 * CHUNKS / 128; k++) {
        int i = (threadIdx.x - F::FIRST) % 128 + k * 128, r = wg * 64 + i / CHUNKS, c = (i % CHUNKS) * 8;
        if (q0 + r < T)
            *reinterpret_cast<int4*>(params.o.ptr + b * params.o.batch + (q0 + r) * params.o.row + (long long)h * params.o.head + c) =
                *reinterpret_cast<const int4*>(fb.sQ + swizzled_offset<BLOCK_M>(r, c));
    }
}

// MIN_BLOCKS: thread blocks per SM the registers are sized for.
template <int HS, int BLOCK_N, int MIN_BLOCKS, bool PRODUCER, bool MASKED>
__global__ void __launch_bounds__(PRODUCER ? 384 : 256, MIN_BLOCKS)
flash_forward_wgmma_kernel(const __grid_constant__ CUtensorMap map_q,   // Q, boxes of BLOCK_M rows
                           const __grid_constant__ CUtensorMap map_k,   // K, boxes of BLOCK_N rows
                           const __grid_constant__ CUtensorMap map_v,   // V, boxes of BLOCK_N rows
                           const AttentionParams params, int n_q_blocks, int head_group, const AttentionMask mask) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)   // wgmma exists only in sm_90a code; elsewhere the body is empty
    using F = ForwardBlock<HS, BLOCK_N, PRODUCER, MASKED>;
    constexpr int PRODUCER_REGISTERS = 24, CONSUMER_REGISTERS = 240;
    static_assert(!PRODUCER || (PRODUCER_REGISTERS * 128 + CONSUMER_REGISTERS * F::CONSUMERS <=
                                65536 / (384 * MIN_BLOCKS) / 8 * 8 * 384),
                  "the consumers claim more registers than the block has");
    extern __shared__ unsigned char smem_raw[];
    __shared__ uint64_t bar_q, bar_full[3], bar_empty[3];
    const F fb(smem_raw, &bar_q, bar_full, bar_empty, &map_q, &map_k, &map_v, params.shape, n_q_blocks, head_group, mask);
    if (threadIdx.x == 0) fb.init_barriers();
    __syncthreads();
    if constexpr (PRODUCER) {
        if (threadIdx.x < F::FIRST) {
            warpgroup_release_registers<PRODUCER_REGISTERS>();
            if (threadIdx.x == 0) forward_producer(fb);
            return;
        }
        warpgroup_claim_registers<CONSUMER_REGISTERS>();
    } else if (threadIdx.x == 0) {
        fb.load_q();
        fb.load_kv_block(0);
    }
    ForwardRows at;
    at.wg = warp_uniform((threadIdx.x - F::FIRST) / 128), at.warp = warp_uniform((threadIdx.x / 32) % 4);
    at.lane = threadIdx.x % 32;
    at.wg_q0 = fb.q0 + at.wg * 64;
    at.row0 = at.wg_q0 + at.warp * 16 + at.lane / 4;
    if constexpr (MASKED) {
        const KeyWindow window(mask, fb.b, fb.T);
        for (int half = 0; half < 2; half++) at.lo[half] = window.lo(min(at.row0 + 8 * half, fb.T - 1));
        at.warp_lo_last = window.lo(min(at.wg_q0 + at.warp * 16 + 15, fb.T - 1));
    }
    float o[HS / 2];   // unnormalised O, accumulator layout
    float m[2], l[2];  // the rows' running maxima, this thread's share of their sums
    forward_mainloop(fb, params, at, o, m, l);
    forward_epilogue(fb, params, at, o, m, l);
#endif
}

template <int HS, int BLOCK_N, int MIN_BLOCKS, bool PRODUCER, bool MASKED>
static void launch_forward_wgmma(const AttentionParams* p, const AttentionMask* mask, cudaStream_t stream) {
    constexpr int BLOCK_M = 128;
    // Q, 3 stages of K and of V, the scheduling anchor, and room to align the start to 1024 bytes.
    constexpr int smem = (BLOCK_M + 6 * BLOCK_N) * HS * (int)sizeof(bf16) + 256 * (int)sizeof(float) + 1024;
    constexpr auto kernel = flash_forward_wgmma_kernel<HS, BLOCK_N, MIN_BLOCKS, PRODUCER, MASKED>;
    raise_smem_limit<kernel>("flash_attention_forward_wgmma", smem);
    AttentionShape s = p->shape;
    CUtensorMap map_q, map_k, map_v;
    make_heads_tensor_map(&map_q, &p->q, s, BLOCK_M);
    make_heads_tensor_map(&map_k, &p->k, s, BLOCK_N);
    make_heads_tensor_map(&map_v, &p->v, s, BLOCK_N);
    int BH = s.B * s.NH, n_q_blocks = (int)ceil_div(s.T, BLOCK_M);
    // Heads in groups by what a head's blocks stream: its K and V.
    int head_group = grid_head_group(2 * (size_t)s.T * HS * sizeof(bf16), BH, n_q_blocks, MIN_BLOCKS);
    kernel<<<n_q_blocks * BH, PRODUCER ? 384 : 256, smem, stream>>>(map_q, map_k, map_v, *p, n_q_blocks, head_group,
                                                                    attention_mask_or_none(mask));
    cudaCheckLaunch();
}

void flash_attention_forward_wgmma(const AttentionParams* p, const AttentionMask* mask, cudaStream_t stream) {
    // HS 64: blocks of 64 keys and two thread blocks per SM (122 registers, 66 KiB of shared
    // memory each), so one block's barrier and softmax hide behind the other's wgmma, which
    // measured faster than 128-key blocks at one block per SM; a producer warpgroup does not fit
    // there (two blocks of 384 threads leave 85 registers a thread). HS 128: blocks of 128 keys
    // at one block per SM (Q and three stages of K and V take 224 of the 227 KiB), with the
    // producer and the consumers' turns, which measured faster than the same blocks without.
    bool masked = attention_mask_active(mask);
    if (p->shape.HS == 64) {
        if (masked) launch_forward_wgmma<64, 64, 2, false, true>(p, mask, stream);
        else        launch_forward_wgmma<64, 64, 2, false, false>(p, mask, stream);
    } else {
        if (masked) launch_forward_wgmma<128, 128, 1, true, true>(p, mask, stream);
        else        launch_forward_wgmma<128, 128, 1, true, false>(p, mask, stream);
    }
}
