// attention/flash_forward.cu: the FlashAttention forward pass on mma.sync tensor cores (sm_80 on).
//   in:  Q, K, V (B, T, NH, HS) bf16, read by the strides of their views (attention/params.h)
//   out: O (B, T, NH, HS) bf16 and L (B, NH, T) fp32 by their views, L = log sum_j exp(scale * q.k_j)
// One thread block per (Q block of BLOCK_M rows, batch*head); each warp owns 16*M_TILES query
// rows, keeps their Q fragments in registers and streams K/V blocks of BLOCK_N keys through
// double-buffered shared memory (one barrier per block), with the online softmax in registers.
// The T x T scores never leave the chip. MASKED (a key window per row, params.h's AttentionMask):
// the block starts at the K/V block that holds its first row's first key, a warp passes over the
// blocks before its own rows' windows, and the blocks that cut a row's window are masked.
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

template <int HS, int M_TILES, int NWARPS, int BLOCK_N, bool MASKED>
__global__ void __launch_bounds__(NWARPS * 32)
flash_forward_kernel(const AttentionParams p, const AttentionMask mask) {
    constexpr int NTHREADS = NWARPS * 32;
    constexpr int WARP_ROWS = 16 * M_TILES;
    constexpr int BLOCK_M = WARP_ROWS * NWARPS;
    constexpr int S = PaddedRow<HS>::stride;
    extern __shared__ __align__(16) unsigned char smem[];
    bf16* sQ = reinterpret_cast<bf16*>(smem);   // (BLOCK_M, HS), later the O staging area
    bf16* sK = sQ + BLOCK_M * S;                  // 2 stages of (BLOCK_N, HS)
    bf16* sV = sK + 2 * BLOCK_N * S;              // 2 stages of (BLOCK_N, HS)

    const int T = p.shape.T, NH = p.shape.NH, causal = p.shape.causal;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    // Causal work grows with the row index: the last Q blocks are issued first so the short
    // ones fill in the tail of the grid.
    int BH = p.shape.B * NH, n_q_blocks = (int)ceil_div(T, BLOCK_M);
    int q_block = n_q_blocks - 1 - blockIdx.x / BH;
    int bh = blockIdx.x % BH, b = bh / NH, h = bh % NH;
    int q0 = q_block * BLOCK_M;
    int warp_q0 = q0 + warp * WARP_ROWS;       // first query row of this warp
    const bf16* q_ptr = head_rows(p.q, b, h);
    // Causal: K/V blocks entirely above the diagonal of this Q block are never touched; masked,
    // nor those before its first row's window (lo never decreases along the rows).
    int n_kv_blocks = (int)ceil_div(causal ? min(q0 + BLOCK_M, T) : T, BLOCK_N);
    int first_kv_block = 0;
    // Masked: the first key of each of this thread's rows, and of the warp's first and last rows
    // (rows past T take row T - 1's).
    int row_lo[M_TILES][2], warp_lo_first = 0, warp_lo_last = 0;
    if constexpr (MASKED) {
        const KeyWindow window(mask, b, T);
        first_kv_block = window.first_block(q0, BLOCK_N);
        warp_lo_first = window.lo(min(warp_q0, T - 1));
        warp_lo_last = window.lo(min(warp_q0 + WARP_ROWS - 1, T - 1));
        for (int mt = 0; mt < M_TILES; mt++)
            for (int half = 0; half < 2; half++) row_lo[mt][half] = window.lo(min(warp_q0 + mt * 16 + g + 8 * half, T - 1));
    }
    // The K and V blocks being loaded, advanced a block at a time: fewer registers than offsets
    // from the head's row 0.
    const bf16* k_ptr = head_rows(p.k, b, h) + first_kv_block * BLOCK_N * p.k.row;
    const bf16* v_ptr = head_rows(p.v, b, h) + first_kv_block * BLOCK_N * p.v.row;

    load_tile_async<BLOCK_M, HS, NTHREADS>(sQ, q_ptr + q0 * p.q.row, p.q.row, T - q0);
    load_tile_async<BLOCK_N, HS, NTHREADS>(sK, k_ptr, p.k.row, T - first_kv_block * BLOCK_N);
    load_tile_async<BLOCK_N, HS, NTHREADS>(sV, v_ptr, p.v.row, T - first_kv_block * BLOCK_N);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    uint32_t q_frag[M_TILES][HS / 16][4];
    for (int mt = 0; mt < M_TILES; mt++)
        for (int kk = 0; kk < HS / 16; kk++) load_a(q_frag[mt][kk], sQ, S, warp * WARP_ROWS + mt * 16, kk * 16);

    // Per row (g and g+8 of each m-tile): running max m of the raw scores, this thread's share
    // l of the running sum of exp, and the unnormalised output o.
    float o[M_TILES][HS / 8][4] = {};
    float m[M_TILES][2], l[M_TILES][2];
    for (int mt = 0; mt < M_TILES; mt++)
        for (int half = 0; half < 2; half++) { m[mt][half] = -INFINITY; l[mt][half] = 0.0f; }
    // exp(scale*(s - m)) = 2^(scale*log2(e)*s - scale*log2(e)*m): one FFMA and one EX2 per score.
    const float scale_log2 = p.shape.scale * (float)M_LOG2E;

    for (int j = first_kv_block; j < n_kv_blocks; j++) {
        int stage = (j - first_kv_block) & 1, kv0 = j * BLOCK_N;
        cp_async_wait<0>();
        // Block j is in place for every thread, and every thread is done with block j-1, so its
        // stage can take block j+1, which loads while block j is used: one barrier per block.
        __syncthreads();
        if (j + 1 < n_kv_blocks)
            load_next_kv_block<BLOCK_N, HS, NTHREADS>(sK, sV, stage ^ 1, k_ptr, p.k.row, v_ptr, p.v.row, T - (kv0 + BLOCK_N));
        const bf16* k_tile = sK + stage * BLOCK_N * S;
        const bf16* v_tile = sV + stage * BLOCK_N * S;

        // On the diagonal a warp may find every key of the block after all of its rows; masked,
        // at the start every key before all of its rows' windows.
        if (!(causal && kv0 > warp_q0 + WARP_ROWS - 1) && !(MASKED && kv0 + BLOCK_N - 1 < warp_lo_first)) {
            // S = Q K^T for this warp's rows: (WARP_ROWS, BLOCK_N), fp32.
            float sc[M_TILES][BLOCK_N / 8][4] = {};
            for (int kk = 0; kk < HS / 16; kk++)
                for (int np = 0; np < BLOCK_N / 16; np++) {
                    uint32_t kb[4];
                    load_b_nk(kb, k_tile, S, np * 16, kk * 16);
                    for (int mt = 0; mt < M_TILES; mt++) {
                        mma_bf16(sc[mt][2 * np], q_frag[mt][kk], kb[0], kb[1]);
                        mma_bf16(sc[mt][2 * np + 1], q_frag[mt][kk], kb[2], kb[3]);
                    }
                }
            // Only the last block (T not a multiple of BLOCK_N) and diagonal blocks need masks;
            // masked, also those that start before a row's window.
            if (kv0 + BLOCK_N > T || (causal && kv0 + BLOCK_N - 1 > warp_q0) || (MASKED && kv0 < warp_lo_last))
                for (int mt = 0; mt < M_TILES; mt++) {
                    int row = warp_q0 + mt * 16 + g;
                    VisibleColumns seen[2];
                    if constexpr (MASKED) {
                        seen[0] = keys_in_window(row, kv0 + 2 * t, T, row_lo[mt][0], causal);
                        seen[1] = keys_in_window(row + 8, kv0 + 2 * t, T, row_lo[mt][1], causal);
                    } else {
                        seen[0] = keys_seen(row, kv0 + 2 * t, T, causal);
                        seen[1] = keys_seen(row + 8, kv0 + 2 * t, T, causal);
                    }
                    mask_tile<BLOCK_N / 8>(&sc[mt][0][0], seen);
                }
            // Online softmax. Every row has a valid score in block 0 (key 0), so m is finite
            // from the first block on and a fully masked row of a later block leaves it as is;
            // masked, a row's first blocks may hold none of its keys (EMPTY_ROWS).
            #pragma unroll   // sc and o stay in registers only while every index is a constant
            for (int mt = 0; mt < M_TILES; mt++) {
                float alpha[2];
                online_softmax<BLOCK_N / 8, 0, MASKED>(&sc[mt][0][0], m[mt], l[mt], alpha, scale_log2);
                for (int dt = 0; dt < HS / 8; dt++)
                    for (int e = 0; e < 4; e++) o[mt][dt][e] *= alpha[e >> 1];
            }
            // O += P V; P goes from the score accumulators straight into A fragments.
            for (int kk = 0; kk < BLOCK_N / 16; kk++) {
                uint32_t p_frag[M_TILES][4];
                for (int mt = 0; mt < M_TILES; mt++) c_to_a(p_frag[mt], sc[mt][2 * kk], sc[mt][2 * kk + 1]);
                for (int dp = 0; dp < HS / 16; dp++) {
                    uint32_t vb[4];
                    load_b_kn(vb, v_tile, S, kk * 16, dp * 16);
                    for (int mt = 0; mt < M_TILES; mt++) {
                        mma_bf16(o[mt][2 * dp], p_frag[mt], vb[0], vb[1]);
                        mma_bf16(o[mt][2 * dp + 1], p_frag[mt], vb[2], vb[3]);
                    }
                }
            }
        }
    }

    // O = o / l and L = scale*m + log(l); O is staged in this warp's own rows of sQ (which
    // only this warp ever read) so that global stores are whole 16-byte rows segments. Masked
    // and not causal, a row may see no key: l = 0 and m = -inf give O = 0 and L = -inf.
    float* lse = p.lse.ptr + b * p.lse.batch + (long long)h * p.lse.head;
    for (int mt = 0; mt < M_TILES; mt++) {
        float inv[2];
        for (int half = 0; half < 2; half++) {
            float sum = quad_sum(l[mt][half]);
            inv[half] = MASKED && sum == 0.0f ? 0.0f : 1.0f / sum;
            int row = warp_q0 + mt * 16 + g + 8 * half;
            if (t == 0 && row < T) lse[row] = m[mt][half] * p.shape.scale + logf(sum);
        }
        for (int dt = 0; dt < HS / 8; dt++)
            store_c_tile<HS>(sQ, warp * WARP_ROWS + mt * 16, dt * 8, o[mt][dt], inv[0], inv[1]);
    }
    __syncwarp();
    store_rows_warp<WARP_ROWS, HS>(head_rows(p.o, b, h) + warp_q0 * p.o.row, p.o.row,
                                   sQ, warp * WARP_ROWS, T - warp_q0);
}

