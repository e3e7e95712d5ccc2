// train/state.cu: the training state file (train/state.h): its header, field by field, and
// the file around the model's optimizer arrays.
#include "train/state.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include "common/atomic_file.h"
#include "common/read_file.h"
#include "train/checkpoint_folder.h"

static_assert(sizeof(StateFileHeader) == HEADER_INTS * sizeof(int32_t), "state header is 256 int32");

// The training state header, a row per field of a TrainingState: its member of StateSlots (the
// slots it takes; a float is stored by its bits), the values a valid file holds, and what a
// resume does with it. The header is written, read back, bounded and compared on a resume by
// this table alone, so a new setting is its member of TrainingState and of StateSlots, its row
// here, and, where files without it must keep their version, a version of its own (state_versions).
// ATTENTION, SWITCH, RECOMPUTE, OPTIMIZER, LR_SHAPE, DECAY_SHAPE, MUON_QKV, MUON_NS, FP8,
// FP8_SCALING, FP8_GRAD and INIT are ints, shown as their flags take them.
typedef enum {
    FIELD_INT,
    FIELD_FLOAT,
    FIELD_U64,
    FIELD_ATTENTION,
    FIELD_SWITCH,
    FIELD_RECOMPUTE,
    FIELD_OPTIMIZER,
    FIELD_LR_SHAPE,
    FIELD_DECAY_SHAPE,
    FIELD_MUON_QKV,
    FIELD_MUON_NS,
    FIELD_FP8,
    FIELD_FP8_SCALING,
    FIELD_FP8_GRAD,
    FIELD_INIT
} FieldType;
// On a resume: FREE is not compared (where the run stood, its shape, a count per rank); SAME must
// be the same for an exact resume; NOTE may differ, and is said (the schedule changes with it).
typedef enum { RESUME_FREE, RESUME_SAME, RESUME_NOTE } ResumeRule;
typedef struct {
    const char* name;      // the flag that sets it, or the word for it
    size_t at;             // its first byte in the header
    FieldType type;
    size_t offset, size;   // in TrainingState
    double lo, hi;         // the values a valid file holds, ints as integers (the shape, the
                           // optimizer's settings, the 64-bit values: state_invalid)
    ResumeRule resume;
} StateField;

static_assert(sizeof(StateSlots) <= sizeof(StateFileHeader), "the fields fit in the header");
static_assert(sizeof(StateSlots) % sizeof(int32_t) == 0, "every member is whole int32 slots, with no padding");
static_assert(offsetof(StateSlots, world_size) == 31 * sizeof(int32_t) && offsetof(StateSlots, seed) == 19 * sizeof(int32_t) &&
              offsetof(StateSlots, lr_schedule) == 39 * sizeof(int32_t) &&
              offsetof(StateSlots, align_documents) == 46 * sizeof(int32_t) &&
              offsetof(StateSlots, muon_qkv) == 48 * sizeof(int32_t) &&
              offsetof(StateSlots, fp8) == 53 * sizeof(int32_t) &&
              offsetof(StateSlots, init_scheme) == 56 * sizeof(int32_t),
              "the slots of earlier versions stay where they were");
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "a 64-bit field is copied to its slots low half first");

// A field's first byte in the header, checked at compile time to hold exactly its member.
template <size_t At, size_t SlotBytes, size_t MemberBytes> constexpr size_t slots_of() {
    static_assert(SlotBytes == MemberBytes, "a field's slots hold exactly its TrainingState member");
    return At;
}
#define FIELD(name, slots, member, type, lo, hi, resume)                                                         \
    {name,                                                                                                      \
     slots_of<offsetof(StateSlots, slots), sizeof(((StateSlots*)0)->slots), sizeof(((TrainingState*)0)->member)>(), \
     type, offsetof(TrainingState, member), sizeof(((TrainingState*)0)->member), lo, hi, resume}
