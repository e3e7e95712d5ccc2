// gpt/checkpoint.cu: reading and writing the model checkpoint and the training state
// (gpt/checkpoint.h).
#include "gpt/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/atomic_file.h"
#include "common/read_file.h"

#define IO_CHUNK ((size_t)64 << 20)

static_assert(sizeof(ModelFileHeader) == HEADER_INTS * sizeof(int32_t), "model header is 256 int32");
static_assert(sizeof(StateFileHeader) == HEADER_INTS * sizeof(int32_t), "state header is 256 int32");

static ShapeFields shape_fields(const GPTConfig* c) {
    ShapeFields f = {.maxT = c->maxT, .V = c->V, .L = c->L, .NH = c->NH, .C = c->C, .Vp = c->Vp};
    return f;
}

static GPTConfig shape_config(ShapeFields f) {
    GPTConfig c = {.maxT = f.maxT, .V = f.V, .Vp = f.Vp, .L = f.L, .NH = f.NH, .C = f.C};
    return c;
}

static void pack_u64(uint32_t h[2], uint64_t v) { h[0] = (uint32_t)v; h[1] = (uint32_t)(v >> 32); }
static uint64_t unpack_u64(const uint32_t h[2]) { return (uint64_t)h[0] | ((uint64_t)h[1] << 32); }

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

GPTConfig read_model_header(FILE* f, const char* path, int* version) {
    ModelFileHeader h;
    if (fread(h.ints, sizeof(int32_t), HEADER_INTS, f) != HEADER_INTS)
        die("%s: too short for a model checkpoint header", path);
    if (h.f.magic != MODEL_MAGIC)
        die("%s: not a model checkpoint (magic %d, expected %d)", path, h.f.magic, MODEL_MAGIC);
    if (h.f.version != MODEL_VERSION_FP32 && h.f.version != MODEL_VERSION_BF16)
        die("%s: unsupported checkpoint version %d (expected 3: fp32 or 5: bf16)", path, h.f.version);
    GPTConfig c = shape_config(h.f.shape);
    if (gpt_config_invalid(&c))
        die("%s: corrupt header (maxT %d, V %d, L %d, NH %d, C %d, Vp %d): %s", path, c.maxT, c.V, c.L,
            c.NH, c.C, c.Vp, gpt_config_invalid(&c));
    // Checked before anything is sized from the header, so a corrupt one is called corrupt.
    size_t elem = h.f.version == MODEL_VERSION_BF16 ? sizeof(bf16) : sizeof(float);
    check_file_size(f, path, (long long)(sizeof(h) + count_params(&c) * elem));
    *version = h.f.version;
    return c;
}

