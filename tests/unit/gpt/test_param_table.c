// tests/unit/gpt/test_param_table.c: the parameter table (gpt/param_table.h) on the CPU: the layout (sizes,
// offsets, each layer's slices), groups, decay, Muon's matrices, ZeRO-1's units and the initial
// values of GPT-2, the modern recipe and every combination of the switches that change the
// tensors, against fixed hashes (GPT-2's layout is llm.c's, and a seed draws the values it always
// has, so every checkpoint written stays readable and every run repeatable); the rows against the
// list of kinds; a per-layer kind on a subset of the layers (slices packed, padding rows, draws); Muon
// cutting qkvw into one (3C, C), three (C, C) or head-pair (2HS, C) matrices as --muon-qkv says,
// the other matrices whole under every cut, ZeRO-1's shards of them whole, head pairs refused with
// an odd head count; presence per architecture; the residual lambdas; the value embeddings; the smear and the backout;
// nanochat's init (--init nanochat) tensor by tensor; --help's listing.
#include <math.h>
#include <string.h>

#include "distributed/zero_shard.h"
#include "gpt/param_table.h"
#include "tests/lib/test.h"

static uint64_t fnv;
static void mix(uint64_t v) {
    for (int b = 0; b < 8; b++) {
        fnv ^= (v >> (8 * b)) & 0xff;
        fnv *= 0x100000001b3ULL;
    }
}

static GPTConfig config(int maxT, int V, int L, int NH, int C, int rotary, int rms_norm, int bias, int untied,
                        int zero_init) {
    GPTConfig c = {.maxT = maxT, .V = V, .Vp = padded_vocab(V), .L = L, .NH = NH, .C = C, .arch = ARCHITECTURE_GPT2};
    c.arch.rotary = rotary;
    c.arch.rms_norm = rms_norm;
    c.arch.bias = bias;
    c.arch.untied_head = untied;
    c.arch.zero_init = zero_init;
    return c;
}

// Tensor i's offset in the flat array.
static size_t tensor_offset(const GPTConfig* c, int i) {
    size_t sizes[NUM_PARAM_TENSORS], off = 0;
    param_sizes(c, sizes);
    for (int j = 0; j < i; j++) off += sizes[j];
    return off;
}

// The layout's hash: the count; each present tensor's size, group, decay, Muon's matrix and
// ZeRO-1's unit under Muon; their offsets; each layer's slices' offsets. A kind no model here has
// leaves it as it is.
static uint64_t layout_hash(const GPTConfig* c) {
    fnv = 0xcbf29ce484222325ULL;
    size_t sizes[NUM_PARAM_TENSORS];
    param_sizes(c, sizes);
    mix(count_params(c));
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        const ParamKind* k = &param_table[i];
        if (!sizes[i]) continue;
        mix(sizes[i]);
        mix(k->group);
        mix(k->decay_scale != 0.0f);
        int rows = 0, cols = 0;
        if (k->group == GROUP_MATRIX) param_muon_matrix(k, c, MUON_QKV_FUSED, &rows, &cols);
        mix(rows);
        mix(cols);
        mix(param_zero_unit(k, c, 1, MUON_QKV_FUSED));
    }
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        if (sizes[i]) mix(tensor_offset(c, i));
    for (int l = 0; l < c->L; l++)
        for (int i = 0; i < NUM_LAYER_PARAMS; i++) {
            const ParamKind* k = &param_table[layer_param_tensors[i]];
            int slice = param_layer_slice(k, l, c);
            if (slice >= 0) mix(tensor_offset(c, layer_param_tensors[i]) + slice * param_slice_size(k, c));
        }
    return fnv;
}

static uint64_t init_hash(const GPTConfig* c, uint64_t seed) {
    size_t P = count_params(c);
    float* values = (float*)malloc(P * sizeof(float));
    if (!values) die("out of memory");
    init_param_values(values, c, seed, INIT_SCHEME_DEFAULT);
    fnv = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < P; i++) {
        uint32_t bits;
        memcpy(&bits, &values[i], sizeof(bits));
        mix(bits);
    }
    free(values);
    return fnv;
}

