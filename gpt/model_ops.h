// gpt/model_ops.h: what the model computes, as lists of operations in the forward's order, each
// list with the settings of the architecture (gpt/config.h) that change its operations, resolved:
//   the stem   tokens (B, T) -> the residual stream x (B, T, C) entering the first block
//   a block    x (B, T, C) -> x (B, T, C): layer l's list of L (the key window and the value
//              embeddings are per layer)
//   the head   x (B, T, C) leaving the last block -> logits (B, T, Vp)
// Every path that computes the model walks these lists, a case for each operation in a switch
// without a default: the batched block's forward and backward (gpt/block.h: training and the
// prompt), the model's forward and backward (gpt/gpt.h: the stem and the head), and the
// prompt's and the decoding step's stem and head and the step's blocks (gpt/inference.h), which
// fuse an operation into the kernel of the next where they can (a norm into the matmul after
// it). The kinds of norm and activation are switched over alike. The build takes -Werror=switch
// (the Makefile): an operation or a kind that one path does not handle fails that path's build.
// So a new part of the model is an operation of its own (or a new kind), not a new field of an
// operation, which a path could leave unread: the build then names every path that must compute
// it. Its tensors are rows of the parameter table (gpt/param_table.h). Plain C, so that CPU
// programs and tests read the lists.
#ifndef FLASHGPT_GPT_MODEL_OPS_H
#define FLASHGPT_GPT_MODEL_OPS_H

#include "gpt/config.h"

#ifdef __cplusplus
extern "C" {
#endif

// The most operations a list holds.
#define MODEL_MAX_OPS 16

// LayerNorm with weight and bias (eps 1e-5, layers/layernorm.h) or RMSNorm without weights (eps
// 1e-6, layers/rmsnorm.h).
typedef enum { NORM_LAYERNORM, NORM_RMSNORM } NormKind;
// The MLP's: GELU (tanh form, layers/gelu.h) or relu(h)^2 (layers/matmul.h).
typedef enum { ACTIVATION_GELU, ACTIVATION_RELU2 } Activation;

// The stem, on the B * T tokens.
typedef enum {
    STEM_EMBEDDING,        // x = wte[token] (+ wpe[position] where the model has learned positions)
    STEM_EMBEDDING_NORM,   // x = RMSNorm(x) without weights (eps 1e-6), whatever the blocks' norm
    STEM_SMEAR,            // x_t += smear_lambda sigmoid(x_t[:24] . smear_gate) x_{t-1} of the row's
                           // token before (none at a row's first), from x before it (layers/smear.h)
} StemOp;

typedef struct {
    int count;
    StemOp op[MODEL_MAX_OPS];
} StemOps;

// A block, pre-norm, on N = B * T rows with layer l's parameters (LayerParameters), the residual
// connections added in the projections. A linear layer adds its bias where the model has one (a
// parameter the architecture lacks is NULL, gpt/parameters.h).
typedef enum {
    BLOCK_RESIDUAL_LAMBDAS, // res (N, C) = resid_lambda x + x0_lambda x0: x the stream from the block
                            // before, x0 the stem's output (layers/residual_lambdas.h)
    BLOCK_NORM1,            // ln1 (N, C) = norm(res)
    BLOCK_VALUE_GATE,       // value_gate (N, NH) = 3 sigmoid(ln1[:, :VALUE_GATE_CHANNELS] @ value_gate^T):
                            // the value embeddings' gate of each row and head (layers/value_embedding.h)
    BLOCK_QKV,              // qkv (N, 3, NH, HS) = ln1 @ qkvw^T + qkvb
    BLOCK_VALUE_EMBEDDING,  // v of qkv += value_gate (per head) * value_embedding[token]: the layer's
                            // token embedding added to the values (the KV cache holds the sum)
    BLOCK_QK_NORM_ROTARY,   // q and k of qkv in place: RMSNorm over each head (no weights), then
                            // rotary at each row's position (layers/rotary.h); either alone
    BLOCK_ATTENTION,        // atty (N, NH, HS) = causal attention of q, k, v in the layer's key
                            // window (and the row's document, where the batch has documents), at
                            // the model's scale (a QK scale's: gpt/activations.h's attention_shape)
    BLOCK_ATTPROJ,          // mid (N, C) = res + atty @ attprojw^T + attprojb
    BLOCK_NORM2,            // ln2 (N, C) = norm(mid)
    BLOCK_FC,               // fch_gelu (N, 4C) = activation(ln2 @ fcw^T + fcb)
    BLOCK_FCPROJ,           // res_next (N, C) = mid + fch_gelu @ fcprojw^T + fcprojb
} BlockOp;

typedef struct {
    int count;
    BlockOp op[MODEL_MAX_OPS];
    NormKind norm;           // NORM1, NORM2
    int qk_norm;             // QK_NORM_ROTARY: the norm of each head's q and k (eps 1e-6)
    int rotary;              // QK_NORM_ROTARY: their rotation
    float rotary_base;       // QK_NORM_ROTARY: the rotation's base (the architecture's, which the
                             // kernels check with or without the rotation)
    int window;              // ATTENTION: the keys a row sees at most, its own included; 0: no bound
    Activation activation;   // FC
} BlockOps;

// The head, on the N rows of the stream leaving the last block.
typedef enum {
    HEAD_BACKOUT,  // x (N, C) = x - backout_lambda x_mid, x_mid the stream leaving the block
                   // architecture_backout_layer (layers/backout.h)
    HEAD_NORM,     // lnf (N, C) = norm(x)
    HEAD_LOGITS,   // logits (N, Vp) = lnf @ head^T (wte, or lm_head where untied), then soft-capped
                   // z -> softcap * tanh(z / softcap) in the loss and the draw
} HeadOp;

typedef struct {
    int count;
    HeadOp op[MODEL_MAX_OPS];
    NormKind norm;   // NORM
    float softcap;   // LOGITS: the cap; 0: none
} HeadOps;

StemOps stem_ops(const Architecture* a);
// Layer l's block, of L layers.
BlockOps block_ops(const Architecture* a, int l, int L);
HeadOps head_ops(const Architecture* a);

#ifdef __cplusplus
}
#endif

#endif
