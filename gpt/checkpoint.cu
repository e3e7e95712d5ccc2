// gpt/checkpoint.cu: reading and writing the model checkpoint and the training state
// (gpt/checkpoint.h).
#include "gpt/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/atomic_file.h"
#include "common/output_path.h"
#include "common/read_file.h"

#define IO_CHUNK ((size_t)64 << 20)

static_assert(sizeof(ModelFileHeader) == HEADER_INTS * sizeof(int32_t), "model header is 256 int32");
static_assert(sizeof(StateFileHeader) == HEADER_INTS * sizeof(int32_t), "state header is 256 int32");

// path for reading; dies naming it unless it is a regular file (it is read at offsets and checked
// against its size).
static FILE* open_checkpoint_file(const char* path) {
    char err[ERR_LEN];
    FILE* f = fopen_regular_file(path, err);
    if (!f) die("%s", err);
    return f;
}

// Dies naming path unless the file has exactly the expected size.
static void check_file_size(FILE* f, const char* path, long long expected) {
    struct stat st;
    if (fstat(fileno(f), &st) != 0) die("%s: cannot stat: %s", path, strerror(errno));
    if ((long long)st.st_size != expected)
        die("%s: %lld bytes, expected %lld: truncated or corrupt", path, (long long)st.st_size, expected);
}

static int fp32_version(int version) { return version == MODEL_VERSION_FP32 || version == MODEL_VERSION_ARCH_FP32; }

GPTConfig read_model_header(FILE* f, const char* path, int* version) {
    ModelFileHeader h;
    if (fread(h.ints, sizeof(int32_t), HEADER_INTS, f) != HEADER_INTS)
        die("%s: too short for a model checkpoint header", path);
    if (h.f.magic != MODEL_MAGIC)
        die("%s: not a model checkpoint (magic %d, expected %d)", path, h.f.magic, MODEL_MAGIC);
    int v = h.f.version;
    int gpt2 = v == MODEL_VERSION_FP32 || v == MODEL_VERSION_BF16;
    if (!gpt2 && v != MODEL_VERSION_ARCH_FP32 && v != MODEL_VERSION_ARCH_BF16)
        die("%s: unsupported checkpoint version %d (expected 3 or 5: GPT-2, fp32 or bf16; 6 or 7: another "
            "architecture)", path, v);
    const ShapeFields* in = &h.f.shape;
    GPTConfig c = {.maxT = in->maxT, .V = in->V, .Vp = in->Vp, .L = in->L, .NH = in->NH, .C = in->C,
                   .arch = ARCHITECTURE_GPT2};
    if (gpt_config_invalid(&c))
        die("%s: corrupt header (maxT %d, V %d, L %d, NH %d, C %d, Vp %d): %s", path, c.maxT, c.V, c.L,
            c.NH, c.C, c.Vp, gpt_config_invalid(&c));
    if (!gpt2) {
        c.arch = h.f.arch;
        const char* why = architecture_invalid(&c.arch);
        if (!why) {
            gpt_config_drop_without_effect(&c);   // the file read as the model it holds (gpt/config.h)
            why = gpt_config_invalid(&c);         // the document token within the vocabulary
        }
        if (why) die("%s: corrupt header: %s", path, why);
        for (int i = MODEL_HEADER_USED_INTS; i < HEADER_INTS; i++)
            if (h.ints[i] != 0)
                die("%s: corrupt header: slot %d holds %d, past the architecture every slot is 0", path, i, h.ints[i]);
    }
    const char* why = block_unsupported(&c.arch, c.C / c.NH);
    if (why) die("%s: head size %d: %s", path, c.C / c.NH, why);
    // Checked before anything is sized from the header, so a corrupt one is called corrupt.
    size_t elem = fp32_version(v) ? sizeof(float) : sizeof(bf16);
    check_file_size(f, path, (long long)(sizeof(h) + count_params(&c) * elem));
    *version = v;
    return c;
}

int read_model_shape(const char* path, GPTConfig* shape, char* err) {
    FILE* f = fopen_regular_file(path, err);
    if (!f) return -1;
    int version;
    *shape = read_model_header(f, path, &version);
    fclose(f);
    return 0;
}

