// gpt/param_table.c: the parameter table's rows, and what is computed from them: sizes, slices,
// Muon's matrices, ZeRO-1's units, the initial values and --help's listing (gpt/param_table.h).
#include "gpt/param_table.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include "distributed/zero_shard.h"

#define PARAM_NAME_ITEM(NAME, field) #field,
const char* const param_names[NUM_PARAM_TENSORS] = {PARAM_TENSORS(PARAM_NAME_ITEM, PARAM_NAME_ITEM)};
const ParamTensor layer_param_tensors[NUM_LAYER_PARAMS] = {PARAM_TENSORS(PARAM_NO_ITEM, PARAM_ENUM_ITEM)};

// The layers that hold a slice of a per-layer kind: every one.
static int every_layer(int l, int L) { return l; }

// Which architectures have a kind (gpt/config.h).
static int learned_positions(const Architecture* a) { return !a->rotary; }
static int layernorm(const Architecture* a) { return !a->rms_norm; }   // RMSNorm has no weights
static int biases(const Architecture* a) { return a->bias; }
static int untied_head(const Architecture* a) { return a->untied_head; }
static int residual_lambdas(const Architecture* a) { return a->residual_lambdas; }
static int value_embeddings(const Architecture* a) { return a->value_embeddings; }
static int smear(const Architecture* a) { return a->smear; }
static int backout(const Architecture* a) { return a->backout; }

// The layers with value embeddings (gpt/config.h's value_embedding_layer: every other one, the
// last among them) take the slices 0, 1, ... in order: layer l's is l / 2.
static int value_embedding_layers(int l, int L) { return value_embedding_layer(l, L) ? l / 2 : -1; }

