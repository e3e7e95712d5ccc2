// layers/muon.cu: Muon's kernels (momentum, Frobenius norms, the scaling to unit norm, NorMuon's
// moments and scales, the update of the master weights) and its launchers: newton_schulz,
// muon_update (layers/muon.h).
//
// Cost at d12 (C 768, L 12): an iteration on an (s, l) matrix, s the shorter side, is 2 s^2 l
// (X X^T) + 2 s^3 (A A) + 2 s^2 l (the product with X) FLOPs: 14 C^3 for qkvw (3C, C), 6 C^3
// for attprojw, 18 C^3 each for fcw and fcprojw, 56 C^3 a layer, so 5 x 12 x 56 x 768^3 = 1.52
// TFLOP a step: 2.5 ms at 600 TFLOP/s (the batched 768 x 768 products are small for an H200).
// Cut into q, k and v (--muon-qkv split), qkvw takes 3 x 6 C^3 = 18 C^3 (60 C^3 a layer); into
// head pairs, 3 NH / 2 matrices (2 HS, C) of 4 (2 HS)^2 C + 2 (2 HS)^3 each: 2.2 C^3 at HS 64,
// C 768 (44 C^3 a layer).
// The passes over the 85M matrix elements move about 30 bytes each (momentum 12, norm 2, scaling
// 4, update 12; NorMuon 2 more), 0.6 ms at 4.3 TB/s, and take the place of AdamW's 28 bytes
// (0.55 ms). So a Muon step costs about 2.5-3.5 ms more than an AdamW one: 3% of d12's 105 ms at
// B 64, T 1024.
#include "layers/muon.h"

#include <math.h>
#include "common/bytes.h"
#include "device/bf16.cuh"
#include "device/reduce.cuh"

#define MUON_THREADS 256
// Packs of 8 elements per thread in the norm kernels: 8192 elements a block.
#define NORM_PACKS_PER_THREAD 4
#define NORM_ELEMENTS_PER_BLOCK (MUON_THREADS * 8 * NORM_PACKS_PER_THREAD)

// ---------------------------------------------------------------------------------------------
// Kernels

// Eight fp32 at p (32-byte aligned) in two 16-byte moves.
__device__ inline void load8(const float* p, float v[8]) {
    float4 lo = ((const float4*)p)[0], hi = ((const float4*)p)[1];
    v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
}
__device__ inline void store8(float* p, const float v[8]) {
    ((float4*)p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    ((float4*)p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

// One pack of 8 elements per thread, n8 packs: x (8 n8) bf16 = the Nesterov step u of the
// momentum m (8 n8) fp32, which is updated, from grads (8 n8) bf16 times *grad_scale.
__global__ void muon_momentum_kernel(bf16* x, float* m, const bf16* grads, size_t n8, float momentum,
                                     const float* grad_scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n8) return;
    bf16x8 g = ((const bf16x8*)grads)[i], u;
    float mv[8], scale = *grad_scale;
    load8(m + 8 * i, mv);
    #pragma unroll
    for (int k = 0; k < 8; k++) {
        float gk = (float)g.v[k] * scale;
        mv[k] = momentum * mv[k] + (1.0f - momentum) * gk;
        u.v[k] = __float2bfloat16((1.0f - momentum) * gk + momentum * mv[k]);
    }
    store8(m + 8 * i, mv);
    ((bf16x8*)x)[i] = u;
}

// Block (b, j) of a grid (blocks_per_matrix, count): its chunk of the packs of matrix j (packs8
// packs of 8 each) as [*begin, *end).
__device__ inline void matrix_chunk(size_t packs8, int blocks_per_matrix, size_t* begin, size_t* end) {
    size_t chunk = (packs8 + blocks_per_matrix - 1) / blocks_per_matrix;
    *begin = blockIdx.x * chunk;
    *end = *begin + chunk < packs8 ? *begin + chunk : packs8;
}

// partials (count, blocks_per_matrix) = the sums of squares of the blocks' chunks of x (count,
// 8 packs8), in a fixed order.
__global__ void frobenius_partials_kernel(float* partials, const bf16* x, size_t packs8, int blocks_per_matrix) {
    const bf16x8* matrix = (const bf16x8*)x + blockIdx.y * packs8;
    size_t begin, end;
    matrix_chunk(packs8, blocks_per_matrix, &begin, &end);
    float acc = 0.0f;
    for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
        bf16x8 v = matrix[i];
        #pragma unroll
        for (int k = 0; k < 8; k++) acc += (float)v.v[k] * (float)v.v[k];
    }
    acc = block_reduce_sum(acc);
    if (threadIdx.x == 0) partials[(size_t)blockIdx.y * blocks_per_matrix + blockIdx.x] = acc;
}

// x (count, 8 packs8) /= (norm_scale times its matrix's Frobenius norm + NEWTON_SCHULZ_EPS): every
// block adds its matrix's partials in the same order, so all of them divide by the same bits.
__global__ void normalize_kernel(bf16* x, const float* partials, size_t packs8, int blocks_per_matrix,
                                 float norm_scale) {
    const float* mine = partials + (size_t)blockIdx.y * blocks_per_matrix;
    float sum = 0.0f;
    for (int j = threadIdx.x; j < blocks_per_matrix; j += blockDim.x) sum += mine[j];
    sum = block_reduce_sum(sum);
    float inv = 1.0f / (norm_scale * sqrtf(sum) + NEWTON_SCHULZ_EPS);
    bf16x8* matrix = (bf16x8*)x + blockIdx.y * packs8;
    size_t begin, end;
    matrix_chunk(packs8, blocks_per_matrix, &begin, &end);
    for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
        bf16x8 v = matrix[i];
        #pragma unroll
        for (int k = 0; k < 8; k++) v.v[k] = __float2bfloat16((float)v.v[k] * inv);
        matrix[i] = v;
    }
}

