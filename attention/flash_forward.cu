// attention/flash_forward.cu: the FlashAttention forward pass on mma.sync tensor cores (sm_80 on).
//   in:  qkv (B, T, 3, NH, HS) bf16, read by strides (row stride 3*NH*HS)
//   out: O (B, T, NH, HS) bf16 and L (B, NH, T) fp32, L = log sum_j exp(scale * q.k_j)
// One thread block per (Q block of BLOCK_M rows, batch*head); each warp owns 16*M_TILES query
// rows, keeps their Q fragments in registers and streams K/V blocks of BLOCK_N keys through
// double-buffered shared memory (one barrier per block), with the online softmax in registers.
// The T x T scores never leave the chip.
#include <math.h>
#include "attention/flash.h"
#include "attention/mma.cuh"
#include "attention/smem_tile.cuh"

template <int HS, int M_TILES, int NWARPS, int BLOCK_N>
__global__ void __launch_bounds__(NWARPS * 32)
flash_forward_kernel(bf16* out, float* lse, const bf16* qkv, int T, int NH, int BH, int n_q_blocks,
                     int causal, float scale) {
    constexpr int NTHREADS = NWARPS * 32;
    constexpr int WARP_ROWS = 16 * M_TILES;
    constexpr int BLOCK_M = WARP_ROWS * NWARPS;
    constexpr int S = PaddedRow<HS>::stride;
    extern __shared__ __align__(16) unsigned char smem[];
    bf16* sQ = reinterpret_cast<bf16*>(smem);   // (BLOCK_M, HS), later the O staging area
    bf16* sK = sQ + BLOCK_M * S;                  // 2 stages of (BLOCK_N, HS)
    bf16* sV = sK + 2 * BLOCK_N * S;              // 2 stages of (BLOCK_N, HS)

    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    // Causal work grows with the row index: the last Q blocks are issued first so the short
    // ones fill in the tail of the grid.
    int q_block = n_q_blocks - 1 - blockIdx.x / BH;
    int bh = blockIdx.x % BH, b = bh / NH, h = bh % NH;
    int q0 = q_block * BLOCK_M;
    int warp_q0 = q0 + warp * WARP_ROWS;       // first query row of this warp
    long long row_stride = 3LL * NH * HS;
    const bf16* q_ptr = qkv + (long long)b * T * row_stride + h * HS;
    const bf16* k_ptr = q_ptr + NH * HS;
    const bf16* v_ptr = q_ptr + 2 * NH * HS;
    // Causal: K/V blocks entirely above the diagonal of this Q block are never touched.
    int n_kv_blocks = (int)ceil_div(causal ? min(q0 + BLOCK_M, T) : T, BLOCK_N);

    load_tile_async<BLOCK_M, HS, NTHREADS>(sQ, q_ptr + q0 * row_stride, row_stride, T - q0);
    load_tile_async<BLOCK_N, HS, NTHREADS>(sK, k_ptr, row_stride, T);
    load_tile_async<BLOCK_N, HS, NTHREADS>(sV, v_ptr, row_stride, T);
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
    const float scale_log2 = scale * (float)M_LOG2E;

    for (int j = 0; j < n_kv_blocks; j++) {
        int stage = j & 1, kv0 = j * BLOCK_N;
        cp_async_wait<0>();
        // Block j is in place for every thread, and every thread is done with block j-1, so its
        // stage can take block j+1, which loads while block j is used: one barrier per block.
        __syncthreads();
        if (j + 1 < n_kv_blocks) {
            int next = kv0 + BLOCK_N;
            load_tile_async<BLOCK_N, HS, NTHREADS>(sK + (stage ^ 1) * BLOCK_N * S, k_ptr + next * row_stride, row_stride, T - next);
            load_tile_async<BLOCK_N, HS, NTHREADS>(sV + (stage ^ 1) * BLOCK_N * S, v_ptr + next * row_stride, row_stride, T - next);
            cp_async_commit();
        }
        const bf16* k_tile = sK + stage * BLOCK_N * S;
        const bf16* v_tile = sV + stage * BLOCK_N * S;

        // On the diagonal a warp may find every key of the block after all of its rows.
        if (!(causal && kv0 > warp_q0 + WARP_ROWS - 1)) {
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
            // Only the last block (T not a multiple of BLOCK_N) and diagonal blocks need masks.
            if (kv0 + BLOCK_N > T || (causal && kv0 + BLOCK_N - 1 > warp_q0)) {
                for (int mt = 0; mt < M_TILES; mt++)
                    for (int nt = 0; nt < BLOCK_N / 8; nt++)
                        for (int e = 0; e < 4; e++) {
                            int col = kv0 + nt * 8 + 2 * t + (e & 1);
                            int row = warp_q0 + mt * 16 + g + (e >> 1) * 8;
                            if (col >= T || (causal && col > row)) sc[mt][nt][e] = -INFINITY;
                        }
            }
            // Online softmax. Every row has a valid score in block 0 (key 0), so m is finite
            // from the first block on and a fully masked row of a later block leaves it as is.
            for (int mt = 0; mt < M_TILES; mt++)
                for (int half = 0; half < 2; half++) {
                    float mx = m[mt][half];
                    for (int nt = 0; nt < BLOCK_N / 8; nt++)
                        mx = fmaxf(mx, fmaxf(sc[mt][nt][2 * half], sc[mt][nt][2 * half + 1]));
                    // the 4 threads of a quad share a row
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                    float alpha = fast_exp2((m[mt][half] - mx) * scale_log2);
                    m[mt][half] = mx;
                    float neg_mx = -mx * scale_log2, sum = 0.0f;
                    for (int nt = 0; nt < BLOCK_N / 8; nt++)
                        for (int e = 2 * half; e < 2 * half + 2; e++) {
                            float p = fast_exp2(fmaf(sc[mt][nt][e], scale_log2, neg_mx));
                            sc[mt][nt][e] = p;
                            sum += p;
                        }
                    l[mt][half] = l[mt][half] * alpha + sum;
                    for (int dt = 0; dt < HS / 8; dt++) {
                        o[mt][dt][2 * half] *= alpha;
                        o[mt][dt][2 * half + 1] *= alpha;
                    }
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
    // only this warp ever read) so that global stores are whole 16-byte rows segments.
    for (int mt = 0; mt < M_TILES; mt++) {
        float inv[2];
        for (int half = 0; half < 2; half++) {
            float sum = l[mt][half];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            inv[half] = 1.0f / sum;
            int row = warp_q0 + mt * 16 + g + 8 * half;
            if (t == 0 && row < T) lse[(long long)bh * T + row] = m[mt][half] * scale + logf(sum);
        }
        for (int dt = 0; dt < HS / 8; dt++)
            store_c_tile<HS>(sQ, warp * WARP_ROWS + mt * 16, dt * 8, o[mt][dt], inv[0], inv[1]);
    }
    __syncwarp();
    store_rows_warp<WARP_ROWS, HS>(out + ((long long)b * T + warp_q0) * NH * HS + h * HS, (long long)NH * HS,
                                   sQ, warp * WARP_ROWS, T - warp_q0);
}

template <int HS, int M_TILES, int NWARPS, int BLOCK_N>
static void launch_forward(AttentionShape s, bf16* out, float* lse, const bf16* qkv, cudaStream_t stream) {
    constexpr int BLOCK_M = 16 * M_TILES * NWARPS;
    constexpr int smem = (BLOCK_M + 4 * BLOCK_N) * PaddedRow<HS>::stride * (int)sizeof(bf16);
    constexpr auto kernel = flash_forward_kernel<HS, M_TILES, NWARPS, BLOCK_N>;
    set_smem_limit_once<kernel>(smem);
    int BH = s.B * s.NH, n_q_blocks = (int)ceil_div(s.T, BLOCK_M);
    kernel<<<n_q_blocks * BH, NWARPS * 32, smem, stream>>>(out, lse, qkv, s.T, s.NH, BH, n_q_blocks, s.causal, s.scale);
    cudaCheckLaunch();
}

void flash_attention_forward_mma(AttentionShape s, bf16* out, float* lse, const bf16* qkv, cudaStream_t stream) {
    // HS 64: 4 warps of 32 rows (two m-tiles share every K/V fragment read from shared memory).
    // HS 128: 8 warps of 16 rows, which keeps Q (32 regs) + O (64) + S (32) within registers.
    if (s.HS == 64) launch_forward<64, 2, 4, 64>(s, out, lse, qkv, stream);
    else            launch_forward<128, 1, 8, 64>(s, out, lse, qkv, stream);
}