float* read_model_values(const char* path, const GPTConfig* config) {
    FILE* f = open_checkpoint_file(path);
    int version;
    GPTConfig c = read_model_header(f, path, &version);
    if (!gpt_config_same_shape(&c, config)) {
        char have[128], want[128];
        gpt_config_describe(&c, have, sizeof(have));
        gpt_config_describe(config, want, sizeof(want));
        die("%s: the checkpoint is %s, the model is %s", path, have, want);
    }
    size_t P = count_params(&c), elem = version == MODEL_VERSION_BF16 ? sizeof(bf16) : sizeof(float);
    float* values = (float*)malloc(P * sizeof(float));
    // bf16 values come through a bounded buffer; fp32 ones straight into values.
    void* chunk = version == MODEL_VERSION_BF16 ? malloc(IO_CHUNK) : NULL;
    if (!values || (version == MODEL_VERSION_BF16 && !chunk)) die("out of host memory reading %s", path);
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

void gpt_save_checkpoint(GPT* g, const char* path) {
    const GPTConfig* c = &g->config;
    ModelFileHeader h;
    memset(&h, 0, sizeof(h));
    h.f.magic = MODEL_MAGIC;
    h.f.version = MODEL_VERSION_BF16;
    h.f.shape = shape_fields(c);
    if (g->dp.comm) cudaCheck(cudaStreamSynchronize(g->comm_stream));   // the gathered parameters
    cudaCheck(cudaStreamSynchronize(g->stream));
    if (g->dp.rank != 0) return;
    FILE* f;
    char tmp[4096];
    open_for_writing(path, tmp, sizeof(tmp), &f);
    int ok = fwrite(&h, sizeof(h), 1, f) == 1 && write_device(f, g->params_memory, g->num_params * sizeof(bf16)) == 0;
    close_written(f, tmp, path, ok);
}

void save_training_state(GPT* g, const TrainingState* s, const char* path) {
    const GPTConfig* c = &s->config;
    StateFileHeader h;
    memset(&h, 0, sizeof(h));
    h.f.magic = STATE_MAGIC;
    h.f.version = STATE_VERSION;
    h.f.step = s->step;
    h.f.shape = shape_fields(c);
    h.f.B = s->B;
    h.f.T = s->T;
    h.f.grad_accum = s->grad_accum;
    h.f.warmup_steps = s->warmup_steps;
    h.f.steps = s->steps;
    h.f.adam_t = s->adam_t;
    h.f.lr = s->lr;
    h.f.min_lr_frac = s->min_lr_frac;
    h.f.weight_decay = s->weight_decay;
    h.f.grad_clip = s->grad_clip;
    pack_u64(h.f.seed, s->seed);
    pack_u64(h.f.loader_epoch, (uint64_t)s->train_loader.epoch);
    pack_u64(h.f.loader_step_in_epoch, (uint64_t)s->train_loader.step_in_epoch);
    pack_u64(h.f.sample_rng, s->sample_rng);
    h.f.attention = s->attention;
    h.f.deterministic = s->deterministic;
    h.f.recompute = s->recompute;
    h.f.classifier_rows = s->classifier_rows;
    h.f.world_size = s->world_size;
    cudaCheck(cudaStreamSynchronize(g->stream));
    FILE* f = NULL;
    char tmp[4096];
    int writer = g->dp.rank == 0, ok = 1;
    if (writer) {
        open_for_writing(path, tmp, sizeof(tmp), &f);
        ok = fwrite(&h, sizeof(h), 1, f) == 1;
    }
    // With ZeRO-1 each array is gathered from the ranks' shards, one at a time.
    float* full = NULL;
    if (sharded(g)) cudaCheck(cudaMalloc((void**)&full, g->shard.padded_count * sizeof(float)));
    for (int k = 0; k < 3; k++) {
        const float* array = optimizer_array(g, k);
        if (full) {
            nccl_all_gather_f32(g->dp.comm, array, full, g->shard.shard_size, g->stream);
            cudaCheck(cudaStreamSynchronize(g->stream));
            array = full;
        }
        if (writer) ok = ok && write_device(f, array, g->num_params * sizeof(float)) == 0;
    }
    if (full) cudaCheck(cudaFree(full));
    if (writer) close_written(f, tmp, path, ok);
}

// What is out of bounds in a state header, or NULL: every size is bounded before the products
// a resume computes from it (tokens per step, samples of the epoch consumed).
static const char* state_header_invalid(const StateFileHeader* h) {
    const GPTConfig c = shape_config(h->f.shape);
    const char* why = gpt_config_invalid(&c);
    if (why) return why;
    if (h->f.step < 0 || h->f.steps <= 0 || h->f.step > h->f.steps || h->f.warmup_steps < 0 || h->f.adam_t < 0)
        return "the step counts are out of range";
    if (h->f.B <= 0 || h->f.T <= 0 || h->f.T > c.maxT || (long long)h->f.B * h->f.T > INT_MAX)
        return "B or T is out of range";
    if (h->f.world_size < 0) return "the number of ranks is negative";
    long long ranks = h->f.world_size > 0 ? h->f.world_size : 1;
    if (h->f.grad_accum <= 0 || h->f.grad_accum > LLONG_MAX / ((long long)h->f.B * h->f.T * ranks))
        return "the micro-steps per step are out of range";
    int64_t epoch = (int64_t)unpack_u64(h->f.loader_epoch), at = (int64_t)unpack_u64(h->f.loader_step_in_epoch);
    if (epoch < 0 || at < 0 || at > INT64_MAX / ranks) return "the data loader's position is out of range";
    if (!(h->f.lr > 0.0f) || !isfinite(h->f.lr) || !(h->f.min_lr_frac >= 0.0f && h->f.min_lr_frac <= 1.0f) ||
        !(h->f.weight_decay >= 0.0f) || !isfinite(h->f.weight_decay) || !(h->f.grad_clip >= 0.0f) ||
        !isfinite(h->f.grad_clip))
        return "a hyperparameter is out of range";
    if ((h->f.attention != ATTENTION_FLASH && h->f.attention != ATTENTION_NAIVE) ||
        (h->f.deterministic != 0 && h->f.deterministic != 1) || h->f.recompute < 0 ||
        h->f.recompute > (RECOMPUTE_GELU | RECOMPUTE_LAYERNORM) || h->f.classifier_rows <= 0)
        return "an attention or memory option is out of range";
    return NULL;
}

TrainingState read_training_state(const char* path) {
    FILE* f = open_checkpoint_file(path);
    StateFileHeader h;
    if (fread(h.ints, sizeof(int32_t), HEADER_INTS, f) != HEADER_INTS) die("%s: too short for a training state", path);
    if (h.f.magic != STATE_MAGIC)
        die("%s: not a training state file (magic %d, expected %d)", path, h.f.magic, STATE_MAGIC);
    if (h.f.version != STATE_VERSION) die("%s: unsupported training state version %d", path, h.f.version);
    const char* why = state_header_invalid(&h);
    if (why) die("%s: corrupt training state header: %s", path, why);
    TrainingState s;
    s.step = h.f.step;
    s.config = shape_config(h.f.shape);
    s.B = h.f.B;
    s.T = h.f.T;
    s.grad_accum = h.f.grad_accum;
    s.warmup_steps = h.f.warmup_steps;
    s.steps = h.f.steps;
    s.adam_t = h.f.adam_t;
    s.lr = h.f.lr;
    s.min_lr_frac = h.f.min_lr_frac;
    s.weight_decay = h.f.weight_decay;
    s.grad_clip = h.f.grad_clip;
    s.seed = unpack_u64(h.f.seed);
    s.train_loader.epoch = (int64_t)unpack_u64(h.f.loader_epoch);
    s.train_loader.step_in_epoch = (int64_t)unpack_u64(h.f.loader_step_in_epoch);
    s.sample_rng = unpack_u64(h.f.sample_rng);
    s.attention = h.f.attention;
    s.deterministic = h.f.deterministic;
    s.recompute = h.f.recompute;
    s.classifier_rows = h.f.classifier_rows;
    s.world_size = h.f.world_size > 0 ? h.f.world_size : 1;
    check_file_size(f, path, (long long)(sizeof(h) + 3 * count_params(&s.config) * sizeof(float)));
    fclose(f);
    return s;
}

void check_training_state_values(const char* path, const TrainingState* s) {
    static const char* const names[3] = {"master weight", "AdamW m", "AdamW v"};
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
    if (!gpt_config_same_shape(&s->config, &g->config)) die("%s: made for another model shape", path);
    FILE* f = open_checkpoint_file(path);
    // This rank's shard of each array (all of it without ZeRO-1); zeros past the parameters.
    const ZeroShard* shard = &g->shard;
    cudaCheck(cudaMemset(g->optimizer_memory, 0, 3 * shard->shard_size * sizeof(float)));
    for (int k = 0; k < 3; k++) {
        long long at = (long long)sizeof(StateFileHeader) + ((long long)k * g->num_params + shard->begin) * sizeof(float);
        if (fseeko(f, at, SEEK_SET) != 0 ||
            read_device(f, optimizer_array(g, k), (shard->end - shard->begin) * sizeof(float)) != 0)
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

int latest_checkpoint_step(const char* dir) {
    DIR* d = opendir(dir);
    if (!d) die("--resume %s: cannot open the directory: %s", dir, strerror(errno));
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
        int step, end = 0;
        if ((sscanf(e->d_name, "model_%8d.bin%n", &step, &end) != 1 &&
             sscanf(e->d_name, "state_%8d.bin%n", &step, &end) != 1) || e->d_name[end] != '\0')
            continue;
        n++;
        if (step > *latest) *latest = step;
    }
    closedir(d);
    return n;
}

int check_dirs(const char* dir, char* err) {
    char path[4096];
    if (!*dir) {
        set_err(err, "the folder name is empty");
        return -1;
    }
    if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path)) {
        set_err(err, "path too long");
        return -1;
    }
    // Up from dir to the first part of it that exists (a file on the way stops stat too).
    struct stat st;
    while (stat(path, &st) != 0) {
        if ((errno != ENOENT && errno != ENOTDIR) || !strcmp(path, ".") || !strcmp(path, "/")) {
            set_err(err, "%s: %s", path, strerror(errno));
            return -1;
        }
        char* slash = strrchr(path, '/');
        while (slash && slash > path && slash[-1] == '/') slash--;
        if (!slash) snprintf(path, sizeof(path), ".");
        else slash[slash == path] = '\0';
    }
    if (!S_ISDIR(st.st_mode)) {
        set_err(err, "%s is not a directory", path);
        return -1;
    }
    if (access(path, W_OK | X_OK) != 0) {
        set_err(err, "cannot write in %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

void make_dirs(const char* dir) {
    if (!*dir) die("cannot create a folder of an empty name");
    char path[4096];
    if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path)) die("%s: path too long", dir);
    for (char* p = path + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(path, 0755) != 0 && errno != EEXIST) die("%s: cannot create: %s", path, strerror(errno));
            *p = saved;
            if (saved == '\0') break;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) die("%s: not a directory", dir);
}