// The optimizer first: a resume with the other one is refused naming it, not a setting of it.
static const StateField state_fields[] = {
    FIELD("--optimizer", optimizer, optimizer, FIELD_OPTIMIZER, OPTIMIZER_ADAMW, OPTIMIZER_MUON, RESUME_SAME),
    FIELD("step", step, step, FIELD_INT, 0, INT_MAX, RESUME_FREE),
    FIELD("context", shape.maxT, config.maxT, FIELD_INT, INT_MIN, INT_MAX, RESUME_FREE),
    FIELD("vocab", shape.V, config.V, FIELD_INT, INT_MIN, INT_MAX, RESUME_FREE),
    FIELD("layers", shape.L, config.L, FIELD_INT, INT_MIN, INT_MAX, RESUME_FREE),
    FIELD("heads", shape.NH, config.NH, FIELD_INT, INT_MIN, INT_MAX, RESUME_FREE),
    FIELD("channels", shape.C, config.C, FIELD_INT, INT_MIN, INT_MAX, RESUME_FREE),
    FIELD("padded vocab", shape.Vp, config.Vp, FIELD_INT, INT_MIN, INT_MAX, RESUME_FREE),
    FIELD("-B", B, B, FIELD_INT, 1, INT_MAX, RESUME_SAME),
    FIELD("-T", T, T, FIELD_INT, 1, INT_MAX, RESUME_SAME),
    FIELD("micro-steps", grad_accum, grad_accum, FIELD_INT, 1, INT_MAX, RESUME_FREE),
    FIELD("--warmup-steps", warmup_steps, schedule.warmup_steps, FIELD_INT, 0, INT_MAX, RESUME_SAME),
    FIELD("--steps", steps, steps, FIELD_INT, 1, INT_MAX, RESUME_NOTE),
    FIELD("optimizer step", adam_t, adam_t, FIELD_INT, 0, INT_MAX, RESUME_FREE),
    // The optimizer's settings are finite here; their bounds are gpt/optimizer.h's (state_invalid).
    FIELD("--lr", lr, lr, FIELD_FLOAT, -FLT_MAX, FLT_MAX, RESUME_SAME),
    FIELD("--min-lr-frac", min_lr_frac, schedule.min_lr_frac, FIELD_FLOAT, 0, 1, RESUME_SAME),
    FIELD("--weight-decay", weight_decay, weight_decay, FIELD_FLOAT, -FLT_MAX, FLT_MAX, RESUME_SAME),
    FIELD("--grad-clip", grad_clip, grad_clip, FIELD_FLOAT, -FLT_MAX, FLT_MAX, RESUME_SAME),
    FIELD("--seed", seed, seed, FIELD_U64, 0, 0, RESUME_SAME),
    FIELD("data epoch", data_epoch, train_loader.epoch, FIELD_U64, 0, 0, RESUME_FREE),
    FIELD("data step", data_step, train_loader.step_in_epoch, FIELD_U64, 0, 0, RESUME_FREE),
    FIELD("sampler state", sample_rng, sample_rng, FIELD_U64, 0, 0, RESUME_FREE),
    FIELD("--attention", attention, attention, FIELD_ATTENTION, ATTENTION_FLASH, ATTENTION_NAIVE, RESUME_SAME),
    FIELD("--deterministic", deterministic, deterministic, FIELD_SWITCH, 0, 1, RESUME_SAME),
    FIELD("--recompute", recompute, recompute, FIELD_RECOMPUTE, 0, RECOMPUTE_GELU | RECOMPUTE_LAYERNORM, RESUME_SAME),
    FIELD("--classifier-chunk", classifier_rows, classifier_rows, FIELD_INT, 1, INT_MAX, RESUME_SAME),
    // Data-parallel ranks; 0 in the files of one-GPU runs of earlier versions.
    FIELD("ranks", world_size, world_size, FIELD_INT, 0, INT_MAX, RESUME_FREE),
    // Muon's; 0 under AdamW (state_invalid).
    FIELD("--muon-momentum", muon_momentum, muon_momentum, FIELD_FLOAT, -FLT_MAX, FLT_MAX, RESUME_SAME),
    FIELD("--embedding-lr", embedding_lr, embedding_lr, FIELD_FLOAT, -FLT_MAX, FLT_MAX, RESUME_SAME),
    FIELD("--vector-lr", vector_lr, vector_lr, FIELD_FLOAT, -FLT_MAX, FLT_MAX, RESUME_SAME),
    FIELD("--adam-beta1", adam_b1, adam_b1, FIELD_FLOAT, -FLT_MAX, FLT_MAX, RESUME_SAME),
    FIELD("--adam-beta2", adam_b2, adam_b2, FIELD_FLOAT, -FLT_MAX, FLT_MAX, RESUME_SAME),
    FIELD("--head-lr", head_lr, head_lr, FIELD_FLOAT, -FLT_MAX, FLT_MAX, RESUME_SAME),
    // The schedule past its warmup and end; bounded by gpt/schedule.h (state_invalid).
    FIELD("--lr-schedule", lr_schedule, schedule.lr_shape, FIELD_LR_SHAPE, LR_SHAPE_COSINE, LR_SHAPE_WSD, RESUME_SAME),
    FIELD("--warmdown-frac", warmdown_frac, schedule.warmdown_frac, FIELD_FLOAT, 0, 1, RESUME_SAME),
    FIELD("--momentum-warmup-steps", momentum_warmup_steps, schedule.momentum_warmup_steps, FIELD_INT, 0, INT_MAX,
          RESUME_SAME),
    FIELD("--momentum-start", momentum_start, schedule.momentum_start, FIELD_FLOAT, 0, 1, RESUME_SAME),
    FIELD("--momentum-cooldown-steps", momentum_cooldown_steps, schedule.momentum_cooldown_steps, FIELD_INT, 0, INT_MAX,
          RESUME_SAME),
    FIELD("--momentum-end", momentum_end, schedule.momentum_end, FIELD_FLOAT, 0, 1, RESUME_SAME),
    FIELD("--weight-decay-schedule", weight_decay_schedule, schedule.decay_shape, FIELD_DECAY_SHAPE, DECAY_SHAPE_CONSTANT,
          DECAY_SHAPE_LINEAR, RESUME_SAME),
    // The rows' alignment; the token within the vocabulary (state_invalid).
    FIELD("--align-documents", align_documents, align_documents, FIELD_SWITCH, 0, 1, RESUME_SAME),
    FIELD("--align-documents at token", document_token, document_token, FIELD_INT, 0, INT_MAX, RESUME_SAME),
    // Muon's variants; 0 under AdamW, the beta 0 without NorMuon (state_invalid).
    FIELD("--muon-qkv", muon_qkv, muon_qkv, FIELD_MUON_QKV, MUON_QKV_FUSED, MUON_QKV_HEAD_PAIRS, RESUME_SAME),
    FIELD("--muon-ns", muon_ns, muon_ns, FIELD_MUON_NS, NEWTON_SCHULZ_QUINTIC, NEWTON_SCHULZ_POLAR_EXPRESS, RESUME_SAME),
    FIELD("--cautious-weight-decay", cautious_weight_decay, cautious_weight_decay, FIELD_SWITCH, 0, 1, RESUME_SAME),
    FIELD("--normuon", normuon, normuon, FIELD_SWITCH, 0, 1, RESUME_SAME),
    FIELD("--normuon-beta2", normuon_beta2, normuon_beta2, FIELD_FLOAT, 0, 1, RESUME_SAME),
    // The FP8 matmuls; the scaling and the gradients' format 0 without them (state_invalid).
    FIELD("--fp8", fp8, fp8, FIELD_FP8, 0, FP8_MLP | FP8_HEAD, RESUME_SAME),
    FIELD("--fp8-scaling", fp8_scaling, fp8_scaling, FIELD_FP8_SCALING, FP8_SCALING_CURRENT, FP8_SCALING_DELAYED,
          RESUME_SAME),
    FIELD("--fp8-grad", fp8_grad, fp8_grad_bf16, FIELD_FP8_GRAD, 0, 1, RESUME_SAME),
    // The init; the groups' betas, each 0 without group_betas, the head's 0 without an untied
    // head, all 0 under AdamW (state_invalid), within gpt/optimizer.h's bounds.
    FIELD("--init", init_scheme, init_scheme, FIELD_INIT, INIT_SCHEME_DEFAULT, INIT_SCHEME_NANOCHAT, RESUME_SAME),
    FIELD("groups' own Adam betas", group_betas, group_betas, FIELD_SWITCH, 0, 1, RESUME_SAME),
    FIELD("--embedding-beta1", embedding_b1, embedding_b1, FIELD_FLOAT, 0, 1, RESUME_SAME),
    FIELD("--embedding-beta2", embedding_b2, embedding_b2, FIELD_FLOAT, 0, 1, RESUME_SAME),
    FIELD("--head-beta1", head_b1, head_b1, FIELD_FLOAT, 0, 1, RESUME_SAME),
    FIELD("--head-beta2", head_b2, head_b2, FIELD_FLOAT, 0, 1, RESUME_SAME),
};
#undef FIELD
#define NUM_STATE_FIELDS (sizeof(state_fields) / sizeof(state_fields[0]))

