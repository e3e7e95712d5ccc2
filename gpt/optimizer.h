// gpt/optimizer.h: the two optimizers the model trains with and their settings. Which group of
// the parameter table (gpt/param_table.h) a tensor is in says how it is updated:
//   AdamW: every tensor at one learning rate (times its row's lr_scale).
//   Muon: the matrix group (the blocks' qkvw, attprojw, fcw, fcprojw; each layer's slice cut into
//     matrices as the row's muon_rows says, each on its own) by Nesterov momentum orthogonalised
//     with Newton-Schulz iterations (layers/muon.h), applied with lr * sqrt(max(1, rows / cols));
//     Adam for the rest: the embedding group (wte, the tied head too, and wpe) at embedding_lr,
//     the head group (an untied lm_head) at head_lr, the vectors (layernorm weights and biases,
//     the biases) at vector_lr, each times its row's lr_scale.
// The learning-rate schedule (gpt/lr_schedule.h) scales every group's rate alike. Weight decay
// is decoupled: master -= lr * weight_decay * decay_scale * master, with the tensor's lr; the
// table decays the 2-D weights.
#ifndef FLASHGPT_GPT_OPTIMIZER_H
#define FLASHGPT_GPT_OPTIMIZER_H

#include <string.h>
#include "gpt/param_table.h"

typedef enum { OPTIMIZER_ADAMW, OPTIMIZER_MUON } OptimizerKind;

typedef struct {
    OptimizerKind kind;
    float lr;             // the peak: AdamW, of every tensor; Muon, of the blocks' matrices
    float momentum;       // Muon's (Nesterov)
    float embedding_lr;   // Muon: Adam's peak for wte and wpe
    float head_lr;        // Muon: Adam's peak for lm_head (an untied head)
    float vector_lr;      // Muon: Adam's peak for the vectors
    float b1, b2, eps;    // Adam's: AdamW's, or under Muon the embeddings' and vectors'
    float weight_decay;   // on the 2-D weights
    float grad_clip;      // the global gradient norm is clipped to it; 0: never
} OptimizerConfig;

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
    }
    return o;
}

// The modern architecture's (gpt/config.h), as issue 47 measured them at d12 on two texts: AdamW
// at lr 2e-3; Muon with wte at 0.05 (the head at 0.002, its own group); the rest as above.
static inline OptimizerConfig modern_optimizer_defaults(OptimizerKind kind) {
    OptimizerConfig o = optimizer_defaults(kind);
    if (kind == OPTIMIZER_ADAMW) o.lr = 2e-3f;
    else o.embedding_lr = 0.05f;
    return o;
}

static inline const char* optimizer_name(OptimizerKind kind) { return kind == OPTIMIZER_MUON ? "muon" : "adamw"; }

#endif
