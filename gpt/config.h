// gpt/config.h: a GPT model's shape and architecture, and their named presets.
// Shapes throughout the model use these letters: L layers, C channels, NH heads, HS = C / NH
// head size, V vocabulary, Vp = V padded up to a multiple of 128 (for the matmuls; the padded
// logits never count in the loss), maxT the context length; B batch, T sequence length <= maxT,
// N = B * T rows.
// The architecture is GPT-2's of 2019 or the modern small-GPT recipe (rotary positions, RMSNorm,
// QK-norm, ReLU^2, no biases, an untied head, zero-initialised projections, soft-capped logits),
// each component switchable on its own for ablations; either may narrow what attention sees to a
// key window per row (attention/mask.h): the row's document, a sliding window per layer, or both;
// and either may take the parts of the 2026 recipe (nanochat, modded-nanogpt), each off in both:
// an RMSNorm of the embedding, a QK scale, the residual and x0 lambdas, value embeddings, the
// smear, the backout. The third preset, 2026, is the modern recipe with every part and
// nanochat's key windows, which follow the context; each preset also holds the training defaults
// that go with it (PresetDefaults).
#ifndef FLASHGPT_GPT_CONFIG_H
#define FLASHGPT_GPT_CONFIG_H

#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

// The most windows a pattern holds (a window for each layer of the largest preset, d48, fits).
#define ARCHITECTURE_MAX_WINDOWS 64

// What the model computes besides its sizes. Every member is 4-byte slots, in this order: the
// model checkpoint stores them one slot each (gpt/checkpoint.h), the floats by their bits. Each
// scalar member is a row of architecture_fields too, which the functions that compare, check,
// rank and describe architectures read.
typedef struct {
    int rotary;          // 1: rotary position embeddings on q and k ("rotate half", layers/rotary.h)
                         // and no wpe; 0: the learned positions wpe
    float rotary_base;   // rotary's base: frequencies base^(-2i / HS)
    int rms_norm;        // 1: RMSNorm without weights (eps 1e-6) for ln1, ln2 and lnf; 0: LayerNorm
                         // with weight and bias (eps 1e-5)
    int qk_norm;         // 1: RMSNorm over HS of each head's q and k, before rotary
    int relu2;           // 1: the MLP's activation is relu(x)^2; 0: GELU (tanh form)
    int bias;            // 1: biases in the four linear layers (qkvb, attprojb, fcb, fcprojb)
    int untied_head;     // 1: an output head lm_head (Vp, C) of its own; 0: wte is the head
    int zero_init;       // 1: attprojw, fcprojw (and lm_head) start at zero
    float softcap;       // > 0: logits z become softcap * tanh(z / softcap) (loss and draw); 0: none
    // The key window of each row (attention/mask.h): row t sees the keys [lo(t), t], lo(t) the
    // later of its document's start and t - W + 1 for its layer's window W.
    int documents;       // 1: a row sees its own document alone; documents start at document_token
    int document_token;  // the token that starts a document (the tokenizer's <|endoftext|>); 0 without
    int window_count;    // the windows' pattern: layer l takes windows[l % window_count]; 0: none
    int windows[ARCHITECTURE_MAX_WINDOWS];   // keys a row sees at most, its own included; 0: no
                                             // bound (the document's, or causal); 0 past the pattern
    // The parts of the 2026 recipe, from slot ARCHITECTURE_PARTS_SLOT on: 0 (none) in every slot
    // of a model without them, which the checkpoint versions before them hold (gpt/checkpoint.h).
    int embedding_norm;  // 1: the stem's output normed, x = RMSNorm(wte[token] (+ wpe[t])), without
                         // weights (eps 1e-6) whatever the blocks' norm (nanochat's)
    float qk_scale;      // > 0: each head's q and k times qk_scale after QK-norm (which it needs), so
                         // that the attention's logits are qk_scale^2 times those of the scale
                         // 1/sqrt(HS): nanochat's 1.2 (modded-nanogpt's attention scale 0.12 at HS 128
                         // is 1.165). Applied as attention's scale (architecture_attention_scale), so
                         // q and k are stored, and the KV cache holds the keys, as QK-norm and rotary
                         // leave them. 0: none
    int residual_lambdas;   // 1: before each block l, x = resid_lambda[l] x + x0_lambda[l] x0 (x0 the
                            // stem's output), learned scalars starting at 1 and 0 (modded-nanogpt's,
                            // nanochat's): tensors of the parameter table
    int value_embeddings;   // 1: on the layers architecture_value_embedding_layer names, the values
                            // take a token embedding of the layer's own, v += gate * value_embedding
                            // [token], the gate learned per head from the attention's input
                            // (nanochat's, after ResFormer's value residual): tensors of the table
    int smear;              // 1: the stem's last operation mixes each token's embedding with the one
                            // before it in its row, x_t += smear_lambda sigmoid(x_t[:24] . smear_gate)
                            // x_{t-1} (nanochat's): tensors of the table
    int backout;            // 1: before the final norm, x = x - backout_lambda x_mid, x_mid the stream
                            // leaving block architecture_backout_layer (nanochat's): a learned scalar
                            // of the table
} Architecture;
#define ARCHITECTURE_PARTS_SLOT (12 + ARCHITECTURE_MAX_WINDOWS)
#define ARCHITECTURE_SLOTS (ARCHITECTURE_PARTS_SLOT + 6)
static_assert(sizeof(Architecture) == ARCHITECTURE_SLOTS * sizeof(int32_t), "a 4-byte slot per value");
static_assert(offsetof(Architecture, embedding_norm) == ARCHITECTURE_PARTS_SLOT * sizeof(int32_t),
              "the parts follow the windows");

