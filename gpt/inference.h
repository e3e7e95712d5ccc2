// gpt/inference.h: the model for generation alone, of either architecture (gpt/config.h): its
// bf16 parameters, a KV cache of its own sized to the sequences (prompt + new tokens, not the
// context; keys as attention reads them: normed and rotated where the architecture does), and
// one layer's activations for the prompt; nothing of training (no gradients, master weights,
// moments, per-layer activations). With a sliding window a layer's decoding reads the last
// window rows of its cache alone. B sequences decode together, a row each. The decoding step is captured as a
// CUDA graph and replayed for every token: its kernels read the tokens and positions from the
// GPU and draw the next tokens there (layers/classifier.h's classifier_sample), so one token id
// per sequence crosses to the host per step, and the next step is launched before the host takes
// them (the GPU never waits for the host). The graph is captured twice, each copy with logits and
// host tokens of its own, so the host reads one step's while the next writes its own. With
// top-k or top-p the draw is the host's (gpt/sampler.h), from the logits the graph leaves, and
// each step waits for it.
#ifndef FLASHGPT_GPT_INFERENCE_H
#define FLASHGPT_GPT_INFERENCE_H

#include <stdint.h>
#include "attention/attention.h"
#include "common/rng.h"
#include "gpt/block.h"
#include "gpt/config.h"
#include "gpt/parameters.h"
#include "layers/matmul.h"

typedef struct {
    size_t params, kv_cache, prompt, step;   // bytes: the parts of inference_build's allocation
} InferenceSizes;

size_t inference_sizes_total(const InferenceSizes* m);
// One line on stderr (stdout is the generated text).
void inference_sizes_print(const InferenceSizes* m);

// One layer's activations on the decoding step's rows (a row per sequence): the stream, Q K V
// (before QK-norm and rotary, which the attention applies), the attention's output, the stream
// after it, the MLP's hidden layer after its activation; with residual lambdas the stem's output
// x0 (else NULL). The step's kernels fuse the norms and the activation into the linear layers,
// and keep nothing else but for the value gates' input: with value embeddings the attention's
// input ln1 (B, C), its norm's statistics and the gates (B, NH) (else NULL). With the smear, the
// stem's output before it (unsmeared) and each sequence's latest token's (smear_prev, which the
// next step's smear looks back to), else NULL. With the backout, the stream leaving its middle
// block (backout_mid), else NULL.
typedef struct {
    bf16 *x, *x0, *qkv, *atty, *mid, *fch_gelu, *ln1, *unsmeared, *smear_prev, *backout_mid;
    float *ln1_mean, *ln1_rstd, *value_gate;
} StepActivations;

typedef struct {
    float temperature;   // 0: the most likely token
    int top_k;           // 0: all
    float top_p;         // 1: all
    uint64_t seed;       // every prompt's draws start from it (inference_set_seed sets another)
} DrawSettings;

// Sequences one model decodes at most (one thread each advances their positions).
#define INFERENCE_MAX_SEQUENCES 1024

typedef struct {
    GPTConfig config;
    int B, length, prompt_max;   // sequences, positions each, the longest prompt
    DrawSettings draw;
    InferenceSizes sizes;
    char* memory;                // one allocation, carved below
    ParameterTensors params;
    bf16* kv_cache;              // (L, B, length, 2C): a row's keys, then its values
    BlockActivations prompt;     // (prompt_max) rows: one layer's, which every layer reuses
    int* prompt_tokens;          // (prompt_max)
    bf16* prompt_unsmeared;      // (prompt_max, C) the prompt's stem output before the smear, or NULL
    int* prompt_rows;            // (prompt_max) device: the prompt's positions 0, 1, ... (rotary), or NULL
    StepActivations step;        // (B) rows
    bf16* logits_of[2];          // (B, Vp) the graph copies' logits
    void* decode_scratch;
    int* tokens;                 // (B) device: the tokens the next step reads, then the ones it draws
    int* positions;              // (B) device: their positions
    uint64_t* seed;              // (1) device: the draws' seed
    int* host_tokens;            // (B) pinned: the tokens of the latest step the caller has
    int* host_tokens_of[2];      // the graph copies' tokens
    int position;                // the position of host_tokens in every sequence (they decode in
                                 // step); 0: no prompt yet
    int* prompt_positions;       // (B) pinned: the prompt's positions on their way to the GPU
    bf16* host_logits;           // (B, Vp) pinned, host draws only: the logits the graph copies out
    float* draw_logits;          // (V) host draws: one sequence's logits in fp32
    float* draw_scratch;         // (2 V) host draws: sample_token's
    Rng rng;                     // host draws
    AttentionPlan attention[ARCHITECTURE_MAX_WINDOWS];   // flash, with each window of the
                                 // architecture's pattern (gpt/block.h); no documents: a sample is
                                 // one document (gpt/generation.h)
    cudaStream_t stream;
    MatmulStream matmul;         // stream, with the cuBLASLt workspace of the prompt's matmuls
    cudaGraphExec_t step_graph[2];   // enqueue_step, captured by inference_build for each copy
    cudaEvent_t step_done[2];        // recorded after each copy's launch
    int next_graph;                  // the copy the next launch replays
    int launched;                    // steps launched whose tokens the caller has not taken (0 to 2)
} InferenceModel;

// Generation's attention: flash with each window of the architecture's pattern, no documents (a
// sample is one document: gpt/generation.h), as block_attention_plans makes them.
void inference_attention_plans(const Architecture* arch, AttentionPlan plans[ARCHITECTURE_MAX_WINDOWS]);

// Allocates the model for B sequences (1 to INFERENCE_MAX_SEQUENCES) of up to length positions
// (2 to the context), prompts of up to prompt_max tokens (< length), whose shapes the flash and
// decode attention take (the caller checks: attention_unsupported); dies with the numbers when
// it does not fit.
void inference_build(InferenceModel* m, GPTConfig c, int B, int length, int prompt_max, DrawSettings draw);
// The parameters from fp32 values (checkpoint order), rounded to bf16; or a copy of bf16 ones
// already on the GPU (a training model's, once the work that writes them is done).
void inference_set_params(InferenceModel* m, const float* values);
void inference_copy_params(InferenceModel* m, const bf16* params);
// The seed of the draws from the next inference_prompt on (the host's too, with top-k or
// top-p); the draws after a prompt already run keep the seed they started from.
void inference_set_seed(InferenceModel* m, uint64_t seed);

// Runs the prompt (n tokens, every sequence's) through the model once, fills every sequence's
// cache rows 0..n-1, and draws each sequence's first token into host_tokens (a step launched
// ahead before it is dropped; parameters set before it apply from it on). Its draws and those
// of the steps after it start from the seed: the same prompt and seed draw the same tokens.
void inference_prompt(InferenceModel* m, const int* prompt, int n);
// Takes every sequence one token further: host_tokens are the tokens drawn after the ones it
// held (at m->position, which then grows by one). m->position < length.
void inference_step(InferenceModel* m);

void inference_free(InferenceModel* m);

#endif