// The hashes, fixed: a change of the layout or of the draws shows here.
static void test_layout_and_init_fixed(void) {
    test_begin("param_table_layout_and_init_fixed");
    struct {
        const char* name;
        GPTConfig c;
        uint64_t seed, layout, init;
    } models[] = {
        {"gpt2 d12", config(1024, 50257, 12, 12, 768, 0, 0, 1, 0, 0), 1337, 0xeb14f46a83f698baULL,
         0xa23a17d894f63de5ULL},
        {"modern d12", config(1024, 50257, 12, 12, 768, 1, 1, 0, 1, 1), 1337, 0xda55e289569a6e67ULL,
         0xab91936b2a64abf2ULL},
        {"gpt2 tiny", config(40, 97, 2, 2, 128, 0, 0, 1, 0, 0), 7, 0xd9681671486b91b7ULL, 0x0908774277e25526ULL},
        {"modern tiny", config(40, 97, 2, 2, 128, 1, 1, 0, 1, 1), 7, 0x233ecfb883f9b1d1ULL, 0x6021dc27062b0141ULL},
    };
    for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
        uint64_t layout = layout_hash(&models[m].c), init = init_hash(&models[m].c, models[m].seed);
        CHECK(layout == models[m].layout, "%s: layout hash 0x%016llx, fixed 0x%016llx", models[m].name,
              (unsigned long long)layout, (unsigned long long)models[m].layout);
        CHECK(init == models[m].init, "%s: init hash 0x%016llx, fixed 0x%016llx", models[m].name,
              (unsigned long long)init, (unsigned long long)models[m].init);
    }
    // Every combination of rotary, rms_norm, bias, untied_head and zero_init (bits 0 to 4 of k) on
    // an odd small shape, seed 1000 + k.
    static const uint64_t layouts[32] = {
        0x1ac08a52bdea1dc4ULL, 0x33b05973fa9175f7ULL, 0xa4f0054c36f5d2d3ULL, 0x83ef614b487a484bULL,
        0x6e117e60d69acb8aULL, 0x90587e28494edba6ULL, 0x8b8105a44824db8cULL, 0x8e33b1251b56f532ULL,
        0xa5ca9c8d24ab7e10ULL, 0x3f5e12c377942762ULL, 0xfe92ad5a4e52c557ULL, 0x144b6e1b698c80dbULL,
        0x22b6c1c6a6c7592cULL, 0xfdd77c625c36153cULL, 0x2ddb7174a42aa3a9ULL, 0x3bb2676c9d867dfcULL,
        0x1ac08a52bdea1dc4ULL, 0x33b05973fa9175f7ULL, 0xa4f0054c36f5d2d3ULL, 0x83ef614b487a484bULL,
        0x6e117e60d69acb8aULL, 0x90587e28494edba6ULL, 0x8b8105a44824db8cULL, 0x8e33b1251b56f532ULL,
        0xa5ca9c8d24ab7e10ULL, 0x3f5e12c377942762ULL, 0xfe92ad5a4e52c557ULL, 0x144b6e1b698c80dbULL,
        0x22b6c1c6a6c7592cULL, 0xfdd77c625c36153cULL, 0x2ddb7174a42aa3a9ULL, 0x3bb2676c9d867dfcULL};
    static const uint64_t inits[32] = {
        0xfba4d8bf7b02fd5bULL, 0x1fb839ef2eb834faULL, 0xa023e8f77764818bULL, 0x36890b4645eb2346ULL,
        0x1a52bf5971b151bdULL, 0xfbc9518b05556fdfULL, 0x13d9c5d32b7eba56ULL, 0x622f3df74389eeddULL,
        0x254d8a69a891c8abULL, 0xf25d12aa862aa1e2ULL, 0xcf8843441efdcaa7ULL, 0x59c66bba2c746f42ULL,
        0x45ec11b4be3ee883ULL, 0x592355cc22d445f9ULL, 0x7ddbbe435f5b5e95ULL, 0x009eb059396124d6ULL,
        0x64fc02cb300ff532ULL, 0x1290b4f55302cadcULL, 0x4f11bf268d51f9b6ULL, 0x572bc1b3593fbd5bULL,
        0x710277af0a0a22a8ULL, 0xcc763286a3cd5f73ULL, 0x766aaf734d48b8f2ULL, 0xee48cb1956a7a624ULL,
        0x652867c4d302eb89ULL, 0xf0e365e24f659977ULL, 0x9f648fd97804f539ULL, 0xe7932c917dd9a000ULL,
        0xff3214f6a98d63bdULL, 0xf4826cefaee422d9ULL, 0x2e22f96019bfe84fULL, 0x8c6a39bdb999ac0aULL};
    for (int k = 0; k < 32; k++) {
        GPTConfig c = config(50, 300, 3, 4, 64, k & 1, (k >> 1) & 1, (k >> 2) & 1, (k >> 3) & 1, (k >> 4) & 1);
        uint64_t layout = layout_hash(&c), init = init_hash(&c, 1000 + k);
        CHECK(layout == layouts[k], "switches %d: layout hash 0x%016llx, fixed 0x%016llx", k,
              (unsigned long long)layout, (unsigned long long)layouts[k]);
        CHECK(init == inits[k], "switches %d: init hash 0x%016llx, fixed 0x%016llx", k, (unsigned long long)init,
              (unsigned long long)inits[k]);
    }
    test_end();
}