// Rotary's base in every preset, and the value a model without rotary holds
// (gpt_config_drop_without_effect).
#define ARCHITECTURE_ROTARY_BASE 10000.0f

// NULL when base may be rotary's base, else the rule it breaks: the frequencies base^(-2i / HS)
// must fall with i. train_gpt's --rotary-base and the checkpoint header are checked by it alike.
static inline const char* rotary_base_invalid(float base) {
    return base > 1.0f && isfinite(base) ? NULL : "the rotary base must be a finite number above 1";
}

// NULL when cap may be the logits' soft cap, else the rule it breaks. A cap c keeps every logit
// within (-c, c), so no token can be more than e^(2c) times as likely as another: below 1 (e^2,
// about 7) it no longer bounds the outliers but flattens every distribution the model could
// draw, so that it cannot learn (the modern recipe caps at 30, the speedruns at 15 to 30).
static inline const char* softcap_invalid(float cap) {
    return cap == 0.0f || (cap >= 1.0f && isfinite(cap)) ? NULL
                                                          : "the softcap must be 0 (none) or a finite number of at least 1";
}

// NULL when s may be the QK scale, else the rule it breaks. It makes the logits of normed q and k
// s^2 times the plain scale's: from 1/8 to 8 (1/64 to 64 times) holds every scale the anchors
// use (nanochat's 1.2, modded-nanogpt's 1.165) many times over; past it a normed head's attention
// starts uniform or as a hard argmax, from which it learns nothing.
static inline const char* qk_scale_invalid(float s) {
    return s == 0.0f || (s >= 0.125f && s <= 8.0f) ? NULL : "the QK scale must be 0 (none) or a number from 0.125 to 8";
}

// How a field holds its value: a switch (0 or 1), another integer (the document token, the window
// count) or a float.
typedef enum { ARCHITECTURE_SWITCH, ARCHITECTURE_INTEGER, ARCHITECTURE_FLOAT } ArchitectureValue;

// A scalar field of Architecture, as the functions below compare, check, rank and describe it.
typedef struct {
    size_t offset;                    // offsetof(Architecture, field)
    ArchitectureValue value;
    const char* (*invalid)(float);    // a float's rule: NULL when it may hold the value, else why not
    int component;                    // 1: a component or a part, counted by architecture_nearest_preset:
                                      // a switch by its value, a float as on (above 0) or off
    const char* on;                   // its words in a description where on (a float's followed by its
                                      // value: "softcap 30"); NULL: none
    const char* off;                  // its words where off; NULL: it is said where on alone (a part)
} ArchitectureField;

