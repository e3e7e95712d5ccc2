// layers/matmul.h: the linear layer through cuBLASLt, bf16 in and out, fp32 accumulation.
// out (N, OC) = inp (N, C) @ weight^T + bias, weight (OC, C) row-major, bias (OC); optionally
// followed by GELU (tanh form), fused into the matmul epilogue, as is its backward, or with the
// residual stream added in the same epilogue; or followed by ReLU^2 (the modern MLP's), which
// cuBLASLt has no epilogue for: one elementwise pass after the matmul, forward and backward.
// The same layer with its three products in FP8 on Hopper's tensor cores (Fp8Linear, below): the
// input and the weight in E4M3, the output's gradient in E5M2 or E4M3, quantised with per-tensor
// scales (layers/fp8.h); bf16 out, fp32 accumulation.
#ifndef FLASHGPT_MATMUL_H
#define FLASHGPT_MATMUL_H

#include <stddef.h>
#include <stdint.h>
#include "common/cuda_check.h"
#include "layers/fp8.h"

// Where matmuls run: a stream and the cuBLASLt workspace that the matmuls on it alone use. An
// algorithm may use its workspace for the whole of its run, so matmuls that can run at once (on
// two streams) must not share one: each owner of a stream that runs matmuls makes a
// MatmulStream of it, and every matmul names one.
typedef struct {
    cudaStream_t stream;
    void* workspace;   // MATMUL_WORKSPACE_BYTES of device memory
} MatmulStream;

#define MATMUL_WORKSPACE_BYTES ((size_t)32 << 20)

// A workspace for the matmuls on stream, which stays the caller's: it destroys the stream after
// matmul_stream_free.
void matmul_stream_init(MatmulStream* s, cudaStream_t stream);
void matmul_stream_free(MatmulStream* s);

// out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias (OC, or NULL) + residual (N, OC, or NULL),
// rounded to bf16 once.
// If pre_gelu != NULL (and no residual): pre_gelu (N, OC) = that result and out =
// gelu(pre_gelu); OC % 8 == 0.
void matmul_forward(bf16* out, bf16* pre_gelu, const bf16* inp, const bf16* weight,
                    const bf16* bias, const bf16* residual, int N, int C, int OC, const MatmulStream* s);

// dinp (N, C) = dout @ weight (overwritten); dweight (OC, C) += dout^T @ inp;
// dbias (OC) += sum over N of dout (dbias may be NULL).
// inp_pre_gelu (N, C), when not NULL: inp was gelu(inp_pre_gelu) (the MLP's hidden layer), and
// dinp becomes the gradient with respect to inp_pre_gelu, dinp * gelu'(inp_pre_gelu), in the
// epilogue of the dinp matmul; C % 8 == 0.
// scratch: matmul_backward_scratch_bytes(N, C, OC), the column sums of dbias: a call without
// dbias uses none and may pass NULL. Deterministic.
void matmul_backward(bf16* dinp, bf16* dweight, bf16* dbias, const bf16* dout, const bf16* inp,
                     const bf16* weight, const bf16* inp_pre_gelu, int N, int C, int OC,
                     void* scratch, const MatmulStream* s);
size_t matmul_backward_scratch_bytes(int N, int C, int OC);

// For each i < batch, row-major: out[i] (M, N) = alpha op(a[i]) (M, K) @ op(b[i]) (K, N)
// + beta c[i] (M, N; c NULL: none, beta ignored), rounded to bf16 once; a is (M, K), or (K, M)
// with trans_a, b is (K, N), or (N, K) with trans_b; the batch's matrices lie one after another
// in each array. c may be out.
void matmul_batched(bf16* out, const bf16* a, const bf16* b, const bf16* c, int M, int N, int K, int trans_a,
                    int trans_b, float alpha, float beta, int batch, const MatmulStream* s);

// out (N, OC) = relu(h)^2, h = inp (N, C) @ weight (OC, C)^T + bias (OC, or NULL), h rounded to
// bf16 (in out) before it is squared; OC % 8 == 0 and out 16-byte aligned. Only out is kept: the
// backward takes relu(h) = sqrt(out).
void matmul_forward_relu2(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int N, int C, int OC,
                          const MatmulStream* s);

