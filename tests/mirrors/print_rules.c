// tests/mirrors/print_rules.c: prints the rules of the architecture (gpt/config.h) and of the optimizer's
// settings (gpt/optimizer.h) on fixed cases as JSON, for tests/mirrors/test_rules.py to compare with the
// scripts' (scripts/gpt_architecture.py, scripts/torch_optimizers.py):
//   {"settings": [a row of optimizer_settings: flag, lo, hi, lo_open, hi_open, use],
//    "defaults": [for each optimizer and preset: preset_optimizer_defaults by flag, Muon's
//                 variants, and eps],
//    "presets": [for each preset: its name, preset_optimizer's optimizer, and at each of a few
//                contexts and layers architecture_of_preset's arch or its error],
//    "describe": [an arch, a context and layers: architecture_describe's words],
//    "nearest": [for every combination of the seven switches and a cap, and of the six parts on
//                gpt2 and modern: the arch and architecture_nearest_preset's name],
//    "rotary_base", "softcap", "qk_scale": [[a value, whether rotary_base_invalid / softcap_invalid /
//                                           qk_scale_invalid takes it]],
//    "architectures": [an arch, a context and layers: whether architecture_invalid refuses it,
//                      and for one it takes, gpt_config_drop_without_effect's arch and why],
//    "optimizers": [an optimizer, untied head or not, its settings by flag and Muon's variants:
//                   optimizer_invalid's line, or null; first the settings of both optimizers'
//                   defaults probed, then Muon's variants in every combination],
//    "newton_schulz": {by --muon-ns name: the norm's factor and each iteration's (a, b, c)},
//    "muon_qkv_unfit": [a head count, a --muon-qkv: muon_qkv_unfit's line, or null]}
// Floats are printed exactly (17 digits), the ones JSON lacks as Infinity and NaN.
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "gpt/optimizer.h"

static void print_float(float v) {
    if (isnan(v)) printf("NaN");
    else if (isinf(v)) printf(v > 0 ? "Infinity" : "-Infinity");
    else printf("%.16e", (double)v);   // with an exponent, so that JSON reads every one, -0 too, as a float
}

// s as a JSON string (the rules' lines hold no control characters), or null.
static void print_string(const char* s) {
    if (!s) {
        printf("null");
        return;
    }
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') putchar('\\');
        putchar(*s);
    }
    putchar('"');
}

static void print_arch(const Architecture* a) {
    printf("{\"rotary\": %d, \"rotary_base\": ", a->rotary);
    print_float(a->rotary_base);
    printf(", \"rms_norm\": %d, \"qk_norm\": %d, \"relu2\": %d, \"bias\": %d, \"untied_head\": %d, \"zero_init\": %d, "
           "\"softcap\": ", a->rms_norm, a->qk_norm, a->relu2, a->bias, a->untied_head, a->zero_init);
    print_float(a->softcap);
    printf(", \"documents\": %d, \"document_token\": %d, \"window_count\": %d, \"windows\": [", a->documents,
           a->document_token, a->window_count);
    for (int i = 0; i < ARCHITECTURE_MAX_WINDOWS; i++) printf("%s%d", i ? ", " : "", a->windows[i]);
    printf("], \"embedding_norm\": %d, \"qk_scale\": ", a->embedding_norm);
    print_float(a->qk_scale);
    printf(", \"residual_lambdas\": %d, \"value_embeddings\": %d, \"smear\": %d, \"backout\": %d}",
           a->residual_lambdas, a->value_embeddings, a->smear, a->backout);
}

static void print_settings_of(const OptimizerConfig* o) {
    printf("{");
    for (int i = 0; i < NUM_OPTIMIZER_SETTINGS; i++) {
        printf("%s\"%s\": ", i ? ", " : "", optimizer_settings[i].flag);
        print_float(optimizer_setting_value(o, &optimizer_settings[i]));
    }
    printf("}, \"variants\": {\"muon_qkv\": \"%s\", \"muon_ns\": \"%s\", \"cautious_weight_decay\": %d, "
           "\"normuon\": %d, \"normuon_beta2\": ", muon_qkv_name(o->muon_qkv), newton_schulz_name(o->muon_ns),
           o->cautious_weight_decay, o->normuon);
    print_float(o->normuon_beta2);
    printf("}");
}