// Every scalar field of Architecture, in its order (the windows, an array, are compared and
// described on their own): a new part is its field, its row here and ARCHITECTURE_SLOTS one
// larger. gpt2's and modern's components are said on or off, the parts where on. Rotary is said
// with its base, two fields in one phrase, and the documents with their token after the parts, so
// architecture_describe words those itself and their rows hold no words.
static const ArchitectureField architecture_fields[] = {
    {offsetof(Architecture, rotary),           ARCHITECTURE_SWITCH,  NULL, 1, NULL, NULL},
    {offsetof(Architecture, rotary_base),      ARCHITECTURE_FLOAT,   rotary_base_invalid, 0, NULL, NULL},
    {offsetof(Architecture, rms_norm),         ARCHITECTURE_SWITCH,  NULL, 1, "rms norm", "layernorm"},
    {offsetof(Architecture, qk_norm),          ARCHITECTURE_SWITCH,  NULL, 1, "qk-norm", "no qk-norm"},
    {offsetof(Architecture, relu2),            ARCHITECTURE_SWITCH,  NULL, 1, "relu2", "gelu"},
    {offsetof(Architecture, bias),             ARCHITECTURE_SWITCH,  NULL, 1, "bias", "no bias"},
    {offsetof(Architecture, untied_head),      ARCHITECTURE_SWITCH,  NULL, 1, "untied head", "tied head"},
    {offsetof(Architecture, zero_init),        ARCHITECTURE_SWITCH,  NULL, 1, "zero init", "no zero init"},
    {offsetof(Architecture, softcap),          ARCHITECTURE_FLOAT,   softcap_invalid, 1, "softcap", "no softcap"},
    {offsetof(Architecture, documents),        ARCHITECTURE_SWITCH,  NULL, 0, NULL, NULL},
    {offsetof(Architecture, document_token),   ARCHITECTURE_INTEGER, NULL, 0, NULL, NULL},
    {offsetof(Architecture, window_count),     ARCHITECTURE_INTEGER, NULL, 0, NULL, NULL},
    {offsetof(Architecture, embedding_norm),   ARCHITECTURE_SWITCH,  NULL, 1, "embedding norm", NULL},
    {offsetof(Architecture, qk_scale),         ARCHITECTURE_FLOAT,   qk_scale_invalid, 1, "qk scale", NULL},
    {offsetof(Architecture, residual_lambdas), ARCHITECTURE_SWITCH,  NULL, 1, "residual lambdas", NULL},
    {offsetof(Architecture, value_embeddings), ARCHITECTURE_SWITCH,  NULL, 1, "value embeddings", NULL},
    {offsetof(Architecture, smear),            ARCHITECTURE_SWITCH,  NULL, 1, "smear", NULL},
    {offsetof(Architecture, backout),          ARCHITECTURE_SWITCH,  NULL, 1, "backout", NULL},
};
#define NUM_ARCHITECTURE_FIELDS ((int)(sizeof(architecture_fields) / sizeof(architecture_fields[0])))
static_assert(sizeof(architecture_fields) / sizeof(architecture_fields[0]) ==
                  ARCHITECTURE_SLOTS - ARCHITECTURE_MAX_WINDOWS,
              "a row for each slot but the windows'");

// Field f of a, as its row says it holds it.
static inline int architecture_field_int(const Architecture* a, const ArchitectureField* f) {
    return *(const int*)((const char*)a + f->offset);
}
static inline float architecture_field_float(const Architecture* a, const ArchitectureField* f) {
    return *(const float*)((const char*)a + f->offset);
}

// 1 when field f of a is on: a switch or an integer not 0, a float above 0.
static inline int architecture_field_on(const Architecture* a, const ArchitectureField* f) {
    return f->value == ARCHITECTURE_FLOAT ? architecture_field_float(a, f) > 0.0f : architecture_field_int(a, f) != 0;
}

// The architectures of gpt2 and modern, as initialisers (modern's components apart too, which
// 2026's row starts from).
#define ARCHITECTURE_GPT2                                                                                          \
    {.rotary = 0, .rotary_base = ARCHITECTURE_ROTARY_BASE, .rms_norm = 0, .qk_norm = 0, .relu2 = 0, .bias = 1,      \
     .untied_head = 0, .zero_init = 0, .softcap = 0.0f}
#define ARCHITECTURE_MODERN_COMPONENTS                                                                             \
    .rotary = 1, .rotary_base = ARCHITECTURE_ROTARY_BASE, .rms_norm = 1, .qk_norm = 1, .relu2 = 1, .bias = 0,       \
    .untied_head = 1, .zero_init = 1, .softcap = 30.0f
#define ARCHITECTURE_MODERN {ARCHITECTURE_MODERN_COMPONENTS}

// How Muon cuts the attention's fused q, k, v weight (train_gpt --muon-qkv): as one (3C, C)
// matrix (the default), as q, k and v, three (C, C), or as each of their pairs of heads, (2HS, C),
// as modded-nanogpt cuts its q and k. Each matrix is orthogonalised on its own, so that split the
// gradient of one (v's, larger) does not set the size of the others' updates (gpt/param_table.h's
// cuts).
typedef enum { MUON_QKV_FUSED, MUON_QKV_SPLIT, MUON_QKV_HEAD_PAIRS, NUM_MUON_QKV } MuonQkv;