static const void* field_in(const StateField* f, const TrainingState* s) { return (const char*)s + f->offset; }

// Whether f's value at p lies within its bounds: an int compared as an integer, a float as a
// float (NaN never does); a 64-bit value always (state_invalid bounds those).
static int field_in_range(const StateField* f, const void* p) {
    if (f->type == FIELD_U64) return 1;
    if (f->type == FIELD_FLOAT) return *(const float*)p >= f->lo && *(const float*)p <= f->hi;
    long long v = *(const int*)p;
    return v >= (long long)f->lo && v <= (long long)f->hi;
}

// f in s as a command line gives it: "-B 8", "--attention naive", "no --deterministic".
static void describe_field(const StateField* f, const TrainingState* s, char* out, size_t len) {
    const void* p = field_in(f, s);
    char recompute[64], fp8[16];
    switch (f->type) {
    case FIELD_FLOAT: snprintf(out, len, "%s %g", f->name, *(const float*)p); break;
    case FIELD_U64: snprintf(out, len, "%s %llu", f->name, (unsigned long long)*(const uint64_t*)p); break;
    case FIELD_ATTENTION: snprintf(out, len, "%s %s", f->name, attention_kind_name((AttentionKind)*(const int*)p)); break;
    case FIELD_SWITCH: snprintf(out, len, "%s%s", *(const int*)p ? "" : "no ", f->name); break;
    case FIELD_RECOMPUTE:
        recompute_name(*(const int*)p, recompute, sizeof(recompute));
        snprintf(out, len, "%s %s", f->name, recompute);
        break;
    case FIELD_OPTIMIZER: snprintf(out, len, "%s %s", f->name, optimizer_name((OptimizerKind)*(const int*)p)); break;
    case FIELD_LR_SHAPE: snprintf(out, len, "%s %s", f->name, lr_shape_name(*(const int*)p)); break;
    case FIELD_DECAY_SHAPE: snprintf(out, len, "%s %s", f->name, decay_shape_name(*(const int*)p)); break;
    case FIELD_MUON_QKV: snprintf(out, len, "%s %s", f->name, muon_qkv_name(*(const int*)p)); break;
    case FIELD_MUON_NS: snprintf(out, len, "%s %s", f->name, newton_schulz_name(*(const int*)p)); break;
    case FIELD_FP8:
        fp8_name(*(const int*)p, fp8, sizeof(fp8));
        snprintf(out, len, "%s %s", f->name, fp8);
        break;
    case FIELD_FP8_SCALING: snprintf(out, len, "%s %s", f->name, *(const int*)p ? "delayed" : "current"); break;
    case FIELD_FP8_GRAD: snprintf(out, len, "%s %s", f->name, *(const int*)p ? "bf16" : "e5m2"); break;
    case FIELD_INIT: snprintf(out, len, "%s %s", f->name, init_scheme_name(*(const int*)p)); break;
    case FIELD_INT: snprintf(out, len, "%s %d", f->name, *(const int*)p); break;
    }
}

