// tests/test_config.c: the model shape's validation (gpt/config.h) against the sizes a crafted
// checkpoint header can hold: every int32, near 2^31 included (CPU).
#include <limits.h>

#include "gpt/config.h"
#include "tests/test.h"

static GPTConfig shape(int maxT, int V, int Vp, int L, int NH, int C) {
    GPTConfig c = {.maxT = maxT, .V = V, .Vp = Vp, .L = L, .NH = NH, .C = C};
    return c;
}

// A vocabulary near 2^31 whose padded size, rounded up in 32 bits, wraps to a negative number:
// a header stating that Vp must still be refused.
static void test_vocab_near_int_max(void) {
    test_begin("config_vocab_near_int_max_refused");
    int vocabs[] = {INT_MAX, INT_MAX - 10, INT_MAX - 126, GPT_MAX_VOCAB + 1};
    for (int i = 0; i < (int)(sizeof(vocabs) / sizeof(vocabs[0])); i++) {
        int V = vocabs[i];
        int wrapped = (int)(unsigned)((unsigned)V + 127u) / 128 * 128;
        GPTConfig c = shape(1024, V, wrapped, 12, 12, 768);
        CHECK(gpt_config_invalid(&c) != NULL, "V %d with Vp %d (rounded up in 32 bits) is accepted", V, wrapped);
        c.Vp = padded_vocab(V);
        CHECK(gpt_config_invalid(&c) != NULL, "V %d with Vp %d is accepted", V, c.Vp);
    }
    test_end();
}

// Sizes whose parameter count overflows 64 bits (L * 4C * C), each within an int32.
static void test_sizes_bounded(void) {
    test_begin("config_sizes_bounded");
    GPTConfig huge = shape(1 << 30, 1 << 30, 1 << 30, 1 << 30, 1 << 10, 1 << 30);
    CHECK(gpt_config_invalid(&huge) != NULL, "L, C, V and the context of 2^30 are accepted");
    GPTConfig layers = shape(1024, 50257, padded_vocab(50257), GPT_MAX_LAYERS + 1, 12, 768);
    CHECK(gpt_config_invalid(&layers) != NULL, "%d layers are accepted", layers.L);
    GPTConfig channels = shape(1024, 50257, padded_vocab(50257), 12, 16, GPT_MAX_CHANNELS + 128);
    CHECK(gpt_config_invalid(&channels) != NULL, "%d channels are accepted", channels.C);
    GPTConfig context = shape(GPT_MAX_CONTEXT + 1, 50257, padded_vocab(50257), 12, 12, 768);
    CHECK(gpt_config_invalid(&context) != NULL, "a context of %d is accepted", context.maxT);
    GPTConfig negative = shape(1024, 50257, -padded_vocab(50257), 12, 12, 768);
    CHECK(gpt_config_invalid(&negative) != NULL, "a negative Vp is accepted");
    test_end();
}

// The bounds leave every real shape, and the largest ones they allow, valid.
static void test_real_shapes_valid(void) {
    test_begin("config_real_shapes_valid");
    CHECK(padded_vocab(50257) == 50304, "padded_vocab(50257) = %d", padded_vocab(50257));
    CHECK(padded_vocab(GPT_MAX_VOCAB) == GPT_MAX_VOCAB, "padded_vocab(2^24) = %d", padded_vocab(GPT_MAX_VOCAB));
    for (int i = 0; i < NUM_MODEL_PRESETS; i++) {
        const ModelPreset* p = &model_presets[i];
        GPTConfig c = shape(1024, 50257, padded_vocab(50257), p->L, p->NH, p->C);
        const char* why = gpt_config_invalid(&c);
        CHECK(!why, "preset %s: %s", p->name, why);
    }
    GPTConfig largest = shape(GPT_MAX_CONTEXT, GPT_MAX_VOCAB, GPT_MAX_VOCAB, GPT_MAX_LAYERS, 512, GPT_MAX_CHANNELS);
    const char* why = gpt_config_invalid(&largest);
    CHECK(!why, "the largest sizes allowed: %s", why);
    test_end();
}

int main(void) {
    test_vocab_near_int_max();
    test_sizes_bounded();
    test_real_shapes_valid();
    return test_exit_code();
}
