// attention/flash_backward_wgmma.cu: the FlashAttention backward pass on Hopper's warpgroup
// tensor cores (wgmma, sm_90a). Same function as flash_backward.cu:
//   in:  dO, O (B, T, NH, HS) bf16; L (B, NH, T) fp32 from the forward; qkv (B, T, 3, NH, HS)
//   out: dqkv (B, T, 3, NH, HS) bf16, every element written
// Around the kernel, the shared steps of flash_backward_steps.cu: D = rowsum(dO * O) before,
// the fp32 dQ accumulator to bf16 after.
// One thread block of two warpgroups per K/V block of 128 keys; warpgroup w owns keys
// 64w..64w+63 and keeps their dK and dV in registers while the block walks over the Q blocks
// that see it (BLOCK_M = 8192 / HS queries each). Per Q block, per warpgroup:
//   S^T = K Q^T, dP^T = V dO^T             (64 keys x BLOCK_M queries, both operands in smem)
//   P^T = exp(scale S^T - L), dS^T = P^T (dP^T - D)     (registers; L, D per query = column)
//   dV += P^T dO, dK += dS^T Q              (P^T, dS^T from registers: the accumulators repacked)
//   dQ += dS K                              (dS^T through smem; the 64 x 64 piece of this
//                                            warpgroup, added to the accumulator with atomics)
// The transposed products put the keys in the rows, the M side of wgmma, so P^T and dS^T come
// out of S^T and dP^T as A operands of the dV and dK products without leaving registers.
// The deterministic mode runs the mma.sync kernels (flash_backward.cu), whose dQ needs no atomics.
#include <math.h>
#include "attention/flash.h"
#include "attention/wgmma.cuh"