// Whether f differs between was and now (floats by value, so 0 and -0 are one; the rest by
// their bits); when it does, both described in then and asked (len bytes each).
static int field_differs(const StateField* f, const TrainingState* was, const TrainingState* now, char* then,
                         char* asked, size_t len) {
    const void *a = field_in(f, was), *b = field_in(f, now);
    if (f->type == FIELD_FLOAT ? *(const float*)a == *(const float*)b : memcmp(a, b, f->size) == 0) return 0;
    describe_field(f, was, then, len);
    describe_field(f, now, asked, len);
    return 1;
}

// Whether s's schedule is not the default past its warmup and its end (the one versions 1 and 2
// hold), which version 3 holds.
static int has_schedule(const TrainingState* s) {
    StepSchedule earlier = {.warmup_steps = s->schedule.warmup_steps, .min_lr_frac = s->schedule.min_lr_frac};
    return memcmp(&earlier, &s->schedule, sizeof(earlier)) != 0;
}

// Whether s has any of Muon's variants, which version 5 holds.
static int has_muon_variants(const TrainingState* s) {
    return s->muon_qkv || s->muon_ns || s->cautious_weight_decay || s->normuon || s->normuon_beta2 != 0.0f;
}

// Whether s has nanochat's init or groups' own Adam betas, which version 7 holds.
static int has_init_or_group_betas(const TrainingState* s) {
    return s->init_scheme || s->group_betas || s->embedding_b1 != 0.0f || s->embedding_b2 != 0.0f ||
           s->head_b1 != 0.0f || s->head_b2 != 0.0f;
}