template <int HS, int M_TILES, int NWARPS, int BLOCK_N, bool MASKED>
static void launch_forward(const AttentionParams* p, const AttentionMask* mask, cudaStream_t stream) {
    constexpr int BLOCK_M = 16 * M_TILES * NWARPS;
    constexpr int smem = (BLOCK_M + 4 * BLOCK_N) * PaddedRow<HS>::stride * (int)sizeof(bf16);
    constexpr auto kernel = flash_forward_kernel<HS, M_TILES, NWARPS, BLOCK_N, MASKED>;
    raise_smem_limit<kernel>("flash_attention_forward_mma", smem);
    int n_q_blocks = (int)ceil_div(p->shape.T, BLOCK_M);
    kernel<<<n_q_blocks * p->shape.B * p->shape.NH, NWARPS * 32, smem, stream>>>(*p, attention_mask_or_none(mask));
    cudaCheckLaunch();
}

void flash_attention_forward_mma(const AttentionParams* p, const AttentionMask* mask, cudaStream_t stream) {
    // HS 64: 4 warps of 32 rows (two m-tiles share every K/V fragment read from shared memory).
    // HS 128: 8 warps of 16 rows, which keeps Q (32 regs) + O (64) + S (32) within registers.
    bool masked = attention_mask_active(mask);
    if (p->shape.HS == 64) {
        if (masked) launch_forward<64, 2, 4, 64, true>(p, mask, stream);
        else        launch_forward<64, 2, 4, 64, false>(p, mask, stream);
    } else {
        if (masked) launch_forward<128, 1, 8, 64, true>(p, mask, stream);
        else        launch_forward<128, 1, 8, 64, false>(p, mask, stream);
    }
}