// BLOCK_M x HS = 8192 for both head sizes, so the dQ tile of a Q block splits into two 64 x 64
// pieces, one per warpgroup: for HS 64 the two halves of the queries, for HS 128 the two halves
// of the dimensions.
template <int HS>
__global__ void __launch_bounds__(256, 1)
flash_backward_wgmma_kernel(bf16* dqkv, float* dq_accum, const bf16* dout, const float* lse, const float* delta,
                            const bf16* qkv, int T, int NH, int BH, int causal, float scale) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)   // wgmma exists only in sm_90a code; elsewhere the body is empty
    constexpr int NTHREADS = 256, BLOCK_N = 128, BLOCK_M = 8192 / HS;
    constexpr int KV_BYTES = BLOCK_N * HS * (int)sizeof(bf16), Q_BYTES = BLOCK_M * HS * (int)sizeof(bf16);
    extern __shared__ unsigned char smem_raw[];
    // Swizzle atoms must start on 1024-byte boundaries; the launcher adds 1024 bytes for this.
    unsigned char* sK = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);  // (BLOCK_N, HS), later dK
    unsigned char* sV = sK + KV_BYTES;                         // (BLOCK_N, HS), later dV
    unsigned char* sQ = sV + KV_BYTES;                         // 2 stages of (BLOCK_M, HS)
    unsigned char* sdO = sQ + 2 * Q_BYTES;                     // 2 stages of (BLOCK_M, HS)
    unsigned char* sdS = sdO + 2 * Q_BYTES;                    // (BLOCK_N, BLOCK_M): dS^T
    float* sL = reinterpret_cast<float*>(sdS + BLOCK_N * BLOCK_M * sizeof(bf16));   // 2 stages of (BLOCK_M)
    float* sD = sL + 2 * BLOCK_M;                              // 2 stages of (BLOCK_M)
    uint32_t* sched_anchor = reinterpret_cast<uint32_t*>(sD + 2 * BLOCK_M);   // (NTHREADS), see the loop

    int wg = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, t = lane % 4;
    // Causal work shrinks with the key index: the first K/V blocks are issued first.
    int kv_block = blockIdx.x / BH;
    int bh = blockIdx.x % BH, b = bh / NH, h = bh % NH;
    int k0 = kv_block * BLOCK_N;
    int wg_k0 = k0 + wg * 64;                          // first key of this warpgroup
    int key0 = wg_k0 + warp * 16 + lane / 4;           // this thread's keys: key0 and key0 + 8
    long long row_stride = 3LL * NH * HS, do_stride = (long long)NH * HS;
    const bf16* q_ptr = qkv + (long long)b * T * row_stride + h * HS;
    const bf16* k_ptr = q_ptr + NH * HS;
    const bf16* v_ptr = q_ptr + 2 * NH * HS;
    const bf16* do_ptr = dout + (long long)b * T * do_stride + h * HS;
    const float* l_ptr = lse + (long long)bh * T;
    const float* d_ptr = delta + (long long)bh * T;
    // Causal: Q blocks entirely before this K/V block never see it.
    int first_q_block = causal ? k0 / BLOCK_M : 0;
    int n_q_blocks = (int)ceil_div(T, BLOCK_M);

    auto load_q_block = [&](int i, int stage) {
        int q0 = i * BLOCK_M;
        load_swizzled_async<BLOCK_M, HS, NTHREADS>(sQ + stage * Q_BYTES, q_ptr + q0 * row_stride, row_stride, T - q0);
        load_swizzled_async<BLOCK_M, HS, NTHREADS>(sdO + stage * Q_BYTES, do_ptr + q0 * do_stride, do_stride, T - q0);
        load_vec_async<BLOCK_M, NTHREADS>(sL + stage * BLOCK_M, l_ptr + q0, T - q0);
        load_vec_async<BLOCK_M, NTHREADS>(sD + stage * BLOCK_M, d_ptr + q0, T - q0);
    };
    load_swizzled_async<BLOCK_N, HS, NTHREADS>(sK, k_ptr + k0 * row_stride, row_stride, T - k0);
    load_swizzled_async<BLOCK_N, HS, NTHREADS>(sV, v_ptr + k0 * row_stride, row_stride, T - k0);
    load_q_block(first_q_block, 0);
    cp_async_commit();

    float dk[HS / 2], dv[HS / 2];   // dK, dV of this warpgroup's keys (accumulator layout)
    #pragma unroll
    for (int i = 0; i < HS / 2; i++) dk[i] = dv[i] = 0.0f;
    const float scale_log2 = scale * (float)M_LOG2E;
    const uint32_t sK_addr = smem_addr(sK), sV_addr = smem_addr(sV), sdS_addr = smem_addr(sdS);
    // This warpgroup's dQ piece: queries 64*dq_qh.., dimensions 64*dq_dh.. of the Q block.
    const int dq_qh = HS == 64 ? wg : 0, dq_dh = HS == 64 ? 0 : wg;

    for (int i = first_q_block; i < n_q_blocks; i++) {
        int stage = (i - first_q_block) & 1, q0 = i * BLOCK_M;
        // One barrier starts each Q block: block i is in place for every thread (cp.async writes
        // through the generic proxy, wgmma reads through the async proxy, hence the fence); every
        // warpgroup is done with block i-1, whose stage now takes block i+1, and with its dS^T.
        cp_async_wait<0>();
        fence_proxy_async_shared();
        __syncthreads();
        if (i + 1 < n_q_blocks) {
            load_q_block(i + 1, stage ^ 1);
            cp_async_commit();
        }
        const uint32_t sQ_addr = smem_addr(sQ + stage * Q_BYTES), sdO_addr = smem_addr(sdO + stage * Q_BYTES);
        const float* l_blk = sL + stage * BLOCK_M;
        const float* d_blk = sD + stage * BLOCK_M;

        // Declared here, not above the loop: their first wgmma ignores the old values (scale-d = 0),
        // so nothing of them lives from one Q block to the next.
        float st[BLOCK_M / 2], dpt[BLOCK_M / 2];   // S^T, then P^T; dP^T, then dS^T
        float dq[32];                               // this warpgroup's dQ piece
        uint32_t pa[BLOCK_M / 16][4], dsa[BLOCK_M / 16][4];   // P^T, dS^T as A fragments
        wgmma_fence();
        #pragma unroll
        for (int kk = 0; kk < HS / 16; kk++)
            wgmma_ss<BLOCK_M>(st, desc_k_major<BLOCK_N>(sK_addr, wg * 64, kk), desc_k_major<BLOCK_M>(sQ_addr, 0, kk), kk > 0);
        wgmma_commit();
        #pragma unroll
        for (int kk = 0; kk < HS / 16; kk++)
            wgmma_ss<BLOCK_M>(dpt, desc_k_major<BLOCK_N>(sV_addr, wg * 64, kk), desc_k_major<BLOCK_M>(sdO_addr, 0, kk), kk > 0);
        wgmma_commit();

        // P^T while dP^T is still running. Masked scores become -inf, so their P^T is 0: queries
        // past T, keys past T and (causal) keys after the query. Only blocks on the diagonal or at
        // the end of the sequence need it, and the branch keeps the others free of its cost.
        wgmma_wait<1>();
        pin_registers(st);
        if (q0 + BLOCK_M > T || wg_k0 + 64 > T || (causal && wg_k0 + 63 > q0)) {
            // Key key0 + 8h sees the columns (queries q0 + col + 2t) with lo[h] <= col < hi[h].
            int lo[2], hi[2];
            #pragma unroll
            for (int h = 0; h < 2; h++) {
                int key = key0 + 8 * h;
                lo[h] = causal ? key - q0 - 2 * t : 0;
                hi[h] = key < T ? T - q0 - 2 * t : 0;
            }
            #pragma unroll
            for (int nt = 0; nt < BLOCK_M / 8; nt++)
                #pragma unroll
                for (int e = 0; e < 4; e++) {
                    int col = nt * 8 + (e & 1);
                    if (col < lo[e >> 1] || col >= hi[e >> 1]) st[4 * nt + e] = -INFINITY;
                }
        }
        #pragma unroll
        for (int nt = 0; nt < BLOCK_M / 8; nt++) {
            float2 lq = *reinterpret_cast<const float2*>(l_blk + nt * 8 + 2 * t);
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                float l_log2 = ((e & 1) ? lq.y : lq.x) * (float)M_LOG2E;
                st[4 * nt + e] = fast_exp2(fmaf(st[4 * nt + e], scale_log2, -l_log2));
            }
        }
        uint32_t anchor = 0;
        #pragma unroll
        for (int i = 0; i < BLOCK_M / 2; i++) anchor ^= __float_as_uint(st[i]);
        // ptxas places wgmma.wait_group as early as it may, which would put the exponentials
        // after the wait, serialised with dP^T; it keeps the wait after memory operations, so
        // this store (never read) of a value that needs all of P^T holds it below them.
        asm volatile("st.shared.u32 [%0], %1;\n" :: "r"(smem_addr(sched_anchor) + threadIdx.x * 4), "r"(anchor) : "memory");
        wgmma_wait<0>();
        pin_registers(dpt);
        #pragma unroll
        for (int nt = 0; nt < BLOCK_M / 8; nt++) {
            float2 dq2 = *reinterpret_cast<const float2*>(d_blk + nt * 8 + 2 * t);
            #pragma unroll
            for (int e = 0; e < 4; e++) dpt[4 * nt + e] = st[4 * nt + e] * (dpt[4 * nt + e] - ((e & 1) ? dq2.y : dq2.x));
        }
        #pragma unroll
        for (int kk = 0; kk < BLOCK_M / 16; kk++) {
            c_to_a(pa[kk], &st[8 * kk], &st[8 * kk + 4]);
            c_to_a(dsa[kk], &dpt[8 * kk], &dpt[8 * kk + 4]);
        }

        // dV += P^T dO and dK += dS^T Q (scale applied once at the end); dO and Q are MN-major
        // B operands here (rows = queries = the k of these products).
        wgmma_fence();
        #pragma unroll
        for (int kk = 0; kk < BLOCK_M / 16; kk++) wgmma_rs<HS>(dv, pa[kk], desc_mn_major<BLOCK_M>(sdO_addr, kk));
        #pragma unroll
        for (int kk = 0; kk < BLOCK_M / 16; kk++) wgmma_rs<HS>(dk, dsa[kk], desc_mn_major<BLOCK_M>(sQ_addr, kk));
        wgmma_commit();

        // dS^T (keys, queries) into shared memory while those run: A fragment register r of
        // k-step kk holds rows +8*(r&1), columns 16kk + 8*(r>>1) + 2t.
        #pragma unroll
        for (int kk = 0; kk < BLOCK_M / 16; kk++)
            #pragma unroll
            for (int r = 0; r < 4; r++) {
                int row = key0 - k0 + 8 * (r & 1), col = 16 * kk + 8 * (r >> 1);
                *reinterpret_cast<uint32_t*>(sdS + swizzled_offset<BLOCK_N>(row, col) + 4 * t) = dsa[kk][r];
            }
        fence_proxy_async_shared();
        __syncthreads();   // all of dS^T in place

        // dQ piece (64 x 64) = dS[queries of the piece, all 128 keys] K[all keys, dims of the
        // piece]: A from the dS^T tile, B from the K tile, both MN-major (one 64-wide panel each).
        wgmma_fence();
        #pragma unroll
        for (int kk = 0; kk < BLOCK_N / 16; kk++)
            wgmma_ss<64, 1, 1>(dq, desc_mn_major<BLOCK_N>(sdS_addr + dq_qh * BLOCK_N * 128, kk),
                               desc_mn_major<BLOCK_N>(sK_addr + dq_dh * BLOCK_N * 128, kk), kk > 0);
        wgmma_commit();
        wgmma_wait<0>();
        pin_registers(dq);
        pin_registers(dv);
        pin_registers(dk);
        pin_registers(pa);
        pin_registers(dsa);

        // d[4n + e] is row 16*warp + g + 8*(e>>1), column 8n + 2t + (e&1) of the piece.
        #pragma unroll
        for (int half = 0; half < 2; half++) {
            int query = q0 + dq_qh * 64 + warp * 16 + lane / 4 + 8 * half;
            if (query >= T) continue;
            float* dst = dq_accum + ((long long)bh * T + query) * HS + dq_dh * 64 + 2 * t;
            #pragma unroll
            for (int n = 0; n < 8; n++)
                atomicAdd(reinterpret_cast<float2*>(dst + 8 * n), make_float2(dq[4 * n + 2 * half], dq[4 * n + 2 * half + 1]));
        }
    }

    // dK (times scale) and dV as bf16 through this warpgroup's rows of sK and sV (every wgmma
    // reading them is done after this barrier), then whole 16-byte row pieces to dqkv.
    __syncthreads();
    #pragma unroll
    for (int n = 0; n < HS / 8; n++)
        #pragma unroll
        for (int half = 0; half < 2; half++) {
            int row = key0 - k0 + 8 * half, col = 8 * n;
            *reinterpret_cast<uint32_t*>(sK + swizzled_offset<BLOCK_N>(row, col) + 4 * t) =
                pack_bf16(dk[4 * n + 2 * half] * scale, dk[4 * n + 2 * half + 1] * scale);
            *reinterpret_cast<uint32_t*>(sV + swizzled_offset<BLOCK_N>(row, col) + 4 * t) =
                pack_bf16(dv[4 * n + 2 * half], dv[4 * n + 2 * half + 1]);
        }
    __syncthreads();
    constexpr int CHUNKS = HS / 8;
    bf16* dk_ptr = dqkv + (long long)b * T * row_stride + NH * HS + h * HS;
    #pragma unroll
    for (int k = 0; k < BLOCK_N * CHUNKS / NTHREADS; k++) {
        int idx = threadIdx.x + k * NTHREADS, r = idx / CHUNKS, c = (idx % CHUNKS) * 8;
        if (k0 + r < T) {
            bf16* dst = dk_ptr + (k0 + r) * row_stride + c;
            *reinterpret_cast<int4*>(dst) = *reinterpret_cast<const int4*>(sK + swizzled_offset<BLOCK_N>(r, c));
            *reinterpret_cast<int4*>(dst + NH * HS) = *reinterpret_cast<const int4*>(sV + swizzled_offset<BLOCK_N>(r, c));
        }
    }
