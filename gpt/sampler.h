// gpt/sampler.h: drawing the next token from a row of logits, on the host in fp32.
#ifndef FLASHGPT_GPT_SAMPLER_H
#define FLASHGPT_GPT_SAMPLER_H

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "common/rng.h"

static inline int compare_descending(const void* a, const void* b) {
    float x = *(const float*)a, y = *(const float*)b;
    return (x < y) - (x > y);
}

// Draws a token from the logits (V) at the temperature (0: the most likely), among the top_k
// most likely when top_k > 0. probs: V floats of scratch.
static inline int sample_token(const float* logits, int V, float temperature, int top_k, Rng* rng, float* probs) {
    int best = 0;
    for (int i = 1; i < V; i++) if (logits[i] > logits[best]) best = i;
    if (temperature <= 0.0f) return best;
    float cutoff = -INFINITY;
    if (top_k > 0 && top_k < V) {
        // The k-th largest logit, from a sorted copy.
        memcpy(probs, logits, (size_t)V * sizeof(float));
        qsort(probs, (size_t)V, sizeof(float), compare_descending);
        cutoff = probs[top_k - 1];
    }
    double sum = 0.0;
    for (int i = 0; i < V; i++) {
        probs[i] = logits[i] >= cutoff ? expf((logits[i] - logits[best]) / temperature) : 0.0f;
        sum += probs[i];
    }
    double u = rng_uniform(rng) * sum, acc = 0.0;
    for (int i = 0; i < V; i++) {
        acc += probs[i];
        if (u <= acc && probs[i] > 0.0f) return i;
    }
    return best;
}

#endif
