// gpt/config.h: the shape of a GPT-2 model and the named presets.
// Shapes throughout the model use these letters: L layers, C channels, NH heads, HS = C / NH
// head size, V vocabulary, Vp = V padded up to a multiple of 128 (for the matmuls; the padded
// logits never count in the loss), maxT the context length; B batch, T sequence length <= maxT,
// N = B * T rows.
#ifndef FLASHGPT_GPT_CONFIG_H
#define FLASHGPT_GPT_CONFIG_H

#include <stdio.h>
#include <string.h>

typedef struct {
    int maxT;   // context length: the rows of the position embedding
    int V;      // vocabulary
    int Vp;     // V padded up to a multiple of 128
    int L;      // layers
    int NH;     // heads
    int C;      // channels
} GPTConfig;

static inline int padded_vocab(int V) { return (V + 127) / 128 * 128; }

// GPT-2's sizes (d12 is the 124M model, d48 the 1.5B), and small ones for tests.
typedef struct {
    const char* name;
    int L, C, NH;
} ModelPreset;

static const ModelPreset model_presets[] = {
    {"d2", 2, 128, 2},   {"d6", 6, 384, 6},     {"d12", 12, 768, 12},
    {"d24", 24, 1024, 16}, {"d36", 36, 1280, 20}, {"d48", 48, 1600, 25},
};
#define NUM_MODEL_PRESETS ((int)(sizeof(model_presets) / sizeof(model_presets[0])))

// The preset called name, or NULL.
static inline const ModelPreset* find_model_preset(const char* name) {
    for (int i = 0; i < NUM_MODEL_PRESETS; i++)
        if (!strcmp(name, model_presets[i].name)) return &model_presets[i];
    return NULL;
}

// NULL when the shape is one the model can be built with, else what is wrong.
static inline const char* gpt_config_invalid(const GPTConfig* c) {
    if (c->maxT <= 0 || c->V <= 0 || c->L <= 0 || c->NH <= 0 || c->C <= 0) return "a size is not positive";
    if (c->C % c->NH != 0) return "the channels are not a multiple of the heads";
    if (c->C % 8 != 0) return "the channels are not a multiple of 8";
    if (c->Vp != padded_vocab(c->V)) return "the padded vocabulary is not V rounded up to 128";
    return NULL;
}

static inline int gpt_config_same_shape(const GPTConfig* a, const GPTConfig* b) {
    return a->maxT == b->maxT && a->V == b->V && a->L == b->L && a->NH == b->NH && a->C == b->C;
}

static inline void gpt_config_describe(const GPTConfig* c, char* out, size_t len) {
    snprintf(out, len, "L %d C %d NH %d V %d context %d", c->L, c->C, c->NH, c->V, c->maxT);
}

#endif