// Each row is a kind of the list (per layer where the list says LAYER), a whole slice of Muon
// matrices in every preset shape under every cut that fits it, with a positive init and rate.
static void test_rows_agree_with_the_list(void) {
    test_begin("param_table_rows_agree_with_the_list");
    int per_layer[NUM_PARAM_TENSORS] = {0};
    for (int i = 0; i < NUM_LAYER_PARAMS; i++) per_layer[layer_param_tensors[i]]++;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        const ParamKind* k = &param_table[i];
        CHECK(param_names[i] && *param_names[i], "kind %d has no name", i);
        CHECK((k->layers != NULL) == (per_layer[i] == 1), "%s: the row's layers and the list's %s differ",
              param_names[i], per_layer[i] ? "LAYER" : "ONCE");
        CHECK(k->rows.times > 0 && k->cols.times > 0, "%s: a shape term is not positive", param_names[i]);
        CHECK(k->init != INIT_NORMAL || k->std > 0.0, "%s: a normal init of std %g", param_names[i], k->std);
        CHECK(k->lr_scale > 0.0f && k->decay_scale >= 0.0f, "%s: lr x%g, decay x%g", param_names[i], k->lr_scale,
              k->decay_scale);
        for (int p = 0; p < NUM_MODEL_PRESETS && k->group == GROUP_MATRIX; p++)
            for (int qkv = 0; qkv < NUM_MUON_QKV; qkv++) {
                const ModelPreset* m = &model_presets[p];
                GPTConfig c = config(1024, 50257, m->L, m->NH, m->C, 0, 0, 1, 0, 0);
                if (muon_qkv_unfit(qkv, &c)) continue;
                int rows, cols;
                param_muon_matrix(k, &c, qkv, &rows, &cols);
                size_t slice = param_slice_size(k, &c), matrix = (size_t)rows * cols;
                CHECK(rows > 0 && slice % matrix == 0 && matrix % 8 == 0,
                      "%s in %s, --muon-qkv %s: Muon's (%d, %d) matrices do not tile a slice of %zu", param_names[i],
                      model_presets[p].name, muon_qkv_name(qkv), rows, cols, slice);
            }
    }
    test_end();
}

// nanochat's layers for its value embeddings: every other layer, the last among them.
static int alternate_layers(int l, int L) { return l % 2 == (L - 1) % 2 ? l / 2 : -1; }

// A (Vp, C) table on alternate layers: its slices packed over those layers in order, its size,
// its draws slice by slice with the padding rows zero, as many draws as real rows.
static void test_layer_subset(void) {
    test_begin("param_table_layer_subset");
    const ParamKind value_embedding = {.rows = {1, DIM_VP}, .cols = {1, DIM_C}, .layers = alternate_layers,
                                       .init = INIT_NORMAL, .std = 0.5, .group = GROUP_EMBEDDING, .lr_scale = 1};
    for (int L = 1; L <= 13; L++) {
        GPTConfig c = config(16, 130, L, 2, 8, 1, 1, 0, 1, 1);
        int n = param_slices(&value_embedding, &c), next = 0;
        for (int l = 0; l < L; l++) {
            int slice = param_layer_slice(&value_embedding, l, &c);
            CHECK(slice == -1 || slice == next, "L %d: layer %d holds slice %d, the next is %d", L, l, slice, next);
            next += slice >= 0;
            CHECK((slice >= 0) == (l % 2 == (L - 1) % 2), "L %d: layer %d holds slice %d", L, l, slice);
        }
        CHECK(n == next && n == (L + 1) / 2, "L %d: %d slices, the layers hold %d", L, n, next);
        CHECK(param_slice_size(&value_embedding, &c) == (size_t)256 * 8, "L %d: a slice of %zu", L,
              param_slice_size(&value_embedding, &c));
        size_t slice = (size_t)c.Vp * c.C, real = (size_t)c.V * c.C;
        float* values = (float*)malloc(n * slice * sizeof(float));
        Rng rng = {99}, want = {99};
        init_param_tensor(&value_embedding, &c, values, &rng);
        int wrong = 0;
        for (int s = 0; s < n; s++)
            for (size_t j = 0; j < slice; j++) {
                float expected = j < real ? (float)(0.5 * rng_normal(&want)) : 0.0f;
                wrong += values[s * slice + j] != expected;
            }
        CHECK(wrong == 0, "L %d: %d values differ from the draws slice by slice (padding zero)", L, wrong);
        CHECK(rng.state == want.state, "L %d: the init took another number of draws", L);
        free(values);
    }
    test_end();
}

// Rank shares of kind k's tensor over W ranks by ZeRO-1's units under Muon cut as qkv says: every
// part whole matrices, all of them owned once. Returns the matrices.
static size_t check_zero_units(const ParamKind* k, const GPTConfig* c, int qkv, const char* what) {
    int rows, cols;
    param_muon_matrix(k, c, qkv, &rows, &cols);
    ZeroTensor t = {param_slices(k, c) * param_slice_size(k, c), param_zero_unit(k, c, 1, qkv)};
    CHECK(t.unit == (size_t)rows * cols, "%s: a ZeRO-1 unit of %zu, Muon's matrix (%d, %d)", what, t.unit, rows, cols);
    CHECK(param_zero_unit(k, c, 0, qkv) == ZERO_SHARD_ALIGN, "%s: AdamW's unit %zu", what, param_zero_unit(k, c, 0, qkv));
    for (int W = 1; W <= 5; W++) {
        size_t owned = 0;
        for (int r = 0; r < W; r++) {
            ZeroShard s;
            char err[ERR_LEN];
            if (zero_shard_init(&s, &t, 1, W, r, 1, ZERO_SHARD_ALIGN, err) != 0) {
                test_fail("%s: %s", what, err);
                return 0;
            }
            ZeroShardPart part = zero_shard_part(&s, &t, 0, r);
            CHECK(part.param_index % t.unit == 0 && part.count % t.unit == 0,
                  "%s, W %d rank %d: a part of %zu from %zu cuts a matrix", what, W, r, part.count, part.param_index);
            owned += part.count;
        }
        CHECK(owned == t.count, "%s, W %d: the ranks own %zu of %zu", what, W, owned, t.count);
    }
    return t.count / t.unit;
}