static const char* const use_names[] = {"every run", "muon", "muon untied head"};

static void print_settings(void) {
    printf("\"settings\": [");
    for (int i = 0; i < NUM_OPTIMIZER_SETTINGS; i++) {
        const OptimizerSetting* s = &optimizer_settings[i];
        printf("%s\n {\"flag\": \"%s\", \"lo\": ", i ? "," : "", s->flag);
        print_float(s->lo);
        printf(", \"hi\": ");
        print_float(s->hi);
        printf(", \"lo_open\": %d, \"hi_open\": %d, \"use\": \"%s\"}", s->lo_open, s->hi_open, use_names[s->use]);
    }
    printf("],\n");
}

static void print_defaults(void) {
    printf("\"defaults\": [");
    int n = 0;
    for (int k = 0; k < 2; k++)
        for (int p = 0; p < NUM_ARCHITECTURE_PRESETS; p++) {
            OptimizerConfig o = preset_optimizer_defaults((OptimizerKind)k, &architecture_presets[p]);
            printf("%s\n {\"optimizer\": \"%s\", \"preset\": \"%s\", \"eps\": ", n++ ? "," : "",
                   optimizer_name((OptimizerKind)k), architecture_presets[p].name);
            print_float(o.eps);
            printf(", \"settings\": ");
            print_settings_of(&o);
            printf("}");
        }
    printf("],\n");
}

// The contexts and layers each preset's architecture is printed at: windows of a quarter of the
// context at 12 layers and 6, rounded down, of one key; one layer, no windows; contexts too short;
// patterns of more layers than a pattern holds, and of as many.
static const int preset_shapes[][2] = {{1024, 12}, {512, 12}, {1024, 6}, {1000, 12}, {64, 2}, {64, 1},
                                       {7, 12},    {4, 2},    {3, 2},    {1, 1},     {2048, 48}, {1024, 66},
                                       {1024, 68}, {1024, 64}, {1024, 63}};
#define NUM_PRESET_SHAPES ((int)(sizeof(preset_shapes) / sizeof(preset_shapes[0])))

static void print_presets(void) {
    printf("\"presets\": [");
    for (int p = 0; p < NUM_ARCHITECTURE_PRESETS; p++) {
        printf("%s\n {\"name\": \"%s\", \"optimizer\": \"%s\", \"architectures\": [", p ? "," : "",
               architecture_presets[p].name, optimizer_name(preset_optimizer(&architecture_presets[p])));
        for (int i = 0; i < NUM_PRESET_SHAPES; i++) {
            Architecture a;
            char err[256];
            int refused = architecture_of_preset(&architecture_presets[p], preset_shapes[i][0], preset_shapes[i][1],
                                                 &a, err, sizeof(err));
            printf("%s\n  {\"maxT\": %d, \"L\": %d, \"arch\": ", i ? "," : "", preset_shapes[i][0], preset_shapes[i][1]);
            if (refused) printf("null");
            else print_arch(&a);
            printf(", \"error\": ");
            print_string(refused ? err : NULL);
            printf("}");
        }
        printf("]}");
    }
    printf("],\n");
}

// A described architecture: arch at context maxT and L layers, and its words.
static void print_described(const Architecture* a, int maxT, int L, int first) {
    char text[ARCHITECTURE_TEXT];
    architecture_describe(a, maxT, L, text, sizeof(text));
    printf("%s\n {\"maxT\": %d, \"L\": %d, \"arch\": ", first ? "" : ",", maxT, L);
    print_arch(a);
    printf(", \"text\": ");
    print_string(text);
    printf("}");
}

