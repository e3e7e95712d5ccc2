// gpt/generation.h: continuing a sequence with the model, one token at a time through the KV
// cache (gpt_forward_one): the text of generate and the samples of train_gpt, drawn by one
// sampler. The prompt goes through one forward; each new token is then one query per layer
// against the keys and values already computed, not a forward over the whole window.
#ifndef FLASHGPT_GPT_GENERATION_H
#define FLASHGPT_GPT_GENERATION_H

#include "common/rng.h"
#include "gpt/gpt.h"

typedef struct {
    float temperature;   // 0: the most likely token (greedy)
    int top_k;           // among the k most likely, 0 for all
    float top_p;         // among the most likely that make up top_p of the probability, 1 for all
} SamplerSettings;

// The settings and the host buffers a draw needs.
typedef struct {
    SamplerSettings settings;
    int V;
    bf16* row;          // (V) a row of logits as the GPU has it
    float* logits;      // (V)
    float* scratch;     // (2 V)
} Sampler;

void sampler_init(Sampler* s, int V, SamplerSettings settings);
void sampler_free(Sampler* s);

// What the caller does with each new token, as it comes.
typedef void (*TokenSink)(int token, void* ctx);

// Continues tokens[0, n_prompt) (the prompt, <|endoftext|> first; longer than the model's T:
// its last T tokens) by n tokens, appended to tokens (room for n_prompt + n) and given to sink
// one by one. The cache holds g->T positions; when it is full, slide 0 stops there, slide 1 runs
// the last T/2 tokens through a forward again and goes on. Returns the tokens generated.
int gpt_generate(GPT* g, int* tokens, int n_prompt, int n, int slide, Sampler* s, Rng* rng, TokenSink sink,
                 void* ctx);

#endif