// qkvw as --muon-qkv cuts it: one (3C, C) matrix a layer (fused), three (C, C) (split: q, k and
// v), or 3 NH / 2 head pairs (2 HS, C); the other matrices each layer's whole under every cut;
// head pairs refused with an odd head count, taken with an even one.
static void test_muon_cuts(void) {
    test_begin("param_table_muon_cuts");
    GPTConfig c = config(64, 100, 3, 4, 64, 1, 1, 0, 1, 1);
    int HS = c.C / c.NH;
    const struct {
        int qkv, rows, cols;
        size_t matrices;
    } cuts[] = {{MUON_QKV_FUSED, 3 * c.C, c.C, (size_t)c.L}, {MUON_QKV_SPLIT, c.C, c.C, (size_t)3 * c.L},
                {MUON_QKV_HEAD_PAIRS, 2 * HS, c.C, (size_t)3 * c.NH / 2 * c.L}};
    const int kinds[] = {PARAM_ATTPROJW, PARAM_FCW, PARAM_FCPROJW};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        const char* name = muon_qkv_name(cuts[i].qkv);
        int rows, cols;
        param_muon_matrix(&param_table[PARAM_QKVW], &c, cuts[i].qkv, &rows, &cols);
        CHECK(rows == cuts[i].rows && cols == cuts[i].cols, "qkvw, %s: Muon's matrix (%d, %d), expected (%d, %d)", name,
              rows, cols, cuts[i].rows, cuts[i].cols);
        size_t n = check_zero_units(&param_table[PARAM_QKVW], &c, cuts[i].qkv, name);
        CHECK(n == cuts[i].matrices, "qkvw, %s: %zu matrices, expected %zu", name, n, cuts[i].matrices);
        CHECK(muon_qkv_unfit(cuts[i].qkv, &c) == NULL, "%s refused with %d heads", name, c.NH);
        for (int j = 0; j < 3; j++) {
            const ParamKind* k = &param_table[kinds[j]];
            param_muon_matrix(k, &c, cuts[i].qkv, &rows, &cols);
            CHECK(rows == (int)param_dim(k->rows, &c), "%s, %s: Muon's matrix has %d rows", param_names[kinds[j]], name,
                  rows);
            n = check_zero_units(k, &c, cuts[i].qkv, param_names[kinds[j]]);
            CHECK(n == (size_t)c.L, "%s, %s: %zu matrices", param_names[kinds[j]], name, n);
        }
    }
    GPTConfig odd = config(64, 100, 3, 5, 320, 1, 1, 0, 1, 1);
    const char* why = muon_qkv_unfit(MUON_QKV_HEAD_PAIRS, &odd);
    CHECK(why && strstr(why, "--muon-qkv head-pairs") && strstr(why, "odd"), "head pairs of 5 heads: %s",
          why ? why : "taken");
    CHECK(!muon_qkv_unfit(MUON_QKV_SPLIT, &odd) && !muon_qkv_unfit(MUON_QKV_FUSED, &odd), "5 heads refused unpaired");
    CHECK(!strcmp(muon_qkv_name(MUON_QKV_FUSED), "fused") && !strcmp(muon_qkv_name(MUON_QKV_SPLIT), "split") &&
          !strcmp(muon_qkv_name(MUON_QKV_HEAD_PAIRS), "head-pairs"), "the cuts' names are not --muon-qkv's");
    test_end();
}

// The kinds GPT-2 and the modern recipe are made of, in each architecture: wpe with learned
// positions, the norms' weights and biases with LayerNorm, the biases with bias, lm_head untied;
// wte and the blocks' matrices always.
static void test_presence(void) {
    test_begin("param_table_presence_per_architecture");
    for (int k = 0; k < 32; k++) {
        GPTConfig c = config(50, 300, 3, 4, 64, k & 1, (k >> 1) & 1, (k >> 2) & 1, (k >> 3) & 1, (k >> 4) & 1);
        const Architecture* a = &c.arch;
        const struct {
            ParamTensor i;
            int present;
        } kinds[] = {{PARAM_WTE, 1}, {PARAM_WPE, !a->rotary}, {PARAM_LN1W, !a->rms_norm}, {PARAM_LN1B, !a->rms_norm},
                     {PARAM_QKVW, 1}, {PARAM_QKVB, a->bias}, {PARAM_ATTPROJW, 1}, {PARAM_ATTPROJB, a->bias},
                     {PARAM_LN2W, !a->rms_norm}, {PARAM_LN2B, !a->rms_norm}, {PARAM_FCW, 1}, {PARAM_FCB, a->bias},
                     {PARAM_FCPROJW, 1}, {PARAM_FCPROJB, a->bias}, {PARAM_LNFW, !a->rms_norm},
                     {PARAM_LNFB, !a->rms_norm}, {PARAM_LM_HEAD, a->untied_head}, {PARAM_RESID_LAMBDA, 0},
                     {PARAM_X0_LAMBDA, 0}, {PARAM_VALUE_EMBEDDING, 0}, {PARAM_VALUE_GATE, 0},
                     {PARAM_SMEAR_GATE, 0}, {PARAM_SMEAR_LAMBDA, 0}, {PARAM_BACKOUT_LAMBDA, 0}};
        size_t sizes[NUM_PARAM_TENSORS];
        param_sizes(&c, sizes);
        for (size_t j = 0; j < sizeof(kinds) / sizeof(kinds[0]); j++) {
            int i = kinds[j].i, want = kinds[j].present;
            CHECK((sizes[i] > 0) == want, "switches %d: %s has %zu elements", k, param_names[i], sizes[i]);
            for (int l = 0; l < c.L && param_table[i].layers; l++)
                CHECK((param_layer_slice(&param_table[i], l, &c) == l) == want, "switches %d: %s in layer %d", k,
                      param_names[i], l);
        }
    }
    test_end();
}

