// gpt/optimizer.h: the two optimizers the model trains with and their settings (their defaults
// and bounds). Which group of the parameter table (gpt/param_table.h) a tensor is in says how it
// is updated:
//   AdamW: every tensor at one learning rate (times its row's lr_scale).
//   Muon: the matrix group (the blocks' qkvw, attprojw, fcw, fcprojw; each layer's slice cut into
//     matrices as the row's muon_rows says, each on its own) by Nesterov momentum orthogonalised
//     with Newton-Schulz iterations (layers/muon.h), applied with lr * sqrt(max(1, rows / cols));
//     Adam for the rest: the embedding group (wte, the tied head too, wpe and the value
//     embeddings' tables) at embedding_lr, the head group (an untied lm_head) at head_lr, the
//     vectors (layernorm weights and biases, the biases, and the 2026 recipe's lambdas and gates)
//     at vector_lr, each times its row's lr_scale; the vectors at Adam's betas (b1, b2), the
//     embeddings and the head at their own (adam_betas), which are those unless given.
//   Muon's variants, each off by default but where the preset's defaults turn it on (2026's: head
//   pairs and NorMuon; a run without them is the Muon above, bit for bit): the
//   fused qkv weight cut into q, k and v, or into their head pairs (--muon-qkv,
//   gpt/param_table.h's MuonQkv); Polar Express's coefficients in place of the
//   quintic's (--muon-ns, layers/newton_schulz.h); cautious weight decay of the matrices
//   (--cautious-weight-decay: decayed only where the update and the weight agree in sign, as
//   nanochat decays its Muon matrices; Adam's groups keep the plain decay, as nanochat's do,
//   where modded-nanogpt makes its Adam cautious too); NorMuon (--normuon, --normuon-beta2: each
//   orthogonalised update's rows evened out by a second moment per row, layers/muon.h), whose
//   moments live in Adam's v at the start of each matrix's place, which Muon leaves unused.
// The step schedule (gpt/schedule.h) gives each step's rates: its learning-rate shape scales
// every group's rate alike, and it shapes Muon's momentum and the weight decay. Weight decay
// is decoupled: master -= lr * weight_decay * decay_scale * master, with the tensor's lr; the
// table's decay_scale decays the matrices, the embeddings and the head, no vector.
#ifndef FLASHGPT_GPT_OPTIMIZER_H
#define FLASHGPT_GPT_OPTIMIZER_H

#include <float.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "gpt/param_table.h"
#include "layers/newton_schulz.h"

typedef enum { OPTIMIZER_ADAMW, OPTIMIZER_MUON } OptimizerKind;

typedef struct {
    OptimizerKind kind;
    float lr;             // the peak: AdamW, of every tensor; Muon, of the blocks' matrices
    float momentum;       // Muon's (Nesterov)
    float embedding_lr;   // Muon: Adam's peak for the embedding group (wte, wpe, the value embeddings)
    float head_lr;        // Muon: Adam's peak for lm_head (an untied head)
    float vector_lr;      // Muon: Adam's peak for the vectors
    float b1, b2, eps;    // Adam's: AdamW's, or under Muon the vectors' (and the groups' below by default)
    float embedding_b1, embedding_b2;   // Muon: Adam's betas for the embedding group
    float head_b1, head_b2;             // Muon: Adam's betas for an untied head
    float weight_decay;   // on the tensors the table decays (decay_scale)
    float grad_clip;      // the global gradient norm is clipped to it; 0: never
    // Muon's variants, 0 where not chosen (and under AdamW)
    int muon_qkv;               // MuonQkv: how qkvw is cut into matrices
    int muon_ns;                // NewtonSchulzKind: the iterations' coefficients
    int cautious_weight_decay;  // the matrices decayed where the update and the weight agree in sign
    int normuon;                // NorMuon's normalisation of each matrix's update
    float normuon_beta2;        // with normuon: its second moment's beta, in [0, 1)
} OptimizerConfig;

// NorMuon's beta of the anchors (nanochat's and modded-nanogpt's).
#define NORMUON_BETA2_DEFAULT 0.95f

