// layers/matmul.cu: the linear layer through cuBLASLt (bf16 A, B, C, D; fp32 compute and scale).
// out (N, OC) = inp (N, C) @ weight^T + bias (+ residual), weight (OC, C); GELU and bias fused as
// epilogues, the residual as the C matrix of D = A B + C.
//
// cuBLASLt is column-major, and a row-major (R, K) matrix is the column-major (K, R) matrix with
// leading dimension K, i.e. its transpose. So, in column-major terms:
//   forward  out^T (OC, N) = weight (OC, C) @ inp^T (C, N): the stored weight is weight^T (C, OC),
//            so A = weight with op T (lda C), B = inp with op N (ldb C), D = out (ldd OC); m OC,
//            n N, k C. The bias (and the GELU input kept in pre_gelu) run along m = OC; the
//            residual (N, OC) is laid out like out, and is C with beta 1.
//   dinp^T (C, N) = weight^T (C, OC) @ dout^T (OC, N): A = weight op N (lda C),
//            B = dout op N (ldb OC), D = dinp (ldd C); m C, n N, k OC; beta 0. The GELU
//            gradient's input (aux, like dinp) runs along m = C.
//   dweight^T (C, OC) += inp^T (C, N) @ dout (N, OC): A = inp op N (lda C),
//            B = dout op T (ldb OC), C = D = dweight (ldd C); m C, n OC, k N; beta 1.
// Each matmul runs on the stream of its MatmulStream with that stream's workspace; the handle,
// which holds no state of a call, serves every stream.
// matmul_batched (Muon's Newton-Schulz iterations) is a strided batch of such products, with
// alpha and beta.
//
// ReLU^2 has no cuBLASLt epilogue: the matmul writes h, a pass squares it in place, and only
// u = relu(h)^2 is kept; the backward takes relu(h) = sqrt(u), its dinp matmul writes dout @ W
// and a pass multiplies it by 2 sqrt(u). Bytes moved beyond the matmuls' inputs at d12, B 64,
// T 1024 (N 65 536 rows of 4C = 3072: one (N, 4C) bf16 tensor is 403 MB):
//   forward  h written (403), read and u written (806): 1.21 GB; GELU's epilogue writes pre_gelu
//            and out, 806 MB. The layer keeps u alone (403 MB), as GELU does under --recompute gelu.
//   backward dout @ W written (403), read with u and dinp written (1.21 GB): 1.61 GB; GELU's DGELU
//            epilogue reads pre_gelu and writes dinp, 806 MB.
// So 1.2 GB more than GELU per layer, ~0.25 ms at 4.8 TB/s, ~3 ms per step of 12 layers. The
// other ways cost as much or more: cuBLASLt's RELU_AUX epilogue (relu(h) and a bitmask) plus a
// squaring pass moves 1.23 GB forward and must keep relu(h) beside u, since DRELU only masks and
// the backward needs 2 relu(h) (806 MB kept per layer, the same backward); keeping h as GELU does
// moves the same bytes and keeps twice the memory; an fp32 h (one rounding of u instead of two)
// moves 0.8 GB more. Precision: u = bf16(hb^2), hb = bf16(h), so sqrt(u) = |h| (1 + a)(1 + b/2),
// |a|, |b| <= 2^-8: within 1.5 * 2^-8 of relu(h), against 2^-8 for a stored bf16 relu(h).
//
// FP8 (Fp8Linear). cuBLAS documentation, cublasLtMatmul(), the FP8 requirements: on Hopper A must
// be transposed and B not (the "TN" format), the compute type CUBLAS_COMPUTE_32F, the scale type
// CUDA_R_32F, the pointers 16-byte aligned and the dimensions multiples of 16 bytes ("Tensor Core
// Usage"); its FP8 type table pairs A and B of E4M3 or E5M2 with C and D in bf16 and a bf16 bias,
// which is what every product here is. D = alpha scale_A scale_B op(A) op(B) + beta C
// ("Narrow Precision Data Types Usage"), scale_A and scale_B read on the GPU through
// CUBLASLT_MATMUL_DESC_A_SCALE_POINTER and B_SCALE_POINTER (cublasLtMatmulDescAttributes_t): the
// dequantising factors scale_inv of layers/fp8.h. TN means both operands run along the reduced
// dimension k, which in row-major terms is:
//   forward  out (N, OC) = inp (N, C) @ weight (OC, C)^T: reduced over C, along which both are
//            stored: A = weight_q (lda C), B = inp quantised (ldb C); m OC, n N, k C, as bf16.
//   dinp (N, C) = dout (N, OC) @ weight: reduced over OC: A = weight_t (C, OC) (lda OC),
//            B = dout quantised (ldb OC); m C, n N, k OC.
//   dweight (OC, C) += dout^T @ inp: reduced over N: A = inp_t (C, N) (lda N), B = dout_t (OC, N)
//            (ldb N), C = D = dweight (ldd C), beta 1; m C, n OC, k N.
// Only the forward may take CUBLASLT_MATMUL_DESC_FAST_ACCUM (no periodic promotion of the tensor
// cores' partial sums to fp32: faster, less exact): its sums run over C or 4C; the backward's over
// OC and over the N tokens, where partial sums kept in the tensor cores' narrower accumulator
// would lose most. Epilogues: the FP8 type table's bias column gives the bias; the GELU (forward)
// and DGELU (backward) of the MLP and ReLU^2 run as the elementwise passes after the matmul
// (layers/gelu.h, the ReLU^2 kernels above), and the bias gradient as the column sums, so no
// epilogue past the bias meets FP8 operands. Cost of GELU's pass against the bf16 path's fused
// epilogue: pre_gelu read once more and out written once more, 2 x (N, 4C) bf16, forward and
// backward.
#include <stdint.h>
#include <cublasLt.h>
#include "layers/matmul.h"
#include "layers/gelu.h"
#include "device/bf16.cuh"
#include "layers/kernel_common.cuh"

