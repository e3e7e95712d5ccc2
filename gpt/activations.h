// gpt/activations.h: the activation memory and the model's memory sizes. All activations live
// in one allocation, carved into the buffers below for the largest batch (B, T) the model was
// built for; a smaller forward (sampling) uses the start of each buffer. MemorySizes counts every
// part in bytes, so the whole model's memory is known, and checked against the GPU, before anything
// is allocated.
#ifndef FLASHGPT_GPT_ACTIVATIONS_H
#define FLASHGPT_GPT_ACTIVATIONS_H

#include <stddef.h>
#include "attention/attention.h"
#include "common/cuda_check.h"
#include "gpt/block.h"
#include "gpt/config.h"

// How the model runs, beyond its shape: these change the memory and the speed, the result only
// within bf16 rounding.
typedef struct {
    AttentionPlan attention;   // kind, deterministic backward, and the ring of context parallelism
                               // (attention/ring.h): with it, each row of the batch is a rank's two
                               // zigzag chunks of a sequence and takes those chunks' positions
    int recompute;           // RECOMPUTE_* flags (gpt/block.h): kept for one layer, recomputed in the backward
    int classifier_rows;     // rows of logits per classifier chunk; 0: as many as fit in
                             // CLASSIFIER_CHUNK_BYTES
    int fp8;                 // FP8_* flags: the matmuls whose forward runs in FP8 (Fp8Linear,
                             // layers/matmul.h), the input and the weight in E4M3
    Fp8Scaling fp8_scaling;  // the scaling of their inputs and gradients (layers/fp8.h); the
                             // weights always take current scaling (gpt/gpt.h); CURRENT without FP8
    int fp8_grad_bf16;       // 1: their gradients' two matmuls in bf16; 0: the output's gradient in
                             // E5M2 (0 without FP8)
} ModelOptions;

// The matmuls --fp8 puts in FP8 (flags): the MLP's two projections (fcw, fcprojw) of every layer,
// and the head (lm_head, or wte when tied: the logits' matmul alone, the embedding stays bf16).
enum { FP8_MLP = 1, FP8_HEAD = 2 };
// "none", "mlp", "head" or "mlp,head".
void fp8_name(int flags, char* out, size_t len);
// The flags of a list: "none", or mlp and head separated by commas (each at most once); -1 for any
// other text (an empty item too).
int fp8_flags(const char* list);

// "none", "gelu", "layernorm" or "gelu,layernorm".
void recompute_name(int flags, char* out, size_t len);
// The flags of a list: "none" or gelu and layernorm separated by commas; -1 for any other text
// (an empty item too: an empty list, a comma at either end or two together).
int recompute_flags(const char* list);

// Logits of at most this many bytes exist at once: the classifier runs over chunks of rows.
#define CLASSIFIER_CHUNK_BYTES ((size_t)1 << 30)