// What a preset sets besides the architecture: the defaults of a run trained as it (train_gpt's
// --arch, else the preset nearest its architecture), each taken where the run does not give its
// option (train/plan.cu; gpt/optimizer.h's preset_optimizer_defaults). A field of 0 leaves the
// optimizer's or the schedule's own default (gpt/optimizer.h's optimizer_defaults, gpt/schedule.h),
// so GPT-2's are all 0; the optimizer's own settings apply under that optimizer alone.
typedef struct {
    int muon;                    // 1: --optimizer muon; 0: adamw
    float adamw_lr;              // AdamW's --lr
    float embedding_lr;          // Muon's --embedding-lr
    float weight_decay;          // --weight-decay, either optimizer's
    MuonQkv muon_qkv;            // Muon's --muon-qkv
    int normuon;                 // 1: Muon's --normuon
    int wsd;                     // 1: --lr-schedule wsd; 0: cosine
    float warmdown_frac;         // wsd's --warmdown-frac
    float min_lr_frac;           // --min-lr-frac
    int momentum_warmup_steps;   // Muon's --momentum-warmup-steps
    float momentum_start;        // and its --momentum-start
} PresetDefaults;

typedef struct {
    const char* name;
    Architecture arch;       // its components and parts; no key windows (those of window_divisor)
    int window_divisor;      // > 0: key windows that follow the context maxT (architecture_of_preset):
    int full_window_every;   // each layer sees maxT / window_divisor keys (rounded down), but every
                             // full_window_every-th layer and the last, which see the whole context
    PresetDefaults defaults;
} ArchitecturePreset;

// gpt2 (llm.c- and Hugging Face-compatible, the default), modern and 2026, in the order of
// train_gpt's --arch choices. 2026 is the set of the 2026 recipe's parts that measured best on
// an H100 (bench/HISTORY.md, the 2026 recipe): modern with an embedding norm, a QK scale of 1.2,
// the residual lambdas, value embeddings, the smear and the backout, nanochat's windows (three
// layers of a quarter of the context, then one full, the last layer full), and Muon with qkvw in
// head pairs, NorMuon, weight decay 0.1, a warm-down over the last 65% to 0.05 of each rate and
// Muon's momentum from 0.85 over the first 300 steps; modern's Adam rates.
static const ArchitecturePreset architecture_presets[] = {
    {.name = "gpt2", .arch = ARCHITECTURE_GPT2},
    {.name = "modern", .arch = ARCHITECTURE_MODERN, .defaults = {.adamw_lr = 2e-3f, .embedding_lr = 0.05f}},
    {.name = "2026",
     .arch = {ARCHITECTURE_MODERN_COMPONENTS, .embedding_norm = 1, .qk_scale = 1.2f, .residual_lambdas = 1,
              .value_embeddings = 1, .smear = 1, .backout = 1},
     .window_divisor = 4,
     .full_window_every = 4,
     .defaults = {.muon = 1, .adamw_lr = 2e-3f, .embedding_lr = 0.05f, .weight_decay = 0.1f,
                  .muon_qkv = MUON_QKV_HEAD_PAIRS, .normuon = 1, .wsd = 1, .warmdown_frac = 0.65f,
                  .min_lr_frac = 0.05f, .momentum_warmup_steps = 300, .momentum_start = 0.85f}},
};
#define NUM_ARCHITECTURE_PRESETS ((int)(sizeof(architecture_presets) / sizeof(architecture_presets[0])))

// Field by field, by value (a float's -0 is its 0).
static inline int architecture_equal(const Architecture* a, const Architecture* b) {
    for (int i = 0; i < NUM_ARCHITECTURE_FIELDS; i++) {
        const ArchitectureField* f = &architecture_fields[i];
        if (f->value == ARCHITECTURE_FLOAT ? architecture_field_float(a, f) != architecture_field_float(b, f)
                                           : architecture_field_int(a, f) != architecture_field_int(b, f))
            return 0;
    }
    for (int i = 0; i < ARCHITECTURE_MAX_WINDOWS; i++)
        if (a->windows[i] != b->windows[i]) return 0;
    return 1;
}

// a without documents or windows.
static inline Architecture architecture_unmasked(const Architecture* a) {
    Architecture u = *a;
    u.documents = u.document_token = u.window_count = 0;
    memset(u.windows, 0, sizeof(u.windows));
    return u;
}