// GPT-2's sixteen tensors in llm.c's order, then the untied head, then the tensors of the 2026
// recipe's parts, each after every tensor before it so that a model without the part keeps its
// layout and its draws: the residual lambdas, the value embeddings and their gates, the smear's
// gate and scale, the backout's share. Weights N(0, 0.02), the projections into the residual stream
// N(0, 0.02 / sqrt(2L)); the matrices, embeddings and head decayed; Muon takes each layer's matrix
// whole, qkvw also as q, k and v or as their head pairs. The lambdas are Adam's, with the vectors,
// at nanochat's rates where the vectors' is the modern recipe's 0.002 (Muon's --vector-lr, AdamW's
// --lr 2e-3): 0.005 for resid_lambda, which scales the whole stream and compounds over the layers,
// 100 times that, 0.5, for x0_lambda, which only adds a share of x0. The value embeddings start as
// the value weights do (nanochat's: the values' own scale, here N(0, 0.02)) and are Adam's
// embeddings at half their rate (nanochat's), decayed as wte is; their gates, a (NH, 12) matrix of
// each such layer, start at zero (a gate of 3 sigmoid(0) = 1.5, where nanochat's uniform(0, 0.02)
// starts within 1% of it) and are Adam's vectors, not decayed, as flashgpt's other small learned
// tensors are (nanochat leaves them to Muon with the blocks). The smear's gate and scale start at
// zero (a smear of nothing; nanochat's gate starts uniform(0, 0.02)) and are Adam's vectors at
// nanochat's rate, 0.2, 100 times the vectors'; so is the backout's share, which starts at zero (no
// backout; nanochat's at 0.2).
const ParamKind param_table[NUM_PARAM_TENSORS] = {
    [PARAM_WTE] = {.rows = {1, DIM_VP}, .cols = {1, DIM_C},
                   .init = INIT_NORMAL, .std = 0.02,
                   .group = GROUP_EMBEDDING, .lr_scale = 1, .decay_scale = 1},
    [PARAM_WPE] = {.rows = {1, DIM_MAXT}, .cols = {1, DIM_C}, .present = learned_positions,
                   .init = INIT_NORMAL, .std = 0.02,
                   .group = GROUP_EMBEDDING, .lr_scale = 1, .decay_scale = 1},
    [PARAM_LN1W] = {.rows = {1, DIM_C}, .cols = {1, DIM_ONE}, .layers = every_layer, .present = layernorm,
                    .init = INIT_ONES,
                    .group = GROUP_VECTOR, .lr_scale = 1},
    [PARAM_LN1B] = {.rows = {1, DIM_C}, .cols = {1, DIM_ONE}, .layers = every_layer, .present = layernorm,
                    .init = INIT_ZERO,
                    .group = GROUP_VECTOR, .lr_scale = 1},
    [PARAM_QKVW] = {.rows = {3, DIM_C}, .cols = {1, DIM_C}, .layers = every_layer,
                    .init = INIT_NORMAL, .std = 0.02,
                    .group = GROUP_MATRIX, .lr_scale = 1, .decay_scale = 1, .muon_rows = {3, DIM_C},
                    .muon_rows_by_qkv = {[MUON_QKV_SPLIT] = {1, DIM_C}, [MUON_QKV_HEAD_PAIRS] = {2, DIM_HS}}},
    [PARAM_QKVB] = {.rows = {3, DIM_C}, .cols = {1, DIM_ONE}, .layers = every_layer, .present = biases,
                    .init = INIT_ZERO,
                    .group = GROUP_VECTOR, .lr_scale = 1},
    [PARAM_ATTPROJW] = {.rows = {1, DIM_C}, .cols = {1, DIM_C}, .layers = every_layer,
                        .init = INIT_NORMAL, .std = 0.02, .residual = 1, .zero_init = 1,
                        .group = GROUP_MATRIX, .lr_scale = 1, .decay_scale = 1, .muon_rows = {1, DIM_C}},
    [PARAM_ATTPROJB] = {.rows = {1, DIM_C}, .cols = {1, DIM_ONE}, .layers = every_layer, .present = biases,
                        .init = INIT_ZERO,
                        .group = GROUP_VECTOR, .lr_scale = 1},
    [PARAM_LN2W] = {.rows = {1, DIM_C}, .cols = {1, DIM_ONE}, .layers = every_layer, .present = layernorm,
                    .init = INIT_ONES,
                    .group = GROUP_VECTOR, .lr_scale = 1},
    [PARAM_LN2B] = {.rows = {1, DIM_C}, .cols = {1, DIM_ONE}, .layers = every_layer, .present = layernorm,
                    .init = INIT_ZERO,
                    .group = GROUP_VECTOR, .lr_scale = 1},
    [PARAM_FCW] = {.rows = {4, DIM_C}, .cols = {1, DIM_C}, .layers = every_layer,
                   .init = INIT_NORMAL, .std = 0.02,
                   .group = GROUP_MATRIX, .lr_scale = 1, .decay_scale = 1, .muon_rows = {4, DIM_C}},
    [PARAM_FCB] = {.rows = {4, DIM_C}, .cols = {1, DIM_ONE}, .layers = every_layer, .present = biases,
                   .init = INIT_ZERO,
                   .group = GROUP_VECTOR, .lr_scale = 1},
    [PARAM_FCPROJW] = {.rows = {1, DIM_C}, .cols = {4, DIM_C}, .layers = every_layer,
                       .init = INIT_NORMAL, .std = 0.02, .residual = 1, .zero_init = 1,
                       .group = GROUP_MATRIX, .lr_scale = 1, .decay_scale = 1, .muon_rows = {1, DIM_C}},
    [PARAM_FCPROJB] = {.rows = {1, DIM_C}, .cols = {1, DIM_ONE}, .layers = every_layer, .present = biases,
                       .init = INIT_ZERO,
                       .group = GROUP_VECTOR, .lr_scale = 1},
    [PARAM_LNFW] = {.rows = {1, DIM_C}, .cols = {1, DIM_ONE}, .present = layernorm,
                    .init = INIT_ONES,
                    .group = GROUP_VECTOR, .lr_scale = 1},
    [PARAM_LNFB] = {.rows = {1, DIM_C}, .cols = {1, DIM_ONE}, .present = layernorm,
                    .init = INIT_ZERO,
                    .group = GROUP_VECTOR, .lr_scale = 1},
    [PARAM_LM_HEAD] = {.rows = {1, DIM_VP}, .cols = {1, DIM_C}, .present = untied_head,
                       .init = INIT_NORMAL, .std = 0.02, .zero_init = 1,
                       .group = GROUP_HEAD, .lr_scale = 1, .decay_scale = 1},
    [PARAM_RESID_LAMBDA] = {.rows = {1, DIM_ONE}, .cols = {1, DIM_ONE}, .layers = every_layer,
                            .present = residual_lambdas, .init = INIT_ONES,
                            .group = GROUP_VECTOR, .lr_scale = 2.5f},
    [PARAM_X0_LAMBDA] = {.rows = {1, DIM_ONE}, .cols = {1, DIM_ONE}, .layers = every_layer,
                         .present = residual_lambdas, .init = INIT_ZERO,
                         .group = GROUP_VECTOR, .lr_scale = 250.0f},
    [PARAM_VALUE_EMBEDDING] = {.rows = {1, DIM_VP}, .cols = {1, DIM_C}, .layers = value_embedding_layers,
                               .present = value_embeddings, .init = INIT_NORMAL, .std = 0.02,
                               .group = GROUP_EMBEDDING, .lr_scale = 0.5f, .decay_scale = 1},
    [PARAM_VALUE_GATE] = {.rows = {1, DIM_NH}, .cols = {VALUE_GATE_CHANNELS, DIM_ONE},
                          .layers = value_embedding_layers, .present = value_embeddings, .init = INIT_ZERO,
                          .group = GROUP_VECTOR, .lr_scale = 1},
    [PARAM_SMEAR_GATE] = {.rows = {1, DIM_ONE}, .cols = {SMEAR_GATE_CHANNELS, DIM_ONE}, .present = smear,
                          .init = INIT_ZERO, .group = GROUP_VECTOR, .lr_scale = 100.0f},
    [PARAM_SMEAR_LAMBDA] = {.rows = {1, DIM_ONE}, .cols = {1, DIM_ONE}, .present = smear, .init = INIT_ZERO,
                            .group = GROUP_VECTOR, .lr_scale = 100.0f},
    [PARAM_BACKOUT_LAMBDA] = {.rows = {1, DIM_ONE}, .cols = {1, DIM_ONE}, .present = backout, .init = INIT_ZERO,
                              .group = GROUP_VECTOR, .lr_scale = 100.0f},
};