float* read_model_values(const char* path, const GPTConfig* config) {
    FILE* f = open_checkpoint_file(path);
    int version;
    GPTConfig c = read_model_header(f, path, &version);
    if (!gpt_config_same_model(&c, config)) {
        char have[ARCHITECTURE_TEXT + 128], want[ARCHITECTURE_TEXT + 128];
        gpt_config_describe(&c, have, sizeof(have));
        gpt_config_describe(config, want, sizeof(want));
        die("%s: the checkpoint is %s, the model is %s", path, have, want);
    }
    int bf16_values = !fp32_version(version);
    size_t P = count_params(&c), elem = bf16_values ? sizeof(bf16) : sizeof(float);
    float* values = (float*)malloc(P * sizeof(float));
    // bf16 values come through a bounded buffer; fp32 ones straight into values.
    void* chunk = bf16_values ? malloc(IO_CHUNK) : NULL;
    if (!values || (bf16_values && !chunk)) die("out of host memory reading %s", path);
    size_t per_chunk = IO_CHUNK / elem;
    for (size_t done = 0; done < P;) {
        size_t n = P - done < per_chunk ? P - done : per_chunk;
        void* into = chunk ? chunk : (void*)(values + done);
        if (fread(into, elem, n, f) != n) die("%s: read failed", path);
        for (size_t i = 0; i < n; i++) {
            if (chunk) values[done + i] = __bfloat162float(((const bf16*)chunk)[i]);
            if (!isfinite(values[done + i]))
                die("%s: parameter %zu is not finite: corrupt checkpoint", path, done + i);
        }
        done += n;
    }
    free(chunk);
    fclose(f);
    return values;
}

// Writes bytes of device memory to f through a bounded host buffer; 0 on success.
static int write_device(FILE* f, const void* dev, size_t bytes) {
    char* buf = (char*)malloc(bytes < IO_CHUNK ? bytes : IO_CHUNK);
    if (!buf) return -1;
    int ok = 1;
    for (size_t done = 0; ok && done < bytes;) {
        size_t n = bytes - done < IO_CHUNK ? bytes - done : IO_CHUNK;
        cudaCheck(cudaMemcpy(buf, (const char*)dev + done, n, cudaMemcpyDeviceToHost));
        ok = fwrite(buf, 1, n, f) == n;
        done += n;
    }
    free(buf);
    return ok ? 0 : -1;
}

// Reads bytes from f into device memory; 0 on success.
static int read_device(FILE* f, void* dev, size_t bytes) {
    char* buf = (char*)malloc(bytes < IO_CHUNK ? bytes : IO_CHUNK);
    if (!buf) return -1;
    int ok = 1;
    for (size_t done = 0; ok && done < bytes;) {
        size_t n = bytes - done < IO_CHUNK ? bytes - done : IO_CHUNK;
        ok = fread(buf, 1, n, f) == n;
        if (ok) cudaCheck(cudaMemcpy((char*)dev + done, buf, n, cudaMemcpyHostToDevice));
        done += n;
    }
    free(buf);
    return ok ? 0 : -1;
}

// path's temporary sibling, for writing; close_written renames it into place.
static void open_for_writing(const char* path, char* tmp, size_t tmp_len, FILE** f) {
    char err[ERR_LEN];
    *f = atomic_open(path, tmp, tmp_len, err);
    if (!*f) die("%s", err);
}

static void close_written(FILE* f, const char* tmp, const char* path, int ok) {
    char err[ERR_LEN];
    if (atomic_close(f, tmp, path, ok, err) != 0) die("%s", err);
}

// The three optimizer arrays of the state file: master weights, m, v (each shard_size floats).
static float* optimizer_array(GPT* g, int k) { return k == 0 ? g->master : k == 1 ? g->m : g->v; }
static int sharded(const GPT* g) { return g->dp.comm && g->dp.zero_stage == 1; }