// NorMuon's q (count, rows) = the mean square of each row of o (count, rows, cols): a warp per
// row, grid (ceil(rows / warps of a block), count), lanes over the row in a fixed order.
__global__ void row_mean_squares_kernel(float* q, const bf16* o, int rows, int cols) {
    int row = blockIdx.x * (MUON_THREADS / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    const bf16* x = o + ((size_t)blockIdx.y * rows + row) * cols;
    float acc = 0.0f;
    for (int j = lane; j < cols; j += 32) acc += (float)x[j] * (float)x[j];
    acc = warp_reduce_sum(acc);
    if (lane == 0) q[(size_t)blockIdx.y * rows + row] = acc / (float)cols;
}

// NorMuon's q (count, cols) = the mean square of each column of o (count, rows, cols): a thread
// per column (the warp's loads side by side in a row), grid (ceil(cols / block), count).
__global__ void column_mean_squares_kernel(float* q, const bf16* o, int rows, int cols) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= cols) return;
    const bf16* x = o + (size_t)blockIdx.y * rows * cols + col;
    float acc = 0.0f;
    for (int i = 0; i < rows; i++) acc += (float)x[(size_t)i * cols] * (float)x[(size_t)i * cols];
    q[(size_t)blockIdx.y * cols + col] = acc / (float)rows;
}

// A block per matrix j: its n mean squares q (at q + j n, each over `reduced` elements) into its
// second moments (at second + j stride), then q replaced by each row's (or column's) scale: the
// moment's inverse square root, times the ratio that keeps the matrix's Frobenius norm.
__global__ void normuon_scales_kernel(float* q, float* second, size_t stride, int n, int reduced, float beta2) {
    float* qj = q + (size_t)blockIdx.x * n;
    float* sj = second + (size_t)blockIdx.x * stride;
    float before = 0.0f, after = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float v = qj[i], moment = beta2 * sj[i] + (1.0f - beta2) * v;
        float inv = 1.0f / sqrtf(fmaxf(moment, 1e-10f));
        sj[i] = moment;
        before += v;
        after += v * inv * inv;
    }
    before = block_reduce_sum(before);
    after = block_reduce_sum(after);
    float ratio = sqrtf((float)reduced * before) / fmaxf(sqrtf((float)reduced * after), 1e-10f);
    for (int i = threadIdx.x; i < n; i += blockDim.x) qj[i] = 1.0f / sqrtf(fmaxf(sj[i], 1e-10f)) * ratio;
}