size_t param_dim(Dim d, const GPTConfig* c) {
    size_t of = 1;
    switch (d.of) {
    case DIM_ONE: of = 1; break;
    case DIM_C: of = (size_t)c->C; break;
    case DIM_HS: of = (size_t)(c->C / c->NH); break;
    case DIM_VP: of = (size_t)c->Vp; break;
    case DIM_MAXT: of = (size_t)c->maxT; break;
    case DIM_NH: of = (size_t)c->NH; break;
    }
    return (size_t)d.times * of;
}

static int present(const ParamKind* k, const Architecture* a) { return !k->present || k->present(a); }

int param_layer_slice(const ParamKind* k, int l, const GPTConfig* c) {
    return k->layers && present(k, &c->arch) ? k->layers(l, c->L) : -1;
}

int param_slices(const ParamKind* k, const GPTConfig* c) {
    if (!present(k, &c->arch)) return 0;
    if (!k->layers) return 1;
    int n = 0;
    for (int l = 0; l < c->L; l++) n += k->layers(l, c->L) >= 0;
    return n;
}

size_t param_slice_size(const ParamKind* k, const GPTConfig* c) {
    return present(k, &c->arch) ? param_dim(k->rows, c) * param_dim(k->cols, c) : 0;
}

Dim param_muon_rows(const ParamKind* k, int qkv) {
    return k->muon_rows_by_qkv[qkv].times ? k->muon_rows_by_qkv[qkv] : k->muon_rows;
}

void param_muon_matrix(const ParamKind* k, const GPTConfig* c, int qkv, int* rows, int* cols) {
    *rows = (int)param_dim(param_muon_rows(k, qkv), c);
    *cols = (int)param_dim(k->cols, c);
}

size_t param_zero_unit(const ParamKind* k, const GPTConfig* c, int muon, int qkv) {
    if (!muon || k->group != GROUP_MATRIX) return ZERO_SHARD_ALIGN;
    int rows, cols;
    param_muon_matrix(k, c, qkv, &rows, &cols);
    return (size_t)rows * cols;
}

const char* muon_qkv_unfit(int qkv, const GPTConfig* c) {
    return qkv == MUON_QKV_HEAD_PAIRS && c->NH % 2 ? "--muon-qkv head-pairs: the model's heads are an odd count, "
                                                     "which does not pair"
                                                   : NULL;
}

const char* muon_qkv_name(int qkv) {
    static const char* const names[NUM_MUON_QKV] = {"fused", "split", "head-pairs"};
    return qkv >= 0 && qkv < NUM_MUON_QKV ? names[qkv] : "?";
}

void param_sizes(const GPTConfig* c, size_t sizes[NUM_PARAM_TENSORS]) {
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        sizes[i] = (size_t)param_slices(&param_table[i], c) * param_slice_size(&param_table[i], c);
}