// The settings that work for d12 on a real text (bench/RESULTS.md, Muon): AdamW lr 3e-4, betas
// (0.9, 0.95), weight decay 0.1; Muon lr 0.02, momentum 0.95, Adam (0.8, 0.95) at 0.001 for
// the embeddings, 0.002 for an untied head and for the vectors, no weight decay. Both clip the
// norm at 1.
static inline OptimizerConfig optimizer_defaults(OptimizerKind kind) {
    OptimizerConfig o;
    memset(&o, 0, sizeof(o));
    o.kind = kind;
    o.eps = 1e-8f;
    o.grad_clip = 1.0f;
    o.b2 = 0.95f;
    if (kind == OPTIMIZER_ADAMW) {
        o.lr = 3e-4f;
        o.b1 = 0.9f;
        o.weight_decay = 0.1f;
    } else {
        o.lr = 0.02f;
        o.momentum = 0.95f;
        o.embedding_lr = 0.001f;
        o.head_lr = 0.002f;
        o.vector_lr = 0.002f;
        o.b1 = 0.8f;
        o.embedding_b1 = o.head_b1 = o.b1;
        o.embedding_b2 = o.head_b2 = o.b2;
    }
    return o;
}

// The betas of Adam's update of group's tensors: AdamW's for every group; under Muon each Adam
// group's own (nanochat's embeddings at (0.8, 0.995), its head at (0.8, 0.96)).
static inline void adam_betas(const OptimizerConfig* o, ParamGroup group, float* b1, float* b2) {
    *b1 = o->b1;
    *b2 = o->b2;
    if (o->kind != OPTIMIZER_MUON) return;
    if (group == GROUP_EMBEDDING) {
        *b1 = o->embedding_b1;
        *b2 = o->embedding_b2;
    } else if (group == GROUP_HEAD) {
        *b1 = o->head_b1;
        *b2 = o->head_b2;
    }
}

// The defaults of a run's settings: those of the architecture preset it is trained as, the one
// train_gpt's --arch names, else the preset nearest its architecture (architecture_nearest_preset):
// an ablation keeps its recipe's rates (--arch modern --qk-norm 0, and --init-from such a model,
// train at modern's), a GPT-2 with one modern component at GPT-2's. The preset's own
// (gpt/config.h's PresetDefaults) replace optimizer_defaults' where it sets them: modern's AdamW
// at lr 2e-3 and Muon's wte at 0.05 (the head at 0.002, its own group), as measured at d12 on two
// texts; 2026's weight decay, and Muon's cut of qkvw and NorMuon. A resumed run takes none of
// these: its training state records every setting it ran with, and train_gpt takes them there.
static inline OptimizerConfig preset_optimizer_defaults(OptimizerKind kind, const ArchitecturePreset* preset) {
    const PresetDefaults* d = &preset->defaults;
    OptimizerConfig o = optimizer_defaults(kind);
    if (d->weight_decay != 0.0f) o.weight_decay = d->weight_decay;
    if (kind == OPTIMIZER_ADAMW) {
        if (d->adamw_lr != 0.0f) o.lr = d->adamw_lr;
        return o;
    }
    if (d->embedding_lr != 0.0f) o.embedding_lr = d->embedding_lr;
    o.muon_qkv = d->muon_qkv;
    o.normuon = d->normuon;
    o.normuon_beta2 = d->normuon ? NORMUON_BETA2_DEFAULT : 0.0f;
    return o;
}

// The optimizer of a run trained as preset where --optimizer is not given (and no resumed run's).
static inline OptimizerKind preset_optimizer(const ArchitecturePreset* preset) {
    return preset->defaults.muon ? OPTIMIZER_MUON : OPTIMIZER_ADAMW;
}

// Which runs a setting belongs to: every run, Muon's (AdamW's betas are fixed), or Muon's with an
// untied head (a tied head is wte, at embedding_lr).
typedef enum { SETTING_EVERY_RUN, SETTING_MUON, SETTING_MUON_UNTIED_HEAD } SettingUse;