// One pack of 8 per thread, n8 packs: master (8 n8) fp32 -= d master + step u, params (8 n8) =
// master rounded to bf16, u the update (bf16), or with NORMUON the update times its row's (or, in
// matrices of fewer rows than columns, its column's) scale (count, max(rows, cols)); d = decay,
// or with CAUTIOUS 0 where u and the master differ in sign.
template <bool CAUTIOUS, bool NORMUON>
__global__ void muon_apply_kernel(bf16* params, float* master, const bf16* update, const float* scales, size_t n8,
                                  int rows, int cols, float step, float decay) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n8) return;
    bf16x8 upd = ((const bf16x8*)update)[i], out;
    float p[8];
    load8(master + 8 * i, p);
    // NORMUON: where element 8 i lies (matrix, row, column); the pack's next ones follow it.
    size_t size = (size_t)rows * cols, matrix = 8 * i / size, within = 8 * i - matrix * size;
    int row = (int)(within / cols), col = (int)(within - (size_t)row * cols), by_row = rows >= cols;
    int n = by_row ? rows : cols;
    #pragma unroll
    for (int k = 0; k < 8; k++) {
        float u = (float)upd.v[k];
        if (NORMUON) {
            u *= scales[matrix * n + (by_row ? row : col)];
            if (++col == cols) {
                col = 0;
                if (++row == rows) row = 0, matrix++;
            }
        }
        float d = CAUTIOUS && u * p[k] < 0.0f ? 0.0f : decay;
        // The step's product rounded, the decay's fused onto it: the roundings of every earlier version.
        p[k] -= __fmaf_rn(d, p[k], __fmul_rn(step, u));
        out.v[k] = __float2bfloat16(p[k]);
    }
    store8(master + 8 * i, p);
    ((bf16x8*)params)[i] = out;
}

// ---------------------------------------------------------------------------------------------
// Launchers


static int norm_blocks(int rows, int cols) { return (int)ceil_div((long long)rows * cols, NORM_ELEMENTS_PER_BLOCK); }

// The Newton-Schulz scratch: the iterate's other buffer (count, rows, cols), the Gram matrix A
// and its polynomial b A + c A A (count, s, s) bf16, s the shorter side, and the norms'
// partial sums (count, norm_blocks) fp32; carved from base (NULL: the size only).
typedef struct {
    bf16 *other, *gram, *poly;
    float* partials;
    size_t bytes;
} NewtonSchulzScratch;

static NewtonSchulzScratch carve_scratch(char* base, int count, int rows, int cols) {
    size_t s = rows < cols ? rows : cols, matrices = (size_t)count * rows * cols, grams = (size_t)count * s * s;
    size_t at[4], sizes[4] = {matrices * sizeof(bf16), grams * sizeof(bf16), grams * sizeof(bf16),
                              (size_t)count * norm_blocks(rows, cols) * sizeof(float)};
    size_t total = 0;
    for (int i = 0; i < 4; i++) {
        at[i] = total;
        total += carve_round_up(sizes[i]);
    }
    if (!base) return (NewtonSchulzScratch){NULL, NULL, NULL, NULL, total};
    return (NewtonSchulzScratch){(bf16*)(base + at[0]), (bf16*)(base + at[1]), (bf16*)(base + at[2]),
                                 (float*)(base + at[3]), total};
}

size_t newton_schulz_scratch_bytes(int count, int rows, int cols) { return carve_scratch(NULL, count, rows, cols).bytes; }

static void check_shape(const char* what, int count, int rows, int cols) {
    if (count <= 0 || rows <= 0 || cols <= 0 || (long long)rows * cols % 8 != 0)
        die("%s: %d matrices of (%d, %d): sizes must be positive, rows * cols a multiple of 8", what, count, rows,
            cols);
}

const bf16* newton_schulz(bf16* x, int count, int rows, int cols, const NewtonSchulzCoefficients* ns, void* scratch,
                          const MatmulStream* ms) {
    check_shape("newton_schulz", count, rows, cols);
    if (!aligned16(x) || !aligned16(scratch)) die("newton_schulz: the buffers must be 16-byte aligned");
    NewtonSchulzScratch n = carve_scratch((char*)scratch, count, rows, cols);
    size_t packs8 = (size_t)rows * cols / 8;
    int blocks = norm_blocks(rows, cols);
    dim3 grid(blocks, count);
    frobenius_partials_kernel<<<grid, MUON_THREADS, 0, ms->stream>>>(n.partials, x, packs8, blocks);
    cudaCheckLaunch();
    normalize_kernel<<<grid, MUON_THREADS, 0, ms->stream>>>(x, n.partials, packs8, blocks, ns->norm_scale);
    cudaCheckLaunch();
    // Wide (rows <= cols): X = M (rows, cols), A = X X^T (rows, rows), X' = P X + a X.
    // Tall: X = M^T, so A = M^T M (cols, cols) and M' = (P X + a X)^T = M P^T + a M.
    int wide = rows <= cols, s = wide ? rows : cols, l = wide ? cols : rows;
    bf16 *cur = x, *next = n.other;
    for (int step = 0; step < NEWTON_SCHULZ_STEPS; step++) {
        const float a = ns->abc[step][0], b = ns->abc[step][1], c = ns->abc[step][2];
        if (wide) matmul_batched(n.gram, cur, cur, NULL, s, s, l, 0, 1, 1.0f, 0.0f, count, ms);
        else matmul_batched(n.gram, cur, cur, NULL, s, s, l, 1, 0, 1.0f, 0.0f, count, ms);
        matmul_batched(n.poly, n.gram, n.gram, n.gram, s, s, s, 0, 0, c, b, count, ms);
        if (wide) matmul_batched(next, n.poly, cur, cur, rows, cols, s, 0, 0, 1.0f, a, count, ms);
        else matmul_batched(next, cur, n.poly, cur, rows, cols, s, 0, 1, 1.0f, a, count, ms);
        bf16* t = cur;
        cur = next;
        next = t;
    }
    return cur;
}