// The residual lambdas (a part of the 2026 recipe), on each preset's components without its
// parts: a (L, 1) tensor each after lm_head, so that every other tensor keeps its place, its size
// and its draws (the presets' layouts and draws are the fixed hashes above); one scalar a layer,
// resid_lambda ones and x0_lambda zeros, Adam's vectors at multiples of their own, not decayed.
static void test_residual_lambdas(void) {
    test_begin("param_table_residual_lambdas");
    for (int p = 0; p < NUM_ARCHITECTURE_PRESETS; p++) {
        GPTConfig c = {.maxT = 40, .V = 97, .Vp = 128, .L = 3, .NH = 2, .C = 128,
                       .arch = architecture_base(&architecture_presets[p].arch)};
        GPTConfig with = c;
        with.arch.residual_lambdas = 1;
        const char* name = architecture_presets[p].name;
        size_t sizes[NUM_PARAM_TENSORS], with_sizes[NUM_PARAM_TENSORS], P = count_params(&c);
        param_sizes(&c, sizes);
        param_sizes(&with, with_sizes);
        CHECK(count_params(&with) == P + 2 * (size_t)c.L, "%s: %zu parameters with the lambdas, %zu without", name,
              count_params(&with), P);
        for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
            int lambda = i == PARAM_RESID_LAMBDA || i == PARAM_X0_LAMBDA;
            if (lambda) CHECK(sizes[i] == 0 && with_sizes[i] == (size_t)c.L, "%s: %s of %zu, %zu with the lambdas",
                              name, param_names[i], sizes[i], with_sizes[i]);
            else CHECK(sizes[i] == with_sizes[i] && (sizes[i] == 0 || tensor_offset(&c, i) == tensor_offset(&with, i)),
                       "%s: %s moves with the lambdas", name, param_names[i]);
        }
        CHECK(tensor_offset(&with, PARAM_RESID_LAMBDA) == P && tensor_offset(&with, PARAM_X0_LAMBDA) == P + c.L,
              "%s: the lambdas are not last", name);
        for (int l = 0; l < c.L; l++)
            CHECK(param_layer_slice(&param_table[PARAM_RESID_LAMBDA], l, &with) == l &&
                  param_layer_slice(&param_table[PARAM_X0_LAMBDA], l, &with) == l &&
                  param_layer_slice(&param_table[PARAM_RESID_LAMBDA], l, &c) == -1,
                  "%s: layer %d's lambdas", name, l);
        float* values = (float*)malloc(P * sizeof(float));
        float* with_values = (float*)malloc((P + 2 * c.L) * sizeof(float));
        init_param_values(values, &c, 5, INIT_SCHEME_DEFAULT);
        init_param_values(with_values, &with, 5, INIT_SCHEME_DEFAULT);
        CHECK(!memcmp(values, with_values, P * sizeof(float)), "%s: the lambdas change the other draws", name);
        int wrong = 0;
        for (int l = 0; l < c.L; l++) wrong += with_values[P + l] != 1.0f || with_values[P + c.L + l] != 0.0f;
        CHECK(wrong == 0, "%s: the lambdas do not start at 1 and 0", name);
        free(values);
        free(with_values);
    }
    const ParamKind *r = &param_table[PARAM_RESID_LAMBDA], *z = &param_table[PARAM_X0_LAMBDA];
    CHECK(r->group == GROUP_VECTOR && z->group == GROUP_VECTOR && r->decay_scale == 0.0f && z->decay_scale == 0.0f &&
          r->lr_scale == 2.5f && z->lr_scale == 250.0f,
          "the lambdas' groups %d %d, decay x%g x%g, lr x%g x%g", r->group, z->group, r->decay_scale, z->decay_scale,
          r->lr_scale, z->lr_scale);
    test_end();
}

// The mean and standard deviation of n values.
static void moments(const float* v, size_t n, double* mean, double* std) {
    double s = 0.0, s2 = 0.0;
    for (size_t i = 0; i < n; i++) {
        s += v[i];
        s2 += (double)v[i] * v[i];
    }
    *mean = s / n;
    *std = sqrt(s2 / n - *mean * *mean);
}