// The header of a model checkpoint of c's shape and architecture, its values bf16 or fp32: GPT-2's
// llm.c versions 5 and 3, another architecture's 7 and 6.
static ModelFileHeader model_header(const GPTConfig* c, int bf16) {
    ModelFileHeader h;
    memset(&h, 0, sizeof(h));
    h.f.magic = MODEL_MAGIC;
    int gpt2 = architecture_is_gpt2(&c->arch);
    h.f.version = bf16 ? (gpt2 ? MODEL_VERSION_BF16 : MODEL_VERSION_ARCH_BF16)
                       : (gpt2 ? MODEL_VERSION_FP32 : MODEL_VERSION_ARCH_FP32);
    h.f.shape = (ShapeFields){.maxT = c->maxT, .V = c->V, .L = c->L, .NH = c->NH, .C = c->C, .Vp = c->Vp};
    if (!gpt2) h.f.arch = c->arch;
    return h;
}

void gpt_save_checkpoint(GPT* g, const char* path) {
    ModelFileHeader h = model_header(&g->config, 1);
    if (g->dp.comm) cudaCheck(cudaStreamSynchronize(g->comm_stream));   // the gathered parameters
    cudaCheck(cudaStreamSynchronize(g->stream));
    if (g->dp.rank != 0) return;
    FILE* f;
    char tmp[4096];
    open_for_writing(path, tmp, sizeof(tmp), &f);
    int ok = fwrite(&h, sizeof(h), 1, f) == 1 && write_device(f, g->params_memory, g->num_params * sizeof(bf16)) == 0;
    close_written(f, tmp, path, ok);
}

void save_model_values(const char* path, const GPTConfig* c, const float* values) {
    ModelFileHeader h = model_header(c, 0);
    FILE* f;
    char tmp[4096];
    open_for_writing(path, tmp, sizeof(tmp), &f);
    size_t n = count_params(c);
    int ok = fwrite(&h, sizeof(h), 1, f) == 1 && fwrite(values, sizeof(float), n, f) == n;
    close_written(f, tmp, path, ok);
}

// The training state header, a row per field of a TrainingState: its member of StateSlots (the
// slots it takes; a float is stored by its bits), the values a valid file holds, and what a
// resume does with it. The header is written, read back, bounded and compared on a resume by
// this table alone, so a new setting is one member of StateSlots and one row here.
// ATTENTION, SWITCH, RECOMPUTE and OPTIMIZER are ints, shown as their flags take them.
typedef enum { FIELD_INT, FIELD_FLOAT, FIELD_U64, FIELD_ATTENTION, FIELD_SWITCH, FIELD_RECOMPUTE, FIELD_OPTIMIZER } FieldType;
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
static_assert(offsetof(StateSlots, world_size) == 31 * sizeof(int32_t) &&
              offsetof(StateSlots, seed) == 19 * sizeof(int32_t), "the slots of earlier versions stay where they were");
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
    FIELD("--warmup-steps", warmup_steps, warmup_steps, FIELD_INT, 0, INT_MAX, RESUME_SAME),
    FIELD("--steps", steps, steps, FIELD_INT, 1, INT_MAX, RESUME_NOTE),
    FIELD("AdamW step", adam_t, adam_t, FIELD_INT, 0, INT_MAX, RESUME_FREE),
    // The optimizer's settings are finite here; their bounds are gpt/optimizer.h's (state_invalid).
    FIELD("--lr", lr, lr, FIELD_FLOAT, -FLT_MAX, FLT_MAX, RESUME_SAME),
    FIELD("--min-lr-frac", min_lr_frac, min_lr_frac, FIELD_FLOAT, 0, 1, RESUME_SAME),
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
    char recompute[64];
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

static int state_version(int optimizer) { return optimizer == OPTIMIZER_MUON ? STATE_VERSION_MUON : STATE_VERSION_ADAMW; }

void state_header_pack(const TrainingState* s, StateFileHeader* h) {
    memset(h, 0, sizeof(*h));
    h->f.magic = STATE_MAGIC;
    h->f.version = state_version(s->optimizer);
    for (const StateField* x = state_fields; x < state_fields + NUM_STATE_FIELDS; x++)
        memcpy((char*)h + x->at, field_in(x, s), x->size);
}

