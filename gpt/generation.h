// gpt/generation.h: text from the inference model (gpt/inference.h), token by token: the one loop
// that generate and train_gpt's samples run, the caller taking each token as it comes, and the
// samples of a model in training drawn on it.
#ifndef FLASHGPT_GPT_GENERATION_H
#define FLASHGPT_GPT_GENERATION_H

#include "common/rng.h"
#include "gpt/inference.h"
#include "tokenizer/tokenizer.h"

// NULL when the inference model can be built for sequences of length positions and prompts of up
// to prompt_max tokens (the flash and decode attention of every layer take their shapes), else why
// not.
const char* generation_unsupported(const GPTConfig* c, int length, int prompt_max);

// Called with the i-th new token of every sequence (tokens: m->B of them, sequence order).
typedef void (*OnTokens)(const int* tokens, int i, void* user);

// Draws n_new tokens of every sequence after the prompt (n_prompt tokens, the sequences', at most
// m->prompt_max). One sequence may run past the cache: when it is full, its last prompt_max
// tokens go through the model again as a new prompt and decoding goes on from there; several
// must fit, n_prompt + n_new - 1 <= m->length. seeds: with it, each run of a prompt first takes
// the next seed of it (inference_set_seed: the draws' noise is keyed by position, which starts
// over); without it (NULL) the model's seed stands.
// A model with documents (gpt/config.h) sees one document per sample, which the prompt is
// (<|endoftext|> first, and no other: encoding never makes one): a sample ends with the first
// <|endoftext|> it draws, as the tokens after it would see the document before, and the drawing
// stops once every sequence's has ended. Returns how many tokens each sequence drew: n_new, or
// fewer when every sample ended (a sequence's tokens after its end are not its sample's).
int generate_tokens(InferenceModel* m, const int* prompt, int n_prompt, int n_new, Rng* seeds, OnTokens on_tokens,
                    void* user);
// 1 when token ends a sample of the model (generate_tokens): its documents' first token.
static inline int ends_sample(const GPTConfig* c, int token) {
    return c->arch.documents && token == c->arch.document_token;
}

// The bytes of token on stdout (nothing for an id outside the vocabulary).
void print_token(const Tokenizer* tok, int token);

// Samples of a model in training (train_gpt --sample-every), decoded as generate decodes: n
// tokens after <|endoftext|> on an inference model of one sequence whose cache is the training
// window: the sample and <|endoftext|>, at most T positions (sample_window). A longer sample
// slides through it (generate_tokens), its prompts half the window.
static inline int sample_window(int T, int n) { return n < T - 1 ? n + 1 : T; }
// NULL when samples of n tokens of a model of shape c trained on T tokens (T >= 2) can be drawn,
// else why not (generation_unsupported).
const char* sampler_unsupported(const GPTConfig* c, int T, int n);
void sampler_build(InferenceModel* m, GPTConfig c, int T, int n, DrawSettings draw);
// "sample: " and the tokens on stdout as they come (up to the end of its document, with
// documents), from the bf16 parameters params on the GPU
// (copied in once every device's work is done, the work that writes them among it), each run of
// a prompt taking the next seed of seeds.
void print_sample(InferenceModel* m, const bf16* params, int n, Rng* seeds, const Tokenizer* tok);

#endif