size_t count_params(const GPTConfig* c) {
    size_t sizes[NUM_PARAM_TENSORS], n = 0;
    param_sizes(c, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) n += sizes[i];
    return n;
}

// The elements of a slice of kind k that an init draws, the first of the slice: all of them but a
// vocabulary table's rows past V, which are padding (zero, and no draw).
static size_t drawn_per_slice(const ParamKind* k, const GPTConfig* c) {
    return k->rows.of == DIM_VP ? (size_t)k->rows.times * c->V * param_dim(k->cols, c) : param_slice_size(k, c);
}

void init_param_tensor(const ParamKind* k, const GPTConfig* c, float* values, Rng* rng) {
    size_t slice = param_slice_size(k, c), n = (size_t)param_slices(k, c) * slice;
    if (k->init == INIT_ONES) {
        for (size_t j = 0; j < n; j++) values[j] = 1.0f;
    } else if (k->init == INIT_ZERO || (k->zero_init && c->arch.zero_init)) {
        memset(values, 0, n * sizeof(float));
    } else {
        double std = k->residual ? k->std / sqrt(2.0 * c->L) : k->std;
        size_t real = drawn_per_slice(k, c);
        for (float* s = values; s < values + n; s += slice) {
            for (size_t j = 0; j < real; j++) s[j] = (float)(std * rng_normal(rng));
            for (size_t j = real; j < slice; j++) s[j] = 0.0f;
        }
    }
}

// x rounded to the nearest bf16 value, ties to even, as the GPU's conversion does (x finite).
static float round_to_bf16(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof(bits));
    bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
    memcpy(&x, &bits, sizeof(x));
    return x;
}

// nanochat's init of the tensors where it is not the row's own (InitScheme): kind INIT_NORMAL
// with std, UNIFORM with the standard deviation std / sqrt(cols) (bound sqrt(3) times it), ZERO,
// or LAYERS from first at layer 0 linearly to last at layer L - 1. kind 0: the row's own.
enum { NANOCHAT_OWN, NANOCHAT_NORMAL, NANOCHAT_UNIFORM, NANOCHAT_ZERO, NANOCHAT_LAYERS };
typedef struct {
    int kind;
    double std, first, last;
} NanochatInit;
static const NanochatInit nanochat_init[NUM_PARAM_TENSORS] = {
    [PARAM_WTE] = {NANOCHAT_NORMAL, 0.8},
    [PARAM_QKVW] = {NANOCHAT_UNIFORM, 1.0},
    [PARAM_ATTPROJW] = {NANOCHAT_ZERO},
    [PARAM_FCW] = {NANOCHAT_UNIFORM, 0.4},
    [PARAM_FCPROJW] = {NANOCHAT_ZERO},
    [PARAM_LM_HEAD] = {NANOCHAT_NORMAL, 0.001},
    [PARAM_RESID_LAMBDA] = {NANOCHAT_LAYERS, 0.0, 1.15, 1.05},
    [PARAM_X0_LAMBDA] = {NANOCHAT_LAYERS, 0.0, 0.20, 0.05},
};

// Tensor k (index i)'s values under nanochat's init, its draws from rng (a vocabulary table's
// rows past V zero and not drawn, as init_param_tensor's).
static void init_nanochat_tensor(int i, const GPTConfig* c, float* values, Rng* rng) {
    const ParamKind* k = &param_table[i];
    const NanochatInit* x = &nanochat_init[i];
    size_t slice = param_slice_size(k, c), n = (size_t)param_slices(k, c) * slice;
    if (x->kind == NANOCHAT_ZERO) {
        memset(values, 0, n * sizeof(float));
        return;
    }
    if (x->kind == NANOCHAT_LAYERS) {
        for (int l = 0; l < c->L; l++) {
            int at = param_layer_slice(k, l, c);
            double share = c->L > 1 ? (double)l / (c->L - 1) : 0.0;
            for (size_t j = 0; at >= 0 && j < slice; j++)
                values[(size_t)at * slice + j] = (float)(x->first + (x->last - x->first) * share);
        }
        return;
    }
    double bound = sqrt(3.0) * x->std / sqrt((double)param_dim(k->cols, c));
    size_t real = drawn_per_slice(k, c);
    for (float* s = values; s < values + n; s += slice) {
        for (size_t j = 0; j < real; j++)
            s[j] = (float)(x->kind == NANOCHAT_NORMAL ? x->std * rng_normal(rng) : bound * (2.0 * rng_uniform(rng) - 1.0));
        for (size_t j = real; j < slice; j++) s[j] = 0.0f;
    }
}

