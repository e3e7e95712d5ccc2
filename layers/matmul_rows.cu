// layers/matmul_rows.cu: layers/matmul_rows.h. One thread block computes 16 output columns of
// up to 32 rows: it copies its 16 weight rows (16 x C) into shared memory with cp.async before
// waiting on the kernel before it; after the wait it takes the input rows (into shared memory
// when it normalises them first, by layernorm or RMSNorm). Its 8 warps split C into steps of 32 and run the bf16
// mma.sync m16n8k16 with the weights as A (16 columns x 16) and the input rows as B (16 x 8
// rows), so one block serves 1 to 32 rows at the cost of one read of its weights. The warps'
// sums meet in shared memory in a fixed order (deterministic), and the epilogue runs on them.
//
// The order of the 32 channels of a step inside the mma is free (a dot product does not care)
// as long as A and B agree: thread (g = lane / 4, t = lane % 4) takes the 8 contiguous channels
// 8t..8t+7, one 16-byte load, and hands channels 8t..8t+3 to the first mma of the step and
// 8t+4..8t+7 to the second, in the k slots the fragment layout gives thread t
// (device/mma.cuh).
#include "layers/matmul_rows.h"

#include "common/error.h"
#include "device/bf16.cuh"
#include "device/launch.cuh"
#include "device/mma.cuh"
#include "device/smem.cuh"
#include "layers/kernel_common.cuh"
#include "layers/layernorm.h"
#include "layers/rmsnorm.h"

#define ROWS_WARPS 8
#define ROWS_THREADS (ROWS_WARPS * 32)
#define ROWS_COLUMNS 16   // output columns a block computes: the M of the mma
#define ROWS_MAX 32       // input rows a block takes: four n-tiles of 8
#define ROWS_UNROLL 3     // steps of 32 channels a warp loads before it multiplies (C 768: one round)
#define ROWS_OUTPUTS (ROWS_MAX * ROWS_COLUMNS / ROWS_THREADS)   // outputs per thread in the epilogue
// Rows in shared memory are padded by 32 elements, so rows g and g + 1, read by one quarter of a
// warp, fall on distinct banks when C is a multiple of 64.
#define ROWS_PAD 32

struct RowsArgs {
    bf16* out;
    const bf16* inp;
    const bf16* weight;
    RowsEpilogue e;
    int N, C, OC;
};

// Shared memory: the weight tile (ROWS_COLUMNS, C + ROWS_PAD); with a norm, the input rows
// (ROWS_MAX, C + ROWS_PAD), normalised in place, and the layernorm's weight and bias (C each);
// the warps' sums (ROWS_WARPS, ROWS_MAX, ROWS_COLUMNS) fp32; the bias of the block's columns.
static size_t rows_shared_bytes(int C, bool norm, bool ln) {
    size_t pitch = C + ROWS_PAD;
    return (ROWS_COLUMNS * pitch + (norm ? ROWS_MAX * pitch : 0) + (ln ? 2 * C : 0)) * sizeof(bf16) +
           ((size_t)ROWS_WARPS * ROWS_MAX * ROWS_COLUMNS + ROWS_COLUMNS) * sizeof(float);
}