// The muon_update scratch: u (count, rows, cols) bf16, the Newton-Schulz scratch, and NorMuon's
// mean squares, then scales (count, max(rows, cols)) fp32.
static size_t update_bytes(int count, int rows, int cols) {
    return carve_round_up((size_t)count * rows * cols * sizeof(bf16));
}
static size_t scales_at(int count, int rows, int cols) {
    return update_bytes(count, rows, cols) + newton_schulz_scratch_bytes(count, rows, cols);
}

size_t muon_scratch_bytes(int count, int rows, int cols) {
    int n = rows > cols ? rows : cols;
    return scales_at(count, rows, cols) + carve_round_up((size_t)count * n * sizeof(float));
}

// NorMuon: the scales of o's rows (or columns) into scales (count, n), second updated.
static void normuon_scales(float* scales, float* second, const bf16* o, int count, int rows, int cols, float beta2,
                           cudaStream_t stream) {
    int by_row = rows >= cols, n = by_row ? rows : cols, warps = MUON_THREADS / 32;
    if (by_row) row_mean_squares_kernel<<<dim3(ceil_div(rows, warps), count), MUON_THREADS, 0, stream>>>(scales, o, rows,
                                                                                                         cols);
    else column_mean_squares_kernel<<<dim3(ceil_div(cols, MUON_THREADS), count), MUON_THREADS, 0, stream>>>(scales, o,
                                                                                                            rows, cols);
    cudaCheckLaunch();
    normuon_scales_kernel<<<count, MUON_THREADS, 0, stream>>>(scales, second, (size_t)rows * cols, n,
                                                               by_row ? cols : rows, beta2);
    cudaCheckLaunch();
}

void muon_update(bf16* params, float* master, const bf16* grads, float* m, float* second, int count, int rows,
                 int cols, const MuonStep* step, void* scratch, const MatmulStream* ms) {
    check_shape("muon_update", count, rows, cols);
    if (!aligned16(params) || !aligned16(master) || !aligned16(grads) || !aligned16(m) || !aligned16(scratch))
        die("muon_update: the buffers must be 16-byte aligned");
    size_t n8 = (size_t)count * rows * cols / 8;
    bf16* u = (bf16*)scratch;
    float* scales = second ? (float*)((char*)scratch + scales_at(count, rows, cols)) : NULL;
    unsigned blocks = (unsigned)ceil_div(n8, MUON_THREADS);
    muon_momentum_kernel<<<blocks, MUON_THREADS, 0, ms->stream>>>(u, m, grads, n8, step->momentum, step->grad_scale);
    cudaCheckLaunch();
    const bf16* update = newton_schulz(u, count, rows, cols, step->ns, (char*)scratch + update_bytes(count, rows, cols),
                                       ms);
    if (second) normuon_scales(scales, second, update, count, rows, cols, step->normuon_beta2, ms->stream);
    float lr_step = step->lr * sqrtf(fmaxf(1.0f, (float)rows / (float)cols)), decay = step->lr * step->weight_decay;
    typedef void (*Apply)(bf16*, float*, const bf16*, const float*, size_t, int, int, float, float);
    const Apply apply[2][2] = {{muon_apply_kernel<false, false>, muon_apply_kernel<false, true>},
                               {muon_apply_kernel<true, false>, muon_apply_kernel<true, true>}};
    apply[step->cautious != 0][second != NULL]<<<blocks, MUON_THREADS, 0, ms->stream>>>(
        params, master, update, scales, n8, rows, cols, lr_step, decay);
    cudaCheckLaunch();
}