// 1 when a slot of the 2026 recipe's parts is not 0 (by its bits): the model takes a checkpoint
// version that holds them (gpt/checkpoint.h).
static inline int architecture_has_parts(const Architecture* a) {
    int32_t slots[ARCHITECTURE_SLOTS];
    memcpy(slots, a, sizeof(slots));
    for (int i = ARCHITECTURE_PARTS_SLOT; i < ARCHITECTURE_SLOTS; i++)
        if (slots[i] != 0) return 1;
    return 0;
}

// a without its key windows and its parts: the preset or the components its description starts
// with (architecture_describe).
static inline Architecture architecture_base(const Architecture* a) {
    Architecture b = architecture_unmasked(a);
    memset((char*)&b + ARCHITECTURE_PARTS_SLOT * sizeof(int32_t), 0,
           (ARCHITECTURE_SLOTS - ARCHITECTURE_PARTS_SLOT) * sizeof(int32_t));
    return b;
}

// NULL when a tokenizer whose <|endoftext|> is eot starts the documents of the model in the file
// or folder model as its training did (or the model has none), else why not, in err (len bytes).
static inline const char* architecture_document_token_differs(const Architecture* a, int eot, const char* model,
                                                              char* err, size_t len) {
    if (!a->documents || a->document_token == eot) return NULL;
    snprintf(err, len, "its <|endoftext|> is token %d, the documents of %s start at token %d", eot, model,
             a->document_token);
    return err;
}

// The window of layer l: keys a row sees at most, 0 for no bound.
static inline int architecture_window(const Architecture* a, int l) {
    return a->window_count > 0 ? a->windows[l % a->window_count] : 0;
}

// The keys a row of layer l sees at most in a sequence of T: its window, or T where the window
// is no bound or no narrower than T (documents, which the data set, are not counted).
static inline int architecture_keys(const Architecture* a, int l, int T) {
    int w = architecture_window(a, l);
    return w > 0 && w < T ? w : T;
}

// 1 when q and k go through the QK-norm and rotary pass (layers/rotary.h): either is on.
static inline int architecture_transforms_qk(const Architecture* a) { return a->qk_norm || a->rotary; }

// The channels of the attention's input (the first ones, after its norm) that a value gate reads
// (nanochat's 12): a layer's gate of head h is 3 sigmoid(ln1[:VALUE_GATE_CHANNELS] . value_gate[h]).
#define VALUE_GATE_CHANNELS 12

// The channels of a token's embedding that the smear's gate reads (nanochat's 24): the gate of
// token t is smear_lambda sigmoid(x_t[:SMEAR_GATE_CHANNELS] . smear_gate).
#define SMEAR_GATE_CHANNELS 24

// The block of L whose output the backout gives back a share of (nanochat's: the middle one, L / 2).
static inline int architecture_backout_layer(int L) { return L / 2; }

// 1 when layer l of L is one that value embeddings go to: every other layer, the last among them
// (nanochat's has_ve: l and L - 1 of one parity).
static inline int value_embedding_layer(int l, int L) { return l % 2 == (L - 1) % 2; }

// 1 when layer l of L takes value embeddings: one of value_embedding_layer's, where the
// architecture has them.
static inline int architecture_value_embedding_layer(const Architecture* a, int l, int L) {
    return a->value_embeddings && value_embedding_layer(l, L);
}

// The attention's softmax scale at head size HS: 1/sqrt(HS), times qk_scale^2 with a QK scale (q
// and k each times qk_scale). Every path takes it from here (gpt/activations.h's attention_shape):
// training, the prompt and the decoding step scale alike.
static inline float architecture_attention_scale(const Architecture* a, int HS) {
    return (a->qk_scale > 0.0f ? a->qk_scale * a->qk_scale : 1.0f) / sqrtf((float)HS);
}

// Layer l's window of L under preset p's windows of window keys: none (0: the whole context) on
// every full_window_every-th layer and on the last.
static inline int preset_layer_window(const ArchitecturePreset* p, int window, int l, int L) {
    return l % p->full_window_every == p->full_window_every - 1 || l == L - 1 ? 0 : window;
}