void init_param_values(float* values, const GPTConfig* c, uint64_t seed, int scheme) {
    size_t sizes[NUM_PARAM_TENSORS];
    param_sizes(c, sizes);
    Rng rng = {seed};
    float* p = values;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        if (scheme == INIT_SCHEME_NANOCHAT && nanochat_init[i].kind != NANOCHAT_OWN) init_nanochat_tensor(i, c, p, &rng);
        else init_param_tensor(&param_table[i], c, p, &rng);
        p += sizes[i];
    }
    for (float* v = values; v < p; v++) *v = round_to_bf16(*v);
}

const char* init_scheme_name(int scheme) {
    static const char* const names[NUM_INIT_SCHEMES] = {"default", "nanochat"};
    return scheme >= 0 && scheme < NUM_INIT_SCHEMES ? names[scheme] : "?";
}

// d as text: "C", "3C", "2HS", "1".
static void dim_text(Dim d, char* out, size_t len) {
    static const char* const names[] = {"", "C", "HS", "Vp", "maxT", "NH"};
    if (d.of == DIM_ONE) snprintf(out, len, "%d", d.times);
    else if (d.times == 1) snprintf(out, len, "%s", names[d.of]);
    else snprintf(out, len, "%d%s", d.times, names[d.of]);
}

void param_table_describe(char* out, size_t len) {
    static const char* const groups[] = {"matrix", "embedding", "head", "vector"};
    size_t n = (size_t)snprintf(out, len, "the model's tensors (gpt/param_table.c), in checkpoint order:\n"
                                          "  %-15s %-11s %-35s %-16s %s\n", "tensor", "shape", "init",
                                "presets", "group");
    for (int i = 0; i < NUM_PARAM_TENSORS && n < len; i++) {
        const ParamKind* k = &param_table[i];
        char rows[16], cols[16], shape[48], init[64], group[96], in[64] = "";
        dim_text(k->rows, rows, sizeof(rows));
        dim_text(k->cols, cols, sizeof(cols));
        int vector = k->cols.of == DIM_ONE && k->cols.times == 1;
        snprintf(shape, sizeof(shape), "(%s%s%s%s)", k->layers ? "L, " : "", rows, vector ? "" : ", ",
                 vector ? "" : cols);
        if (k->init == INIT_NORMAL)
            snprintf(init, sizeof(init), "normal %g%s%s", k->std, k->residual ? "/sqrt(2L)" : "",
                     k->zero_init ? "; zero init: 0" : "");
        else snprintf(init, sizeof(init), "%s", k->init == INIT_ONES ? "ones" : "zero");
        size_t g = (size_t)snprintf(group, sizeof(group), "%s", groups[k->group]);
        if (k->lr_scale != 1.0f) g += (size_t)snprintf(group + g, sizeof(group) - g, " lr x%g", k->lr_scale);
        if (k->decay_scale != 0.0f) g += (size_t)snprintf(group + g, sizeof(group) - g, ", decay");
        if (k->decay_scale != 0.0f && k->decay_scale != 1.0f)
            g += (size_t)snprintf(group + g, sizeof(group) - g, " x%g", k->decay_scale);
        if (k->group == GROUP_MATRIX && (k->muon_rows.times != k->rows.times || k->muon_rows.of != k->rows.of)) {
            dim_text(k->muon_rows, rows, sizeof(rows));
            g += (size_t)snprintf(group + g, sizeof(group) - g, ", Muon by (%s, %s)", rows, cols);
        }
        for (int q = 0, first = 1; q < NUM_MUON_QKV && g < sizeof(group); q++)
            if (k->muon_rows_by_qkv[q].times) {
                dim_text(k->muon_rows_by_qkv[q], rows, sizeof(rows));
                g += (size_t)snprintf(group + g, sizeof(group) - g, "%s %s (%s, %s)", first ? ", --muon-qkv" : ",",
                                      muon_qkv_name(q), rows, cols);
                first = 0;
            }
        for (int p = 0; p < NUM_ARCHITECTURE_PRESETS; p++) {
            size_t used = strlen(in);
            if (present(k, &architecture_presets[p].arch))
                snprintf(in + used, sizeof(in) - used, "%s%s", used ? " " : "", architecture_presets[p].name);
        }
        n += (size_t)snprintf(out + n, len - n, "  %-15s %-11s %-35s %-16s %s\n", param_names[i], shape, init, in,
                              group);
    }
}