#endif
}

template <int HS>
static void launch_backward_wgmma(AttentionShape s, bf16* dqkv, float* dq_accum, const bf16* dout, const float* lse,
                                  const float* delta, const bf16* qkv, cudaStream_t stream) {
    constexpr int BLOCK_N = 128, BLOCK_M = 8192 / HS;
    // K, V, 2 stages of Q and dO, dS^T, 2 stages of L and D, the scheduling anchor, and room to
    // align the start to 1024 bytes.
    constexpr int smem = (2 * BLOCK_N + 4 * BLOCK_M) * HS * (int)sizeof(bf16) + BLOCK_N * BLOCK_M * (int)sizeof(bf16) +
                         (4 * BLOCK_M + 256) * (int)sizeof(float) + 1024;
    constexpr auto kernel = flash_backward_wgmma_kernel<HS>;
    set_smem_limit_once<kernel>(smem);
    int BH = s.B * s.NH, n_kv_blocks = (int)ceil_div(s.T, BLOCK_N);
    kernel<<<n_kv_blocks * BH, 256, smem, stream>>>(dqkv, dq_accum, dout, lse, delta, qkv, s.T, s.NH, BH, s.causal, s.scale);
    cudaCheckLaunch();
}

void flash_attention_backward_wgmma(AttentionShape s, bf16* dqkv, const bf16* dout, const bf16* out, const float* lse,
                                    const bf16* qkv, void* scratch, int deterministic, cudaStream_t stream) {
    const char* why = flash_attention_unsupported(s);
    if (why) { fprintf(stderr, "error: %s\n", why); exit(1); }
    if (!flash_attention_wgmma_available()) {
        fprintf(stderr, "error: flash attention: the wgmma kernels need an sm_90 GPU and a build for sm_90a\n");
        exit(1);
    }
    if (deterministic) {
        flash_attention_backward_mma(s, dqkv, dout, out, lse, qkv, scratch, 1, stream);
        return;
    }
    float* delta = flash_backward_delta(s, scratch);
    float* dq_accum = flash_backward_dq_accum(s, scratch);
    flash_backward_prepass(s, delta, dq_accum, dout, out, stream);
    if (s.HS == 64) launch_backward_wgmma<64>(s, dqkv, dq_accum, dout, lse, delta, qkv, stream);
    else            launch_backward_wgmma<128>(s, dqkv, dq_accum, dout, lse, delta, qkv, stream);
    flash_backward_dq_convert(s, dqkv, dq_accum, stream);
}
