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

// Bounds of the sizes, checked before anything is computed from them: V rounded up to 128
// stays an int, and every tensor's element count (Vp * C and maxT * C at most 2^40, L * 4C * C
// at most 2^46) and the files' byte counts fit in 64 bits with room to spare.
#define GPT_MAX_CONTEXT (1 << 24)
#define GPT_MAX_VOCAB (1 << 24)
#define GPT_MAX_LAYERS (1 << 12)
#define GPT_MAX_CHANNELS (1 << 16)

// V rounded up to a multiple of 128 (V within GPT_MAX_VOCAB; computed wide, so no V overflows).
static inline int padded_vocab(int V) { return (int)(((long long)V + 127) / 128 * 128); }

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
    if (c->maxT > GPT_MAX_CONTEXT) return "the context is longer than 2^24";
    if (c->V > GPT_MAX_VOCAB) return "the vocabulary is larger than 2^24";
    if (c->L > GPT_MAX_LAYERS) return "more than 2^12 layers";
    if (c->C > GPT_MAX_CHANNELS) return "more than 2^16 channels";
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