// Each preset at each shape it holds, described there and at another context and layers; with
// documents; without each of its parts and its windows; with windows of its own.
static void print_describe(void) {
    printf("\"describe\": [");
    int first = 1;
    for (int p = 0; p < NUM_ARCHITECTURE_PRESETS; p++)
        for (int i = 0; i < NUM_PRESET_SHAPES; i++) {
            Architecture a;
            char err[256];
            int maxT = preset_shapes[i][0], L = preset_shapes[i][1];
            if (architecture_of_preset(&architecture_presets[p], maxT, L, &a, err, sizeof(err))) continue;
            print_described(&a, maxT, L, first);
            first = 0;
            print_described(&a, 2 * maxT, L, 0);
            print_described(&a, maxT, L + 1, 0);
            Architecture changed = a;
            changed.documents = 1;
            changed.document_token = 7;
            print_described(&changed, maxT, L, 0);
            int32_t slots[ARCHITECTURE_SLOTS];
            for (int part = ARCHITECTURE_PARTS_SLOT; part < ARCHITECTURE_SLOTS; part++) {
                memcpy(slots, &a, sizeof(slots));
                slots[part] = 0;
                memcpy(&changed, slots, sizeof(slots));
                print_described(&changed, maxT, L, 0);
            }
            changed = architecture_unmasked(&a);
            print_described(&changed, maxT, L, 0);
            changed.window_count = 2;
            changed.windows[0] = 5;
            print_described(&changed, maxT, L, 0);
        }
    printf("],\n");
}

static void print_nearest(void) {
    printf("\"nearest\": [");
    for (int k = 0; k < 256; k++) {
        Architecture a = ARCHITECTURE_GPT2;
        int* switches[] = {&a.rotary, &a.rms_norm, &a.qk_norm, &a.relu2, &a.bias, &a.untied_head, &a.zero_init};
        for (int i = 0; i < 7; i++) *switches[i] = (k >> i) & 1;
        a.softcap = (k >> 7) & 1 ? 15.0f : 0.0f;
        printf("%s\n {\"arch\": ", k ? "," : "");
        print_arch(&a);
        printf(", \"preset\": \"%s\"}", architecture_nearest_preset(&a)->name);
    }
    for (int k = 0; k < 128; k++) {
        Architecture a = k & 1 ? (Architecture)ARCHITECTURE_MODERN : (Architecture)ARCHITECTURE_GPT2;
        int* parts[] = {&a.embedding_norm, &a.residual_lambdas, &a.value_embeddings, &a.smear, &a.backout};
        for (int i = 0; i < 5; i++) *parts[i] = (k >> (i + 1)) & 1;
        a.qk_scale = (k >> 6) & 1 ? 1.5f : 0.0f;
        printf(",\n {\"arch\": ");
        print_arch(&a);
        printf(", \"preset\": \"%s\"}", architecture_nearest_preset(&a)->name);
    }
    printf("],\n");
}

static const float probes[] = {0.0f, -0.0f, -1.0f, 1e-40f, 0.1f, 0.125f, 0.5f, 0.99f, 1.0f, 1.0000001f, 2.0f,
                               8.0f, 8.0000010f, 15.0f, 1e30f, FLT_MAX, INFINITY, -INFINITY, NAN};
#define NUM_PROBES ((int)(sizeof(probes) / sizeof(probes[0])))

static void print_value_rules(void) {
    const char* names[] = {"rotary_base", "softcap", "qk_scale"};
    const char* (*rules[])(float) = {rotary_base_invalid, softcap_invalid, qk_scale_invalid};
    for (int r = 0; r < 3; r++) {
        printf("\"%s\": [", names[r]);
        for (int i = 0; i < NUM_PROBES; i++) {
            printf("%s[", i ? ", " : "");
            print_float(probes[i]);
            printf(", %s]", rules[r](probes[i]) ? "false" : "true");
        }
        printf("],\n");
    }
}

#define QK_SCALE_SLOT ((int)(offsetof(Architecture, qk_scale) / sizeof(int32_t)))

// An architecture from a preset, a field or the windows changed.
typedef struct {
    int modern;
    int maxT, L;
    int field;            // a slot of the architecture to set (-1: none), to value's bits
    float float_value;    // for the float slots (1: rotary_base, 8: softcap, QK_SCALE_SLOT: qk_scale)
    int int_value;
    int window_count;     // -2: the preset's
    int windows[4];
} ArchitectureCase;