// Whether s has rows aligned to documents (version 4) or FP8 matmuls (version 6).
static int has_aligned_rows(const TrainingState* s) { return s->align_documents != 0; }
static int has_fp8(const TrainingState* s) { return s->fp8 != 0; }

// The versions past the optimizer's, latest first: what of a run each holds that no earlier one
// does, and what a header whose version does not match its fields is told. A run's file takes the
// first version whose part the run has (state_version); a header is checked against the same.
static const struct {
    int version;
    int (*holds)(const TrainingState*);
    const char* mismatch;
} state_versions[] = {
    {STATE_VERSION_INIT_BETAS, has_init_or_group_betas, "the version is not that of the init and the groups' betas"},
    {STATE_VERSION_FP8, has_fp8, "the version is not FP8's"},
    {STATE_VERSION_MUON_VARIANTS, has_muon_variants, "the version is not that of Muon's variants"},
    {STATE_VERSION_DOCUMENTS, has_aligned_rows, "the version is not the rows' alignment's"},
    {STATE_VERSION_SCHEDULE, has_schedule, "the version is not the schedule's"},
};
#define NUM_STATE_VERSIONS (sizeof(state_versions) / sizeof(state_versions[0]))

// The version of s's file: the earliest that holds it.
static int state_version(const TrainingState* s) {
    for (size_t i = 0; i < NUM_STATE_VERSIONS; i++)
        if (state_versions[i].holds(s)) return state_versions[i].version;
    return s->optimizer == OPTIMIZER_MUON ? STATE_VERSION_MUON : STATE_VERSION_ADAMW;
}

void state_header_pack(const TrainingState* s, StateFileHeader* h) {
    memset(h, 0, sizeof(*h));
    h->f.magic = STATE_MAGIC;
    h->f.version = state_version(s);
    for (const StateField* x = state_fields; x < state_fields + NUM_STATE_FIELDS; x++)
        memcpy((char*)h + x->at, field_in(x, s), x->size);
}

void save_training_state(GPT* g, const TrainingState* s, const char* path) {
    StateFileHeader h;
    state_header_pack(s, &h);
    FILE* f = NULL;
    char tmp[4096], err[ERR_LEN];
    int writer = g->dp.rank == 0, ok = 1;
    if (writer) {
        if (!(f = atomic_open(path, tmp, sizeof(tmp), err))) die("%s", err);
        ok = fwrite(&h, sizeof(h), 1, f) == 1;
    }
    if (gpt_write_optimizer_state(g, f) != 0 || gpt_write_fp8_state(g, f) != 0) ok = 0;
    if (writer && atomic_close(f, tmp, path, ok, err) != 0) die("%s", err);
}

OptimizerConfig training_state_optimizer(const TrainingState* s) {
    OptimizerKind kind = s->optimizer == OPTIMIZER_MUON ? OPTIMIZER_MUON : OPTIMIZER_ADAMW;
    // An AdamW run records none of Muon's settings: its betas are the fixed ones.
    OptimizerConfig o = optimizer_defaults(kind);
    o.lr = s->lr;
    o.weight_decay = s->weight_decay;
    o.grad_clip = s->grad_clip;
    if (kind != OPTIMIZER_MUON) return o;
    o.momentum = s->muon_momentum;
    o.embedding_lr = s->embedding_lr;
    o.head_lr = s->head_lr;
    o.vector_lr = s->vector_lr;
    o.b1 = s->adam_b1;
    o.b2 = s->adam_b2;
    o.muon_qkv = s->muon_qkv;
    o.muon_ns = s->muon_ns;
    o.cautious_weight_decay = s->cautious_weight_decay;
    o.normuon = s->normuon;
    o.normuon_beta2 = s->normuon_beta2;
    // Without a record of their own, the groups take the vectors' betas (every earlier version).
    o.embedding_b1 = s->group_betas ? s->embedding_b1 : o.b1;
    o.embedding_b2 = s->group_betas ? s->embedding_b2 : o.b2;
    o.head_b1 = s->group_betas && s->head_lr != 0.0f ? s->head_b1 : o.b1;
    o.head_b2 = s->group_betas && s->head_lr != 0.0f ? s->head_b2 : o.b2;
    return o;
}

