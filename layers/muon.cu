// layers/muon.cu: Muon's kernels (momentum, Frobenius norms, the scaling to unit norm, the
// update of the master weights) and its launchers: newton_schulz, muon_update (layers/muon.h).
//
// Cost at d12 (C 768, L 12): an iteration on an (s, l) matrix, s the shorter side, is 2 s^2 l
// (X X^T) + 2 s^3 (A A) + 2 s^2 l (the product with X) FLOPs: 14 C^3 for qkvw (3C, C), 6 C^3
// for attprojw, 18 C^3 each for fcw and fcprojw, 56 C^3 a layer, so 5 x 12 x 56 x 768^3 = 1.52
// TFLOP a step: 2.5 ms at 600 TFLOP/s (the batched 768 x 768 products are small for an H200).
// The passes over the 85M matrix elements move about 30 bytes each (momentum 12, norm 2, scaling
// 4, update 12), 0.6 ms at 4.3 TB/s, and take the place of AdamW's 28 bytes (0.55 ms). So a Muon
// step costs about 2.5-3.5 ms more than an AdamW one: 3% of d12's 105 ms at B 64, T 1024.
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
// momentum m (8 n8) fp32, which is updated, from grads (8 n8) bf16 times grad_scale.
__global__ void muon_momentum_kernel(bf16* x, float* m, const bf16* grads, size_t n8, float momentum,
                                     float grad_scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n8) return;
    bf16x8 g = ((const bf16x8*)grads)[i], u;
    float mv[8];
    load8(m + 8 * i, mv);
    #pragma unroll
    for (int k = 0; k < 8; k++) {
        float gk = (float)g.v[k] * grad_scale;
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

// x (count, 8 packs8) /= (its matrix's Frobenius norm + NEWTON_SCHULZ_EPS): every block adds its
// matrix's partials in the same order, so all of them divide by the same bits.
__global__ void normalize_kernel(bf16* x, const float* partials, size_t packs8, int blocks_per_matrix) {
    const float* mine = partials + (size_t)blockIdx.y * blocks_per_matrix;
    float sum = 0.0f;
    for (int j = threadIdx.x; j < blocks_per_matrix; j += blockDim.x) sum += mine[j];
    sum = block_reduce_sum(sum);
    float inv = 1.0f / (sqrtf(sum) + NEWTON_SCHULZ_EPS);
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

// One pack of 8 per thread, n8 packs: master (8 n8) fp32 -= decay master + step update (bf16),
// params (8 n8) = master rounded to bf16.
__global__ void muon_apply_kernel(bf16* params, float* master, const bf16* update, size_t n8, float step,
                                  float decay) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n8) return;
    bf16x8 u = ((const bf16x8*)update)[i], out;
    float p[8];
    load8(master + 8 * i, p);
    #pragma unroll
    for (int k = 0; k < 8; k++) {
        p[k] -= decay * p[k] + step * (float)u.v[k];
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

const bf16* newton_schulz(bf16* x, int count, int rows, int cols, void* scratch, const MatmulStream* ms) {
    check_shape("newton_schulz", count, rows, cols);
    if (!aligned16(x) || !aligned16(scratch)) die("newton_schulz: the buffers must be 16-byte aligned");
    NewtonSchulzScratch n = carve_scratch((char*)scratch, count, rows, cols);
    size_t packs8 = (size_t)rows * cols / 8;
    int blocks = norm_blocks(rows, cols);
    dim3 grid(blocks, count);
    frobenius_partials_kernel<<<grid, MUON_THREADS, 0, ms->stream>>>(n.partials, x, packs8, blocks);
    cudaCheckLaunch();
    normalize_kernel<<<grid, MUON_THREADS, 0, ms->stream>>>(x, n.partials, packs8, blocks);
    cudaCheckLaunch();
    // Wide (rows <= cols): X = M (rows, cols), A = X X^T (rows, rows), X' = P X + a X.
    // Tall: X = M^T, so A = M^T M (cols, cols) and M' = (P X + a X)^T = M P^T + a M.
    const float a = NEWTON_SCHULZ_A, b = NEWTON_SCHULZ_B, c = NEWTON_SCHULZ_C;
    int wide = rows <= cols, s = wide ? rows : cols, l = wide ? cols : rows;
    bf16 *cur = x, *next = n.other;
    for (int step = 0; step < NEWTON_SCHULZ_STEPS; step++) {
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

size_t muon_scratch_bytes(int count, int rows, int cols) {
    return carve_round_up((size_t)count * rows * cols * sizeof(bf16)) + newton_schulz_scratch_bytes(count, rows, cols);
}

void muon_update(bf16* params, float* master, const bf16* grads, float* m, int count, int rows, int cols, float lr,
                 float momentum, float weight_decay, float grad_scale, void* scratch, const MatmulStream* ms) {
    check_shape("muon_update", count, rows, cols);
    if (!aligned16(params) || !aligned16(master) || !aligned16(grads) || !aligned16(m) || !aligned16(scratch))
        die("muon_update: the buffers must be 16-byte aligned");
    size_t n8 = (size_t)count * rows * cols / 8;
    bf16* u = (bf16*)scratch;
    unsigned blocks = (unsigned)ceil_div(n8, MUON_THREADS);
    muon_momentum_kernel<<<blocks, MUON_THREADS, 0, ms->stream>>>(u, m, grads, n8, momentum, grad_scale);
    cudaCheckLaunch();
    const bf16* update = newton_schulz(u, count, rows, cols, (char*)scratch + carve_round_up(n8 * 8 * sizeof(bf16)), ms);
    float step = lr * sqrtf(fmaxf(1.0f, (float)rows / (float)cols));
    muon_apply_kernel<<<blocks, MUON_THREADS, 0, ms->stream>>>(params, master, update, n8, step, lr * weight_decay);
    cudaCheckLaunch();
}
