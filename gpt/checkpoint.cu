// gpt/checkpoint.cu: reading and writing the model checkpoint, and the optimizer's arrays of a
// training state (gpt/checkpoint.h).
#include "gpt/checkpoint.h"

#include <float.h>
#include <math.h>
#include <string.h>
#include "common/atomic_file.h"
#include "common/read_file.h"

static_assert(sizeof(ModelFileHeader) == HEADER_INTS * sizeof(int32_t), "model header is 256 int32");

FILE* open_checkpoint_file(const char* path) {
    char err[ERR_LEN];
    FILE* f = fopen_regular_file(path, err);
    if (!f) die("%s", err);
    return f;
}

// Dies naming path unless the file has exactly the expected size.
static void check_file_size(FILE* f, const char* path, long long expected) {
    char err[ERR_LEN];
    if (file_size_refused(f, path, expected, err) != 0) die("%s", err);
}

static int fp32_version(int version) {
    return version == MODEL_VERSION_FP32 || version == MODEL_VERSION_ARCH_FP32 || version == MODEL_VERSION_PARTS_FP32;
}

GPTConfig read_model_header(FILE* f, const char* path, int* version) {
    ModelFileHeader h;
    if (fread(h.ints, sizeof(int32_t), HEADER_INTS, f) != HEADER_INTS)
        die("%s: too short for a model checkpoint header", path);
    if (h.f.magic != MODEL_MAGIC)
        die("%s: not a model checkpoint (magic %d, expected %d)", path, h.f.magic, MODEL_MAGIC);
    int v = h.f.version;
    int gpt2 = v == MODEL_VERSION_FP32 || v == MODEL_VERSION_BF16;
    int parts = v == MODEL_VERSION_PARTS_FP32 || v == MODEL_VERSION_PARTS_BF16;
    if (!gpt2 && !parts && v != MODEL_VERSION_ARCH_FP32 && v != MODEL_VERSION_ARCH_BF16)
        die("%s: unsupported checkpoint version %d (expected 3 or 5: GPT-2, fp32 or bf16; 6 or 7: another "
            "architecture; 8 or 9: with a part of the 2026 recipe)", path, v);
    const ShapeFields* in = &h.f.shape;
    GPTConfig c = {.maxT = in->maxT, .V = in->V, .Vp = in->Vp, .L = in->L, .NH = in->NH, .C = in->C,
                   .arch = ARCHITECTURE_GPT2};
    if (gpt_config_invalid(&c))
        die("%s: corrupt header (maxT %d, V %d, L %d, NH %d, C %d, Vp %d): %s", path, c.maxT, c.V, c.L,
            c.NH, c.C, c.Vp, gpt_config_invalid(&c));
    if (!gpt2) {
        // Versions 6 and 7 end before the parts' slots, whose zeros read as none of them.
        for (int i = parts ? MODEL_HEADER_USED_INTS : MODEL_HEADER_PARTS_INT; i < HEADER_INTS; i++)
            if (h.ints[i] != 0)
                die("%s: corrupt header: slot %d holds %d, past the architecture every slot is 0", path, i, h.ints[i]);
        c.arch = h.f.arch;
        const char* why = architecture_invalid(&c.arch);
        if (!why) {
            gpt_config_drop_without_effect(&c);   // the file read as the model it holds (gpt/config.h)
            why = gpt_config_invalid(&c);         // the document token within the vocabulary
        }
        if (why) die("%s: corrupt header: %s", path, why);
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
    void* chunk = bf16_values ? malloc(CHECKPOINT_IO_CHUNK) : NULL;
    if (!values || (bf16_values && !chunk)) die("out of host memory reading %s", path);
    size_t per_chunk = CHECKPOINT_IO_CHUNK / elem;
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
    char* buf = (char*)malloc(bytes < CHECKPOINT_IO_CHUNK ? bytes : CHECKPOINT_IO_CHUNK);
    if (!buf) return -1;
    int ok = 1;
    for (size_t done = 0; ok && done < bytes;) {
        size_t n = bytes - done < CHECKPOINT_IO_CHUNK ? bytes - done : CHECKPOINT_IO_CHUNK;
        cudaCheck(cudaMemcpy(buf, (const char*)dev + done, n, cudaMemcpyDeviceToHost));
        ok = fwrite(buf, 1, n, f) == n;
        done += n;
    }
    free(buf);
    return ok ? 0 : -1;
}

// Reads bytes from f into device memory; 0 on success.
static int read_device(FILE* f, void* dev, size_t bytes) {
    char* buf = (char*)malloc(bytes < CHECKPOINT_IO_CHUNK ? bytes : CHECKPOINT_IO_CHUNK);
    if (!buf) return -1;
    int ok = 1;
    for (size_t done = 0; ok && done < bytes;) {
        size_t n = bytes - done < CHECKPOINT_IO_CHUNK ? bytes - done : CHECKPOINT_IO_CHUNK;
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
// llm.c versions 5 and 3, a model with a part of the 2026 recipe 9 and 8, another architecture's
// 7 and 6 (which readers without the parts read).
static ModelFileHeader model_header(const GPTConfig* c, int bf16) {
    ModelFileHeader h;
    memset(&h, 0, sizeof(h));
    h.f.magic = MODEL_MAGIC;
    int gpt2 = architecture_is_gpt2(&c->arch), parts = architecture_has_parts(&c->arch);
    h.f.version = gpt2    ? (bf16 ? MODEL_VERSION_BF16 : MODEL_VERSION_FP32)
                  : parts ? (bf16 ? MODEL_VERSION_PARTS_BF16 : MODEL_VERSION_PARTS_FP32)
                          : (bf16 ? MODEL_VERSION_ARCH_BF16 : MODEL_VERSION_ARCH_FP32);
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

int gpt_write_optimizer_state(GPT* g, FILE* f) {
    cudaCheck(cudaStreamSynchronize(g->stream));
    int failed = 0;
    for (int k = 0; k < 3; k++)
        if (write_optimizer_array(g, k, f) != 0) failed = 1;
    return failed ? -1 : 0;
}

int gpt_read_optimizer_state(GPT* g, FILE* f, long long at) {
    // This rank's parts of each array (all of it without ZeRO-1); zeros elsewhere.
    const ZeroShard* shard = &g->shard;
    cudaCheck(cudaMemset(g->optimizer_memory, 0, 3 * shard->shard_size * sizeof(float)));
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
            ZeroShardPart part = zero_shard_part(shard, g->zero_tensors, i, shard->rank);
            if (part.count == 0) continue;
            long long from = at + ((long long)k * g->num_params + part.param_index) * (long long)sizeof(float);
            if (fseeko(f, from, SEEK_SET) != 0 ||
                read_device(f, optimizer_array(g, k) + part.shard_offset, part.count * sizeof(float)) != 0)
                return -1;
        }
    return 0;
}

// The Fp8Tensor states of fp8_state_bytes, in the file's order: n of them, or (out not NULL) out
// pointed at them.
static int fp8_tensors(GPT* g, Fp8Tensor** out) {
    int n = 0;
    if (g->options.fp8_scaling != FP8_SCALING_DELAYED) return 0;
    for (int i = 0; g->fp8.mlp && i < 2 * g->config.L; i++) {
        if (out) out[n] = &g->fp8.mlp[i].inp, out[n + 1] = &g->fp8.mlp[i].grad;
        n += 2;
    }
    if (g->fp8.head) {
        if (out) out[n] = &g->fp8.head->inp, out[n + 1] = &g->fp8.head->grad;
        n += 2;
    }
    return n;
}

size_t fp8_state_bytes(const GPTConfig* c, int fp8, Fp8Scaling scaling) {
    if (scaling != FP8_SCALING_DELAYED) return 0;
    size_t layers = (fp8 & FP8_MLP ? 2 * (size_t)c->L : 0) + (fp8 & FP8_HEAD ? 1 : 0);
    return 2 * layers * sizeof(Fp8Scale);
}

const char* fp8_scale_invalid(const Fp8Scale* s) {
    if (!(s->scale_inv >= 0.0f && s->scale_inv <= FLT_MAX && s->scale >= 0.0f && s->scale <= FLT_MAX))
        return "an FP8 scale is not a finite number >= 0";
    for (int i = 0; i < FP8_HISTORY; i++)
        if (!(s->history[i] >= 0.0f && s->history[i] <= FLT_MAX)) return "an FP8 amax is not a finite number >= 0";
    if (s->amax != 0.0f || s->blocks_done != 0) return "an FP8 state is caught in a quantisation";
    return NULL;
}

int gpt_write_fp8_state(GPT* g, FILE* f) {
    int n = fp8_tensors(g, NULL);
    if (n == 0 || g->dp.rank != 0) return 0;
    Fp8Tensor** tensors = (Fp8Tensor**)malloc(n * sizeof(Fp8Tensor*));
    if (!tensors) die("out of host memory");
    fp8_tensors(g, tensors);
    cudaCheck(cudaStreamSynchronize(g->stream));
    int failed = 0;
    for (int i = 0; i < n && !failed; i++) failed = write_device(f, tensors[i]->state, sizeof(Fp8Scale));
    free(tensors);
    return failed ? -1 : 0;
}

int gpt_read_fp8_state(GPT* g, FILE* f, long long at) {
    int n = fp8_tensors(g, NULL);
    if (n == 0) return 0;
    Fp8Tensor** tensors = (Fp8Tensor**)malloc(n * sizeof(Fp8Tensor*));
    if (!tensors) die("out of host memory");
    fp8_tensors(g, tensors);
    int failed = fseeko(f, at, SEEK_SET) != 0;
    for (int i = 0; i < n && !failed; i++) {
        failed = read_device(f, tensors[i]->state, sizeof(Fp8Scale));
        tensors[i]->has_history = 1;
    }
    free(tensors);
    return failed ? -1 : 0;
}