void training_state_set_optimizer(TrainingState* s, const OptimizerConfig* o) {
    s->optimizer = (int)o->kind;
    s->lr = o->lr;
    s->weight_decay = o->weight_decay;
    s->grad_clip = o->grad_clip;
    s->muon_momentum = s->embedding_lr = s->vector_lr = s->adam_b1 = s->adam_b2 = s->head_lr = 0.0f;
    s->muon_qkv = s->muon_ns = s->cautious_weight_decay = s->normuon = 0;
    s->normuon_beta2 = 0.0f;
    s->group_betas = 0;
    s->embedding_b1 = s->embedding_b2 = s->head_b1 = s->head_b2 = 0.0f;
    // Muon's own settings; an AdamW run's stay zero (its betas are fixed).
    if (o->kind != OPTIMIZER_MUON) return;
    s->muon_qkv = o->muon_qkv;
    s->muon_ns = o->muon_ns;
    s->cautious_weight_decay = o->cautious_weight_decay;
    s->normuon = o->normuon;
    s->normuon_beta2 = o->normuon_beta2;
    s->muon_momentum = o->momentum;
    s->embedding_lr = o->embedding_lr;
    s->vector_lr = o->vector_lr;
    s->adam_b1 = o->b1;
    s->adam_b2 = o->b2;
    if (s->config.arch.untied_head) s->head_lr = o->head_lr;
    int untied = s->config.arch.untied_head;
    s->group_betas = o->embedding_b1 != o->b1 || o->embedding_b2 != o->b2 ||
                     (untied && (o->head_b1 != o->b1 || o->head_b2 != o->b2));
    if (!s->group_betas) return;
    s->embedding_b1 = o->embedding_b1;
    s->embedding_b2 = o->embedding_b2;
    if (untied) {
        s->head_b1 = o->head_b1;
        s->head_b2 = o->head_b2;
    }
}

// What is out of range across the fields of a state read back, each within its own bounds, or
// NULL (err, ERR_LEN bytes, may hold the line): every size is bounded before the products a resume
// computes from it (tokens per step, samples of the epoch consumed); the optimizer's settings
// are those of its kind, within gpt/optimizer.h's bounds (an untied head's rate where one is
// recorded: the header has no architecture); the schedule within gpt/schedule.h's.
static const char* state_invalid(const TrainingState* s, char* err) {
    const char* why = gpt_config_invalid(&s->config);
    if (why) return why;
    if (s->step > s->steps || s->adam_t > s->step) return "the step counts are out of range";
    if (s->T > s->config.maxT || (long long)s->B * s->T > INT_MAX) return "B or T is out of range";
    long long ranks = s->world_size > 0 ? s->world_size : 1;
    if (s->grad_accum > LLONG_MAX / ((long long)s->B * s->T * ranks)) return "the micro-steps per step are out of range";
    const DataLoaderState* at = &s->train_loader;
    if (at->epoch < 0 || at->step_in_epoch < 0 || at->step_in_epoch > INT64_MAX / ranks)
        return "the data loader's position is out of range";
    int muon = s->optimizer == OPTIMIZER_MUON;
    const float settings[] = {s->muon_momentum, s->embedding_lr, s->vector_lr, s->adam_b1, s->adam_b2, s->head_lr,
                              (float)s->muon_qkv, (float)s->muon_ns, (float)s->cautious_weight_decay,
                              (float)s->normuon, s->normuon_beta2, (float)s->group_betas, s->embedding_b1,
                              s->embedding_b2, s->head_b1, s->head_b2};
    for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
        if (!muon && settings[i] != 0.0f) return "an AdamW run with Muon's settings";
    if (!s->group_betas && (s->embedding_b1 != 0.0f || s->embedding_b2 != 0.0f || s->head_b1 != 0.0f || s->head_b2 != 0.0f))
        return "the groups' betas are set without their switch";
    if (s->head_lr == 0.0f && (s->head_b1 != 0.0f || s->head_b2 != 0.0f)) return "the head's betas are set without an untied head";
    OptimizerConfig o = training_state_optimizer(s);
    if (optimizer_invalid(&o, s->head_lr != 0.0f, err, ERR_LEN) != 0) return err;
    const char* unfit = muon_qkv_unfit(s->muon_qkv, &s->config);
    if (unfit) return unfit;
    if (step_schedule_invalid(&s->schedule, muon, err, ERR_LEN) != 0) return err;
    if (s->document_token >= (s->align_documents ? s->config.V : 1))
        return "the document token is set without --align-documents, or outside the vocabulary";
    if (!s->fp8 && (s->fp8_scaling || s->fp8_grad_bf16)) return "FP8's settings without --fp8";
    if (s->fp8_scaling == FP8_SCALING_DELAYED && s->world_size > 1)
        return "delayed FP8 scaling on several ranks, whose histories the file does not hold";
    return NULL;
}