// Writes bytes of the fp32 array k (0 master weights, 1 m, 2 v) of the whole model, in
// parameter order, to f on rank 0. With ZeRO-1 the ranks' parts are gathered first, one
// broadcast each (every rank takes part). 0 on success.
static int write_optimizer_array(GPT* g, int k, FILE* f) {
    const float* array = optimizer_array(g, k);
    if (!sharded(g)) return g->dp.rank == 0 ? write_device(f, array, g->num_params * sizeof(float)) : 0;
    float* full;
    const ZeroShard* s = &g->shard;
    cudaCheck(cudaMalloc((void**)&full, g->num_params * sizeof(float)));
    nccl_group_begin();
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        for (int r = 0; r < s->world_size; r++) {
            ZeroShardPart part = zero_shard_part(s, g->zero_tensors, i, r);
            if (part.count)
                nccl_broadcast(g->dp.comm, array + part.shard_offset, full + part.param_index, part.count * sizeof(float),
                               r, g->stream);
        }
    nccl_group_end();
    cudaCheck(cudaStreamSynchronize(g->stream));
    int failed = g->dp.rank == 0 ? write_device(f, full, g->num_params * sizeof(float)) : 0;
    cudaCheck(cudaFree(full));
    return failed;
}

void save_training_state(GPT* g, const TrainingState* s, const char* path) {
    StateFileHeader h;
    state_header_pack(s, &h);
    cudaCheck(cudaStreamSynchronize(g->stream));
    FILE* f = NULL;
    char tmp[4096];
    int writer = g->dp.rank == 0, ok = 1;
    if (writer) {
        open_for_writing(path, tmp, sizeof(tmp), &f);
        ok = fwrite(&h, sizeof(h), 1, f) == 1;
    }
    for (int k = 0; k < 3; k++)
        if (write_optimizer_array(g, k, f) != 0) ok = 0;
    if (writer) close_written(f, tmp, path, ok);
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
    return o;
}

void training_state_set_optimizer(TrainingState* s, const OptimizerConfig* o) {
    s->optimizer = (int)o->kind;
    s->lr = o->lr;
    s->weight_decay = o->weight_decay;
    s->grad_clip = o->grad_clip;
    s->muon_momentum = s->embedding_lr = s->vector_lr = s->adam_b1 = s->adam_b2 = s->head_lr = 0.0f;
    // Muon's own settings; an AdamW run's stay zero (its betas are fixed).
    if (o->kind != OPTIMIZER_MUON) return;
    s->muon_momentum = o->momentum;
    s->embedding_lr = o->embedding_lr;
    s->vector_lr = o->vector_lr;
    s->adam_b1 = o->b1;
    s->adam_b2 = o->b2;
    if (s->config.arch.untied_head) s->head_lr = o->head_lr;
}

// What is out of range across the fields of a state read back, each within its own bounds, or
// NULL (err, ERR_LEN bytes, may hold the line): every size is bounded before the products a resume
// computes from it (tokens per step, samples of the epoch consumed); the optimizer's settings
// are those of its kind, within gpt/optimizer.h's bounds (an untied head's rate where one is
// recorded: the header has no architecture).
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
    float settings[6] = {s->muon_momentum, s->embedding_lr, s->vector_lr, s->adam_b1, s->adam_b2, s->head_lr};
    for (int i = 0; i < 6; i++)
        if (!muon && settings[i] != 0.0f) return "an AdamW run with Muon's settings";
    OptimizerConfig o = training_state_optimizer(s);
    if (optimizer_invalid(&o, s->head_lr != 0.0f, err, ERR_LEN) != 0) return err;
    return NULL;
}

