// tests/unit/gpt/test_config.c: the model shape's validation (gpt/config.h) against the sizes a crafted
// checkpoint header can hold: every int32, near 2^31 included; the architecture's fields, each
// refused out of its range or where it has no effect, the presets valid; the fields without
// effect dropped as a file is read; the preset nearest an architecture; the parts of the 2026
// recipe; the 2026 preset, its key windows following the context; the table of the architecture's
// fields that the comparisons, checks, nearest preset and descriptions read (CPU).
#include <limits.h>
#include <math.h>
#include <stddef.h>

#include "gpt/config.h"
#include "tests/lib/test.h"

static GPTConfig shape(int maxT, int V, int Vp, int L, int NH, int C) {
    GPTConfig c = {.maxT = maxT, .V = V, .Vp = Vp, .L = L, .NH = NH, .C = C, .arch = ARCHITECTURE_GPT2};
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

// Each field out of its range is refused, the presets are valid at d12's shape and named back,
// and a preset with a field changed is described by its components.
static void test_architecture_fields(void) {
    test_begin("config_architecture_fields");
    for (int i = 0; i < NUM_ARCHITECTURE_PRESETS; i++) {
        GPTConfig c = shape(1024, 50257, padded_vocab(50257), 12, 12, 768);
        char err[256];
        CHECK(!architecture_of_preset(&architecture_presets[i], c.maxT, c.L, &c.arch, err, sizeof(err)), "preset %s: %s",
              architecture_presets[i].name, err);
        const char* why = architecture_invalid(&c.arch);
        if (!why) why = gpt_config_invalid(&c);
        CHECK(!why, "preset %s: %s", architecture_presets[i].name, why);
        CHECK(architecture_preset_of(&c.arch, c.maxT, c.L) == &architecture_presets[i], "preset %s is not found back",
              architecture_presets[i].name);
    }
    const Architecture gpt2 = ARCHITECTURE_GPT2, modern = ARCHITECTURE_MODERN;
    CHECK(architecture_is_gpt2(&gpt2) && !architecture_is_gpt2(&modern), "GPT-2's architecture is not told apart");
    // The rotary base above 1; a cap of 0 (none) or at least 1 (gpt/config.h's softcap_invalid).
    const float floats[] = {1.0f, 0.5f, 0.0f, -1.0f, INFINITY, NAN, 1e-40f, 0.99f, 2.0f, 1e30f};
    for (int i = 0; i < 10; i++) {
        Architecture a = modern;
        a.rotary_base = floats[i];
        int valid = floats[i] > 1.0f && isfinite(floats[i]);
        CHECK((architecture_invalid(&a) == NULL) == valid, "rotary base %g: %s", floats[i], valid ? "refused" : "accepted");
        CHECK((rotary_base_invalid(floats[i]) == NULL) == valid, "rotary_base_invalid(%g) says otherwise", floats[i]);
        a = modern;
        a.softcap = floats[i];
        valid = floats[i] == 0.0f || (floats[i] >= 1.0f && isfinite(floats[i]));
        CHECK((architecture_invalid(&a) == NULL) == valid, "softcap %g: %s", floats[i], valid ? "refused" : "accepted");
        CHECK((softcap_invalid(floats[i]) == NULL) == valid, "softcap_invalid(%g) says otherwise", floats[i]);
    }
    // A rotary base without rotary has no effect: only the presets' own is taken.
    GPTConfig based = shape(1024, 50257, 50304, 12, 12, 768);
    based.arch.rotary_base = 5000.0f;
    CHECK(!architecture_invalid(&based.arch) && gpt_config_invalid(&based) != NULL,
          "GPT-2 with a rotary base of 5000 is accepted");
    based.arch.rotary = 1;
    CHECK(gpt_config_invalid(&based) == NULL, "rotary with base 5000: %s", gpt_config_invalid(&based));
    const size_t flags[] = {offsetof(Architecture, rotary),  offsetof(Architecture, rms_norm),
                            offsetof(Architecture, qk_norm), offsetof(Architecture, relu2),
                            offsetof(Architecture, bias),    offsetof(Architecture, untied_head),
                            offsetof(Architecture, zero_init)};
    for (int i = 0; i < 7; i++)
        for (int v = -1; v <= 2; v += 3) {
            Architecture a = gpt2;
            memcpy((char*)&a + flags[i], &v, sizeof(v));
            CHECK(architecture_invalid(&a) != NULL, "switch %d set to %d is accepted", i, v);
        }
    Architecture ablation = modern;
    ablation.qk_norm = 0;
    char text[ARCHITECTURE_TEXT];
    architecture_describe(&ablation, 1024, 12, text, sizeof(text));
    CHECK(!architecture_preset_of(&ablation, 1024, 12) && strstr(text, "no qk-norm") && strstr(text, "rotary (base 10000)"),
          "modern without QK-norm is described as '%s'", text);
    test_end();
}

// Attention's key windows: documents and a window pattern are checked field by field, make an
// architecture no preset (a GPT-2 with them is no llm.c model), take each layer's window from
// the pattern in turn, are described after the preset or components, and the document token
// must lie within the vocabulary.
static void test_architecture_key_windows(void) {
    test_begin("config_architecture_key_windows");
    const Architecture gpt2 = ARCHITECTURE_GPT2, modern = ARCHITECTURE_MODERN;
    Architecture a = modern;
    a.documents = 1;
    a.document_token = 50256;
    a.window_count = 3;
    a.windows[0] = 2048;
    a.windows[2] = 512;
    CHECK(!architecture_invalid(&a) && !modern.documents && modern.window_count == 0,
          "documents and the windows 2048,full,512: %s", architecture_invalid(&a));
    CHECK(!architecture_preset_of(&a, 4096, 12) && !architecture_equal(&a, &modern), "a masked modern model is the preset");
    Architecture unmasked = architecture_unmasked(&a);
    CHECK(architecture_equal(&unmasked, &modern), "without its key windows it is not the modern preset");
    const int expected[7] = {2048, 0, 512, 2048, 0, 512, 2048};
    for (int l = 0; l < 7; l++)
        CHECK(architecture_window(&a, l) == expected[l], "layer %d: window %d, expected %d", l,
              architecture_window(&a, l), expected[l]);
    CHECK(architecture_window(&modern, 5) == 0, "a layer without a pattern has a window");
    char text[ARCHITECTURE_TEXT];
    architecture_describe(&a, 4096, 12, text, sizeof(text));
    CHECK(!strcmp(text, "modern, documents (token 50256), windows 2048,full,512"), "described as '%s'", text);
    Architecture g = gpt2;
    g.window_count = 1;
    g.windows[0] = 64;
    architecture_describe(&g, 1024, 12, text, sizeof(text));
    CHECK(!architecture_is_gpt2(&g) && !strcmp(text, "gpt2, windows 64"), "GPT-2 with a window: '%s', %s", text,
          architecture_is_gpt2(&g) ? "an llm.c model" : "no llm.c model");
    // Each bad value alone.
    Architecture bad[7];
    for (int i = 0; i < 7; i++) bad[i] = a;
    bad[0].documents = 2;
    bad[1].document_token = -1;
    bad[2].documents = 0;                    // a token without documents
    bad[3].window_count = ARCHITECTURE_MAX_WINDOWS + 1;
    bad[4].windows[1] = -5;
    bad[5].windows[3] = 256;                 // past the pattern
    bad[6].windows[0] = -1;
    for (int i = 0; i < 7; i++) CHECK(architecture_invalid(&bad[i]) != NULL, "bad key window %d is accepted", i);
    GPTConfig c = {.maxT = 4096, .V = 50257, .Vp = padded_vocab(50257), .L = 12, .NH = 12, .C = 768, .arch = a};
    c.arch.windows[0] = c.arch.windows[2] = 0;
    CHECK(gpt_config_invalid(&c) != NULL, "a pattern that bounds no layer is accepted");
    c.arch = a;
    CHECK(!gpt_config_invalid(&c), "token 50256 of 50257: %s", gpt_config_invalid(&c));
    c.arch.document_token = 50257;
    CHECK(gpt_config_invalid(&c) != NULL, "a document token past the vocabulary is accepted");
    // A window bounds a layer only when narrower than the context; a pattern gives each layer an
    // entry at most.
    c.arch.document_token = 50256;
    c.maxT = 2049;
    CHECK(!gpt_config_invalid(&c), "windows 2048,full,512 at context 2049: %s", gpt_config_invalid(&c));
    c.maxT = 2048;
    CHECK(gpt_config_invalid(&c) != NULL, "a window of 2048 at context 2048 is accepted");
    c.maxT = 4096;
    c.L = 2;
    CHECK(gpt_config_invalid(&c) != NULL, "a pattern of 3 windows on 2 layers is accepted");
    c.L = 3;
    CHECK(!gpt_config_invalid(&c), "a pattern of 3 windows on 3 layers: %s", gpt_config_invalid(&c));
    test_end();
}

// The fields without effect, each dropped as a file is read: the model read is the one it
// computes, described as such, refused by none of the checks, and left as it is when read again;
// a model holding none is left as it is, and a value invalid in itself is left for
// architecture_invalid to refuse.
static void test_drop_without_effect(void) {
    test_begin("config_fields_without_effect_dropped");
    const Architecture gpt2 = ARCHITECTURE_GPT2, modern = ARCHITECTURE_MODERN;
    const struct {
        Architecture arch;
        int L;
        const char* read;   // architecture_describe of the model read
    } cases[] = {
        {{.rotary = 0, .rotary_base = 5000.0f, .bias = 1}, 2, "gpt2"},
        {{.rotary = 0, .rotary_base = 5000.0f, .bias = 1, .window_count = 1, .windows = {64}}, 2, "gpt2"},
        {{.rotary = 0, .rotary_base = 10000.0f, .bias = 1, .window_count = 1, .windows = {100000}}, 2, "gpt2"},
        {{.rotary = 0, .rotary_base = 10000.0f, .bias = 1, .window_count = 2, .windows = {8, 64}}, 2,
         "gpt2, windows 8,full"},
        {{.rotary = 0, .rotary_base = 10000.0f, .bias = 1, .window_count = 3, .windows = {8, 16, 32}}, 2,
         "gpt2, windows 8,16"},
        {{.rotary = 0, .rotary_base = 10000.0f, .bias = 1, .window_count = 3, .windows = {0, 0, 32}}, 2, "gpt2"},
        {{.rotary = 0, .rotary_base = 10000.0f, .bias = 1, .window_count = 2}, 2, "gpt2"},
        {{.rotary = 0, .rotary_base = 10000.0f, .bias = 1, .window_count = 64, .windows = {0, 8, 99}}, 3,
         "gpt2, windows full,8,full"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        GPTConfig c = shape(64, 300, 384, cases[i].L, 2, 128);
        c.arch = cases[i].arch;
        CHECK(!architecture_invalid(&c.arch) && gpt_config_invalid(&c) != NULL, "case %zu is not refused as it is", i);
        CHECK(gpt_config_drop_without_effect(&c) != NULL, "case %zu: nothing said dropped", i);
        char text[ARCHITECTURE_TEXT];
        architecture_describe(&c.arch, c.maxT, c.L, text, sizeof(text));
        CHECK(!strcmp(text, cases[i].read), "case %zu reads as '%s', expected '%s'", i, text, cases[i].read);
        CHECK(!architecture_invalid(&c.arch) && !gpt_config_invalid(&c), "case %zu read back is refused: %s", i,
              architecture_invalid(&c.arch) ? architecture_invalid(&c.arch) : gpt_config_invalid(&c));
        GPTConfig again = c;
        CHECK(!gpt_config_drop_without_effect(&again) && gpt_config_same_model(&again, &c),
              "case %zu changes when read again", i);
        if (!strcmp(cases[i].read, "gpt2")) CHECK(architecture_is_gpt2(&c.arch), "case %zu is not GPT-2's file", i);
    }
    // Models with no field without effect, and invalid values, are left as they are.
    Architecture windowed = modern;
    windowed.window_count = 2;
    windowed.windows[0] = 63;
    const Architecture kept[] = {gpt2, modern, windowed, {.rotary = 0, .rotary_base = 0.0f, .bias = 1},
                                 {.rotary = 0, .rotary_base = NAN, .bias = 1}};
    for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
        GPTConfig c = shape(64, 300, 384, 2, 2, 128);
        c.arch = kept[i];
        GPTConfig read = c;
        CHECK(!gpt_config_drop_without_effect(&read) && !memcmp(&read, &c, sizeof(c)), "model %zu is changed", i);
    }
    test_end();
}

// The parts of the 2026 recipe: off in gpt2 and modern, every one on in 2026; each a value of its
// own, refused out of its range; a model with one is no preset, described after its preset's name,
// nearest the preset without it, and holds a slot of the parts (architecture_has_parts: its
// checkpoint's version).
static void test_parts(void) {
    test_begin("config_parts");
    const Architecture gpt2 = ARCHITECTURE_GPT2, modern = ARCHITECTURE_MODERN;
    for (int i = 0; i < 2; i++)
        CHECK(!architecture_has_parts(&architecture_presets[i].arch), "preset %s has a part",
              architecture_presets[i].name);
    const Architecture* recipe = &architecture_presets[2].arch;
    CHECK(recipe->embedding_norm && recipe->qk_scale == 1.2f && recipe->residual_lambdas && recipe->value_embeddings &&
              recipe->smear && recipe->backout && !strcmp(architecture_presets[2].name, "2026"),
          "2026 lacks a part");
    Architecture a = modern;
    a.embedding_norm = 1;
    char text[ARCHITECTURE_TEXT];
    architecture_describe(&a, 1024, 12, text, sizeof(text));
    CHECK(!architecture_invalid(&a) && architecture_has_parts(&a) && !architecture_preset_of(&a, 1024, 12) &&
          architecture_nearest_preset(&a) == &architecture_presets[1] && !strcmp(text, "modern, embedding norm"),
          "modern with an embedding norm: '%s', %s", text, architecture_invalid(&a) ? architecture_invalid(&a) : "");
    Architecture base = architecture_base(&a);
    CHECK(architecture_equal(&base, &modern), "without its parts it is not the modern preset");
    a = gpt2;
    a.embedding_norm = 1;
    a.qk_norm = 1;
    a.window_count = 1;
    a.windows[0] = 64;
    architecture_describe(&a, 1024, 12, text, sizeof(text));
    CHECK(!strcmp(text, "learned positions, layernorm, qk-norm, gelu, bias, tied head, no zero init, no softcap, "
                        "embedding norm, windows 64"),
          "GPT-2 with QK-norm, an embedding norm and a window: '%s'", text);
    CHECK(architecture_nearest_preset(&a) == &architecture_presets[0], "GPT-2 with parts is nearest modern");
    for (int v = -1; v <= 2; v += 3) {
        a = modern;
        a.embedding_norm = v;
        CHECK(architecture_invalid(&a) != NULL, "an embedding norm of %d is accepted", v);
        a = modern;
        a.residual_lambdas = v;
        CHECK(architecture_invalid(&a) != NULL, "residual lambdas of %d are accepted", v);
        a = modern;
        a.value_embeddings = v;
        CHECK(architecture_invalid(&a) != NULL, "value embeddings of %d are accepted", v);
        a = modern;
        a.smear = v;
        CHECK(architecture_invalid(&a) != NULL, "a smear of %d is accepted", v);
        a = modern;
        a.backout = v;
        CHECK(architecture_invalid(&a) != NULL, "a backout of %d is accepted", v);
    }
    a = modern;
    a.embedding_norm = a.residual_lambdas = a.value_embeddings = a.smear = a.backout = 1;
    a.qk_scale = 1.2f;
    a.documents = 1;
    a.document_token = 7;
    architecture_describe(&a, 1024, 12, text, sizeof(text));
    CHECK(!architecture_invalid(&a) && !strcmp(text, "modern, embedding norm, qk scale 1.2, residual lambdas, value "
                                                     "embeddings, smear, backout, documents (token 7)"),
          "modern with every part and documents, without 2026's windows: '%s'", text);
    a = gpt2;
    a.residual_lambdas = 1;
    CHECK(architecture_has_parts(&a) && !architecture_is_gpt2(&a), "GPT-2 with residual lambdas is llm.c's GPT-2");
    a = gpt2;
    a.value_embeddings = 1;
    CHECK(architecture_has_parts(&a) && !architecture_is_gpt2(&a), "GPT-2 with value embeddings is llm.c's GPT-2");
    Architecture smeared = gpt2;
    smeared.smear = 1;
    CHECK(architecture_has_parts(&smeared) && !architecture_is_gpt2(&smeared), "GPT-2 with the smear is llm.c's GPT-2");
    smeared = gpt2;
    smeared.backout = 1;
    CHECK(architecture_has_parts(&smeared) && !architecture_is_gpt2(&smeared) && architecture_backout_layer(12) == 6 &&
              architecture_backout_layer(3) == 1,
          "GPT-2 with the backout is llm.c's GPT-2, or the backout's block is not L / 2");
    // The value embeddings' layers: every other one, the last among them, whatever L's parity.
    const int layers_of_3[] = {1, 0, 1}, layers_of_4[] = {0, 1, 0, 1};
    for (int l = 0; l < 4; l++)
        CHECK(architecture_value_embedding_layer(&a, l, 4) == layers_of_4[l] &&
              (l == 3 || architecture_value_embedding_layer(&a, l, 3) == layers_of_3[l]) &&
              !architecture_value_embedding_layer(&gpt2, l, 4),
              "layer %d's value embeddings", l);
    // The QK scale: from 1/8 to 8 with QK-norm; the attention's scale qk_scale^2 / sqrt(HS), the
    // plain one's bits without it; a scale of 1 scales nothing, dropped as a file is read.
    const float scales[] = {0.0f, 0.125f, 1.2f, 8.0f, 0.1f, 8.5f, -1.0f, INFINITY, NAN};
    for (int i = 0; i < 9; i++) {
        a = modern;
        a.qk_scale = scales[i];
        int valid = i < 4;
        CHECK((architecture_invalid(&a) == NULL) == valid && (qk_scale_invalid(scales[i]) == NULL) == valid,
              "a QK scale of %g: %s", scales[i], valid ? "refused" : "accepted");
    }
    a = modern;
    a.qk_scale = 1.2f;
    architecture_describe(&a, 1024, 12, text, sizeof(text));
    CHECK(!strcmp(text, "modern, qk scale 1.2") && architecture_has_parts(&a), "modern with a QK scale: '%s'", text);
    float plain = 1.0f / sqrtf(128.0f);
    CHECK(architecture_attention_scale(&modern, 128) == plain &&
          architecture_attention_scale(&a, 128) == 1.2f * 1.2f / sqrtf(128.0f),
          "attention scales %g and %g at HS 128", architecture_attention_scale(&modern, 128),
          architecture_attention_scale(&a, 128));
    a.qk_norm = 0;
    CHECK(architecture_invalid(&a) != NULL, "a QK scale without QK-norm is accepted");
    GPTConfig c = shape(1024, 50257, 50304, 12, 12, 768);
    c.arch = modern;
    c.arch.qk_scale = 1.0f;
    CHECK(!architecture_invalid(&c.arch) && gpt_config_invalid(&c) != NULL && gpt_config_drop_without_effect(&c) &&
          architecture_equal(&c.arch, &modern) && !architecture_has_parts(&c.arch),
          "a QK scale of 1 is not dropped as a field without effect");
    test_end();
}

// The preset nearest an architecture: the one its components differ least from, gpt2 on a tie;
// the rotary base, the cap's value and the key windows count for nothing.
static void test_nearest_preset(void) {
    test_begin("config_nearest_preset");
    const Architecture gpt2 = ARCHITECTURE_GPT2, modern = ARCHITECTURE_MODERN;
    const ArchitecturePreset *gpt2_preset = &architecture_presets[0], *modern_preset = &architecture_presets[1];
    CHECK(architecture_nearest_preset(&gpt2) == gpt2_preset && architecture_nearest_preset(&modern) == modern_preset,
          "a preset is not its own nearest");
    Architecture a = modern;
    a.softcap = 0.0f;
    CHECK(architecture_nearest_preset(&a) == modern_preset, "modern without its cap is nearest gpt2");
    a = modern;
    a.qk_norm = 0;
    a.softcap = 15.0f;
    a.rotary_base = 500000.0f;
    a.window_count = 1;
    a.windows[0] = 128;
    CHECK(architecture_nearest_preset(&a) == modern_preset, "modern without QK-norm, capped at 15, is nearest gpt2");
    a = gpt2;
    a.rotary = 1;
    CHECK(architecture_nearest_preset(&a) == gpt2_preset, "GPT-2 with rotary is nearest modern");
    a.rms_norm = a.qk_norm = a.relu2 = 1;   // four of eight: a tie
    CHECK(architecture_nearest_preset(&a) == gpt2_preset, "a tie is not gpt2's");
    a.bias = 0;
    CHECK(architecture_nearest_preset(&a) == modern_preset, "five of modern's eight are nearest gpt2");
    // The parts count as components: 2026 is modern with all six.
    const ArchitecturePreset* recipe_preset = &architecture_presets[2];
    a = recipe_preset->arch;
    CHECK(architecture_nearest_preset(&a) == recipe_preset, "2026 is not its own nearest");
    a.smear = a.backout = 0;
    a.window_count = 1;
    a.windows[0] = 64;
    CHECK(architecture_nearest_preset(&a) == recipe_preset, "2026 without two parts, another window, is nearest modern");
    a = modern;
    a.embedding_norm = a.residual_lambdas = 1;
    a.qk_scale = 1.5f;   // three of six: a tie
    CHECK(architecture_nearest_preset(&a) == modern_preset, "a tie between modern and 2026 is not modern's");
    a.smear = 1;
    CHECK(architecture_nearest_preset(&a) == recipe_preset, "modern with four parts is nearest modern");
    test_end();
}

// Field f of a set to the value it holds in from.
static void take_field(Architecture* a, const Architecture* from, const ArchitectureField* f) {
    memcpy((char*)a + f->offset, (const char*)from + f->offset, sizeof(int32_t));
}

// 1 when a and b differ in field f.
static int field_differs(const Architecture* a, const Architecture* b, const ArchitectureField* f) {
    Architecture x = *a;
    take_field(&x, b, f);
    return !architecture_equal(&x, a);
}

// The table of Architecture's scalar fields (architecture_fields): a row for each slot but the
// windows', in the struct's order, so that a part without a row fails here; a rule for each float
// and for nothing else; the parts components said where on. Each row is compared by value (a
// float's -0 its 0), counted by architecture_nearest_preset where it is a component, and each part
// described by its words.
static void test_architecture_field_table(void) {
    test_begin("config_architecture_field_table");
    const int windows_slot = (int)(offsetof(Architecture, windows) / sizeof(int32_t));
    int rows[ARCHITECTURE_SLOTS] = {0}, before = -1;
    for (int i = 0; i < NUM_ARCHITECTURE_FIELDS; i++) {
        const ArchitectureField* f = &architecture_fields[i];
        int slot = (int)(f->offset / sizeof(int32_t));
        CHECK(f->offset % sizeof(int32_t) == 0 && slot > before && slot < ARCHITECTURE_SLOTS,
              "row %d is not a slot past the row before's", i);
        if (slot < ARCHITECTURE_SLOTS) rows[slot]++;
        before = slot;
        CHECK((f->invalid != NULL) == (f->value == ARCHITECTURE_FLOAT), "row %d: a rule is not a float's alone", i);
        CHECK(!f->off || f->on, "row %d has words off but none on", i);
        if (slot >= ARCHITECTURE_PARTS_SLOT)
            CHECK(f->component && f->on && !f->off && f->value != ARCHITECTURE_INTEGER,
                  "row %d: a part is not a component said where on", i);
    }
    for (int slot = 0; slot < ARCHITECTURE_SLOTS; slot++) {
        int window = slot >= windows_slot && slot < windows_slot + ARCHITECTURE_MAX_WINDOWS;
        CHECK(rows[slot] == !window, "slot %d has %d rows", slot, rows[slot]);
    }
    const ArchitecturePreset *gpt2 = &architecture_presets[0], *modern = &architecture_presets[1],
                             *recipe = &architecture_presets[2];
    char text[ARCHITECTURE_TEXT], want[ARCHITECTURE_TEXT];
    for (int i = 0; i < NUM_ARCHITECTURE_FIELDS; i++) {
        const ArchitectureField* f = &architecture_fields[i];
        Architecture a = modern->arch, b = modern->arch;
        if (f->value == ARCHITECTURE_FLOAT) {
            float changed = architecture_field_float(&a, f) + 1.0f, zero = 0.0f, negative_zero = -0.0f;
            memcpy((char*)&a + f->offset, &changed, sizeof(float));
            CHECK(!architecture_equal(&a, &modern->arch), "row %d: a float changed is equal", i);
            memcpy((char*)&a + f->offset, &zero, sizeof(float));
            memcpy((char*)&b + f->offset, &negative_zero, sizeof(float));
            CHECK(architecture_equal(&a, &b), "row %d: -0 is not 0", i);
        } else {
            int changed = architecture_field_int(&a, f) + 1;
            memcpy((char*)&a + f->offset, &changed, sizeof(int));
            CHECK(!architecture_equal(&a, &modern->arch), "row %d: an integer changed is equal", i);
        }
        if (!f->component) continue;
        // Between the presets that differ in it (gpt2 and modern for a component, modern and 2026
        // for a part): half the others of theirs taken from the second leaves the first nearest
        // (the first on a tie), and this one taken too the second.
        int part = (int)(f->offset / sizeof(int32_t)) >= ARCHITECTURE_PARTS_SLOT;
        const ArchitecturePreset *first = part ? modern : gpt2, *second = part ? recipe : modern;
        int differing = 0;
        for (int k = 0; k < NUM_ARCHITECTURE_FIELDS; k++) {
            const ArchitectureField* g = &architecture_fields[k];
            differing += g->component && field_differs(&first->arch, &second->arch, g);
        }
        Architecture t = first->arch;
        for (int k = 0, taken = 0; k < NUM_ARCHITECTURE_FIELDS && taken < differing / 2; k++) {
            const ArchitectureField* g = &architecture_fields[k];
            if (k == i || !g->component || !field_differs(&first->arch, &second->arch, g)) continue;
            take_field(&t, &second->arch, g);
            taken++;
        }
        const ArchitecturePreset* nearest_before = architecture_nearest_preset(&t);
        take_field(&t, &second->arch, f);
        const ArchitecturePreset* nearest_after = architecture_nearest_preset(&t);
        CHECK(nearest_before == first && nearest_after == second, "row %d: nearest %s, then %s with it taken from %s",
              i, nearest_before->name, nearest_after->name, second->name);
        if (!part) continue;
        // A part on modern: no longer modern, said after its name, nearest modern still.
        a = modern->arch;
        take_field(&a, &recipe->arch, f);
        architecture_describe(&a, 1024, 12, text, sizeof(text));
        if (f->value == ARCHITECTURE_FLOAT)
            snprintf(want, sizeof(want), "modern, %s %g", f->on, architecture_field_float(&recipe->arch, f));
        else snprintf(want, sizeof(want), "modern, %s", f->on);
        CHECK(!strcmp(text, want) && !architecture_equal(&a, &modern->arch) && architecture_has_parts(&a) &&
                  architecture_nearest_preset(&a) == modern,
              "modern with the part of row %d: '%s', expected '%s'", i, text, want);
    }
    // The components' words, each on and off.
    Architecture a = modern->arch;
    a.bias = 1;
    architecture_describe(&a, 1024, 12, text, sizeof(text));
    CHECK(!strcmp(text, "rotary (base 10000), rms norm, qk-norm, relu2, bias, untied head, zero init, softcap 30"),
          "modern with biases: '%s'", text);
    a = gpt2->arch;
    a.bias = 0;
    a.softcap = 15.0f;
    architecture_describe(&a, 1024, 12, text, sizeof(text));
    CHECK(!strcmp(text, "learned positions, layernorm, no qk-norm, gelu, no bias, tied head, no zero init, softcap 15"),
          "GPT-2 without biases, capped at 15: '%s'", text);
    test_end();
}

// A window pattern as --window-pattern writes it ("256,256,256,full"), "" for none.
static void pattern_text(const Architecture* a, char* out, size_t len) {
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < a->window_count && n < len; i++) {
        if (a->windows[i]) n += (size_t)snprintf(out + n, len - n, "%s%d", i ? "," : "", a->windows[i]);
        else n += (size_t)snprintf(out + n, len - n, "%sfull", i ? "," : "");
    }
}

