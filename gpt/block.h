// gpt/block.h: one transformer block of the GPT, written once, for either architecture
// (gpt/config.h). The training model runs it on every layer of a batch, forward and backward
// (gpt/gpt.cu); the inference model runs its forward on a prompt (gpt/inference.cu). Its
// operations are the layer's list (gpt/model_ops.h's block_ops): block_forward walks it in order,
// block_backward in reverse, and gpt/inference.cu's decoding step walks the same list with kernels
// of its own. Pre-norm, the residual connections added in the projections' epilogues:
//   res      = resid_lambda x + x0_lambda x0 with residual lambdas (x the block before's res_next,
//              x0 the stem's output), else x
//   mid      = res + attproj(attention(rope(qknorm(qkv(ln1(res))))))   qkv (N, 3C), atty (N, C)
//              (on a layer with value embeddings, v += value_gate * value_embedding[token] first)
//   res_next = mid + fcproj(act(fc(ln2(mid))))                          fch, fch_gelu (N, 4C)
// on N = B * T rows of C = NH * HS channels (attention: B sequences of T tokens). GPT-2's: ln
// LayerNorm, act GELU, biases, no QK-norm or rotary. The modern one: ln RMSNorm without weights,
// QK-norm and rotary in place on q and k (layers/rotary.h), act ReLU^2 (its output alone kept), no
// biases; each component switched on its own.
#ifndef FLASHGPT_GPT_BLOCK_H
#define FLASHGPT_GPT_BLOCK_H

#include "attention/attention.h"
#include "common/cuda_check.h"
#include "gpt/model_ops.h"
#include "gpt/parameters.h"
#include "gpt/profile.h"
#include "layers/matmul.h"

// What the backward computes again instead of keeping per layer (flags).
enum { RECOMPUTE_GELU = 1, RECOMPUTE_LAYERNORM = 2 };

// NULL when the block computes the architecture at head size HS in every program, else why not:
// the head sizes every attention path takes (attention_head_size_unsupported), and with rotary or
// QK-norm those of layers/rotary.h too. The model checkpoint's header is checked by it.
const char* block_unsupported(const Architecture* arch, int HS);

// A norm of inp (N, C) into out, forward and backward (dinp +=): LayerNorm with weight, bias,
// mean and rstd (N), or RMSNorm without weights (mean, weight, bias unused, rstd (N)); scratch:
// the layernorm backward's. The blocks' ln1 and ln2 and the model's lnf.
void norm_forward(NormKind norm, bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight,
                  const bf16* bias, int N, int C, cudaStream_t stream);
void norm_backward(NormKind norm, bf16* dinp, bf16* dweight, bf16* dbias, const bf16* dout, const bf16* inp,
                   const bf16* weight, const float* mean, const float* rstd, int N, int C, void* scratch,
                   cudaStream_t stream);

// A block's activations on its N rows: what the forward writes and the backward reads. Buffers
// may coincide where nothing reads them again (the prompt's: x, res and res_next, ln1 and ln2).
typedef struct {
    bf16* x;          // (N, C) the stream from the block before (the first block's: x0), which the
                      // residual lambdas make res of; residual lambdas only
    bf16* x0;         // (N, C) the stem's output; residual lambdas only
    bf16* res;        // (N, C) the stream entering the block
    bf16* ln1;        // (N, C)
    float* ln1_mean;  // (N); LayerNorm only
    float* ln1_rstd;  // (N)
    bf16* qkv;        // (N, 3, NH, HS); with QK-norm or rotary, q and k as attention takes them
    float* qk_rstd;   // (N, 2, NH) QK-norm's rstd of each head's q and k; QK-norm only
    float* value_gate;   // (N, NH) fp32 the value embeddings' gates; value embeddings only
    bf16* atty;       // (N, NH, HS)
    void* att_saved;  // attention_saved_bytes: L (flash) or P (naive)
    bf16* mid;        // (N, C) the stream after the attention block
    bf16* ln2;        // (N, C)
    float* ln2_mean;  // (N); LayerNorm only
    float* ln2_rstd;  // (N)
    bf16* fch;        // (N, 4C) before GELU; GELU only
    bf16* fch_gelu;   // (N, 4C) the MLP's activation: GELU's, or relu(h)^2
    bf16* res_next;   // (N, C) the stream leaving the block
} BlockActivations;

