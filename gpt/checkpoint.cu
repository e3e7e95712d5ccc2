// gpt/checkpoint.cu: reading and writing the model checkpoint and the training state
// (gpt/checkpoint.h).
#include "gpt/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/atomic_file.h"

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

void gpt_load_checkpoint(GPT* g, const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) die("%s: cannot open: %s", path, strerror(errno));
    int version;
    GPTConfig c = read_model_header(f, path, &version);
    if (!gpt_config_same_shape(&c, &g->config)) {
        char have[128], want[128];
        gpt_config_describe(&c, have, sizeof(have));
        gpt_config_describe(&g->config, want, sizeof(want));
        die("%s: the checkpoint is %s, the model is %s", path, have, want);
    }
    size_t P = g->num_params, elem = version == MODEL_VERSION_BF16 ? sizeof(bf16) : sizeof(float);
    float* values = (float*)malloc(P * sizeof(float));
    void* raw = malloc(P * elem);
    if (!values || !raw) die("out of host memory reading %s", path);
    if (fread(raw, elem, P, f) != P) die("%s: read failed", path);
    fclose(f);
    for (size_t i = 0; i < P; i++) {
        values[i] = version == MODEL_VERSION_BF16 ? __bfloat162float(((bf16*)raw)[i]) : ((float*)raw)[i];
        if (!isfinite(values[i])) die("%s: parameter %zu is not finite: corrupt checkpoint", path, i);
    }
    free(raw);
    gpt_set_params(g, values);
    free(values);
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

TrainingState load_training_state(GPT* g, const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) die("%s: cannot open: %s", path, strerror(errno));
    StateFileHeader h;
    if (fread(h.ints, sizeof(int32_t), HEADER_INTS, f) != HEADER_INTS) die("%s: too short for a training state", path);
    if (h.f.magic != STATE_MAGIC)
        die("%s: not a training state file (magic %d, expected %d)", path, h.f.magic, STATE_MAGIC);
    if (h.f.version != STATE_VERSION) die("%s: unsupported training state version %d", path, h.f.version);
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
    if (s.step < 0 || gpt_config_invalid(&s.config) || s.B <= 0 || s.T <= 0 || s.grad_accum <= 0 || s.adam_t < 0)
        die("%s: corrupt training state header", path);
    check_file_size(f, path, (long long)(sizeof(h) + 3 * count_params(&s.config) * sizeof(float)));
    if (g) {
        if (!gpt_config_same_shape(&s.config, &g->config)) die("%s: made for another model shape", path);
        // This rank's shard of each array (all of it without ZeRO-1); zeros past the parameters.
        const ZeroShard* shard = &g->shard;
        cudaCheck(cudaMemset(g->optimizer_memory, 0, 3 * shard->shard_size * sizeof(float)));
        for (int k = 0; k < 3; k++) {
            long long at = (long long)sizeof(h) + ((long long)k * g->num_params + shard->begin) * sizeof(float);
            if (fseeko(f, at, SEEK_SET) != 0 ||
                read_device(f, optimizer_array(g, k), (shard->end - shard->begin) * sizeof(float)) != 0)
                die("%s: read failed", path);
        }
        g->adam_t = s.adam_t;
    }
    fclose(f);
    return s;
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

void make_dirs(const char* dir) {
    if (!*dir) die("--out-dir: empty path");
    char path[4096];
    snprintf(path, sizeof(path), "%s", dir);
    for (char* p = path + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(path, 0755) != 0 && errno != EEXIST) die("%s: cannot create: %s", path, strerror(errno));
            *p = saved;
            if (saved == '\0') break;
        }
    }
}