// matmul_backward for the layer that reads relu(h)^2 (the MLP's second): inp (N, C) = relu(h)^2, the
// output of matmul_forward_relu2, and dinp (N, C) is the gradient with respect to h:
// (dout @ weight) * 2 sqrt(inp); C % 8 == 0, dinp and inp 16-byte aligned. dweight, dbias, scratch
// as in matmul_backward.
void matmul_backward_relu2(bf16* dinp, bf16* dweight, bf16* dbias, const bf16* dout, const bf16* inp,
                           const bf16* weight, int N, int C, int OC, void* scratch, const MatmulStream* s);

// ---- FP8
// The FP8 state of one linear layer, weight (OC, C): the scaling of its three tensors, the weight
// quantised as the forward and the backward read it (fp8_linear_quantise_weight makes both after
// each change of the weight, before the next forward), and the forward's input quantised and
// transposed, kept for the backward's dweight. Every FP8 operand runs along the reduced
// dimension (cuBLASLt's FP8 matmuls take A transposed and B not, column-major: layers/matmul.cu),
// hence the transposed copies. The scales and histories are on the GPU. The weight always takes
// current scaling: quantised once per change, its amax pass costs one read of the weight, and its
// quantisation is a function of the weight alone, so that a model whose weights are set again
// (a resume) quantises them to the same bytes; the input's and the gradient's Fp8Scale states are
// what a checkpoint keeps of it.
typedef struct {
    int C, OC, max_N;
    int fast_accum;              // the forward's products accumulate without cuBLASLt's promotion
    Fp8Tensor inp, weight, grad; // E4M3, E4M3, and the gradient's format
    uint8_t* weight_q;           // (OC, C): the forward's
    uint8_t* weight_t;           // (C, OC): dinp's
    uint8_t* inp_t;              // (C, N): the latest forward's input, for dweight; NULL for a layer
                                 // without its FP8 backward
} Fp8Linear;

// C, OC and every N multiples of 16 (cuBLASLt's FP8 operands), N <= max_N; scaling: the input's
// and the gradient's. fp8_backward 0: the caller runs the layer's backward in bf16 (on its own
// input and weight), so the input is not kept. Ends the program with one line on a GPU without
// FP8 tensor cores (compute capability below 8.9).
void fp8_linear_init(Fp8Linear* l, int C, int OC, int max_N, Fp8Scaling scaling, Fp8Format grad_format,
                     int fast_accum, int fp8_backward);
void fp8_linear_free(Fp8Linear* l);
// The device memory fp8_linear_init allocates for such a layer.
size_t fp8_linear_bytes(int C, int OC, int max_N, int fp8_backward);
void fp8_linear_quantise_weight(Fp8Linear* l, const bf16* weight, cudaStream_t stream);

// The scratch of an FP8 forward or backward (the quantised input; the quantised gradient and its
// transpose, and the column sums of dbias), of the forward alone for a layer without its FP8
// backward: layers that never run at once may share it.
size_t matmul_fp8_scratch_bytes(int N, int C, int OC, int fp8_backward);

// matmul_forward through l: out (N, OC) = inp (N, C) @ weight^T + bias + residual; with pre_gelu
// (and no residual), pre_gelu = that and out = gelu(pre_gelu), GELU in a pass after the matmul.
void matmul_forward_fp8(bf16* out, bf16* pre_gelu, const bf16* inp, const bf16* bias, const bf16* residual, int N,
                        Fp8Linear* l, void* scratch, const MatmulStream* s);
// matmul_forward_relu2 through l.
void matmul_forward_relu2_fp8(bf16* out, const bf16* inp, const bf16* bias, int N, Fp8Linear* l, void* scratch,
                              const MatmulStream* s);
// matmul_backward through l (made with its FP8 backward), after its forward on the same N:
// dinp (N, C) = dout (N, OC) @ weight, dweight (OC, C) += dout^T @ inp, dbias (OC, or NULL) += the
// column sums of dout; with inp_pre_gelu, dinp *= gelu'(inp_pre_gelu) in a pass after the matmul.
void matmul_backward_fp8(bf16* dinp, bf16* dweight, bf16* dbias, const bf16* dout, const bf16* inp_pre_gelu, int N,
                         Fp8Linear* l, void* scratch, const MatmulStream* s);
// matmul_backward_relu2 through l: inp (N, C) = relu(h)^2, the forward's input.
void matmul_backward_relu2_fp8(bf16* dinp, bf16* dweight, bf16* dbias, const bf16* dout, const bf16* inp, int N,
                               Fp8Linear* l, void* scratch, const MatmulStream* s);

#endif