// h (packs of 8) -> relu(h)^2 in place, in fp32, rounded once. A NaN passes through.
__global__ void relu2_forward_kernel(bf16x8* h, size_t packs) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= packs) return;
    bf16x8 v = h[i];
    for (int k = 0; k < 8; k++) {
        float x = (float)v.v[k], r = x < 0.0f ? 0.0f : x;
        v.v[k] = (bf16)(r * r);
    }
    h[i] = v;
}

// grad (packs of 8) *= 2 relu(h) = 2 sqrt(u), in place, u = relu(h)^2.
__global__ void relu2_backward_kernel(bf16x8* grad, const bf16x8* u, size_t packs) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= packs) return;
    bf16x8 g = grad[i], u8 = u[i];
    for (int k = 0; k < 8; k++) g.v[k] = (bf16)((float)g.v[k] * (2.0f * sqrtf((float)u8.v[k])));
    grad[i] = g;
}

#define ELEMENTWISE_THREADS 256

static cublasLtHandle_t lt_handle;

void matmul_stream_init(MatmulStream* s, cudaStream_t stream) {
    if (!lt_handle) cublasCheck(cublasLtCreate(&lt_handle));
    s->stream = stream;
    cudaCheck(cudaMalloc(&s->workspace, MATMUL_WORKSPACE_BYTES));
}

void matmul_stream_free(MatmulStream* s) {
    cudaCheck(cudaStreamSynchronize(s->stream));   // its last matmul is done with the workspace
    cudaCheck(cudaFree(s->workspace));
    s->workspace = NULL;
}

// Largest power of two (at most 256) dividing the address: the heuristic must only pick
// algorithms that work at the alignment the buffers really have.
static uint32_t alignment_of(const void* p) {
    uint32_t a = 256;
    while (a > 2 && (uintptr_t)p % a != 0) a /= 2;
    return a;
}