int state_header_unpack(const StateFileHeader* h, TrainingState* s, char* err) {
    if (h->f.magic != STATE_MAGIC) {
        set_err(err, "not a training state file (magic %d, expected %d)", h->f.magic, STATE_MAGIC);
        return -1;
    }
    if (h->f.version != STATE_VERSION_ADAMW && h->f.version != STATE_VERSION_MUON) {
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
    const char* why = h->f.version != state_version(s->optimizer) ? "the version is not the optimizer's"
                                                                  : state_invalid(s, why_err);
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
    check_file_size(f, path, (long long)(sizeof(h) + 3 * count_params(&s.config) * sizeof(float)));
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
    const char* const* names = s->optimizer == OPTIMIZER_MUON ? muon : adamw;
    FILE* f = open_checkpoint_file(path);
    size_t P = count_params(&s->config), per_chunk = IO_CHUNK / sizeof(float);
    float* chunk = (float*)malloc(IO_CHUNK);
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
    free(chunk);
    fclose(f);
}

void load_optimizer_state(GPT* g, const TrainingState* s, const char* path) {
    if (!gpt_config_same_model(&s->config, &g->config)) die("%s: made for another model", path);
    if (s->optimizer != (int)g->optimizer.kind) die("%s: made for another optimizer", path);
    FILE* f = open_checkpoint_file(path);
    // This rank's parts of each array (all of it without ZeRO-1); zeros elsewhere.
    const ZeroShard* shard = &g->shard;
    cudaCheck(cudaMemset(g->optimizer_memory, 0, 3 * shard->shard_size * sizeof(float)));
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
            ZeroShardPart part = zero_shard_part(shard, g->zero_tensors, i, shard->rank);
            if (part.count == 0) continue;
            long long at = (long long)sizeof(StateFileHeader) + ((long long)k * g->num_params + part.param_index) *
                                                                    sizeof(float);
            if (fseeko(f, at, SEEK_SET) != 0 ||
                read_device(f, optimizer_array(g, k) + part.shard_offset, part.count * sizeof(float)) != 0)
                die("%s: read failed", path);
        }
    g->adam_t = s->adam_t;
    fclose(f);
}

void checkpoint_paths(const char* dir, int step, char* model, char* state, size_t len) {
    if (snprintf(model, len, "%s/model_%08d.bin", dir, step) >= (int)len ||
        snprintf(state, len, "%s/state_%08d.bin", dir, step) >= (int)len)
        die("%s: path too long", dir);
}

int latest_checkpoint_step(const char* dir, char* err) {
    DIR* d = opendir(dir);
    if (!d) {
        set_err(err, "%s: cannot open the directory: %s", dir, strerror(errno));
        return -2;
    }
    int best = -1;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        int step, end = 0;
        if (sscanf(e->d_name, "state_%8d.bin%n", &step, &end) != 1 || e->d_name[end] != '\0') continue;
        char model[4096], state[4096];
        checkpoint_paths(dir, step, model, state, sizeof(model));
        if (step > best && access(model, R_OK) == 0) best = step;
    }
    closedir(d);
    return best;
}

int checkpoint_file_step(const char* name) {
    int step, end = 0;
    if ((sscanf(name, "model_%8d.bin%n", &step, &end) != 1 && sscanf(name, "state_%8d.bin%n", &step, &end) != 1) ||
        name[end] != '\0')
        return -1;
    return step;
}

int count_checkpoint_files(const char* dir, int* latest, char* err) {
    DIR* d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return 0;
        set_err(err, "cannot read the folder: %s", strerror(errno));
        return -1;
    }
    int n = 0;
    *latest = -1;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        int step = checkpoint_file_step(e->d_name);
        if (step < 0) continue;
        n++;
        if (step > *latest) *latest = step;
    }
    closedir(d);
    return n;
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

int check_checkpoint_folder(const char* dir, const char* resumed_dir, char* err) {
    if (resumed_dir && same_file(dir, resumed_dir)) return 0;
    int latest, n = count_checkpoint_files(dir, &latest, err);
    if (n < 0) {
        char why[ERR_LEN];
        snprintf(why, sizeof(why), "%s", err);
        set_err(err, "%s: %s", dir, why);
    } else if (n > 0) {
        set_err(err, "%s holds the checkpoints of another run (%d file%s, the latest of step %d)", dir, n,
                n > 1 ? "s" : "", latest);
    }
    return n;
}