// The architecture of preset p in a model of context maxT and L layers, into *a: its components
// and parts, and where it has them its key windows at that context, as the shortest pattern that
// gives each layer its window (2026's at context 1024 and 12 layers: 256,256,256,full; at 6
// layers: 256,256,256,full,256,full). 0, or -1 with err (len bytes) saying why the model cannot
// hold them: a context below window_divisor leaves a window no key, and a pattern holds 64 layers.
static inline int architecture_of_preset(const ArchitecturePreset* p, int maxT, int L, Architecture* a, char* err,
                                         size_t len) {
    *a = p->arch;
    if (!p->window_divisor) return 0;
    int window = maxT / p->window_divisor, bounded = 0;
    for (int l = 0; l < L; l++) bounded |= preset_layer_window(p, 1, l, L) > 0;
    if (!bounded) return 0;   // one layer, or every layer full: no windows
    if (window < 1) {
        snprintf(err, len, "its key windows are the context / %d, rounded down: a context of %d leaves them no key "
                 "(give %d or more)", p->window_divisor, maxT, p->window_divisor);
        return -1;
    }
    for (int period = 1; period <= L && period <= ARCHITECTURE_MAX_WINDOWS; period++) {
        int repeats = 1;
        for (int l = period; l < L && repeats; l++)
            repeats = preset_layer_window(p, window, l, L) == preset_layer_window(p, window, l % period, L);
        if (!repeats) continue;
        a->window_count = period;
        for (int l = 0; l < period; l++) a->windows[l] = preset_layer_window(p, window, l, L);
        return 0;
    }
    snprintf(err, len, "its key windows on %d layers repeat over more layers than a pattern holds (%d)", L,
             ARCHITECTURE_MAX_WINDOWS);
    return -1;
}

// The preset whose architecture a is in a model of context maxT and L layers, or NULL (an ablation).
static inline const ArchitecturePreset* architecture_preset_of(const Architecture* a, int maxT, int L) {
    for (int i = 0; i < NUM_ARCHITECTURE_PRESETS; i++) {
        Architecture preset;
        char err[160];
        if (!architecture_of_preset(&architecture_presets[i], maxT, L, &preset, err, sizeof(err)) &&
            architecture_equal(a, &preset))
            return &architecture_presets[i];
    }
    return NULL;
}

// The preset nearest a: the one whose components and parts differ from a's in the fewest (the
// rows of architecture_fields marked component: the seven switches, the soft cap and the six
// parts, each counted as on or off; the rotary base, the cap's and the QK scale's values and the
// key windows are no component of their own), the first (gpt2, then modern) on a tie.
static inline const ArchitecturePreset* architecture_nearest_preset(const Architecture* a) {
    const ArchitecturePreset* nearest = NULL;
    int fewest = INT_MAX;
    for (int i = 0; i < NUM_ARCHITECTURE_PRESETS; i++) {
        const Architecture* p = &architecture_presets[i].arch;
        int differ = 0;
        for (int k = 0; k < NUM_ARCHITECTURE_FIELDS; k++) {
            const ArchitectureField* f = &architecture_fields[k];
            if (!f->component) continue;
            differ += f->value == ARCHITECTURE_FLOAT ? architecture_field_on(a, f) != architecture_field_on(p, f)
                                                     : architecture_field_int(a, f) != architecture_field_int(p, f);
        }
        if (differ < fewest) {
            fewest = differ;
            nearest = &architecture_presets[i];
        }
    }
    return nearest;
}

// GPT-2's architecture: the one llm.c's checkpoint versions hold (without documents or windows).
static inline int architecture_is_gpt2(const Architecture* a) {
    return architecture_equal(a, &architecture_presets[0].arch);
}

// NULL when every field holds a value it may, else which does not. (The head sizes the blocks
// take are the block's to say, gpt/block.h; the fields without effect, which depend on the
// context and the layers too, gpt_config_drop_without_effect's.)
static inline const char* architecture_invalid(const Architecture* a) {
    for (int i = 0; i < NUM_ARCHITECTURE_FIELDS; i++) {
        const ArchitectureField* f = &architecture_fields[i];
        if (f->value != ARCHITECTURE_SWITCH) continue;
        int v = architecture_field_int(a, f);
        if (v != 0 && v != 1) return "a switch of the architecture is neither 0 nor 1";
    }
    for (int i = 0; i < NUM_ARCHITECTURE_FIELDS; i++) {   // the floats' rules, once every switch is one
        const ArchitectureField* f = &architecture_fields[i];
        const char* why = f->invalid ? f->invalid(architecture_field_float(a, f)) : NULL;
        if (why) return why;
    }
    if (a->qk_scale != 0.0f && !a->qk_norm)   // unnormed q and k take their scale from their weights
        return "a QK scale without QK-norm (the scale of q and k not normed is their weights': --qk-norm 1)";
    if (a->document_token < 0 || (!a->documents && a->document_token != 0))
        return "the document token is negative, or set without documents";
    if (a->window_count < 0 || a->window_count > ARCHITECTURE_MAX_WINDOWS)
        return "the window count is not 0 to 64";
    for (int i = 0; i < ARCHITECTURE_MAX_WINDOWS; i++) {
        if (a->windows[i] < 0) return "a window is negative";
        if (i >= a->window_count && a->windows[i] != 0) return "a window is set past the pattern";
    }
    return NULL;
}

