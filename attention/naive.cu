// attention/naive.cu: textbook attention; each matmul is one cuBLAS strided batch over the heads
// of one sequence.
//   forward:  S = scale * Q K^T       (B, NH, T, T) bf16, written into probs
//             P = softmax(S), in place (causal: exact zeros above the diagonal; masked: and
//             before each row's window, params.h's AttentionMask)
//             O = P V                 (B, T, NH, HS), by its view
//   backward: dV = P^T dO, dP = dO V^T (B, NH, T, T) fp32 in scratch,
//             dS = P ∘ (dP − rowsum(dP ∘ P)) * scale, bf16, in place over dP,
//             dQ = dS K, dK = dS^T Q; dQ, dK, dV written by their views.
// S lives in the bf16 buffer of P (the forward gets no other memory): its rounding, |S| * 2^-9
// per score, is the largest error of this path; softmax and its backward compute in fp32.
// Per sequence b, head h is one batch entry: each view (attention/params.h) of a sequence is NH
// (T, HS) row-major matrices, rows `row` elements apart, heads `head` elements apart: cuBLAS's
// leading dimension and batch stride.
#include <limits.h>
#include "attention/naive.h"
#include "attention/mask.h"
#include "attention/softmax.cuh"
#include "device/reduce.cuh"

#define SOFTMAX_THREADS 256

static cublasHandle_t naive_cublas = NULL;