static const ArchitectureCase architecture_cases[] = {
    {0, 64, 2, -1, 0, 0, -2, {0}},
    {1, 64, 2, -1, 0, 0, -2, {0}},
    {0, 64, 2, 1, 5000.0f, 0, -2, {0}},
    {1, 64, 2, 1, 5000.0f, 0, -2, {0}},
    {0, 64, 2, 1, 1.0f, 0, -2, {0}},
    {0, 64, 2, 1, NAN, 0, -2, {0}},
    {0, 64, 2, 1, 0.0f, 0, -2, {0}},
    {1, 64, 2, 1, 0.5f, 0, -2, {0}},
    {1, 64, 2, 1, INFINITY, 0, -2, {0}},
    {1, 64, 2, 8, 0.5f, 0, -2, {0}},
    {1, 64, 2, 8, 1e-40f, 0, -2, {0}},
    {1, 64, 2, 8, 1.0f, 0, -2, {0}},
    {1, 64, 2, 8, -1.0f, 0, -2, {0}},
    {1, 64, 2, 8, INFINITY, 0, -2, {0}},
    {0, 64, 2, 0, 0, 2, -2, {0}},
    {0, 64, 2, 4, 0, -1, -2, {0}},
    {0, 64, 2, 9, 0, 2, -2, {0}},
    {0, 64, 2, 10, 0, 5, -2, {0}},
    {0, 64, 2, 10, 0, -1, -2, {0}},
    {0, 64, 2, 9, 0, 1, -2, {0}},
    {1, 64, 2, -1, 0, 0, 65, {0}},
    {1, 64, 2, -1, 0, 0, -1, {0}},
    {1, 64, 2, -1, 0, 0, 1, {-3}},
    {1, 64, 2, -1, 0, 0, 1, {8, 8}},
    {1, 64, 2, -1, 0, 0, 1, {63}},
    {1, 64, 2, -1, 0, 0, 1, {64}},
    {0, 64, 2, -1, 0, 0, 1, {100000}},
    {1, 64, 2, -1, 0, 0, 2, {8, 64}},
    {1, 64, 2, -1, 0, 0, 2, {8, 0}},
    {1, 64, 2, -1, 0, 0, 2, {0, 0}},
    {1, 64, 2, -1, 0, 0, 3, {8, 16, 32}},
    {1, 64, 2, -1, 0, 0, 3, {0, 0, 32}},
    {1, 64, 3, -1, 0, 0, 4, {0, 8, 99, 4}},
    {0, 16, 1, 1, 5000.0f, 0, 2, {16, 4}},
    {0, 64, 2, ARCHITECTURE_PARTS_SLOT, 0, 1, -2, {0}},
    {1, 64, 2, ARCHITECTURE_PARTS_SLOT, 0, 1, 2, {8, 0}},
    {1, 64, 2, ARCHITECTURE_PARTS_SLOT, 0, 2, -2, {0}},
    {0, 64, 2, ARCHITECTURE_PARTS_SLOT, 0, -1, -2, {0}},
    {1, 64, 2, QK_SCALE_SLOT, 1.2f, 0, -2, {0}},
    {1, 64, 2, QK_SCALE_SLOT, 1.0f, 0, -2, {0}},
    {1, 64, 2, QK_SCALE_SLOT, 1.0f, 0, 2, {8, 64}},
    {1, 64, 2, QK_SCALE_SLOT, 0.1f, 0, -2, {0}},
    {1, 64, 2, QK_SCALE_SLOT, 9.0f, 0, -2, {0}},
    {1, 64, 2, QK_SCALE_SLOT, NAN, 0, -2, {0}},
    {0, 64, 2, QK_SCALE_SLOT, 1.2f, 0, -2, {0}},
    {0, 64, 2, QK_SCALE_SLOT, 1.0f, 0, -2, {0}},
    {0, 64, 2, QK_SCALE_SLOT, -0.0f, 0, -2, {0}},
    {0, 64, 2, ARCHITECTURE_PARTS_SLOT + 2, 0, 1, -2, {0}},
    {1, 64, 2, ARCHITECTURE_PARTS_SLOT + 2, 0, 3, -2, {0}},
    {0, 64, 2, ARCHITECTURE_PARTS_SLOT + 3, 0, 1, -2, {0}},
    {1, 64, 3, ARCHITECTURE_PARTS_SLOT + 3, 0, 1, 2, {8, 0}},
    {1, 64, 2, ARCHITECTURE_PARTS_SLOT + 3, 0, 2, -2, {0}},
    {0, 64, 2, ARCHITECTURE_PARTS_SLOT + 4, 0, 1, -2, {0}},
    {1, 64, 2, ARCHITECTURE_PARTS_SLOT + 4, 0, 1, 2, {8, 0}},
    {1, 64, 2, ARCHITECTURE_PARTS_SLOT + 4, 0, -1, -2, {0}},
    {0, 64, 2, ARCHITECTURE_PARTS_SLOT + 5, 0, 1, -2, {0}},
    {1, 64, 2, ARCHITECTURE_PARTS_SLOT + 5, 0, 1, 2, {8, 0}},
    {1, 64, 2, ARCHITECTURE_PARTS_SLOT + 5, 0, 2, -2, {0}},
};
#define NUM_ARCHITECTURE_CASES ((int)(sizeof(architecture_cases) / sizeof(architecture_cases[0])))

