// tests/mirrors/print_param_table.c: prints the parameter table (gpt/param_table.h) as JSON, for
// tests/mirrors/test_param_table.py to compare with scripts/gpt_parameters.py's:
//   {"kinds": [a row per kind: name, per_layer, rows, cols, init, std, residual, zero_init, group,
//              lr_scale, decay_scale, muon_rows (by --muon-qkv: the blocks Muon cuts a slice into)],
//    "models": [for each model: its shape and architecture, and per kind its size, offset, slice
//               size, Muon's matrix by --muon-qkv ([0, 0] outside the matrix group), ZeRO-1's unit
//               under Muon by --muon-qkv, and the slice each layer holds (per-layer kinds the
//               architecture has)]}
// A Dim is [times, "C"]; the models are the presets at d12 and every combination of the switches
// and parts that change the tensors (the residual lambdas, the value embeddings, the smear with the
// backout) at a small odd shape and at d6.
#include <stdio.h>

#include "gpt/param_table.h"

static const char* const dim_names[] = {"1", "C", "HS", "Vp", "maxT", "NH"};
static const char* const init_names[] = {"zero", "ones", "normal"};
static const char* const group_names[] = {"matrix", "embedding", "head", "vector"};

static void print_dim(Dim d) { printf("[%d, \"%s\"]", d.times, dim_names[d.of]); }

// {"fused": ..., "split": ..., "head-pairs": ...}: what print_cut prints of each cut.
static void print_by_qkv(void (*print_cut)(int qkv, const void* arg), const void* arg) {
    printf("{");
    for (int q = 0; q < NUM_MUON_QKV; q++) {
        printf("%s\"%s\": ", q ? ", " : "", muon_qkv_name(q));
        print_cut(q, arg);
    }
    printf("}");
}

static void print_muon_rows(int qkv, const void* kind) { print_dim(param_muon_rows((const ParamKind*)kind, qkv)); }

typedef struct {
    const ParamKind* k;
    const GPTConfig* c;
} KindOfModel;

static void print_muon_matrix(int qkv, const void* arg) {
    const KindOfModel* m = (const KindOfModel*)arg;
    int rows = 0, cols = 0;
    if (m->k->group == GROUP_MATRIX) param_muon_matrix(m->k, m->c, qkv, &rows, &cols);
    printf("[%d, %d]", rows, cols);
}

static void print_zero_unit(int qkv, const void* arg) {
    const KindOfModel* m = (const KindOfModel*)arg;
    printf("%zu", param_zero_unit(m->k, m->c, 1, qkv));
}

static void print_kind(int i) {
    const ParamKind* k = &param_table[i];
    printf("{\"name\": \"%s\", \"per_layer\": %s, \"rows\": ", param_names[i], k->layers ? "true" : "false");
    print_dim(k->rows);
    printf(", \"cols\": ");
    print_dim(k->cols);
    printf(", \"init\": \"%s\", \"std\": %.17g, \"residual\": %d, \"zero_init\": %d, \"group\": \"%s\", "
           "\"lr_scale\": %.9g, \"decay_scale\": %.9g, \"muon_rows\": ",
           init_names[k->init], k->std, k->residual, k->zero_init, group_names[k->group], k->lr_scale,
           k->decay_scale);
    print_by_qkv(print_muon_rows, k);
    printf("}");
}

static void print_model(const GPTConfig* c) {
    const Architecture* a = &c->arch;
    printf("{\"maxT\": %d, \"V\": %d, \"L\": %d, \"NH\": %d, \"C\": %d, \"arch\": {\"rotary\": %d, "
           "\"rotary_base\": %.9g, \"rms_norm\": %d, \"qk_norm\": %d, \"relu2\": %d, \"bias\": %d, "
           "\"untied_head\": %d, \"zero_init\": %d, \"softcap\": %.9g, \"residual_lambdas\": %d, "
           "\"value_embeddings\": %d, \"smear\": %d, \"backout\": %d}, \"tensors\": [",
           c->maxT, c->V, c->L, c->NH, c->C, a->rotary, a->rotary_base, a->rms_norm, a->qk_norm, a->relu2, a->bias,
           a->untied_head, a->zero_init, a->softcap, a->residual_lambdas, a->value_embeddings, a->smear, a->backout);
    size_t sizes[NUM_PARAM_TENSORS], offset = 0;
    param_sizes(c, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; offset += sizes[i++]) {
        const ParamKind* k = &param_table[i];
        KindOfModel m = {k, c};
        printf("%s\n  {\"name\": \"%s\", \"size\": %zu, \"offset\": %zu, \"slice_size\": %zu, \"muon\": ",
               i ? "," : "", param_names[i], sizes[i], offset, param_slice_size(k, c));
        print_by_qkv(print_muon_matrix, &m);
        printf(", \"zero_unit\": ");
        print_by_qkv(print_zero_unit, &m);
        printf(", \"layer_slices\": [");
        for (int l = 0; l < c->L && k->layers && sizes[i]; l++)
            printf("%s%d", l ? ", " : "", param_layer_slice(k, l, c));
        printf("]}");
    }
    printf("]}");
}

int main(void) {
    printf("{\"kinds\": [");
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        printf("%s\n ", i ? "," : "");
        print_kind(i);
    }
    printf("],\n\"models\": [");
    int n = 0;
    for (int p = 0; p < NUM_ARCHITECTURE_PRESETS; p++) {
        GPTConfig c = {.maxT = 1024, .V = 50257, .Vp = padded_vocab(50257), .L = 12, .NH = 12, .C = 768,
                       .arch = architecture_presets[p].arch};
        printf("%s\n", n++ ? "," : "");
        print_model(&c);
    }
    for (int shape = 0; shape < 2; shape++)
        for (int k = 0; k < 256; k++) {
            GPTConfig c = shape ? (GPTConfig){.maxT = 256, .V = 8192, .Vp = 8192, .L = 6, .NH = 6, .C = 384,
                                              .arch = ARCHITECTURE_MODERN}
                                : (GPTConfig){.maxT = 50, .V = 300, .Vp = padded_vocab(300), .L = 3, .NH = 4, .C = 64,
                                              .arch = ARCHITECTURE_GPT2};
            c.arch.rotary = k & 1;
            c.arch.rms_norm = (k >> 1) & 1;
            c.arch.bias = (k >> 2) & 1;
            c.arch.untied_head = (k >> 3) & 1;
            c.arch.zero_init = (k >> 4) & 1;
            c.arch.residual_lambdas = (k >> 5) & 1;
            c.arch.value_embeddings = (k >> 6) & 1;
            c.arch.smear = c.arch.backout = (k >> 7) & 1;
            printf(",\n");
            print_model(&c);
        }
    printf("]}\n");
    return 0;
}