// Row-major C (M, N) = alpha * op(X) (M, K) op(Y) (K, N), for `batch` heads at once, each
// operand advancing by its head stride. bf16 in, fp32 accumulation, C bf16 or fp32 (c_type).
// cuBLAS is column-major: to it a row-major matrix is its own transpose, so it computes
// C^T = op(Y)^T op(X)^T, i.e. the operands swap places and keep their transpose flags.
static void batched_matmul(int M, int N, int K, float alpha,
                           const bf16* x, int ldx, long long x_stride, int x_trans,
                           const bf16* y, int ldy, long long y_stride, int y_trans,
                           void* c, cudaDataType c_type, int ldc, long long c_stride,
                           int batch, cudaStream_t stream) {
    if (!naive_cublas) cublasCheck(cublasCreate(&naive_cublas));
    cublasCheck(cublasSetStream(naive_cublas, stream));
    const float beta = 0.0f;
    cublasCheck(cublasGemmStridedBatchedEx(
        naive_cublas, y_trans ? CUBLAS_OP_T : CUBLAS_OP_N, x_trans ? CUBLAS_OP_T : CUBLAS_OP_N,
        N, M, K, &alpha,
        y, CUDA_R_16BF, ldy, y_stride,
        x, CUDA_R_16BF, ldx, x_stride, &beta,
        c, c_type, ldc, c_stride,
        batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// The keys row `row` of (B, NH, T) rows sees are [lo, n): causal, those up to its position
// i = row % T; MASKED, from the first key of its window on (the mask is unused otherwise), and
// not causal, a row whose window starts past the keys sees none (lo >= n).
struct RowKeys { int lo, n; };
template <bool MASKED>
__device__ __forceinline__ RowKeys row_keys(size_t row, int T, int NH, int causal, const AttentionMask& mask) {
    if (!MASKED) return {0, causal ? (int)(row % T) + 1 : T};
    int i = (int)(row % T);
    return {KeyWindow(mask, (int)(row / ((size_t)NH * T)), T).lo(i), causal ? i + 1 : T};
}

// The block reductions of a row, an operation type per variant: block_reduce keeps a shared
// array per type, and one that kernels of both variants shared would be the module's rather
// than each kernel's own.
template <bool MASKED> struct RowMax : MaxOp {};
template <bool MASKED> struct RowSum : SumOp {};

// One block per row of att (B * NH * T rows of T): scores in, probabilities out, in place.
// A row keeps its keys [lo, n) (row_keys) and is exactly 0 elsewhere.
template <bool MASKED>
__global__ void softmax_forward_kernel(bf16* att, int T, int causal, int NH, const AttentionMask mask) {
    size_t row = blockIdx.x;
    const RowKeys keys = row_keys<MASKED>(row, T, NH, causal, mask);
    const int n = keys.n;
    bf16* s = att + row * T;
    // Each thread keeps the max m of its entries and the sum l of exp(s - m), rescaled when m grows.
    float m = -INFINITY, l = 0.0f;
    for (int j = keys.lo + threadIdx.x; j < n; j += blockDim.x) {
        float v = (float)s[j];
        if (v > m) { l = l * expf(m - v) + 1.0f; m = v; }
        else l += expf(v - m);
    }
    float row_max = block_reduce(m, RowMax<MASKED>(), -INFINITY);
    float row_sum = block_reduce(l * expf(m - row_max), RowSum<MASKED>(), 0.0f);  // a thread without entries adds 0
    float inv_sum = 1.0f / row_sum;
    for (int j = threadIdx.x; j < T; j += blockDim.x)
        s[j] = (!MASKED || j >= keys.lo) && j < n ? (bf16)(expf((float)s[j] - row_max) * inv_sum) : (bf16)0.0f;
}

// One block per row (B * NH * T rows of T): dS = P ∘ (dP − rowsum(dP ∘ P)) * scale.
// dS (bf16) overwrites the first half of its own row of dP (fp32), so it has row stride 2T.
// That is safe chunk by chunk: all threads read a chunk of dP before any writes it, and the
// writes of a chunk land on bytes of that chunk or of earlier, already read ones.
template <bool MASKED>
__global__ void softmax_backward_kernel(float* dp_ds, const bf16* probs, int T, int causal, float scale,
                                        int NH, const AttentionMask mask) {
    size_t row = blockIdx.x;
    const RowKeys keys = row_keys<MASKED>(row, T, NH, causal, mask);   // outside them, P is 0 and so is dS
    const int n = keys.n;
    const bf16* p = probs + row * T;
    const float* dp = dp_ds + row * T;
    bf16* ds = (bf16*)(dp_ds + row * T);
    float dot = 0.0f;
    for (int j = keys.lo + threadIdx.x; j < n; j += blockDim.x) dot += (float)p[j] * dp[j];
    dot = block_reduce(dot, RowSum<MASKED>(), 0.0f);
    for (int base = 0; base < T; base += blockDim.x) {
        int j = base + threadIdx.x;
        float v = (!MASKED || j >= keys.lo) && j < n ? (float)p[j] * (dp[j] - dot) * scale : 0.0f;
        __syncthreads();
        if (j < T) ds[j] = (bf16)v;
    }
}

const char* naive_attention_unsupported(AttentionShape s) {
    static char why[128];
    if (s.HS % 8 != 0 || s.HS < 8 || s.HS > 256)
        snprintf(why, sizeof(why), "naive attention: head size %d is not a multiple of 8 in [8, 256]", s.HS);
    else if (s.B < 1 || s.T < 1 || s.NH < 1)
        snprintf(why, sizeof(why), "naive attention: B, T and NH must be at least 1");
    else if ((long long)s.B * s.NH * s.T > INT_MAX)  // one softmax block per row
        snprintf(why, sizeof(why), "naive attention: B*NH*T must be below 2^31");
    else
        return NULL;
    return why;
}

size_t naive_attention_scratch_bytes(AttentionShape s) {
    return (size_t)s.B * s.NH * s.T * s.T * sizeof(float);
}

// A view of sequence b as cuBLAS operands: the first head's matrix, its leading dimension (the
// row stride, which cuBLAS takes as an int) and the stride between heads.
struct HeadMatrices {
    bf16* ptr;
    int ld;
    long long stride;
};
static HeadMatrices heads(AttentionTensor v, int b) {
    if (v.row > INT_MAX) die("naive attention: row stride %lld is past cuBLAS's int", v.row);
    return {v.ptr + b * v.batch, (int)v.row, v.head};
}

// The row softmaxes of B * NH * T rows, masked or not.
static void softmax_forward(const AttentionParams* p, const AttentionMask* mask, bf16* probs, cudaStream_t stream) {
    AttentionShape s = p->shape;
    auto kernel = attention_mask_active(mask) ? softmax_forward_kernel<true> : softmax_forward_kernel<false>;
    kernel<<<s.B * s.NH * s.T, SOFTMAX_THREADS, 0, stream>>>(probs, s.T, s.causal, s.NH, attention_mask_or_none(mask));
    cudaCheckLaunch();
}

static void softmax_backward(const AttentionParams* p, const AttentionMask* mask, float* dp_ds, const bf16* probs,
                             cudaStream_t stream) {
    AttentionShape s = p->shape;
    auto kernel = attention_mask_active(mask) ? softmax_backward_kernel<true> : softmax_backward_kernel<false>;
    kernel<<<s.B * s.NH * s.T, SOFTMAX_THREADS, 0, stream>>>(dp_ds, probs, s.T, s.causal, s.scale, s.NH,
                                                              attention_mask_or_none(mask));
    cudaCheckLaunch();
}

void naive_attention_forward(const AttentionParams* p, const AttentionMask* mask, bf16* probs, cudaStream_t stream) {
    int T = p->shape.T, NH = p->shape.NH, HS = p->shape.HS;
    long long TT = (long long)T * T;
    for (int b = 0; b < p->shape.B; b++) {
        HeadMatrices q = heads(p->q, b), k = heads(p->k, b);
        // S (T, T) = scale * Q (T, HS) K^T
        batched_matmul(T, T, HS, p->shape.scale, q.ptr, q.ld, q.stride, 0, k.ptr, k.ld, k.stride, 1,
                       probs + b * NH * TT, CUDA_R_16BF, T, TT, NH, stream);
    }
    softmax_forward(p, mask, probs, stream);
    for (int b = 0; b < p->shape.B; b++) {
        HeadMatrices v = heads(p->v, b), o = heads(p->o, b);
        // O (T, HS) = P (T, T) V (T, HS)
        batched_matmul(T, HS, T, 1.0f, probs + b * NH * TT, T, TT, 0, v.ptr, v.ld, v.stride, 0,
                       o.ptr, CUDA_R_16BF, o.ld, o.stride, NH, stream);
    }
}

void naive_attention_backward(const AttentionParams* p, const AttentionMask* mask, const bf16* probs, void* scratch,
                              cudaStream_t stream) {
    int T = p->shape.T, NH = p->shape.NH, HS = p->shape.HS;
    long long TT = (long long)T * T;
    float* dp_ds = (float*)scratch;
    for (int b = 0; b < p->shape.B; b++) {
        HeadMatrices v = heads(p->v, b), dout = heads(p->dout, b), dv = heads(p->dv, b);
        const bf16* att = probs + b * NH * TT;
        // dV (T, HS) = P^T (T, T) dO (T, HS)
        batched_matmul(T, HS, T, 1.0f, att, T, TT, 1, dout.ptr, dout.ld, dout.stride, 0,
                       dv.ptr, CUDA_R_16BF, dv.ld, dv.stride, NH, stream);
        // dP (T, T) = dO (T, HS) V^T, fp32
        batched_matmul(T, T, HS, 1.0f, dout.ptr, dout.ld, dout.stride, 0, v.ptr, v.ld, v.stride, 1,
                       dp_ds + b * NH * TT, CUDA_R_32F, T, TT, NH, stream);
    }
    softmax_backward(p, mask, dp_ds, probs, stream);
    for (int b = 0; b < p->shape.B; b++) {
        HeadMatrices q = heads(p->q, b), k = heads(p->k, b), dq = heads(p->dq, b), dk = heads(p->dk, b);
        const bf16* ds = (const bf16*)(dp_ds + b * NH * TT);  // row stride 2T
        // dQ (T, HS) = dS (T, T) K (T, HS)
        batched_matmul(T, HS, T, 1.0f, ds, 2 * T, 2 * TT, 0, k.ptr, k.ld, k.stride, 0,
                       dq.ptr, CUDA_R_16BF, dq.ld, dq.stride, NH, stream);
        // dK (T, HS) = dS^T (T, T) Q (T, HS)
        batched_matmul(T, HS, T, 1.0f, ds, 2 * T, 2 * TT, 1, q.ptr, q.ld, q.stride, 0,
                       dk.ptr, CUDA_R_16BF, dk.ld, dk.stride, NH, stream);
    }
}