static void print_architectures(void) {
    printf("\"architectures\": [");
    for (int i = 0; i < NUM_ARCHITECTURE_CASES; i++) {
        const ArchitectureCase* x = &architecture_cases[i];
        GPTConfig c = {.maxT = x->maxT, .V = 300, .Vp = padded_vocab(300), .L = x->L, .NH = 2, .C = 128,
                       .arch = architecture_presets[x->modern].arch};
        int32_t slots[ARCHITECTURE_SLOTS];
        memcpy(slots, &c.arch, sizeof(slots));
        if (x->field == 1 || x->field == 8 || x->field == QK_SCALE_SLOT)
            memcpy(&slots[x->field], &x->float_value, sizeof(float));
        else if (x->field >= 0) slots[x->field] = x->int_value;
        memcpy(&c.arch, slots, sizeof(slots));
        if (x->window_count != -2) {
            c.arch.window_count = x->window_count;
            memcpy(c.arch.windows, x->windows, sizeof(x->windows));
        }
        printf("%s\n {\"maxT\": %d, \"L\": %d, \"arch\": ", i ? "," : "", c.maxT, c.L);
        print_arch(&c.arch);
        int refused = architecture_invalid(&c.arch) != NULL;
        printf(", \"invalid\": %s", refused ? "true" : "false");
        if (!refused) {
            const char* why = gpt_config_drop_without_effect(&c);
            printf(", \"dropped\": ");
            print_arch(&c.arch);
            printf(", \"why\": ");
            print_string(why);
        }
        printf("}");
    }
    printf("],\n");
}