int state_header_unpack(const StateFileHeader* h, TrainingState* s, char* err) {
    if (h->f.magic != STATE_MAGIC) {
        set_err(err, "not a training state file (magic %d, expected %d)", h->f.magic, STATE_MAGIC);
        return -1;
    }
    if (h->f.version < STATE_VERSION_ADAMW || h->f.version > STATE_VERSION_INIT_BETAS) {
        set_err(err, "unsupported training state version %d", h->f.version);
        return -1;
    }
    for (size_t i = sizeof(StateSlots) / sizeof(int32_t); i < HEADER_INTS; i++)
        if (h->ints[i] != 0) {
            set_err(err, "corrupt training state header: slot %zu holds %d, past the fields every slot is 0", i,
                    h->ints[i]);
            return -1;
        }
    memset(s, 0, sizeof(*s));
    for (const StateField* x = state_fields; x < state_fields + NUM_STATE_FIELDS; x++) {
        const void* p = memcpy((char*)s + x->offset, (const char*)h + x->at, x->size);
        if (!field_in_range(x, p)) {
            if (x->type == FIELD_FLOAT) set_err(err, "corrupt training state header: %s %g is out of range", x->name,
                                                *(const float*)p);
            else set_err(err, "corrupt training state header: %s %d is out of range", x->name, *(const int*)p);
            return -1;
        }
    }
    char why_err[ERR_LEN];
    const char* why = state_invalid(s, why_err);
    if (h->f.version != state_version(s)) {
        // The latest version the header claims or its fields need names the mismatch.
        why = "the version is not the optimizer's";
        for (size_t i = 0; i < NUM_STATE_VERSIONS; i++)
            if (h->f.version == state_versions[i].version || state_versions[i].holds(s)) {
                why = state_versions[i].mismatch;
                break;
            }
    }
    if (why) {
        set_err(err, "corrupt training state header: %s", why);
        return -1;
    }
    if (s->world_size == 0) s->world_size = 1;
    return 0;
}

TrainingState read_training_state(const char* path, const Architecture* arch) {
    FILE* f = open_checkpoint_file(path);
    StateFileHeader h;
    TrainingState s;
    char err[ERR_LEN];
    if (fread(h.ints, sizeof(int32_t), HEADER_INTS, f) != HEADER_INTS) die("%s: too short for a training state", path);
    if (state_header_unpack(&h, &s, err) != 0) die("%s: %s", path, err);
    s.config.arch = *arch;
    size_t fp8 = fp8_state_bytes(&s.config, s.fp8, (Fp8Scaling)s.fp8_scaling);
    long long bytes = (long long)(sizeof(h) + 3 * count_params(&s.config) * sizeof(float) + fp8);
    if (file_size_refused(f, path, bytes, err) != 0) die("%s", err);
    fclose(f);
    return s;
}

int resume_settings_differ(const TrainingState* was, const TrainingState* now, char* err, char* note) {
    const StateField* end = state_fields + NUM_STATE_FIELDS;
    char then[96], asked[96];
    note[0] = '\0';
    for (const StateField* f = state_fields; f < end; f++)
        if (f->resume == RESUME_SAME && field_differs(f, was, now, then, asked, sizeof(then))) {
            set_err(err, "the run used %s, this one asks for %s; an exact resume needs the same", then, asked);
            return 1;
        }
    // Any number of ranks may resume a run, with the same tokens per step.
    long long tokens = (long long)was->B * was->T * was->grad_accum * was->world_size;
    long long asked_tokens = (long long)now->B * now->T * now->grad_accum * now->world_size;
    if (tokens != asked_tokens) {
        set_err(err, "the run used --total-batch-size %lld, this one asks for --total-batch-size %lld", tokens,
                asked_tokens);
        return 1;
    }
    for (const StateField* f = state_fields; f < end; f++)
        if (f->resume == RESUME_NOTE && field_differs(f, was, now, then, asked, sizeof(then)))
            set_err(note, "%s, the run had %s: the learning-rate schedule changes", asked, then);
    return 0;
}