// The bytes an architecture's description may take (architecture_describe).
#define ARCHITECTURE_TEXT 1024

// Appends ", " and field f of a in words to the description out (len bytes, n of them written so
// far, as snprintf counts them): its words on, a float's followed by its value, else its words off.
static inline size_t architecture_describe_field(const ArchitectureField* f, const Architecture* a, char* out,
                                                 size_t len, size_t n) {
    int on = architecture_field_on(a, f);
    if (n < len) n += (size_t)snprintf(out + n, len - n, ", %s", on ? f->on : f->off);
    if (on && f->value == ARCHITECTURE_FLOAT && n < len)
        n += (size_t)snprintf(out + n, len - n, " %g", architecture_field_float(a, f));
    return n;
}

// The architecture a of a model of context maxT and L layers in words: the preset it is
// (architecture_preset_of: "gpt2", "modern", "2026"), then its documents, if any: "2026,
// documents (token 50256)". Else the preset or the components its base is (architecture_base):
// "gpt2", "modern", or "rotary (base 10000), rms norm, qk-norm, relu2, no bias, untied head,
// zero init, softcap 30" (off ones as GPT-2's: "learned positions", "layernorm"; "learned
// positions (rotary base 5000)" for a base without effect, so that an option asking for one is
// told from the model without it); then the parts it has: "embedding norm, qk scale 1.2, residual
// lambdas, value embeddings, smear, backout"; then the key windows, if any: "documents (token
// 50256), windows 2048,512" (a window pattern as train_gpt's --window-pattern takes it, "full"
// for no bound).
static inline void architecture_describe(const Architecture* a, int maxT, int L, char* out, size_t len) {
    Architecture undocumented = *a, base = architecture_base(a);
    undocumented.documents = undocumented.document_token = 0;
    const ArchitecturePreset* whole = architecture_preset_of(&undocumented, maxT, L);
    const ArchitecturePreset* preset = whole ? whole : architecture_preset_of(&base, maxT, L);
    // What the name leaves to say: the documents of a whole preset; the parts and the key windows
    // of a base.
    Architecture rest = *a;
    if (whole) {
        rest = base;
        rest.documents = a->documents;
        rest.document_token = a->document_token;
    }
    size_t n;
    if (preset) {
        n = (size_t)snprintf(out, len, "%s", preset->name);
    } else {
        if (a->rotary) n = (size_t)snprintf(out, len, "rotary (base %g)", a->rotary_base);
        else if (a->rotary_base != ARCHITECTURE_ROTARY_BASE)
            n = (size_t)snprintf(out, len, "learned positions (rotary base %g)", a->rotary_base);
        else n = (size_t)snprintf(out, len, "learned positions");
        for (int i = 0; i < NUM_ARCHITECTURE_FIELDS; i++)   // the components, each on or off
            if (architecture_fields[i].off) n = architecture_describe_field(&architecture_fields[i], a, out, len, n);
    }
    for (int i = 0; i < NUM_ARCHITECTURE_FIELDS; i++) {   // the parts that are on
        const ArchitectureField* f = &architecture_fields[i];
        if (f->on && !f->off && architecture_field_on(&rest, f)) n = architecture_describe_field(f, &rest, out, len, n);
    }
    if (rest.documents && n < len)
        n += (size_t)snprintf(out + n, len - n, ", documents (token %d)", rest.document_token);
    for (int i = 0; i < rest.window_count && i < ARCHITECTURE_MAX_WINDOWS && n < len; i++) {
        const char* before = i ? "," : ", windows ";
        if (rest.windows[i]) n += (size_t)snprintf(out + n, len - n, "%s%d", before, rest.windows[i]);
        else n += (size_t)snprintf(out + n, len - n, "%sfull", before);
    }
}