// Each setting of each optimizer's defaults set to each probe, with a tied and an untied head;
// then the weight decay against each rate it is applied with.
static void print_optimizers(void) {
    printf("\"optimizers\": [");
    int n = 0;
    char err[256];
    for (int k = 0; k < 2; k++)
        for (int untied = 0; untied < 2; untied++) {
            const OptimizerConfig base = preset_optimizer_defaults((OptimizerKind)k, &architecture_presets[untied]);
            for (int s = -1; s < NUM_OPTIMIZER_SETTINGS; s++)
                for (int p = 0; p < (s < 0 ? 1 : NUM_PROBES); p++) {
                    OptimizerConfig o = base;
                    if (s >= 0) *(float*)((char*)&o + optimizer_settings[s].offset) = probes[p];
                    const char* why = optimizer_invalid(&o, untied, err, sizeof(err)) ? err : NULL;
                    printf("%s\n {\"optimizer\": \"%s\", \"untied_head\": %d, \"settings\": ", n++ ? "," : "",
                           optimizer_name(o.kind), untied);
                    print_settings_of(&o);
                    printf(", \"why\": ");
                    print_string(why);
                    printf("}");
                }
            const float decays[] = {0.5f, 2.0f, 20.0f, 1000.0f, 1e30f};
            const float rates[] = {1e-30f, 1e-3f, 0.05f, 0.5f, 1.0f};
            const size_t rate_of[] = {offsetof(OptimizerConfig, lr), offsetof(OptimizerConfig, embedding_lr),
                                      offsetof(OptimizerConfig, head_lr)};
            for (int d = 0; d < 5; d++)
                for (int r = 0; r < 3; r++)
                    for (int v = 0; v < 5; v++) {
                        OptimizerConfig o = base;
                        o.weight_decay = decays[d];
                        *(float*)((char*)&o + rate_of[r]) = rates[v];
                        const char* why = optimizer_invalid(&o, untied, err, sizeof(err)) ? err : NULL;
                        printf(",\n {\"optimizer\": \"%s\", \"untied_head\": %d, \"settings\": ", optimizer_name(o.kind),
                               untied);
                        print_settings_of(&o);
                        printf(", \"why\": ");
                        print_string(why);
                        printf("}");
                    }
        }
    // Muon's variants, every combination, with and without a weight decay, under either optimizer.
    const float betas[] = {0.0f, 0.5f, 0.95f, 1.0f, -0.1f, NAN};
    for (int k = 0; k < 2; k++)
        for (int v = 0; v < NUM_MUON_QKV * NUM_NEWTON_SCHULZ * 2 * 2 * 6 * 2; v++) {
            OptimizerConfig o = preset_optimizer_defaults((OptimizerKind)k, &architecture_presets[0]);
            int at = v;
            o.muon_qkv = at % NUM_MUON_QKV, at /= NUM_MUON_QKV;
            o.muon_ns = at % NUM_NEWTON_SCHULZ, at /= NUM_NEWTON_SCHULZ;
            o.cautious_weight_decay = at % 2, at /= 2;
            o.normuon = at % 2, at /= 2;
            o.normuon_beta2 = betas[at % 6], at /= 6;
            o.weight_decay = at % 2 ? 0.1f : 0.0f;
            const char* why = optimizer_invalid(&o, 0, err, sizeof(err)) ? err : NULL;
            printf(",\n {\"optimizer\": \"%s\", \"untied_head\": 0, \"settings\": ", optimizer_name(o.kind));
            print_settings_of(&o);
            printf(", \"why\": ");
            print_string(why);
            printf("}");
        }
    printf("],\n");
}

static void print_newton_schulz(void) {
    printf("\"newton_schulz\": {");
    for (int k = 0; k < NUM_NEWTON_SCHULZ; k++) {
        const NewtonSchulzCoefficients* c = &newton_schulz_coefficients[k];
        printf("%s\"%s\": {\"norm_scale\": ", k ? ", " : "", newton_schulz_name(k));
        print_float(c->norm_scale);
        printf(", \"steps\": [");
        for (int i = 0; i < NEWTON_SCHULZ_STEPS; i++)
            for (int j = 0; j < 3; j++) {
                printf("%s", i || j ? (j ? ", " : "], [") : "[");
                print_float(c->abc[i][j]);
            }
        printf("]]}");
    }
    printf("},\n");
}

static void print_muon_qkv_unfit(void) {
    printf("\"muon_qkv_unfit\": [");
    for (int NH = 1; NH <= 6; NH++)
        for (int q = 0; q < NUM_MUON_QKV; q++) {
            GPTConfig c = {.maxT = 64, .V = 300, .Vp = padded_vocab(300), .L = 2, .NH = NH, .C = 64 * NH};
            printf("%s\n [%d, \"%s\", ", NH > 1 || q ? "," : "", NH, muon_qkv_name(q));
            print_string(muon_qkv_unfit(q, &c));
            printf("]");
        }
    printf("]\n");
}

int main(void) {
    printf("{");
    print_settings();
    print_defaults();
    print_presets();
    print_describe();
    print_nearest();
    print_value_rules();
    print_architectures();
    print_optimizers();
    print_newton_schulz();
    print_muon_qkv_unfit();
    printf("}\n");
    return 0;
}