// A setting: its flag, its member, the values it may take and the runs it belongs to.
typedef struct {
    const char* flag;
    size_t offset;          // of its float in OptimizerConfig
    float lo, hi;           // hi FLT_MAX: no bound above but the floats'
    int lo_open, hi_open;   // 1: the bound itself is not taken
    SettingUse use;
} OptimizerSetting;

// Every setting's bounds, stated once: train_gpt's options and the training state's check
// (gpt/checkpoint.cu) both read them here. A bound is open where the value itself breaks the
// optimizer: a learning rate of 0 learns nothing; a momentum or a beta of 1 never forgets a
// gradient (and Adam's bias correction divides by 1 - beta^t = 0).
static const OptimizerSetting optimizer_settings[] = {
    {"--lr", offsetof(OptimizerConfig, lr), 0.0f, FLT_MAX, 1, 0, SETTING_EVERY_RUN},
    {"--weight-decay", offsetof(OptimizerConfig, weight_decay), 0.0f, FLT_MAX, 0, 0, SETTING_EVERY_RUN},
    {"--grad-clip", offsetof(OptimizerConfig, grad_clip), 0.0f, FLT_MAX, 0, 0, SETTING_EVERY_RUN},
    {"--muon-momentum", offsetof(OptimizerConfig, momentum), 0.0f, 1.0f, 0, 1, SETTING_MUON},
    {"--embedding-lr", offsetof(OptimizerConfig, embedding_lr), 0.0f, FLT_MAX, 1, 0, SETTING_MUON},
    {"--head-lr", offsetof(OptimizerConfig, head_lr), 0.0f, FLT_MAX, 1, 0, SETTING_MUON_UNTIED_HEAD},
    {"--vector-lr", offsetof(OptimizerConfig, vector_lr), 0.0f, FLT_MAX, 1, 0, SETTING_MUON},
    {"--adam-beta1", offsetof(OptimizerConfig, b1), 0.0f, 1.0f, 0, 1, SETTING_MUON},
    {"--adam-beta2", offsetof(OptimizerConfig, b2), 0.0f, 1.0f, 0, 1, SETTING_MUON},
    {"--embedding-beta1", offsetof(OptimizerConfig, embedding_b1), 0.0f, 1.0f, 0, 1, SETTING_MUON},
    {"--embedding-beta2", offsetof(OptimizerConfig, embedding_b2), 0.0f, 1.0f, 0, 1, SETTING_MUON},
    {"--head-beta1", offsetof(OptimizerConfig, head_b1), 0.0f, 1.0f, 0, 1, SETTING_MUON_UNTIED_HEAD},
    {"--head-beta2", offsetof(OptimizerConfig, head_b2), 0.0f, 1.0f, 0, 1, SETTING_MUON_UNTIED_HEAD},
};
#define NUM_OPTIMIZER_SETTINGS ((int)(sizeof(optimizer_settings) / sizeof(optimizer_settings[0])))

// The setting whose flag is flag, or NULL.
static inline const OptimizerSetting* optimizer_setting(const char* flag) {
    for (int i = 0; i < NUM_OPTIMIZER_SETTINGS; i++)
        if (!strcmp(optimizer_settings[i].flag, flag)) return &optimizer_settings[i];
    return NULL;
}

static inline float optimizer_setting_value(const OptimizerConfig* o, const OptimizerSetting* s) {
    return *(const float*)((const char*)o + s->offset);
}

// 0 when s may be v, else -1 with err stating its bounds: "--lr 0 must be > 0", "--muon-momentum 1
// must be in [0, 1)".
static inline int optimizer_setting_refused(const OptimizerSetting* s, float v, char* err, size_t len) {
    if ((s->lo_open ? v > s->lo : v >= s->lo) && (s->hi_open ? v < s->hi : v <= s->hi)) return 0;
    if (s->hi == FLT_MAX) snprintf(err, len, "%s %g must be %s %g", s->flag, v, s->lo_open ? ">" : ">=", s->lo);
    else snprintf(err, len, "%s %g must be in %c%g, %g%c", s->flag, v, s->lo_open ? '(' : '[', s->lo, s->hi,
                  s->hi_open ? ')' : ']');
    return -1;
}