typedef struct {
    int maxT;   // context length: the rows of the position embedding (when it has one)
    int V;      // vocabulary
    int Vp;     // V padded up to a multiple of 128
    int L;      // layers
    int NH;     // heads
    int C;      // channels
    Architecture arch;
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

// The sizes (GPT-2's: d12 is the 124M model, d48 the 1.5B), and small ones for tests.
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

// Fields without effect: no field holds a value that changes nothing the model computes (a
// rotary base other than the presets' without rotary, a QK scale of 1, a window of the context
// or more, a window pattern longer than the layers, a pattern that bounds no layer), so that one model has one
// description and a GPT-2 stays llm.c's file. train_gpt refuses an option that would set one
// (gpt_config_invalid): a dropped option would leave its command line naming a model the run does
// not train. A model file that holds one (versions 6 and 7 may) still describes a model, and is
// read as that model (read_model_header): each such field dropped, so that a GPT-2 in a version 6
// file is GPT-2, in every program and when saved again (version 3 or 5).
// Drops each field without effect from c, whose fields are each valid (architecture_invalid; a
// value invalid in itself is left for it to refuse): a rotary base without rotary becomes the
// presets', a QK scale of 1 none, a window of the context or more no bound, the pattern's entries past the layers go,
// and a pattern that then bounds no layer becomes none. Returns why the first field dropped has
// no effect, or NULL when c holds none.
static inline const char* gpt_config_drop_without_effect(GPTConfig* c) {
    Architecture* a = &c->arch;
    const char* why = NULL;
    if (!a->rotary && a->rotary_base != ARCHITECTURE_ROTARY_BASE && !rotary_base_invalid(a->rotary_base)) {
        a->rotary_base = ARCHITECTURE_ROTARY_BASE;
        why = "a rotary base without rotary, where it has no effect (--rotary 1 gives the model rotary)";
    }
    if (a->qk_scale == 1.0f) {
        a->qk_scale = 0.0f;
        if (!why) why = "a QK scale of 1, which scales nothing (leave it out)";
    }
    if (a->window_count <= 0 || a->window_count > ARCHITECTURE_MAX_WINDOWS) return why;
    int bounded = 0;
    for (int i = 0; i < a->window_count; i++) {
        if (a->windows[i] >= c->maxT) {
            a->windows[i] = 0;
            if (!why) why = "a window is no narrower than the context, so it bounds nothing (leave it out; in a "
                            "pattern, full)";
        }
        if (i >= c->L) a->windows[i] = 0;
        bounded |= a->windows[i] > 0;
    }
    if (a->window_count > c->L) {
        a->window_count = c->L;
        if (!why) why = "the window pattern is longer than the layers, which take no more of it";
    }
    if (!bounded) {
        a->window_count = 0;
        if (!why) why = "the window pattern bounds no layer";
    }
    return why;
}

// NULL when the shape is one the model can be built with, its document token within the
// vocabulary and no field without effect (gpt_config_drop_without_effect), else what is wrong
// (the architecture's own fields: architecture_invalid).
static inline const char* gpt_config_invalid(const GPTConfig* c) {
    if (c->maxT <= 0 || c->V <= 0 || c->L <= 0 || c->NH <= 0 || c->C <= 0) return "a size is not positive";
    if (c->maxT > GPT_MAX_CONTEXT) return "the context is longer than 2^24";
    if (c->V > GPT_MAX_VOCAB) return "the vocabulary is larger than 2^24";
    if (c->L > GPT_MAX_LAYERS) return "more than 2^12 layers";
    if (c->C > GPT_MAX_CHANNELS) return "more than 2^16 channels";
    if (c->C % c->NH != 0) return "the channels are not a multiple of the heads";
    if (c->C % 8 != 0) return "the channels are not a multiple of 8";
    if (c->Vp != padded_vocab(c->V)) return "the padded vocabulary is not V rounded up to 128";
    if (c->arch.documents && c->arch.document_token >= c->V) return "the document token is outside the vocabulary";
    GPTConfig dropped = *c;
    return gpt_config_drop_without_effect(&dropped);
}

static inline int gpt_config_same_shape(const GPTConfig* a, const GPTConfig* b) {
    return a->maxT == b->maxT && a->V == b->V && a->L == b->L && a->NH == b->NH && a->C == b->C;
}

// The same shape and architecture: the same model.
static inline int gpt_config_same_model(const GPTConfig* a, const GPTConfig* b) {
    return gpt_config_same_shape(a, b) && architecture_equal(&a->arch, &b->arch);
}

// "L 12 C 768 NH 12 V 50257 context 1024, gpt2"
static inline void gpt_config_describe(const GPTConfig* c, char* out, size_t len) {
    char arch[ARCHITECTURE_TEXT];
    architecture_describe(&c->arch, c->maxT, c->L, arch, sizeof(arch));
    snprintf(out, len, "L %d C %d NH %d V %d context %d, %s", c->L, c->C, c->NH, c->V, c->maxT, arch);
}

#endif