__global__ void __launch_bounds__(ROWS_THREADS, 2) matmul_rows_kernel(const RowsArgs a) {
    extern __shared__ __align__(16) unsigned char shared[];
    const RowsEpilogue& e = a.e;
    const bool ln = e.ln_weight != NULL, norm = ln || e.rms_norm;
    const int C = a.C, pitch = C + ROWS_PAD, packs = C / 8;
    const int col0 = blockIdx.x * ROWS_COLUMNS, n0 = blockIdx.y * ROWS_MAX, rows = min(ROWS_MAX, a.N - n0);
    bf16* w_tile = (bf16*)shared;
    bf16* x_tile = w_tile + ROWS_COLUMNS * pitch;
    bf16* ln_w = x_tile + (norm ? ROWS_MAX * pitch : 0);
    bf16* ln_b = ln_w + (ln ? C : 0);
    float* partial = (float*)(ln_b + (ln ? C : 0));
    float* bias = partial + ROWS_WARPS * ROWS_MAX * ROWS_COLUMNS;

    // No kernel writes the parameters: their copies start before the wait, so they overlap the
    // kernel before this one.
    for (int i = threadIdx.x; i < ROWS_COLUMNS * packs; i += ROWS_THREADS) {
        int r = i / packs, c = (i % packs) * 8;
        bool valid = col0 + r < a.OC;
        cp_async_16(w_tile + r * pitch + c, a.weight + (size_t)(valid ? col0 + r : 0) * C + c, valid);
    }
    for (int i = threadIdx.x; ln && i < packs; i += ROWS_THREADS) {
        cp_async_16(ln_w + 8 * i, e.ln_weight + 8 * i, true);
        cp_async_16(ln_b + 8 * i, e.ln_bias + 8 * i, true);
    }
    if (threadIdx.x < ROWS_COLUMNS)
        bias[threadIdx.x] = e.bias && col0 + threadIdx.x < a.OC ? (float)e.bias[col0 + threadIdx.x] : 0.0f;
    cp_async_commit();
    grid_dependency_wait();
    grid_dependents_launch();

    // The inputs: with a norm, every row into shared memory; the residual of this thread's
    // outputs into registers, in flight while the rest goes on.
    for (int i = threadIdx.x; norm && i < rows * packs; i += ROWS_THREADS) {
        int r = i / packs, c = (i % packs) * 8;
        cp_async_16(x_tile + r * pitch + c, a.inp + (size_t)(n0 + r) * C + c, true);
    }
    cp_async_commit();
    float residual[ROWS_OUTPUTS];
    #pragma unroll
    for (int q = 0; q < ROWS_OUTPUTS; q++) {
        int i = threadIdx.x + q * ROWS_THREADS, r = i / ROWS_COLUMNS, col = col0 + i % ROWS_COLUMNS;
        residual[q] = e.residual && r < rows && col < a.OC ? (float)e.residual[(size_t)(n0 + r) * a.OC + col] : 0.0f;
    }
    cp_async_wait<0>();
    __syncthreads();

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    if (norm) {
        // All rows at once, a group of `per_row` threads each (a warp when there are few rows):
        // layernorm's mean and rstd in two passes as layers/layernorm.cu (no cancellation in the
        // variance), or RMSNorm's rstd, then the row normalised in place, rounded to bf16 as
        // those kernels' outputs are.
        const int per_row = rows <= ROWS_THREADS / 32 ? 32 : ROWS_THREADS / ROWS_MAX;
        int r = threadIdx.x / per_row, part = threadIdx.x % per_row;
        bf16x8* x = (bf16x8*)(x_tile + r * pitch);
        float sum = 0.0f, sum_sq = 0.0f;
        for (int p = part; ln && r < rows && p < packs; p += per_row) {
            bf16x8 v = x[p];
            for (int k = 0; k < 8; k++) sum += (float)v.v[k];
        }
        for (int offset = per_row / 2; offset > 0; offset >>= 1)
            sum += __shfl_xor_sync(0xffffffffu, sum, offset);
        float m = sum / C;   // RMSNorm: 0
        for (int p = part; r < rows && p < packs; p += per_row) {
            bf16x8 v = x[p];
            for (int k = 0; k < 8; k++) sum_sq += ((float)v.v[k] - m) * ((float)v.v[k] - m);
        }
        for (int offset = per_row / 2; offset > 0; offset >>= 1)
            sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
        float rstd = rsqrtf(sum_sq / C + (ln ? LAYERNORM_EPS : RMSNORM_EPS));
        for (int p = part; r < rows && p < packs; p += per_row) {
            bf16x8 v = x[p];
            if (ln) {
                bf16x8 w = ((const bf16x8*)ln_w)[p], b = ((const bf16x8*)ln_b)[p];
                for (int k = 0; k < 8; k++)
                    v.v[k] = (bf16)(((float)v.v[k] - m) * rstd * (float)w.v[k] + (float)b.v[k]);
            } else {
                for (int k = 0; k < 8; k++) v.v[k] = (bf16)((float)v.v[k] * rstd);
            }
            x[p] = v;
        }
        __syncthreads();
    }

    // The B operand: the normalised rows in shared memory, or the input rows in global memory.
    const bf16* x_rows = norm ? x_tile : a.inp + (size_t)n0 * C;
    const int x_pitch = norm ? pitch : C;
    float acc[ROWS_MAX / 8][4] = {};
    const int n_tiles = (rows + 7) / 8, steps = (C + 31) / 32;
    const uint4 zero = {0u, 0u, 0u, 0u};
    for (int base = warp; base < steps; base += ROWS_WARPS * ROWS_UNROLL) {
        // Every load of the group first, so they are in flight together.
        uint4 w_lo[ROWS_UNROLL], w_hi[ROWS_UNROLL], x[ROWS_UNROLL][ROWS_MAX / 8];
        #pragma unroll
        for (int u = 0; u < ROWS_UNROLL; u++) {
            int k = (base + u * ROWS_WARPS) * 32 + 8 * t;
            bool in = k < C;   // C % 8 == 0: a pack is all in or all out
            w_lo[u] = in ? *(const uint4*)(w_tile + g * pitch + k) : zero;
            w_hi[u] = in ? *(const uint4*)(w_tile + (g + 8) * pitch + k) : zero;
            #pragma unroll
            for (int j = 0; j < ROWS_MAX / 8; j++) {
                int r = 8 * j + g;
                x[u][j] = j < n_tiles && in && r < rows ? *(const uint4*)(x_rows + (size_t)r * x_pitch + k) : zero;
            }
        }
        #pragma unroll
        for (int u = 0; u < ROWS_UNROLL; u++) {
            const uint32_t a_first[4] = {w_lo[u].x, w_hi[u].x, w_lo[u].y, w_hi[u].y};
            const uint32_t a_second[4] = {w_lo[u].z, w_hi[u].z, w_lo[u].w, w_hi[u].w};
            #pragma unroll
            for (int j = 0; j < ROWS_MAX / 8; j++) {
                if (j >= n_tiles) break;
                mma_bf16(acc[j], a_first, x[u][j].x, x[u][j].y);
                mma_bf16(acc[j], a_second, x[u][j].z, x[u][j].w);
            }
        }
    }
    // C fragment: c0 c1 are columns g, rows 2t and 2t + 1 of the n-tile; c2 c3 the same rows of
    // column g + 8.
    #pragma unroll
    for (int j = 0; j < ROWS_MAX / 8; j++) {
        if (j >= n_tiles) break;
        float* p = partial + (warp * ROWS_MAX + 8 * j + 2 * t) * ROWS_COLUMNS;
        p[g] = acc[j][0];
        p[ROWS_COLUMNS + g] = acc[j][1];
        p[g + 8] = acc[j][2];
        p[ROWS_COLUMNS + g + 8] = acc[j][3];
    }
    __syncthreads();

    #pragma unroll
    for (int q = 0; q < ROWS_OUTPUTS; q++) {
        int i = threadIdx.x + q * ROWS_THREADS, r = i / ROWS_COLUMNS, c = i % ROWS_COLUMNS, col = col0 + c;
        if (r >= rows || col >= a.OC) continue;
        float v = bias[c];
        for (int w = 0; w < ROWS_WARPS; w++) v += partial[(w * ROWS_MAX + r) * ROWS_COLUMNS + c];
        if (e.gelu) v = gelu_tanh(v);
        if (e.relu2) {
            v = fmaxf((float)(bf16)v, 0.0f);
            v *= v;
        }
        bf16 o = (bf16)(v + residual[q]);
        int n = n0 + r;
        a.out[(size_t)n * a.OC + col] = o;
        if (e.cache && col >= e.cache_from)
            e.cache[n * e.cache_batch + e.positions[n] * e.cache_row + (col - e.cache_from)] = o;
    }
}