// nanochat's init of a modern model with the lambdas and one of GPT-2's: wte N(0, 0.8) and the head
// N(0, 0.001) (padding rows zero), qkvw and fcw uniform of std 1/sqrt(C) and 0.4/sqrt(C) (within
// sqrt(3) times it), the projections zero, the lambdas from 1.15 and 0.2 to 1.05 and 0.05, the rest
// as the default init draws it (GPT-2's wpe and norms); the same seed the same values.
static void test_nanochat_init(void) {
    test_begin("param_table_nanochat_init");
    GPTConfig modern = {.maxT = 40, .V = 1000, .Vp = 1024, .L = 3, .NH = 2, .C = 256, .arch = ARCHITECTURE_MODERN};
    modern.arch.residual_lambdas = 1;
    GPTConfig gpt2 = modern;
    gpt2.arch = (Architecture)ARCHITECTURE_GPT2;
    const GPTConfig* configs[] = {&modern, &gpt2};
    for (int m = 0; m < 2; m++) {
        const GPTConfig* c = configs[m];
        size_t P = count_params(c), sizes[NUM_PARAM_TENSORS];
        param_sizes(c, sizes);
        float* values = (float*)malloc(P * sizeof(float));
        float* again = (float*)malloc(P * sizeof(float));
        float* plain = (float*)malloc(P * sizeof(float));
        init_param_values(values, c, 9, INIT_SCHEME_NANOCHAT);
        init_param_values(again, c, 9, INIT_SCHEME_NANOCHAT);
        init_param_values(plain, c, 9, INIT_SCHEME_DEFAULT);
        CHECK(!memcmp(values, again, P * sizeof(float)), "model %d: the same seed, other values", m);
        size_t off = 0;
        double unit = 1.0 / sqrt((double)c->C);
        for (int i = 0; i < NUM_PARAM_TENSORS; off += sizes[i++]) {
            const float* v = values + off;
            size_t n = sizes[i], real = n;
            if (!n) continue;
            double mean, std, most = 0.0, want = -1.0;
            if (i == PARAM_WTE || i == PARAM_LM_HEAD) {
                real = (size_t)c->V * c->C;
                int padding_zero = 1;
                for (size_t j = real; j < n; j++) padding_zero &= v[j] == 0.0f;
                CHECK(padding_zero, "model %d: %s: a padding row is not zero", m, param_names[i]);
                want = i == PARAM_WTE ? 0.8 : 0.001;
            } else if (i == PARAM_QKVW || i == PARAM_FCW) {
                want = (i == PARAM_QKVW ? 1.0 : 0.4) * unit;
                for (size_t j = 0; j < n; j++) most = fmax(most, fabs(v[j]));
                CHECK(most <= sqrt(3.0) * want * 1.004, "model %d: %s: %g past the uniform's bound", m, param_names[i],
                      most);
            }
            if (want > 0.0) {
                moments(v, real, &mean, &std);
                CHECK(fabs(std / want - 1.0) < 0.03 && fabs(mean) < 0.03 * want, "model %d: %s: mean %g std %g, want "
                      "std %g", m, param_names[i], mean, std, want);
            } else if (i == PARAM_ATTPROJW || i == PARAM_FCPROJW) {
                int zero = 1;
                for (size_t j = 0; j < n; j++) zero &= v[j] == 0.0f;
                CHECK(zero, "model %d: %s is not zero", m, param_names[i]);
            } else if (i == PARAM_RESID_LAMBDA || i == PARAM_X0_LAMBDA) {
                double first = i == PARAM_RESID_LAMBDA ? 1.15 : 0.2, last = i == PARAM_RESID_LAMBDA ? 1.05 : 0.05;
                for (int l = 0; l < c->L; l++) {
                    double x = first + (last - first) * l / (c->L - 1);
                    CHECK(fabs(v[l] - x) < 0.005 * x, "model %d: %s of layer %d: %g, want %g", m, param_names[i], l,
                          v[l], x);
                }
            } else {   // wpe (drawn after wte, which takes as many draws), the norms and biases: the default's
                CHECK(!memcmp(v, plain + off, n * sizeof(float)), "model %d: %s is not the default init", m,
                      param_names[i]);
            }
        }
        free(values);
        free(again);
        free(plain);
    }
    CHECK(!strcmp(init_scheme_name(INIT_SCHEME_NANOCHAT), "nanochat") && !strcmp(init_scheme_name(INIT_SCHEME_DEFAULT),
                                                                                 "default"), "the schemes' names");
    test_end();
}