// The alignment of batch matrices stride_bytes apart from p.
static uint32_t batch_alignment(const void* p, size_t stride_bytes, int batch) {
    uint32_t a = alignment_of(p), s = batch > 1 ? alignment_of((const void*)(uintptr_t)stride_bytes) : a;
    return a < s ? a : s;
}

static void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                     const void* value, size_t size) {
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, attr, value, size));
}

// The layout of batch packed (rows, cols) column-major matrices of type, one after another.
static cublasLtMatrixLayout_t lt_layout(cudaDataType_t type, int rows, int cols, int batch) {
    cublasLtMatrixLayout_t layout;
    cublasCheck(cublasLtMatrixLayoutCreate(&layout, type, rows, cols, rows));
    if (batch > 1) {
        int64_t stride = (int64_t)rows * cols;
        cublasCheck(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)));
        cublasCheck(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                     sizeof(stride)));
    }
    return layout;
}

// A and B as the matmul reads them: bf16, or FP8 (E4M3, E5M2) each with its dequantising factor
// on the GPU and, for FP8, whether the products accumulate fast (layers/matmul.cu's header).
typedef struct {
    cudaDataType_t a_type, b_type;
    const float *a_scale, *b_scale;
    int fast_accum;
} LtInputs;
static const LtInputs BF16_INPUTS = {CUDA_R_16BF, CUDA_R_16BF, NULL, NULL, 0};

static size_t element_bytes(cudaDataType_t type) { return type == CUDA_R_16BF ? sizeof(bf16) : 1; }

// D (m, n) = alpha op(A) (m, k) @ op(B) (k, n) (+ beta C, when c is not NULL; c may be d),
// column-major and packed (the leading dimension of each matrix is its stored row count), for
// each of batch such products on matrices stored one after another, with an optional bias (m)
// and GELU input (aux, m x n: written by the forward's GELU epilogues, read by DGELU) for the
// epilogue. A and B as in (bf16 or FP8); C, D, bias and aux bf16.
static void lt_matmul(bf16* d, const void* a, const void* b, const bf16* c, int m, int n, int k, int trans_a,
                      int trans_b, cublasLtEpilogue_t epilogue, const bf16* bias, const bf16* aux, float alpha,
                      float beta, int batch, const LtInputs* in, const MatmulStream* s) {
    if (!s->workspace) die("matmul: the MatmulStream has no workspace (matmul_stream_init)");
    int fp8 = in->a_type != CUDA_R_16BF;
    if (fp8 && (!trans_a || trans_b)) die("matmul: FP8 operands need A transposed and B not (cuBLASLt's TN)");
    cublasLtMatmulDesc_t desc;
    cublasCheck(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    if (fp8) {
        int8_t fast = (int8_t)in->fast_accum;
        set_desc(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &in->a_scale, sizeof(in->a_scale));
        set_desc(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &in->b_scale, sizeof(in->b_scale));
        set_desc(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast));
    }
    cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a));
    set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b));
    set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
    if (bias) set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
    if (aux) {
        int64_t aux_ld = m;
        set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux));
        set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld));
    }

    // Layouts describe the matrices as stored, before op().
    int rows_a = trans_a ? k : m, rows_b = trans_b ? n : k;
    cublasLtMatrixLayout_t layout_a = lt_layout(in->a_type, rows_a, trans_a ? m : k, batch);
    cublasLtMatrixLayout_t layout_b = lt_layout(in->b_type, rows_b, trans_b ? k : n, batch);
    cublasLtMatrixLayout_t layout_d = lt_layout(CUDA_R_16BF, m, n, batch);

    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t workspace_bytes = MATMUL_WORKSPACE_BYTES;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &workspace_bytes, sizeof(workspace_bytes)));
    const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    // In a batch every matrix must have it, so the stride's alignment bounds it too.
    size_t stride_a = (size_t)m * k * element_bytes(in->a_type), stride_b = (size_t)k * n * element_bytes(in->b_type),
           stride_d = (size_t)m * n * sizeof(bf16);
    const uint32_t align[4] = {batch_alignment(a, stride_a, batch), batch_alignment(b, stride_b, batch),
                               batch_alignment(c ? c : d, stride_d, batch), batch_alignment(d, stride_d, batch)};
    for (int i = 0; i < 4; i++)
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, align_attr[i], &align[i], sizeof(align[i])));

    cublasLtMatmulHeuristicResult_t heuristic;
    int found = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt_handle, desc, layout_a, layout_b,
                                                           layout_d, layout_d, pref, 1, &heuristic, &found);
    if (status != CUBLAS_STATUS_NOT_SUPPORTED) cublasCheck(status);
    if (status == CUBLAS_STATUS_NOT_SUPPORTED || found == 0)
        die("matmul: cuBLASLt has no algorithm for m=%d n=%d k=%d (transa %d, transb %d, epilogue %d, batch %d, "
            "A type %d, B type %d)", m, n, k, trans_a, trans_b, (int)epilogue, batch, (int)in->a_type, (int)in->b_type);
    if (!c) beta = 0.0f;
    cublasCheck(cublasLtMatmul(lt_handle, desc, &alpha, a, layout_a, b, layout_b, &beta, c ? c : d, layout_d,
                               d, layout_d, &heuristic.algo, s->workspace, MATMUL_WORKSPACE_BYTES,
                               s->stream));

    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    cublasCheck(cublasLtMatrixLayoutDestroy(layout_a));
    cublasCheck(cublasLtMatrixLayoutDestroy(layout_b));
    cublasCheck(cublasLtMatrixLayoutDestroy(layout_d));
    cublasCheck(cublasLtMatmulDescDestroy(desc));
}

