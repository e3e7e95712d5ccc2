// gpt/generation.cu: gpt/generation.h.
#include "gpt/generation.h"

#include "gpt/sampler.h"

void sampler_init(Sampler* s, int V, SamplerSettings settings) {
    s->settings = settings;
    s->V = V;
    s->row = (bf16*)malloc((size_t)V * sizeof(bf16));
    s->logits = (float*)malloc((size_t)V * sizeof(float));
    s->scratch = (float*)malloc(2 * (size_t)V * sizeof(float));
    if (!s->row || !s->logits || !s->scratch) die("out of host memory for the sampler (%d tokens)", V);
}

void sampler_free(Sampler* s) {
    free(s->row);
    free(s->logits);
    free(s->scratch);
}

// The token after row `row` of the last forward.
static int sample_after(Sampler* s, GPT* g, int row, Rng* rng) {
    cudaCheck(cudaMemcpyAsync(s->row, gpt_logits(g, row, 1), (size_t)s->V * sizeof(bf16), cudaMemcpyDeviceToHost,
                              g->stream));
    cudaCheck(cudaStreamSynchronize(g->stream));
    for (int v = 0; v < s->V; v++) s->logits[v] = __bfloat162float(s->row[v]);
    const SamplerSettings* o = &s->settings;
    return sample_token(s->logits, s->V, o->temperature, o->top_k, o->top_p, rng, s->scratch);
}

int gpt_generate(GPT* g, int* tokens, int n_prompt, int n, int slide, Sampler* s, Rng* rng, TokenSink sink,
                 void* ctx) {
    int T = g->T, count = n_prompt;
    int first = count > T ? count - T : 0;
    gpt_forward(g, tokens + first, 1, count - first);
    int pos = count - first;   // cache rows in use; the next token comes after row pos - 1
    for (int i = 0; i < n; i++) {
        int token = sample_after(s, g, pos - 1, rng);
        tokens[count++] = token;
        sink(token, ctx);
        if (i == n - 1) break;
        if (pos == T) {
            if (!slide) return i + 1;
            int keep = T / 2 > 0 ? T / 2 : 1;
            gpt_forward(g, tokens + count - keep, 1, keep);
            pos = keep;
            continue;
        }
        gpt_forward_one(g, token, pos++);
    }
    return n;
}