// The value embeddings (a part of the 2026 recipe), on each preset's components without its
// parts: a (Vp, C) table and a (NH, 12) gate on every other layer, the last among them, after
// every other tensor, which keeps its place, its size and its draws; the tables drawn N(0, 0.02)
// with zero padding rows, the gates zero; the tables Adam's embeddings at half their rate,
// decayed, the gates Adam's vectors, not decayed.
static void test_value_embeddings(void) {
    test_begin("param_table_value_embeddings");
    for (int p = 0; p < NUM_ARCHITECTURE_PRESETS; p++)
        for (int L = 2; L <= 3; L++) {
            GPTConfig c = {.maxT = 40, .V = 97, .Vp = 128, .L = L, .NH = 2, .C = 128,
                           .arch = architecture_base(&architecture_presets[p].arch)};
            GPTConfig with = c;
            with.arch.value_embeddings = 1;
            const char* name = architecture_presets[p].name;
            size_t sizes[NUM_PARAM_TENSORS], with_sizes[NUM_PARAM_TENSORS], P = count_params(&c);
            size_t layers = (size_t)(L + 1) / 2, table = (size_t)c.Vp * c.C, gate = (size_t)c.NH * VALUE_GATE_CHANNELS;
            param_sizes(&c, sizes);
            param_sizes(&with, with_sizes);
            CHECK(count_params(&with) == P + layers * (table + gate), "%s L %d: %zu parameters with them, %zu without",
                  name, L, count_params(&with), P);
            for (int i = 0; i < NUM_PARAM_TENSORS; i++)
                if (i != PARAM_VALUE_EMBEDDING && i != PARAM_VALUE_GATE)
                    CHECK(sizes[i] == with_sizes[i] &&
                              (sizes[i] == 0 || tensor_offset(&c, i) == tensor_offset(&with, i)),
                          "%s L %d: %s moves with the value embeddings", name, L, param_names[i]);
            CHECK(sizes[PARAM_VALUE_EMBEDDING] == 0 && with_sizes[PARAM_VALUE_EMBEDDING] == layers * table &&
                  with_sizes[PARAM_VALUE_GATE] == layers * gate && tensor_offset(&with, PARAM_VALUE_EMBEDDING) == P,
                  "%s L %d: the value embeddings' sizes %zu, %zu", name, L, with_sizes[PARAM_VALUE_EMBEDDING],
                  with_sizes[PARAM_VALUE_GATE]);
            for (int l = 0; l < L; l++) {
                int want = l % 2 == (L - 1) % 2 ? l / 2 : -1;
                CHECK(param_layer_slice(&param_table[PARAM_VALUE_EMBEDDING], l, &with) == want &&
                      param_layer_slice(&param_table[PARAM_VALUE_GATE], l, &with) == want &&
                      (want >= 0) == architecture_value_embedding_layer(&with.arch, l, L),
                      "%s L %d: layer %d's value embedding", name, L, l);
            }
            float* values = (float*)malloc(P * sizeof(float));
            float* with_values = (float*)malloc(count_params(&with) * sizeof(float));
            init_param_values(values, &c, 5, INIT_SCHEME_DEFAULT);
            init_param_values(with_values, &with, 5, INIT_SCHEME_DEFAULT);
            CHECK(!memcmp(values, with_values, P * sizeof(float)), "%s L %d: they change the other draws", name, L);
            int wrong = 0;
            double square = 0.0;
            for (size_t s = 0; s < layers; s++)
                for (size_t j = 0; j < table; j++) {
                    float v = with_values[P + s * table + j];
                    if (j >= (size_t)c.V * c.C) wrong += v != 0.0f;
                    else square += (double)v * v;
                }
            for (size_t j = 0; j < layers * gate; j++) wrong += with_values[P + layers * table + j] != 0.0f;
            double std = sqrt(square / (layers * c.V * c.C));
            CHECK(wrong == 0 && fabs(std - 0.02) < 0.001, "%s L %d: %d padding or gate values not zero, std %g", name,
                  L, wrong, std);
            free(values);
            free(with_values);
        }
    const ParamKind *t = &param_table[PARAM_VALUE_EMBEDDING], *g = &param_table[PARAM_VALUE_GATE];
    CHECK(t->group == GROUP_EMBEDDING && t->lr_scale == 0.5f && t->decay_scale == 1.0f && g->group == GROUP_VECTOR &&
          g->lr_scale == 1.0f && g->decay_scale == 0.0f,
          "the value embeddings' groups %d %d, lr x%g x%g, decay x%g x%g", t->group, g->group, t->lr_scale,
          g->lr_scale, t->decay_scale, g->decay_scale);
    test_end();
}

// Where the value embeddings' tables start in the flat array, with and without the residual
// lambdas (2L values before them), at 1 to 9 layers: each layer's table at an even offset (the
// kernels read its rows 4 bytes at a time, layers/value_embedding.cu), and at an offset a multiple
// of 8 (16 bytes) only where 2L is.
static void test_value_embedding_alignment(void) {
    test_begin("param_table_value_embedding_alignment");
    for (int lambdas = 0; lambdas <= 1; lambdas++)
        for (int L = 1; L <= 9; L++) {
            GPTConfig c = {.maxT = 40, .V = 97, .Vp = 128, .L = L, .NH = 2, .C = 128,
                           .arch = architecture_presets[1].arch};
            c.arch.value_embeddings = 1;
            c.arch.residual_lambdas = lambdas;
            size_t at = tensor_offset(&c, PARAM_VALUE_EMBEDDING), table = (size_t)c.Vp * c.C;
            for (int l = 0; l < L; l++) {
                int slice = param_layer_slice(&param_table[PARAM_VALUE_EMBEDDING], l, &c);
                if (slice < 0) continue;
                size_t o = at + slice * table;
                CHECK(o % 2 == 0 && (o % 8 == 0) == (!lambdas || (2 * L) % 8 == 0),
                      "residual lambdas %d, L %d: layer %d's table at %zu", lambdas, L, l, o);
            }
        }
    test_end();
}