void matmul_forward(bf16* out, bf16* pre_gelu, const bf16* inp, const bf16* weight,
                    const bf16* bias, const bf16* residual, int N, int C, int OC, const MatmulStream* s) {
    if (pre_gelu && OC % 8 != 0)
        die("matmul_forward: the fused GELU needs OC a multiple of 8 (cuBLASLt), got OC=%d", OC);
    if (pre_gelu && residual) die("matmul_forward: the fused GELU takes no residual");
    cublasLtEpilogue_t epilogue =
        pre_gelu ? (bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                 : (bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
    lt_matmul(out, weight, inp, residual, OC, N, C, 1, 0, epilogue, bias, pre_gelu, 1.0f, 1.0f, 1, &BF16_INPUTS, s);
}

void matmul_forward_relu2(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int N, int C, int OC,
                          const MatmulStream* s) {
    if (OC % 8 != 0 || !aligned16(out))
        die("matmul_forward_relu2: needs OC (%d) a multiple of 8 and a 16-byte aligned out", OC);
    lt_matmul(out, weight, inp, NULL, OC, N, C, 1, 0, bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT,
              bias, NULL, 1.0f, 0.0f, 1, &BF16_INPUTS, s);
    size_t packs = (size_t)N * OC / 8;
    if (packs == 0) return;
    relu2_forward_kernel<<<ceil_div(packs, ELEMENTWISE_THREADS), ELEMENTWISE_THREADS, 0, s->stream>>>(
        (bf16x8*)out, packs);
    cudaCheckLaunch();
}

size_t matmul_backward_scratch_bytes(int N, int C, int OC) { return column_sums_scratch_bytes(N, OC); }

// dweight (OC, C) += dout^T @ inp; dbias (OC, or NULL) += the column sums of dout.
static void weight_gradients(const char* who, bf16* dweight, bf16* dbias, const bf16* dout, const bf16* inp,
                             int N, int C, int OC, void* scratch, const MatmulStream* s) {
    if (dbias && !scratch) die("%s: dbias needs the scratch", who);
    if (dbias) column_sums_add(dbias, dout, N, OC, OC, (float*)scratch, s->stream);
    lt_matmul(dweight, inp, dout, dweight, C, OC, N, 0, 1, CUBLASLT_EPILOGUE_DEFAULT, NULL, NULL, 1.0f, 1.0f, 1,
              &BF16_INPUTS, s);
}

void matmul_backward(bf16* dinp, bf16* dweight, bf16* dbias, const bf16* dout, const bf16* inp,
                     const bf16* weight, const bf16* inp_pre_gelu, int N, int C, int OC,
                     void* scratch, const MatmulStream* s) {
    if (inp_pre_gelu && C % 8 != 0)
        die("matmul_backward: the fused GELU backward needs C a multiple of 8 (cuBLASLt), got C=%d", C);
    weight_gradients("matmul_backward", dweight, dbias, dout, inp, N, C, OC, scratch, s);
    lt_matmul(dinp, weight, dout, NULL, C, N, OC, 0, 0,
              inp_pre_gelu ? CUBLASLT_EPILOGUE_DGELU : CUBLASLT_EPILOGUE_DEFAULT, NULL, inp_pre_gelu, 1.0f, 0.0f,
              1, &BF16_INPUTS, s);
}

// Row-major out = op(a) op(b) is column-major out^T = op(b)^T op(a)^T, and a row-major matrix
// is the column-major view of its transpose: so b comes first, with its own transposition.
void matmul_batched(bf16* out, const bf16* a, const bf16* b, const bf16* c, int M, int N, int K, int trans_a,
                    int trans_b, float alpha, float beta, int batch, const MatmulStream* s) {
    lt_matmul(out, b, a, c, N, M, K, trans_b, trans_a, CUBLASLT_EPILOGUE_DEFAULT, NULL, NULL, alpha, beta, batch,
              &BF16_INPUTS, s);
}

void matmul_backward_relu2(bf16* dinp, bf16* dweight, bf16* dbias, const bf16* dout, const bf16* inp,
                           const bf16* weight, int N, int C, int OC, void* scratch, const MatmulStream* s) {
    if (C % 8 != 0 || !aligned16(dinp) || !aligned16(inp))
        die("matmul_backward_relu2: needs C (%d) a multiple of 8 and 16-byte aligned dinp and inp", C);
    weight_gradients("matmul_backward_relu2", dweight, dbias, dout, inp, N, C, OC, scratch, s);
    lt_matmul(dinp, weight, dout, NULL, C, N, OC, 0, 0, CUBLASLT_EPILOGUE_DEFAULT, NULL, NULL, 1.0f, 0.0f, 1,
              &BF16_INPUTS, s);
    size_t packs = (size_t)N * C / 8;
    if (packs == 0) return;
    relu2_backward_kernel<<<ceil_div(packs, ELEMENTWISE_THREADS), ELEMENTWISE_THREADS, 0, s->stream>>>(
        (bf16x8*)dinp, (const bf16x8*)inp, packs);
    cudaCheckLaunch();
}

// ---- FP8

void fp8_linear_init(Fp8Linear* l, int C, int OC, int max_N, Fp8Scaling scaling, Fp8Format grad_format,
                     int fast_accum, int fp8_backward) {
    if (C <= 0 || OC <= 0 || max_N <= 0 || C % 16 != 0 || OC % 16 != 0 || max_N % 16 != 0)
        die("fp8_linear_init: C (%d), OC (%d) and max_N (%d) must be positive multiples of 16", C, OC, max_N);
    int device, major, minor;
    cudaCheck(cudaGetDevice(&device));
    cudaCheck(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    cudaCheck(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    if (major * 10 + minor < 89)
        die("FP8 matmuls need FP8 tensor cores (compute capability 8.9 or later); this GPU is %d.%d", major, minor);
    l->C = C;
    l->OC = OC;
    l->max_N = max_N;
    l->fast_accum = fast_accum;
    fp8_tensor_init(&l->inp, FP8_E4M3, scaling);
    fp8_tensor_init(&l->weight, FP8_E4M3, FP8_SCALING_CURRENT);
    fp8_tensor_init(&l->grad, grad_format, scaling);
    cudaCheck(cudaMalloc((void**)&l->weight_q, (size_t)OC * C));
    cudaCheck(cudaMalloc((void**)&l->weight_t, (size_t)OC * C));
    l->inp_t = NULL;
    if (fp8_backward) cudaCheck(cudaMalloc((void**)&l->inp_t, (size_t)C * max_N));
}

size_t fp8_linear_bytes(int C, int OC, int max_N, int fp8_backward) {
    return 2 * (size_t)OC * C + (fp8_backward ? (size_t)C * max_N : 0) + 3 * sizeof(Fp8Scale);
}

void fp8_linear_free(Fp8Linear* l) {
    fp8_tensor_free(&l->inp);
    fp8_tensor_free(&l->weight);
    fp8_tensor_free(&l->grad);
    cudaCheck(cudaFree(l->weight_q));
    cudaCheck(cudaFree(l->weight_t));
    cudaCheck(cudaFree(l->inp_t));
    l->weight_q = l->weight_t = l->inp_t = NULL;
}

void fp8_linear_quantise_weight(Fp8Linear* l, const bf16* weight, cudaStream_t stream) {
    fp8_quantise(&l->weight, l->weight_q, l->weight_t, weight, l->OC, l->C, stream);
}

// Scratch pieces start 256 bytes apart, the alignment cuBLASLt's fastest algorithms want.
static size_t scratch_piece(size_t bytes) { return (size_t)ceil_div((long long)bytes, 256) * 256; }

size_t matmul_fp8_scratch_bytes(int N, int C, int OC, int fp8_backward) {
    size_t forward = scratch_piece((size_t)N * C);
    size_t backward = fp8_backward ? 2 * scratch_piece((size_t)N * OC) + column_sums_scratch_bytes(N, OC) : 0;
    return forward > backward ? forward : backward;
}

static void check_fp8_shape(const char* who, int N, const Fp8Linear* l, void* scratch) {
    if (N <= 0 || N % 16 != 0 || N > l->max_N)
        die("%s: N (%d) must be a positive multiple of 16 up to the layer's max_N (%d)", who, N, l->max_N);
    if (!scratch) die("%s: needs matmul_fp8_scratch_bytes of scratch", who);
}

// out (N, OC) = inp @ weight^T (+ bias) (+ residual), the input quantised into the scratch and,
// transposed, into l->inp_t for the backward (where the layer has its FP8 backward).
static void forward_fp8(const char* who, bf16* out, const bf16* inp, const bf16* bias, const bf16* residual, int N,
                        Fp8Linear* l, void* scratch, const MatmulStream* s) {
    check_fp8_shape(who, N, l, scratch);
    uint8_t* inp_q = (uint8_t*)scratch;
    fp8_quantise(&l->inp, inp_q, l->inp_t, inp, N, l->C, s->stream);
    const LtInputs in = {CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, &l->weight.state->scale_inv, &l->inp.state->scale_inv,
                         l->fast_accum};
    lt_matmul(out, l->weight_q, inp_q, residual, l->OC, N, l->C, 1, 0,
              bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT, bias, NULL, 1.0f, 1.0f, 1, &in, s);
}

void matmul_forward_fp8(bf16* out, bf16* pre_gelu, const bf16* inp, const bf16* bias, const bf16* residual, int N,
                        Fp8Linear* l, void* scratch, const MatmulStream* s) {
    if (pre_gelu && residual) die("matmul_forward_fp8: GELU takes no residual");
    forward_fp8("matmul_forward_fp8", pre_gelu ? pre_gelu : out, inp, bias, residual, N, l, scratch, s);
    if (pre_gelu) gelu_forward(out, pre_gelu, (size_t)N * l->OC, s->stream);
}

void matmul_forward_relu2_fp8(bf16* out, const bf16* inp, const bf16* bias, int N, Fp8Linear* l, void* scratch,
                              const MatmulStream* s) {
    if (!aligned16(out)) die("matmul_forward_relu2_fp8: needs a 16-byte aligned out");
    forward_fp8("matmul_forward_relu2_fp8", out, inp, bias, NULL, N, l, scratch, s);
    size_t packs = (size_t)N * l->OC / 8;
    relu2_forward_kernel<<<ceil_div(packs, ELEMENTWISE_THREADS), ELEMENTWISE_THREADS, 0, s->stream>>>(
        (bf16x8*)out, packs);
    cudaCheckLaunch();
}

// dweight += dout^T @ inp, dbias += the column sums of dout, dinp = dout @ weight: dout quantised
// with its transpose into the scratch, the column sums' partials after them.
static void backward_fp8(const char* who, bf16* dinp, bf16* dweight, bf16* dbias, const bf16* dout, int N,
                         Fp8Linear* l, void* scratch, const MatmulStream* s) {
    check_fp8_shape(who, N, l, scratch);
    if (!l->inp_t) die("%s: the layer was made without its FP8 backward", who);
    int C = l->C, OC = l->OC;
    uint8_t* dout_q = (uint8_t*)scratch;
    uint8_t* dout_t = dout_q + scratch_piece((size_t)N * OC);
    if (dbias) column_sums_add(dbias, dout, N, OC, OC, (float*)(dout_t + scratch_piece((size_t)N * OC)), s->stream);
    fp8_quantise(&l->grad, dout_q, dout_t, dout, N, OC, s->stream);
    cudaDataType_t grad_type = l->grad.format == FP8_E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2;
    const LtInputs weight_grad = {CUDA_R_8F_E4M3, grad_type, &l->inp.state->scale_inv, &l->grad.state->scale_inv, 0};
    lt_matmul(dweight, l->inp_t, dout_t, dweight, C, OC, N, 1, 0, CUBLASLT_EPILOGUE_DEFAULT, NULL, NULL, 1.0f, 1.0f,
              1, &weight_grad, s);
    const LtInputs inp_grad = {CUDA_R_8F_E4M3, grad_type, &l->weight.state->scale_inv, &l->grad.state->scale_inv, 0};
    lt_matmul(dinp, l->weight_t, dout_q, NULL, C, N, OC, 1, 0, CUBLASLT_EPILOGUE_DEFAULT, NULL, NULL, 1.0f, 0.0f, 1,
              &inp_grad, s);
}

void matmul_backward_fp8(bf16* dinp, bf16* dweight, bf16* dbias, const bf16* dout, const bf16* inp_pre_gelu, int N,
                         Fp8Linear* l, void* scratch, const MatmulStream* s) {
    backward_fp8("matmul_backward_fp8", dinp, dweight, dbias, dout, N, l, scratch, s);
    if (inp_pre_gelu) gelu_backward(dinp, inp_pre_gelu, (size_t)N * l->C, s->stream);
}

void matmul_backward_relu2_fp8(bf16* dinp, bf16* dweight, bf16* dbias, const bf16* dout, const bf16* inp, int N,
                               Fp8Linear* l, void* scratch, const MatmulStream* s) {
    if (!aligned16(dinp) || !aligned16(inp))
        die("matmul_backward_relu2_fp8: needs 16-byte aligned dinp and inp");
    backward_fp8("matmul_backward_relu2_fp8", dinp, dweight, dbias, dout, N, l, scratch, s);
    size_t packs = (size_t)N * l->C / 8;
    relu2_backward_kernel<<<ceil_div(packs, ELEMENTWISE_THREADS), ELEMENTWISE_THREADS, 0, s->stream>>>(
        (bf16x8*)dinp, (const bf16x8*)inp, packs);
    cudaCheckLaunch();
}
