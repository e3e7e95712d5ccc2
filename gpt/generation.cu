// gpt/generation.cu: the generation loop over the inference model (gpt/generation.h).
#include "gpt/generation.h"

#include <string.h>
#include "common/error.h"
#include "gpt/activations.h"

const char* generation_unsupported(const GPTConfig* c, int length, int prompt_max) {
    AttentionPlan plans[ARCHITECTURE_MAX_WINDOWS];
    inference_attention_plans(&c->arch, plans);
    for (int i = 0; i < block_attention_count(&c->arch); i++) {
        const char* why = attention_unsupported(&plans[i], attention_shape(c, 1, prompt_max));
        if (!why) why = attention_decode_unsupported(&plans[i], attention_shape(c, 1, length));
        if (why) return why;
    }
    return NULL;
}

int generate_tokens(InferenceModel* m, const int* prompt, int n_prompt, int n_new, Rng* seeds, OnTokens on_tokens,
                    void* user) {
    if (n_prompt < 1 || n_prompt > m->prompt_max || (m->B > 1 && n_prompt + n_new - 1 > m->length))
        die("generate_tokens: %d sequence(s) of %d + %d tokens, the model holds prompts of 1 to %d and %d positions",
            m->B, n_prompt, n_new, m->prompt_max, m->length);
    // Sequence 0's tokens since its latest prompt: the cache's, then the latest drawn (only one
    // sequence runs past the cache, so no other's are needed).
    int* window = (int*)malloc((size_t)(m->length + 1) * sizeof(int));
    char* ended = (char*)calloc((size_t)m->B, 1);   // each sequence's sample has ended
    if (!window || !ended) die("out of host memory for generation");
    memcpy(window, prompt, (size_t)n_prompt * sizeof(int));
    int count = n_prompt, open = m->B, drawn = 0;
    for (int i = 0; i < n_new && open > 0; i++) {
        int full = i > 0 && count - 1 == m->length;
        if (full) {
            memmove(window, window + count - m->prompt_max, (size_t)m->prompt_max * sizeof(int));
            count = m->prompt_max;
        }
        if (i == 0 || full) {
            if (seeds) inference_set_seed(m, rng_next(seeds));
            inference_prompt(m, window, count);
        } else {
            inference_step(m);
        }
        window[count++] = m->host_tokens[0];
        on_tokens(m->host_tokens, i, user);
        drawn++;
        for (int b = 0; b < m->B; b++)
            if (!ended[b] && ends_sample(&m->config, m->host_tokens[b])) ended[b] = 1, open--;
    }
    free(window);
    free(ended);
    return drawn;
}

void print_token(const Tokenizer* tok, int token) {
    size_t bytes;
    const unsigned char* text = tokenizer_token(tok, token, &bytes);
    if (text) fwrite(text, 1, bytes, stdout);
}

const char* sampler_unsupported(const GPTConfig* c, int T, int n) {
    int length = sample_window(T, n);
    return generation_unsupported(c, length, length / 2);
}

void sampler_build(InferenceModel* m, GPTConfig c, int T, int n, DrawSettings draw) {
    int length = sample_window(T, n);
    inference_build(m, c, 1, length, length / 2, draw);
}

static void print_sample_token(const int* tokens, int i, void* tok) { print_token((const Tokenizer*)tok, tokens[0]); }

void print_sample(InferenceModel* m, const bf16* params, int n, Rng* seeds, const Tokenizer* tok) {
    int eot = tokenizer_eot(tok);
    cudaCheck(cudaDeviceSynchronize());
    inference_copy_params(m, params);
    printf("sample: ");
    generate_tokens(m, &eot, 1, n, seeds, print_sample_token, (void*)tok);
    printf("\n");
    fflush(stdout);
}