void check_training_state_values(const char* path, const TrainingState* s) {
    static const char* const adamw[3] = {"master weight", "AdamW m", "AdamW v"};
    static const char* const muon[3] = {"master weight", "momentum or Adam m", "Adam v"};
    static const char* const normuon[3] = {"master weight", "momentum or Adam m", "Adam v or NorMuon moment"};
    const char* const* names = s->optimizer == OPTIMIZER_MUON ? (s->normuon ? normuon : muon) : adamw;
    FILE* f = open_checkpoint_file(path);
    size_t P = count_params(&s->config), per_chunk = CHECKPOINT_IO_CHUNK / sizeof(float);
    float* chunk = (float*)malloc(CHECKPOINT_IO_CHUNK);
    if (!chunk) die("out of host memory reading %s", path);
    if (fseeko(f, (off_t)sizeof(StateFileHeader), SEEK_SET) != 0) die("%s: read failed", path);
    for (int k = 0; k < 3; k++) {
        for (size_t done = 0; done < P;) {
            size_t n = P - done < per_chunk ? P - done : per_chunk;
            if (fread(chunk, sizeof(float), n, f) != n) die("%s: read failed", path);
            for (size_t i = 0; i < n; i++)
                if (!isfinite(chunk[i]) || (k == 2 && chunk[i] < 0.0f))
                    die("%s: the %s of parameter %zu is %g: corrupt training state", path, names[k], done + i,
                        chunk[i]);
            done += n;
        }
    }
    // The FP8 layers' state after the arrays, where the run keeps one.
    size_t fp8 = fp8_state_bytes(&s->config, s->fp8, (Fp8Scaling)s->fp8_scaling);
    for (size_t i = 0; i < fp8 / sizeof(Fp8Scale); i++) {
        Fp8Scale scale;
        if (fread(&scale, sizeof(scale), 1, f) != 1) die("%s: read failed", path);
        const char* why = fp8_scale_invalid(&scale);
        if (why) die("%s: %s (FP8 state %zu): corrupt training state", path, why, i);
    }
    free(chunk);
    fclose(f);
}

void load_optimizer_state(GPT* g, const TrainingState* s, const char* path) {
    if (!gpt_config_same_model(&s->config, &g->config)) die("%s: made for another model", path);
    if (s->optimizer != (int)g->optimizer.kind) die("%s: made for another optimizer", path);
    if (s->fp8 != g->options.fp8 || s->fp8_scaling != (int)g->options.fp8_scaling)
        die("%s: made for other FP8 matmuls", path);
    FILE* f = open_checkpoint_file(path);
    long long fp8_at = (long long)sizeof(StateFileHeader) + 3 * (long long)g->num_params * (long long)sizeof(float);
    if (gpt_read_optimizer_state(g, f, (long long)sizeof(StateFileHeader)) != 0 ||
        gpt_read_fp8_state(g, f, fp8_at) != 0)
        die("%s: read failed", path);
    g->adam_t = s->adam_t;
    fclose(f);
}

int find_resume_checkpoint(const char* dir, char* model, char* state, size_t len, TrainingState* s, char* err) {
    int step = latest_checkpoint_step(dir, err);
    if (step == -2) return -1;
    if (step < 0) {
        set_err(err, "%s: no model_*.bin / state_*.bin checkpoint pair in it", dir);
        return -1;
    }
    checkpoint_paths(dir, step, model, state, len);
    GPTConfig shape;
    if (read_model_shape(model, &shape, err) != 0) return -1;
    *s = read_training_state(state, &shape.arch);
    if (!gpt_config_same_shape(&shape, &s->config)) {
        char have[ARCHITECTURE_TEXT + 128], want[ARCHITECTURE_TEXT + 128];
        gpt_config_describe(&shape, have, sizeof(have));
        gpt_config_describe(&s->config, want, sizeof(want));
        set_err(err, "%s: %s is %s, %s %s: not one checkpoint", dir, model, have, state, want);
        return -1;
    }
    return 0;
}