// The 2026 preset at a context and layers: modern's components and every part; key windows of a
// quarter of the context, rounded down, in three layers of four, the last layer full, as the
// shortest pattern; none with one layer; refused in one line at a context below 4 and past 64
// layers of pattern; a valid model wherever it is taken, described as 2026 there alone (its
// documents after the name), and by its parts and windows at another shape or with one changed.
static void test_preset_2026(void) {
    test_begin("config_preset_2026");
    const ArchitecturePreset* p = &architecture_presets[2];
    const Architecture modern = ARCHITECTURE_MODERN, base = architecture_base(&p->arch);
    CHECK(architecture_equal(&modern, &base) && p->window_divisor == 4 &&
              p->full_window_every == 4 && !p->arch.window_count,
          "2026 is not modern with its parts, or holds windows of its own");
    const struct {
        int maxT, L;
        const char* pattern;
    } cases[] = {{1024, 12, "256,256,256,full"}, {512, 12, "128,128,128,full"}, {1000, 12, "250,250,250,full"},
                 {1027, 24, "256,256,256,full"}, {1024, 6, "256,256,256,full,256,full"}, {64, 2, "16,full"},
                 {7, 12, "1,1,1,full"},          {2048, 48, "512,512,512,full"},        {64, 1, ""},
                 {3, 1, ""},                     {64, 3, "16,16,full"}};
    char err[256], text[ARCHITECTURE_TEXT];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        GPTConfig c = shape(cases[i].maxT, 300, padded_vocab(300), cases[i].L, 2, 128);
        int refused = architecture_of_preset(p, c.maxT, c.L, &c.arch, err, sizeof(err));
        pattern_text(&c.arch, text, sizeof(text));
        CHECK(!refused && !strcmp(text, cases[i].pattern), "context %d, %d layers: windows '%s', expected '%s' (%s)",
              c.maxT, c.L, text, cases[i].pattern, refused ? err : "taken");
        const char* why = architecture_invalid(&c.arch);
        if (!why) why = gpt_config_invalid(&c);
        CHECK(!refused && !why, "context %d, %d layers: %s", c.maxT, c.L, why);
        CHECK(architecture_preset_of(&c.arch, c.maxT, c.L) == p, "context %d, %d layers: not found back", c.maxT, c.L);
    }
    GPTConfig c = shape(1024, 300, padded_vocab(300), 63, 2, 128);
    CHECK(!architecture_of_preset(p, c.maxT, c.L, &c.arch, err, sizeof(err)) && c.arch.window_count == 63 &&
              c.arch.windows[59] == 0 && c.arch.windows[61] == 256 && c.arch.windows[62] == 0,
          "63 layers: a pattern of %d", c.arch.window_count);
    CHECK(architecture_of_preset(p, 1024, 66, &c.arch, err, sizeof(err)) &&
              strstr(err, "on 66 layers repeat over more layers than a pattern holds (64)"),
          "66 layers: '%s'", err);
    CHECK(!architecture_of_preset(p, 1024, 68, &c.arch, err, sizeof(err)) && c.arch.window_count == 4,
          "68 layers: %s", err);
    CHECK(architecture_of_preset(p, 3, 12, &c.arch, err, sizeof(err)) &&
              !strcmp(err, "its key windows are the context / 4, rounded down: a context of 3 leaves them no key "
                           "(give 4 or more)"),
          "context 3: '%s'", err);
    // The words: at its shape and no other.
    c = shape(1024, 50257, padded_vocab(50257), 12, 12, 768);
    architecture_of_preset(p, c.maxT, c.L, &c.arch, err, sizeof(err));
    char model[ARCHITECTURE_TEXT + 128];
    gpt_config_describe(&c, model, sizeof(model));
    CHECK(!strcmp(model, "L 12 C 768 NH 12 V 50257 context 1024, 2026"), "d12's description: '%s'", model);
    const char* parts = "modern, embedding norm, qk scale 1.2, residual lambdas, value embeddings, smear, backout";
    char want[ARCHITECTURE_TEXT];
    snprintf(want, sizeof(want), "%s, windows 256,256,256,full", parts);
    architecture_describe(&c.arch, 2048, 12, text, sizeof(text));
    CHECK(!strcmp(text, want), "at context 2048: '%s'", text);
    architecture_describe(&c.arch, 1024, 6, text, sizeof(text));
    CHECK(!strcmp(text, want), "at 6 layers: '%s'", text);
    Architecture a = c.arch;
    a.documents = 1;
    a.document_token = 50256;
    architecture_describe(&a, 1024, 12, text, sizeof(text));
    CHECK(!strcmp(text, "2026, documents (token 50256)"), "with documents: '%s'", text);
    a = c.arch;
    a.smear = 0;
    architecture_describe(&a, 1024, 12, text, sizeof(text));
    CHECK(!strcmp(text, "modern, embedding norm, qk scale 1.2, residual lambdas, value embeddings, backout, windows "
                        "256,256,256,full"),
          "without the smear: '%s'", text);
    a = architecture_unmasked(&c.arch);
    architecture_describe(&a, 1024, 12, text, sizeof(text));
    CHECK(!strcmp(text, parts), "without its windows: '%s'", text);
    test_end();
}

int main(void) {
    test_architecture_field_table();
    test_nearest_preset();
    test_preset_2026();
    test_architecture_fields();
    test_architecture_key_windows();
    test_drop_without_effect();
    test_parts();
    test_vocab_near_int_max();
    test_sizes_bounded();
    test_real_shapes_valid();
    return test_exit_code();
}