void matmul_rows_forward(bf16* out, const bf16* inp, const bf16* weight, const RowsEpilogue* epilogue, int N,
                         int C, int OC, cudaStream_t stream) {
    const RowsEpilogue* e = epilogue;
    if (C % 8 != 0 || OC < 1 || !aligned16(inp) || !aligned16(weight) || (e->ln_weight && !e->ln_bias) ||
        (e->ln_weight && (!aligned16(e->ln_weight) || !aligned16(e->ln_bias))))
        die("matmul_rows_forward: needs C (%d) a multiple of 8, OC (%d) at least 1, the layernorm's weight and "
            "bias together and 16-byte aligned inputs and weights", C, OC);
    if ((e->ln_weight && e->rms_norm) || (e->gelu && e->relu2))
        die("matmul_rows_forward: one norm and one activation at most");
    size_t shared_bytes = rows_shared_bytes(C, e->ln_weight || e->rms_norm, e->ln_weight != NULL);
    raise_smem_limit<matmul_rows_kernel>("matmul_rows_forward", shared_bytes);
    if (N == 0) return;
    RowsArgs a = {out, inp, weight, *e, N, C, OC};
    dim3 grid((unsigned)ceil_div(OC, ROWS_COLUMNS), (unsigned)ceil_div(N, ROWS_MAX));
    launch_overlapped(matmul_rows_kernel, grid, dim3(ROWS_THREADS), shared_bytes, stream, a);
}