// The smear (a part of the 2026 recipe), on each preset's components without its parts: its gate
// (1, 24) and lambda (1), tensors of the model after every other one, zero, Adam's vectors at 100
// times their rate, not decayed; the backout's lambda (1) alike, after them.
static void test_smear(void) {
    test_begin("param_table_smear");
    for (int p = 0; p < NUM_ARCHITECTURE_PRESETS; p++) {
        GPTConfig c = {.maxT = 40, .V = 97, .Vp = 128, .L = 3, .NH = 2, .C = 128,
                       .arch = architecture_base(&architecture_presets[p].arch)};
        c.arch.value_embeddings = 1;
        GPTConfig with = c;
        with.arch.smear = 1;
        const char* name = architecture_presets[p].name;
        size_t P = count_params(&c), sizes[NUM_PARAM_TENSORS];
        param_sizes(&with, sizes);
        CHECK(count_params(&with) == P + SMEAR_GATE_CHANNELS + 1 && sizes[PARAM_SMEAR_GATE] == SMEAR_GATE_CHANNELS &&
              sizes[PARAM_SMEAR_LAMBDA] == 1 && tensor_offset(&with, PARAM_SMEAR_GATE) == P &&
              tensor_offset(&with, PARAM_SMEAR_LAMBDA) == P + SMEAR_GATE_CHANNELS,
              "%s: %zu parameters with the smear, %zu without", name, count_params(&with), P);
        float* values = (float*)malloc(P * sizeof(float));
        float* with_values = (float*)malloc((P + SMEAR_GATE_CHANNELS + 1) * sizeof(float));
        init_param_values(values, &c, 5, INIT_SCHEME_DEFAULT);
        init_param_values(with_values, &with, 5, INIT_SCHEME_DEFAULT);
        int wrong = memcmp(values, with_values, P * sizeof(float)) != 0;
        for (size_t j = P; j < P + SMEAR_GATE_CHANNELS + 1; j++) wrong += with_values[j] != 0.0f;
        CHECK(wrong == 0, "%s: the smear changes the other draws or does not start at zero", name);
        free(values);
        free(with_values);
    }
    // The backout's share: one more, last, zero, with the smear's rate.
    GPTConfig c = {.maxT = 40, .V = 97, .Vp = 128, .L = 3, .NH = 2, .C = 128, .arch = ARCHITECTURE_MODERN};
    c.arch.smear = 1;
    GPTConfig with = c;
    with.arch.backout = 1;
    size_t P = count_params(&c);
    float* values = (float*)malloc((P + 1) * sizeof(float));
    init_param_values(values, &with, 5, INIT_SCHEME_DEFAULT);
    const ParamKind* b = &param_table[PARAM_BACKOUT_LAMBDA];
    CHECK(count_params(&with) == P + 1 && tensor_offset(&with, PARAM_BACKOUT_LAMBDA) == P && values[P] == 0.0f &&
          b->group == GROUP_VECTOR && b->lr_scale == 100.0f && b->decay_scale == 0.0f && !b->layers,
          "the backout's lambda: %zu parameters, %zu without, group %d lr x%g", count_params(&with), P, b->group,
          b->lr_scale);
    free(values);
    const ParamKind *g = &param_table[PARAM_SMEAR_GATE], *l = &param_table[PARAM_SMEAR_LAMBDA];
    CHECK(g->group == GROUP_VECTOR && l->group == GROUP_VECTOR && g->lr_scale == 100.0f && l->lr_scale == 100.0f &&
          g->decay_scale == 0.0f && l->decay_scale == 0.0f && !g->layers && !l->layers,
          "the smear's groups %d %d, lr x%g x%g", g->group, l->group, g->lr_scale, l->lr_scale);
    test_end();
}

// --help's listing: a line per kind after two of heading, whole within its bytes.
static void test_describe(void) {
    test_begin("param_table_describe");
    char text[PARAM_TABLE_TEXT];
    param_table_describe(text, sizeof(text));
    CHECK(strlen(text) < sizeof(text) - 1, "the listing fills its %zu bytes", sizeof(text));
    int lines = 0;
    for (const char* p = text; *p; p++) lines += *p == '\n';
    CHECK(lines == NUM_PARAM_TENSORS + 2, "%d lines", lines);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        char line[32];
        snprintf(line, sizeof(line), "\n  %s ", param_names[i]);
        CHECK(strstr(text, line), "no line for %s", param_names[i]);
    }
    CHECK(strstr(text, "(L, 3C, C)") && strstr(text, "(Vp, C)") && strstr(text, "normal 0.02/sqrt(2L)"),
          "the shapes or inits are not as the table says:\n%s", text);
    CHECK(strstr(text, "matrix, decay, --muon-qkv split (C, C), head-pairs (2HS, C)\n"), "qkvw's cuts are not listed:\n%s",
          text);
    test_end();
}

int main(void) {
    test_layout_and_init_fixed();
    test_rows_agree_with_the_list();
    test_layer_subset();
    test_muon_cuts();
    test_presence();
    test_residual_lambdas();
    test_nanochat_init();
    test_value_embeddings();
    test_value_embedding_alignment();
    test_smear();
    test_describe();
    return test_exit_code();
}