// A buffer the architecture has no use for is NULL and takes no memory (marked below).
typedef struct {
    bf16* embedding;     // (B, T, C) the embedding before its norm; embedding norm only
    float* embedding_rstd;   // (B, T) its norm's rstd; embedding norm only
    bf16* smear_in;      // (B, T, C) the stem's output before the smear; smear only
    bf16* residual;      // (L + 1, B, T, C): the stream entering each layer, then the final one;
                         // with residual lambdas the stream each block leaves, x0 first
    bf16* residual_in;   // (L, B, T, C) the stream each block takes, resid_lambda x + x0_lambda x0;
                         // residual lambdas only
    bf16* ln1;           // (L, B, T, C); recomputed: (B, T, C), shared with ln2
    float* ln1_mean;     // (L, B, T); LayerNorm only
    float* ln1_rstd;     // (L, B, T)
    bf16* qkv;           // (L, B, T, 3, NH, HS)
    float* qk_rstd;      // (L, B, T, 2, NH); QK-norm only
    float* value_gate;   // (L, B, T, NH) the value embeddings' gates (a layer without them leaves
                         // its slice unused); value embeddings only
    bf16* atty;          // (L, B, T, NH, HS)
    char* att_saved;     // (L, attention_saved_bytes): P (naive) or L (flash)
    bf16* residual_mid;  // (L, B, T, C): the stream after the attention block
    bf16* ln2;           // (L, B, T, C); recomputed: the buffer of ln1
    float* ln2_mean;     // (L, B, T); LayerNorm only
    float* ln2_rstd;     // (L, B, T)
    bf16* fch;           // (L, B, T, 4C) before GELU; GELU only
    bf16* fch_gelu;      // (L, B, T, 4C) GELU's or ReLU^2's output; recomputed GELU: (B, T, 4C)
    bf16* backout_out;   // (B, T, C) the stream leaving the last block less the backout's share of
                         // the middle one's, which lnf norms; backout only
    bf16* lnf;           // (B, T, C)
    float* lnf_mean;     // (B, T); LayerNorm only
    float* lnf_rstd;     // (B, T)
    int* positions;      // (B, T) each row's position, for rotary only (gpt/gpt.h sets them)
    int* doc_start;      // (B, T) the first and last position of each row's document, with
    int* doc_end;        // documents only (attention/mask.h; each forward finds them); under
                         // the ring (B, N * T), at the positions of each row's whole sequence
    bf16* logits;        // (rows, Vp): one chunk of the B * T rows, overwritten with dlogits
    float* losses;       // (B, T)
    int* inputs;         // (B, T)
    int* targets;        // (B, T)
    bf16* dresidual;     // (B, T, C) gradient of the residual stream
    bf16* dnarrow;       // (B, T, C) gradient of ln outputs / atty; dlnf after gpt_classifier
    bf16* dwide;         // (B, T, 4C) gradient of qkv (3C) / fch (4C)
    float* dx0;          // (B, T, C) fp32 gradient of x0 from the residual lambdas; those only
    bf16* dbackout;      // (B, T, C) the middle block's stream's gradient from the backout, kept until
                         // the backward reaches that block; backout only
    float* dvalue_gate;  // (B, T, NH) fp32 gradient of a layer's value gates; value embeddings only
    int* token_groups;   // the batch's rows of each token (layers/encoder.h's encoder_token_groups),
                         // for the value embeddings' backward and wte's; value embeddings only
    void* scratch;       // the largest scratch any layer asks for, in the logits' memory
} Activations;

// Bytes per part, for the memory table and the fit check. The logits and the scratch share
// one region of logits_and_scratch bytes.
typedef struct {
    size_t params, grads, optimizer, activations, attention_saved, logits, scratch,
        logits_and_scratch, backward;
    size_t optimizer_scratch;   // Muon's Newton-Schulz buffers (gpt.h), 0 under AdamW
    size_t fp8;                 // the FP8 layers' quantised weights and kept inputs, and their scratch
                                // (gpt/gpt.h); 0 without FP8
    int logits_rows, rows;   // rows of one classifier chunk, of the whole batch (B * T)
} MemorySizes;

size_t memory_sizes_total(const MemorySizes* m);
// 1 when bytes do not fit in the GPU's free memory with a reserve for what the CUDA libraries
// allocate on their own (the cuBLASLt workspace, ...), the numbers in err; 0 when they do.
int gpu_memory_unfit(size_t bytes, char* err);
// Bytes of the GPU's memory in use, by this process and any other.
size_t gpu_memory_in_use(void);
// Prints the sizes as a table, with the device's memory.
void memory_sizes_print(const MemorySizes* m, AttentionKind kind);

// The attention's shape of batches of B x T, causal, at the architecture's scale
// (architecture_attention_scale: a QK scale's there): every path's, so all scale alike.
AttentionShape attention_shape(const GPTConfig* c, int B, int T);
// NULL when every layer's attention (opt's plan with the architecture's key windows,
// block_attention_plans) computes batches of B x T, else why not.
const char* model_attention_unsupported(const GPTConfig* c, const ModelOptions* opt, int B, int T);

// Lays the activations out in base (NULL: computes the sizes only) and fills the activation
// parts of m; returns the bytes of the whole region. A recomputed activation keeps one
// layer's buffer: the forward writes it layer after layer, the backward recomputes it.
size_t layout_activations(Activations* a, char* base, const GPTConfig* c, int B, int T,
                          const ModelOptions* opt, MemorySizes* m);

// Layer l's slices of the per-layer activation buffers laid out for (B, T), which keep that
// stride for any smaller forward (it uses the start of each slice).
BlockActivations layer_activations(const Activations* a, const GPTConfig* c, int B, int T,
                                   const ModelOptions* opt, int l);

#endif
