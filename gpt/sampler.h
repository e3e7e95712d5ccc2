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
// most likely when top_k > 0, and then among the fewest most likely whose probabilities add up
// to top_p when top_p < 1 (nucleus sampling). scratch: 2 V floats.
static inline int sample_token(const float* logits, int V, float temperature, int top_k, float top_p, Rng* rng,
                               float* scratch) {
    float* probs = scratch;
    float* sorted = scratch + V;
    int best = 0;
    for (int i = 1; i < V; i++) if (logits[i] > logits[best]) best = i;
    if (temperature <= 0.0f) return best;
    float cutoff = -INFINITY;
    if (top_k > 0 && top_k < V) {
        // The k-th largest logit, from a sorted copy.
        memcpy(sorted, logits, (size_t)V * sizeof(float));
        qsort(sorted, (size_t)V, sizeof(float), compare_descending);
        cutoff = sorted[top_k - 1];
    }
    double sum = 0.0;
    for (int i = 0; i < V; i++) {
        probs[i] = logits[i] >= cutoff ? expf((logits[i] - logits[best]) / temperature) : 0.0f;
        sum += probs[i];
    }
    if (top_p < 1.0f) {
        // The smallest probability of the nucleus: the largest ones, in order, until top_p of the sum.
        memcpy(sorted, probs, (size_t)V * sizeof(float));
        qsort(sorted, (size_t)V, sizeof(float), compare_descending);
        double acc = 0.0;
        float smallest = sorted[0];
        for (int i = 0; i < V && acc < top_p * sum; i++) {
            acc += sorted[i];
            smallest = sorted[i];
        }
        sum = 0.0;
        for (int i = 0; i < V; i++) {
            if (probs[i] < smallest) probs[i] = 0.0f;
            sum += probs[i];
        }
    }
    double u = rng_uniform(rng) * sum, acc = 0.0;
    for (int i = 0; i < V; i++) {
        acc += probs[i];
        if (u <= acc && probs[i] > 0.0f) return i;
    }
    return best;
}

#endif