// 0 when Muon's variants in o are ones it has, each 0 where it does not apply (under AdamW, the
// beta without NorMuon) and cautious decay with a decay to be cautious with; else -1 with err
// naming the flag.
static inline int muon_variants_invalid(const OptimizerConfig* o, char* err, size_t len) {
    const struct {
        const char* flag;
        int set, lo, hi;
    } choices[] = {{"--muon-qkv", o->muon_qkv, 0, NUM_MUON_QKV - 1}, {"--muon-ns", o->muon_ns, 0, NUM_NEWTON_SCHULZ - 1},
                   {"--cautious-weight-decay", o->cautious_weight_decay, 0, 1}, {"--normuon", o->normuon, 0, 1}};
    for (size_t i = 0; i < sizeof(choices) / sizeof(choices[0]); i++) {
        if (choices[i].set < choices[i].lo || choices[i].set > choices[i].hi)
            snprintf(err, len, "%s %d is out of range", choices[i].flag, choices[i].set);
        else if (choices[i].set && o->kind != OPTIMIZER_MUON)
            snprintf(err, len, "%s is a setting of --optimizer muon", choices[i].flag);
        else continue;
        return -1;
    }
    if (o->normuon && !(o->normuon_beta2 >= 0.0f && o->normuon_beta2 < 1.0f))
        snprintf(err, len, "--normuon-beta2 %g must be in [0, 1)", o->normuon_beta2);
    else if (!o->normuon && o->normuon_beta2 != 0.0f) snprintf(err, len, "--normuon-beta2 without --normuon has no effect");
    else if (o->cautious_weight_decay && o->weight_decay == 0.0f)
        snprintf(err, len, "--cautious-weight-decay without --weight-decay has no effect");
    else return 0;
    return -1;
}

// 0 when every setting of a run of o's kind (an untied head's rate where untied_head is set) is
// within its bounds, Muon's variants too (muon_variants_invalid), and the weight decay within the
// rates it is applied with; else -1 with err naming the flag. The decay takes lr * weight_decay of
// a 2-D weight each step at the peak: at 1 or more it erases the weights (or flips them) whatever
// the gradients say.
static inline int optimizer_invalid(const OptimizerConfig* o, int untied_head, char* err, size_t len) {
    int muon = o->kind == OPTIMIZER_MUON;
    for (int i = 0; i < NUM_OPTIMIZER_SETTINGS; i++) {
        const OptimizerSetting* s = &optimizer_settings[i];
        if ((s->use != SETTING_EVERY_RUN && !muon) || (s->use == SETTING_MUON_UNTIED_HEAD && !untied_head)) continue;
        if (optimizer_setting_refused(s, optimizer_setting_value(o, s), err, len)) return -1;
    }
    if (muon_variants_invalid(o, err, len)) return -1;
    // The groups with decayed tensors (the table's decay_scale): AdamW's one; Muon's matrices,
    // embeddings and an untied head.
    const struct {
        const char* flag;
        float lr;
    } decayed[] = {{"--lr", o->lr}, {"--embedding-lr", muon ? o->embedding_lr : 0.0f},
                   {"--head-lr", muon && untied_head ? o->head_lr : 0.0f}};
    for (size_t i = 0; i < sizeof(decayed) / sizeof(decayed[0]); i++)
        if ((double)decayed[i].lr * o->weight_decay >= 1.0) {
            snprintf(err, len, "--weight-decay %g: times %s %g it is %g, and must stay below 1 (at 1 a step at the "
                     "peak erases the decayed weights)", o->weight_decay, decayed[i].flag, decayed[i].lr,
                     (double)decayed[i].lr * o->weight_decay);
            return -1;
        }
    return 0;
}

static inline const char* optimizer_name(OptimizerKind kind) { return kind == OPTIMIZER_MUON ? "muon" : "adamw"; }

#endif