// The attention of each window of the architecture's pattern (one plan without a pattern): base
// (kind, deterministic backward, ring) with the key window of the layers that take it (their
// BLOCK_ATTENTION's) and, where the architecture has documents, their bounds doc_start and
// doc_end (B, T) on the device (attention/mask.h). Made once; block_attention gives a layer's.
// Without documents or windows the one plan is base with no mask: the kernels of plain causal
// attention.
void block_attention_plans(const Architecture* arch, const AttentionPlan* base, const int* doc_start,
                           const int* doc_end, AttentionPlan plans[ARCHITECTURE_MAX_WINDOWS]);
// How many plans block_attention_plans makes: the pattern's windows, or one.
static inline int block_attention_count(const Architecture* arch) {
    return arch->window_count > 0 ? arch->window_count : 1;
}
static inline const AttentionPlan* block_attention(const Architecture* arch, const AttentionPlan* plans, int l) {
    return &plans[l % block_attention_count(arch)];
}

// How the blocks of a pass run, the same for every layer.
typedef struct {
    const Architecture* arch;
    int layers;               // the model's L (which layers take value embeddings)
    const AttentionPlan* attention;   // block_attention_plans' plans: layer l runs block_attention's
    AttentionShape shape;     // B sequences of T tokens: N = B * T rows, C = NH * HS
    const int* positions;     // (N) each row's position on the GPU, for rotary (else NULL)
    int recompute;            // RECOMPUTE_* flags; RECOMPUTE_GELU for a GELU MLP only
    void* scratch;            // the layers' scratch: attention_scratch_bytes, and in the backward
                              // the matmuls' and layernorms' (may be NULL for a forward that takes none)
    Profile* profile;         // NULL: no marks
    const MatmulStream* matmul;   // the stream every kernel of the block runs on (matmul->stream),
                                  // with the workspace of its matmuls
    Fp8Linear* fp8_mlp;       // (L, 2): layer l's fc and fcproj in FP8, their weights quantised;
                              // NULL: the MLP in bf16
    void* fp8_scratch;        // their matmul_fp8_scratch_bytes
    int fp8_grad_bf16;        // 1: their gradients' matmuls in bf16 (the forward's alone in FP8)
    const int* tokens;        // (N) the rows' tokens on the GPU; value embeddings only
    const int* token_groups;  // the backward's: the rows of each token (layers/encoder.h's
    int token_group_count;    // encoder_token_groups), on the GPU; value embeddings only
} BlockPass;

// Marks the L blocks of a pass record in the profile at most, each closing one of its parts
// (gpt/profile.h): one per operation each way, and in the backward one per recomputation (at
// most three: the GELU, ln2, ln1).
int block_forward_marks(const Architecture* arch, int L);
int block_backward_marks(const Architecture* arch, int L);

// x->res (N, C) through layer l's block into x->res_next, writing every activation of x (those
// of the architecture). With RECOMPUTE_GELU the GELU is a kernel of its own after the fc matmul,
// the one the backward's recomputation runs, so that the backward sees the forward's bits.
void block_forward(const BlockPass* pass, int l, const BlockActivations* x, const LayerParameters* w);

// The gradients the backward of every block reads and writes.
typedef struct {
    bf16* dresidual;  // (N, C): d loss / d res_next in, d loss / d res out (the residual paths pass
                      // it through, the branches add to it)
    bf16* dnarrow;    // (N, C) the gradients of the norms' outputs and of atty
    bf16* dwide;      // (N, 4C) the gradients of qkv (3C) and fch (4C)
    float* dx0;       // (N, C) fp32 d loss / d x0 from the residual lambdas, added to block by block
                      // from zero (the first block's backward takes it into dresidual); residual
                      // lambdas only
    float* dvalue_gate;   // (N, NH) fp32 d loss / d value_gate of the layer; value embeddings only
} BlockGradients;

// Layer l's backward: d->dresidual from d loss / d res_next to d loss / d res, and dw += the
// gradients of its parameters; x as the forward left it (the recomputed activations are made
// again here).
void block_backward(const BlockPass* pass, int l, const BlockActivations* x, const LayerParameters* w,
                    const LayerParameters* dw, const BlockGradients* d);

#endif
