// train_gpt.cu: the GPT-2 model (parameters, activations, forward, backward, AdamW update),
// checkpoints, sampling, the command line and the training loop, on one GPU.
// Shapes: B batch, T sequence length (<= maxT, the model's context), C channels, L layers,
// NH heads, HS = C / NH, V vocabulary, Vp = V padded up to a multiple of 128, N = B * T.
// The layers live in layers/ and attention/; this file decides which buffer is which and
// the order of the calls. The model contract (parameter order, init, AdamW, file formats)
// is the one the numpy reference in tests/gen_gpt_reference.py follows.
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <glob.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include "common/error.h"
#include "common/atomic_file.h"
#include "common/rng.h"
#include "common/cuda_check.h"
#include "layers/encoder.h"
#include "layers/layernorm.h"
#include "layers/matmul.h"
#include "layers/residual.h"
#include "layers/gelu.h"
#include "layers/classifier.h"
#include "layers/adamw.h"
#include "layers/global_norm.h"
#include "attention/attention.h"
#include "data/shard.h"
#include "data/dataloader.h"
#include "tokenizer/tokenizer.h"

// ----------------------------------------------------------------------------------------------
// Model configuration

typedef struct {
    int maxT;   // context length
    int V;      // vocabulary
    int Vp;     // V padded up to a multiple of 128
    int L, NH, C;
} GPTConfig;

typedef struct {
    const char* name;
    int L, C, NH;
} ModelPreset;

static const ModelPreset model_presets[] = {
    {"d2", 2, 128, 2},   {"d6", 6, 384, 6},     {"d12", 12, 768, 12},
    {"d24", 24, 1024, 16}, {"d36", 36, 1280, 20}, {"d48", 48, 1600, 25},
};
#define NUM_MODEL_PRESETS ((int)(sizeof(model_presets) / sizeof(model_presets[0])))

int padded_vocab(int V) { return (V + 127) / 128 * 128; }

// ----------------------------------------------------------------------------------------------
// Parameters: one bf16 allocation holding every tensor in checkpoint order.

#define NUM_PARAM_TENSORS 16
static const char* const param_names[NUM_PARAM_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};
// Weight decay applies to the 2-D weights only.
static const int param_decays[NUM_PARAM_TENSORS] = {1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0};

typedef struct {
    bf16* wte;       // (Vp, C)
    bf16* wpe;       // (maxT, C)
    bf16* ln1w;      // (L, C)
    bf16* ln1b;      // (L, C)
    bf16* qkvw;      // (L, 3C, C)
    bf16* qkvb;      // (L, 3C)
    bf16* attprojw;  // (L, C, C)
    bf16* attprojb;  // (L, C)
    bf16* ln2w;      // (L, C)
    bf16* ln2b;      // (L, C)
    bf16* fcw;       // (L, 4C, C)
    bf16* fcb;       // (L, 4C)
    bf16* fcprojw;   // (L, C, 4C)
    bf16* fcprojb;   // (L, C)
    bf16* lnfw;      // (C)
    bf16* lnfb;      // (C)
} ParameterTensors;

void param_sizes(const GPTConfig* c, size_t sizes[NUM_PARAM_TENSORS]) {
    size_t L = c->L, C = c->C;
    size_t s[NUM_PARAM_TENSORS] = {
        (size_t)c->Vp * C, (size_t)c->maxT * C, L * C, L * C, L * 3 * C * C, L * 3 * C,
        L * C * C, L * C, L * C, L * C, L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C, C, C};
    memcpy(sizes, s, sizeof(s));
}

size_t count_params(const GPTConfig* c) {
    size_t sizes[NUM_PARAM_TENSORS], n = 0;
    param_sizes(c, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) n += sizes[i];
    return n;
}

// Points the tensors into base (one allocation of count_params elements).
void point_params(ParameterTensors* p, bf16* base, const GPTConfig* c) {
    bf16** ptrs[NUM_PARAM_TENSORS] = {
        &p->wte, &p->wpe, &p->ln1w, &p->ln1b, &p->qkvw, &p->qkvb, &p->attprojw, &p->attprojb,
        &p->ln2w, &p->ln2b, &p->fcw, &p->fcb, &p->fcprojw, &p->fcprojb, &p->lnfw, &p->lnfb};
    size_t sizes[NUM_PARAM_TENSORS];
    param_sizes(c, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        *ptrs[i] = base;
        base += sizes[i];
    }
}

// ----------------------------------------------------------------------------------------------
// Activations: one allocation, carved into the buffers below for the largest (B, T) the model
// was built for; a smaller forward (sampling) uses the start of each buffer.

typedef struct {
    bf16* residual;      // (L + 1, B, T, C): the stream entering each layer, then the final one
    bf16* ln1;           // (L, B, T, C); recomputed: (B, T, C), shared with ln2
    float* ln1_mean;     // (L, B, T)
    float* ln1_rstd;     // (L, B, T)
    bf16* qkv;           // (L, B, T, 3, NH, HS)
    bf16* atty;          // (L, B, T, NH, HS)
    char* att_saved;     // (L, attention_saved_bytes): P (naive) or L (flash)
    bf16* residual_mid;  // (L, B, T, C): the stream after the attention block
    bf16* ln2;           // (L, B, T, C); recomputed: the buffer of ln1
    float* ln2_mean;     // (L, B, T)
    float* ln2_rstd;     // (L, B, T)
    bf16* fch;           // (L, B, T, 4C) before GELU
    bf16* fch_gelu;      // (L, B, T, 4C); recomputed: (B, T, 4C)
    bf16* lnf;           // (B, T, C)
    float* lnf_mean;     // (B, T)
    float* lnf_rstd;     // (B, T)
    bf16* logits;        // (rows, Vp): one chunk of the B * T rows, overwritten with dlogits
    float* losses;       // (B, T)
    int* inputs;         // (B, T)
    int* targets;        // (B, T)
    bf16* dresidual;     // (B, T, C) gradient of the residual stream
    bf16* dnarrow;       // (B, T, C) gradient of ln outputs / atty; dlnf after gpt_classifier
    bf16* dwide;         // (B, T, 4C) gradient of qkv (3C) / fch_gelu (4C)
    float* norm;         // (1) squared gradient norm
    void* scratch;       // the largest scratch any layer asks for, in the logits' memory
} Activations;

// What is kept for the backward and what is computed again in it.
enum { RECOMPUTE_GELU = 1, RECOMPUTE_LAYERNORM = 2 };

// How the model runs, beyond its shape: these change the memory and the speed, the result only
// within bf16 rounding.
typedef struct {
    AttentionKind attention;
    int deterministic;       // passed to the attention backward
    int recompute;           // RECOMPUTE_* flags: kept for one layer, recomputed in the backward
    int classifier_rows;     // rows of logits per classifier chunk; 0: as many as fit in
                             // CLASSIFIER_CHUNK_BYTES
} ModelOptions;

const char* attention_name(AttentionKind kind) { return kind == ATTENTION_FLASH ? "flash" : "naive"; }

// "none", "gelu", "layernorm" or "gelu,layernorm".
void recompute_name(int flags, char* out, size_t len) {
    snprintf(out, len, "%s%s%s", flags & RECOMPUTE_GELU ? "gelu" : "",
             flags == (RECOMPUTE_GELU | RECOMPUTE_LAYERNORM) ? "," : "",
             flags & RECOMPUTE_LAYERNORM ? "layernorm" : flags ? "" : "none");
}

// Logits of at most this many bytes exist at once: the classifier runs over chunks of rows.
#define CLASSIFIER_CHUNK_BYTES ((size_t)1 << 30)

// Bytes per part, for the memory table and the fit check. The logits and the scratch share
// one region of logits_and_scratch bytes.
typedef struct {
    size_t params, grads, optimizer, activations, attention_saved, logits, scratch,
        logits_and_scratch, backward;
    int logits_rows, rows;   // rows of one classifier chunk, of the whole batch (B * T)
} MemoryPlan;

size_t memory_plan_total(const MemoryPlan* m) {
    return m->params + m->grads + m->optimizer + m->activations + m->attention_saved +
           m->logits_and_scratch + m->backward;
}

AttentionShape attention_shape(const GPTConfig* c, int B, int T) {
    AttentionShape s = {B, T, c->NH, c->C / c->NH, 1, 1.0f / sqrtf((float)(c->C / c->NH))};
    return s;
}

#define CARVE_ALIGN 256
// Takes bytes from the region at base (NULL: only counts), adding them to *part.
void* carve(char* base, size_t* offset, size_t bytes, size_t* part) {
    void* p = base ? base + *offset : NULL;
    size_t rounded = (bytes + CARVE_ALIGN - 1) / CARVE_ALIGN * CARVE_ALIGN;
    *offset += rounded;
    *part += rounded;
    return p;
}

// Rows of logits per classifier chunk for N rows: the option, or what fits in
// CLASSIFIER_CHUNK_BYTES (a multiple of 128 rows, for the matmul), at most N.
int classifier_chunk_rows(const GPTConfig* c, int N, const ModelOptions* opt) {
    size_t rows = opt->classifier_rows;
    if (rows == 0) {
        rows = CLASSIFIER_CHUNK_BYTES / ((size_t)c->Vp * sizeof(bf16));
        rows = rows > 128 ? rows / 128 * 128 : 1;
    }
    return rows < (size_t)N ? (int)rows : N;
}

// Lays the activations out in base (NULL: computes the sizes only) and fills the plan's
// activation parts; returns the bytes of the whole region. A recomputed activation keeps one
// layer's buffer: the forward writes it layer after layer, the backward recomputes it.
size_t layout_activations(Activations* a, char* base, const GPTConfig* c, int B, int T,
                          const ModelOptions* opt, MemoryPlan* m) {
    size_t L = c->L, C = c->C, N = (size_t)B * T, off = 0;
    size_t P = count_params(c);
    size_t ln_layers = opt->recompute & RECOMPUTE_LAYERNORM ? 1 : L;
    size_t gelu_layers = opt->recompute & RECOMPUTE_GELU ? 1 : L;
    AttentionKind kind = opt->attention;
    AttentionShape s = attention_shape(c, B, T);
    m->activations = m->attention_saved = m->logits_and_scratch = m->backward = 0;
    a->residual = (bf16*)carve(base, &off, (L + 1) * N * C * sizeof(bf16), &m->activations);
    a->ln1 = (bf16*)carve(base, &off, ln_layers * N * C * sizeof(bf16), &m->activations);
    a->ln1_mean = (float*)carve(base, &off, L * N * sizeof(float), &m->activations);
    a->ln1_rstd = (float*)carve(base, &off, L * N * sizeof(float), &m->activations);
    a->qkv = (bf16*)carve(base, &off, L * N * 3 * C * sizeof(bf16), &m->activations);
    a->atty = (bf16*)carve(base, &off, L * N * C * sizeof(bf16), &m->activations);
    a->residual_mid = (bf16*)carve(base, &off, L * N * C * sizeof(bf16), &m->activations);
    a->ln2 = opt->recompute & RECOMPUTE_LAYERNORM
                 ? a->ln1
                 : (bf16*)carve(base, &off, L * N * C * sizeof(bf16), &m->activations);
    a->ln2_mean = (float*)carve(base, &off, L * N * sizeof(float), &m->activations);
    a->ln2_rstd = (float*)carve(base, &off, L * N * sizeof(float), &m->activations);
    a->fch = (bf16*)carve(base, &off, L * N * 4 * C * sizeof(bf16), &m->activations);
    a->fch_gelu = (bf16*)carve(base, &off, gelu_layers * N * 4 * C * sizeof(bf16), &m->activations);
    a->lnf = (bf16*)carve(base, &off, N * C * sizeof(bf16), &m->activations);
    a->lnf_mean = (float*)carve(base, &off, N * sizeof(float), &m->activations);
    a->lnf_rstd = (float*)carve(base, &off, N * sizeof(float), &m->activations);
    a->losses = (float*)carve(base, &off, N * sizeof(float), &m->activations);
    a->inputs = (int*)carve(base, &off, N * sizeof(int), &m->activations);
    a->targets = (int*)carve(base, &off, N * sizeof(int), &m->activations);
    // Each layer's saved block is rounded up to CARVE_ALIGN here; layer l's starts at l * stride.
    size_t saved = attention_saved_bytes(kind, s);
    size_t saved_stride = (saved + CARVE_ALIGN - 1) / CARVE_ALIGN * CARVE_ALIGN;
    a->att_saved = (char*)carve(base, &off, L * saved_stride, &m->attention_saved);
    a->dresidual = (bf16*)carve(base, &off, N * C * sizeof(bf16), &m->backward);
    a->dnarrow = (bf16*)carve(base, &off, N * C * sizeof(bf16), &m->backward);
    a->dwide = (bf16*)carve(base, &off, N * 4 * C * sizeof(bf16), &m->backward);
    a->norm = (float*)carve(base, &off, sizeof(float), &m->backward);
    // The classifier's matmul_backward (rows, C, Vp) is left out: with neither bias nor GELU it
    // takes no scratch, which matters, as the scratch is the memory of the dlogits it reads.
    size_t sc = encoder_backward_scratch_bytes(B, T, (int)C);
    size_t cand[] = {
        layernorm_backward_scratch_bytes((int)N, (int)C),
        matmul_backward_scratch_bytes((int)N, (int)C, 3 * (int)C),
        matmul_backward_scratch_bytes((int)N, (int)C, (int)C),
        matmul_backward_scratch_bytes((int)N, (int)C, 4 * (int)C),
        matmul_backward_scratch_bytes((int)N, 4 * (int)C, (int)C),
        attention_scratch_bytes(kind, s),
        global_norm_scratch_bytes(P)};
    for (size_t i = 0; i < sizeof(cand) / sizeof(cand[0]); i++) sc = cand[i] > sc ? cand[i] : sc;
    // The scratch lives in the logits' memory: the logits are dead from the moment the
    // classifier's matmul_backward has read the last chunk of dlogits until the next forward,
    // and no layer takes scratch in the forward.
    m->rows = (int)N;
    m->logits_rows = classifier_chunk_rows(c, (int)N, opt);
    m->logits = (size_t)m->logits_rows * c->Vp * sizeof(bf16);
    m->scratch = sc;
    a->logits = (bf16*)carve(base, &off, m->logits > sc ? m->logits : sc, &m->logits_and_scratch);
    a->scratch = a->logits;
    return off;
}

// ----------------------------------------------------------------------------------------------
// The model

typedef struct {
    float b1, b2, eps, weight_decay, grad_clip;   // the learning rate comes per step
} AdamWConfig;

typedef struct {
    GPTConfig config;
    int B, T;                    // the largest batch the buffers hold
    ModelOptions options;
    size_t num_params;
    size_t param_sizes[NUM_PARAM_TENSORS];
    bf16* params_memory;         // (num_params) one allocation
    bf16* grads_memory;          // (num_params)
    float* optimizer_memory;     // (3, num_params): master weights, m, v
    float* master;
    float* m;
    float* v;
    ParameterTensors params, grads;
    char* acts_memory;
    Activations acts;
    MemoryPlan plan;
    int* host_tokens;            // (B, T) pinned: the inputs of the batch in flight
    int* host_targets;           // (B, T) pinned
    float* host_losses;          // (B, T) pinned
    int adam_t;                  // AdamW steps taken
    cudaStream_t stream;
} GPT;

// Bytes that gpt_build would allocate.
MemoryPlan gpt_memory_plan(const GPTConfig* c, int B, int T, const ModelOptions* opt) {
    MemoryPlan m;
    Activations a;
    size_t P = count_params(c);
    layout_activations(&a, NULL, c, B, T, opt, &m);
    m.params = P * sizeof(bf16);
    m.grads = P * sizeof(bf16);
    m.optimizer = 3 * P * sizeof(float);
    return m;
}

#define GIB(x) ((double)(x) / (1024.0 * 1024.0 * 1024.0))
// Room left for the cuBLASLt workspace and what the CUDA libraries allocate on their own.
#define MEMORY_RESERVE ((size_t)512 << 20)

// Allocates everything for batches up to (B, T); dies with the numbers when it does not fit.
void gpt_build(GPT* g, GPTConfig c, int B, int T, const ModelOptions* opt) {
    static int matmul_ready = 0;
    memset(g, 0, sizeof(*g));
    g->config = c;
    g->B = B;
    g->T = T;
    g->options = *opt;
    g->num_params = count_params(&c);
    param_sizes(&c, g->param_sizes);
    g->plan = gpt_memory_plan(&c, B, T, opt);
    size_t need = memory_plan_total(&g->plan), free_bytes, total_bytes;
    cudaCheck(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (need + MEMORY_RESERVE > free_bytes)
        die("-B %d -T %d does not fit in GPU memory: the model needs %.2f GiB (+%.2f GiB reserve), "
            "%.2f GiB are free; try a smaller -B or --recompute gelu,layernorm", B, T, GIB(need),
            GIB(MEMORY_RESERVE), GIB(free_bytes));
    if (!matmul_ready) {
        matmul_init();
        matmul_ready = 1;
    }
    size_t P = g->num_params;
    cudaCheck(cudaStreamCreate(&g->stream));
    cudaCheck(cudaMalloc((void**)&g->params_memory, P * sizeof(bf16)));
    cudaCheck(cudaMalloc((void**)&g->grads_memory, P * sizeof(bf16)));
    cudaCheck(cudaMalloc((void**)&g->optimizer_memory, 3 * P * sizeof(float)));
    g->master = g->optimizer_memory;
    g->m = g->optimizer_memory + P;
    g->v = g->optimizer_memory + 2 * P;
    cudaCheck(cudaMemset(g->optimizer_memory, 0, 3 * P * sizeof(float)));
    cudaCheck(cudaMemset(g->grads_memory, 0, P * sizeof(bf16)));
    point_params(&g->params, g->params_memory, &c);
    point_params(&g->grads, g->grads_memory, &c);
    MemoryPlan m;
    size_t acts_bytes = layout_activations(&g->acts, NULL, &c, B, T, opt, &m);
    cudaCheck(cudaMalloc((void**)&g->acts_memory, acts_bytes));
    layout_activations(&g->acts, g->acts_memory, &c, B, T, opt, &m);
    cudaCheck(cudaMallocHost((void**)&g->host_tokens, (size_t)B * T * sizeof(int)));
    cudaCheck(cudaMallocHost((void**)&g->host_targets, (size_t)B * T * sizeof(int)));
    cudaCheck(cudaMallocHost((void**)&g->host_losses, (size_t)B * T * sizeof(float)));
}

void gpt_free(GPT* g) {
    cudaCheck(cudaStreamSynchronize(g->stream));
    cudaCheck(cudaFree(g->params_memory));
    cudaCheck(cudaFree(g->grads_memory));
    cudaCheck(cudaFree(g->optimizer_memory));
    cudaCheck(cudaFree(g->acts_memory));
    cudaCheck(cudaFreeHost(g->host_tokens));
    cudaCheck(cudaFreeHost(g->host_targets));
    cudaCheck(cudaFreeHost(g->host_losses));
    cudaCheck(cudaStreamDestroy(g->stream));
}

// Sets the model from fp32 values (num_params, checkpoint order): master = values,
// params = values rounded to bf16. AdamW starts over.
void gpt_set_params(GPT* g, const float* values) {
    size_t P = g->num_params;
    bf16* rounded = (bf16*)malloc(P * sizeof(bf16));
    if (!rounded) die("out of host memory (%zu parameters)", P);
    for (size_t i = 0; i < P; i++) rounded[i] = __float2bfloat16(values[i]);
    cudaCheck(cudaMemcpy(g->params_memory, rounded, P * sizeof(bf16), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(g->master, values, P * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(g->m, 0, 2 * P * sizeof(float)));
    g->adam_t = 0;
    free(rounded);
}

// The contract's init: N(0, 0.02) weights, residual projections N(0, 0.02/sqrt(2L)), biases 0,
// layernorm weights 1, wte padding rows 0.
void gpt_init_random(GPT* g, uint64_t seed) {
    const GPTConfig* c = &g->config;
    float* values = (float*)malloc(g->num_params * sizeof(float));
    if (!values) die("out of host memory (%zu parameters)", g->num_params);
    Rng rng = {seed};
    float* p = values;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        const char* name = param_names[i];
        size_t n = g->param_sizes[i];
        if (!strcmp(name, "ln1w") || !strcmp(name, "ln2w") || !strcmp(name, "lnfw")) {
            for (size_t j = 0; j < n; j++) p[j] = 1.0f;
        } else if (!param_decays[i]) {
            memset(p, 0, n * sizeof(float));
        } else {
            int residual = !strcmp(name, "attprojw") || !strcmp(name, "fcprojw");
            double std = residual ? 0.02 / sqrt(2.0 * c->L) : 0.02;
            size_t real = !strcmp(name, "wte") ? (size_t)c->V * c->C : n;
            for (size_t j = 0; j < real; j++) p[j] = (float)(std * rng_normal(&rng));
            for (size_t j = real; j < n; j++) p[j] = 0.0f;
        }
        p += n;
    }
    // The master weights start as the bf16 model itself.
    for (size_t i = 0; i < g->num_params; i++) values[i] = __bfloat162float(__float2bfloat16(values[i]));
    gpt_set_params(g, values);
    free(values);
}

// ----------------------------------------------------------------------------------------------
// Forward, loss, backward, update

static inline size_t layer_offset(int l, int B, int T, size_t width) { return (size_t)l * B * T * width; }
// The layer whose slot of a buffer layer l uses: 0 when the buffer is recomputed (one slot).
static inline int slot(int l, int recomputed) { return recomputed ? 0 : l; }

// Bytes between the saved attention blocks of two layers (the largest batch's, rounded).
static size_t saved_stride(const GPT* g) {
    size_t bytes = attention_saved_bytes(g->options.attention, attention_shape(&g->config, g->B, g->T));
    return (bytes + CARVE_ALIGN - 1) / CARVE_ALIGN * CARVE_ALIGN;
}

// Layer l's slices of the per-layer activation buffers, which keep the stride of the largest
// batch (a smaller forward uses the start of each slice).
typedef struct {
    bf16* res;        // (B, T, C) the stream entering the layer
    bf16* ln1;        // (B, T, C)
    float* ln1_mean;  // (B, T)
    float* ln1_rstd;  // (B, T)
    bf16* qkv;        // (B, T, 3, NH, HS)
    bf16* atty;       // (B, T, NH, HS)
    void* att_saved;  // attention_saved_bytes
    bf16* mid;        // (B, T, C) the stream after the attention block
    bf16* ln2;        // (B, T, C)
    float* ln2_mean;  // (B, T)
    float* ln2_rstd;  // (B, T)
    bf16* fch;        // (B, T, 4C) before GELU
    bf16* fch_gelu;   // (B, T, 4C)
    bf16* res_next;   // (B, T, C) the stream leaving the layer
} LayerActivations;

static LayerActivations layer_activations(const GPT* g, int l) {
    const Activations* a = &g->acts;
    int B = g->B, T = g->T;
    size_t C = g->config.C;
    int re_ln = g->options.recompute & RECOMPUTE_LAYERNORM, re_gelu = g->options.recompute & RECOMPUTE_GELU;
    LayerActivations x;
    x.res = a->residual + layer_offset(l, B, T, C);
    x.ln1 = a->ln1 + layer_offset(slot(l, re_ln), B, T, C);
    x.ln1_mean = a->ln1_mean + layer_offset(l, B, T, 1);
    x.ln1_rstd = a->ln1_rstd + layer_offset(l, B, T, 1);
    x.qkv = a->qkv + layer_offset(l, B, T, 3 * C);
    x.atty = a->atty + layer_offset(l, B, T, C);
    x.att_saved = a->att_saved + l * saved_stride(g);
    x.mid = a->residual_mid + layer_offset(l, B, T, C);
    x.ln2 = a->ln2 + layer_offset(slot(l, re_ln), B, T, C);
    x.ln2_mean = a->ln2_mean + layer_offset(l, B, T, 1);
    x.ln2_rstd = a->ln2_rstd + layer_offset(l, B, T, 1);
    x.fch = a->fch + layer_offset(l, B, T, 4 * C);
    x.fch_gelu = a->fch_gelu + layer_offset(slot(l, re_gelu), B, T, 4 * C);
    x.res_next = a->residual + layer_offset(l + 1, B, T, C);
    return x;
}

// Layer l's slices of the per-layer parameter tensors (or of their gradients).
typedef struct {
    bf16 *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} LayerParameters;

static LayerParameters layer_parameters(const ParameterTensors* p, int l, size_t C) {
    LayerParameters w;
    w.ln1w = p->ln1w + l * C;
    w.ln1b = p->ln1b + l * C;
    w.qkvw = p->qkvw + l * 3 * C * C;
    w.qkvb = p->qkvb + l * 3 * C;
    w.attprojw = p->attprojw + l * C * C;
    w.attprojb = p->attprojb + l * C;
    w.ln2w = p->ln2w + l * C;
    w.ln2b = p->ln2b + l * C;
    w.fcw = p->fcw + l * 4 * C * C;
    w.fcb = p->fcb + l * 4 * C;
    w.fcprojw = p->fcprojw + l * C * 4 * C;
    w.fcprojb = p->fcprojb + l * C;
    return w;
}

// The final layernorm's output lnf (B, T, C) of host_inputs (B, T), B and T within what the
// model was built for; the logits come from gpt_logits or gpt_classifier, a chunk at a time.
void gpt_forward(GPT* g, const int* host_inputs, int B, int T) {
    const GPTConfig* c = &g->config;
    Activations* a = &g->acts;
    ParameterTensors* p = &g->params;
    cudaStream_t st = g->stream;
    int C = c->C, L = c->L, N = B * T;
    AttentionShape s = attention_shape(c, B, T);
    cudaCheck(cudaMemcpyAsync(a->inputs, host_inputs, (size_t)N * sizeof(int),
                              cudaMemcpyHostToDevice, st));
    encoder_forward(a->residual, a->inputs, p->wte, p->wpe, B, T, C, st);
    for (int l = 0; l < L; l++) {
        LayerActivations x = layer_activations(g, l);
        LayerParameters w = layer_parameters(p, l, C);
        layernorm_forward(x.ln1, x.ln1_mean, x.ln1_rstd, x.res, w.ln1w, w.ln1b, N, C, st);
        matmul_forward(x.qkv, NULL, x.ln1, w.qkvw, w.qkvb, N, C, 3 * C, st);
        attention_forward(g->options.attention, s, x.atty, x.att_saved, x.qkv, st);
        matmul_forward(x.mid, NULL, x.atty, w.attprojw, w.attprojb, N, C, C, st);
        residual_forward(x.mid, x.mid, x.res, (size_t)N * C, st);
        layernorm_forward(x.ln2, x.ln2_mean, x.ln2_rstd, x.mid, w.ln2w, w.ln2b, N, C, st);
        if (g->options.recompute & RECOMPUTE_GELU) {
            // The same kernel as the recomputation, so the backward sees the forward's bits.
            matmul_forward(x.fch, NULL, x.ln2, w.fcw, w.fcb, N, C, 4 * C, st);
            gelu_forward(x.fch_gelu, x.fch, (size_t)N * 4 * C, st);
        } else {
            matmul_forward(x.fch_gelu, x.fch, x.ln2, w.fcw, w.fcb, N, C, 4 * C, st);
        }
        matmul_forward(x.res_next, NULL, x.fch_gelu, w.fcprojw, w.fcprojb, N, 4 * C, C, st);
        residual_forward(x.res_next, x.res_next, x.mid, (size_t)N * C, st);
    }
    layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, a->residual + layer_offset(L, g->B, g->T, C),
                      p->lnfw, p->lnfb, N, C, st);
}

// The logits (rows, Vp) of the rows [row, row + rows) of the last gpt_forward, rows at most
// g->plan.logits_rows; returns them (device memory, valid until the next call).
bf16* gpt_logits(GPT* g, int row, int rows) {
    if (rows > g->plan.logits_rows) die("gpt_logits: %d rows, the buffer holds %d", rows, g->plan.logits_rows);
    const GPTConfig* c = &g->config;
    matmul_forward(g->acts.logits, NULL, g->acts.lnf + (size_t)row * c->C, g->params.wte, NULL, rows,
                   c->C, c->Vp, g->stream);
    return g->acts.logits;
}

// Cross-entropy per position of the last gpt_forward (B, T) against host_targets, into the
// losses; gpt_mean_loss reads them. The logits exist a chunk of rows at a time. write_dlogits:
// also the classifier's backward, chunk by chunk: dlnf (B, T, C) into dnarrow for gpt_backward
// and dwte += dlogits^T lnf, with dlogits = dloss/dlogits * dloss_scale.
// Nothing waits for the GPU here.
void gpt_classifier(GPT* g, const int* host_targets, int B, int T, float dloss_scale, int write_dlogits) {
    const GPTConfig* c = &g->config;
    Activations* a = &g->acts;
    int N = B * T, C = c->C;
    cudaCheck(cudaMemcpyAsync(a->targets, host_targets, (size_t)N * sizeof(int),
                              cudaMemcpyHostToDevice, g->stream));
    for (int row = 0; row < N; row += g->plan.logits_rows) {
        int rows = N - row < g->plan.logits_rows ? N - row : g->plan.logits_rows;
        bf16* logits = gpt_logits(g, row, rows);
        classifier_forward_backward(logits, a->losses + row, a->targets + row, rows, c->V, c->Vp,
                                    dloss_scale, write_dlogits, g->stream);
        // logits = lnf @ wte^T; with neither bias nor GELU this takes no scratch.
        if (write_dlogits)
            matmul_backward(a->dnarrow + (size_t)row * C, g->grads.wte, NULL, logits,
                            a->lnf + (size_t)row * C, g->params.wte, NULL, rows, C, c->Vp, NULL, g->stream);
    }
    cudaCheck(cudaMemcpyAsync(g->host_losses, a->losses, (size_t)N * sizeof(float),
                              cudaMemcpyDeviceToHost, g->stream));
}

// The mean of the N losses of the last gpt_classifier, once the GPU is done; summed on the host
// in a fixed order, in double.
float gpt_mean_loss(GPT* g, int N) {
    cudaCheck(cudaStreamSynchronize(g->stream));
    double sum = 0.0;
    for (int i = 0; i < N; i++) sum += g->host_losses[i];
    return (float)(sum / N);
}

// Adds the gradients of the batch (B, T) to the grads; gpt_classifier with write_dlogits must
// have run (dlnf in dnarrow, dwte started) and host_inputs must be the batch of the last
// gpt_forward.
void gpt_backward(GPT* g, const int* host_inputs) {
    const GPTConfig* c = &g->config;
    Activations* a = &g->acts;
    ParameterTensors* p = &g->params;
    ParameterTensors* d = &g->grads;
    cudaStream_t st = g->stream;
    int B = g->B, T = g->T, C = c->C, L = c->L, N = B * T;
    int re_ln = g->options.recompute & RECOMPUTE_LAYERNORM, re_gelu = g->options.recompute & RECOMPUTE_GELU;
    AttentionKind kind = g->options.attention;
    AttentionShape s = attention_shape(c, B, T);
    int deterministic = kind == ATTENTION_NAIVE ? 1 : g->options.deterministic;
    void* scratch = a->scratch;
    cudaCheck(cudaMemsetAsync(a->dresidual, 0, (size_t)N * C * sizeof(bf16), st));
    layernorm_backward(a->dresidual, d->lnfw, d->lnfb, a->dnarrow, a->residual + layer_offset(L, B, T, C),
                       p->lnfw, a->lnf_mean, a->lnf_rstd, N, C, scratch, st);
    for (int l = L - 1; l >= 0; l--) {
        LayerActivations x = layer_activations(g, l);
        LayerParameters w = layer_parameters(p, l, C), dw = layer_parameters(d, l, C);
        // A recomputed activation is made again from what the layer kept, just before its use
        // (the same kernels on the same inputs: the forward's bits).
        if (re_gelu) gelu_forward(x.fch_gelu, x.fch, (size_t)N * 4 * C, st);
        if (re_ln) layernorm_forward(x.ln2, x.ln2_mean, x.ln2_rstd, x.mid, w.ln2w, w.ln2b, N, C, st);
        // dresidual holds d(output of layer l); the residual paths pass it through unchanged
        // and the branches add to it.
        matmul_backward(a->dwide, dw.fcprojw, dw.fcprojb, a->dresidual, x.fch_gelu, w.fcprojw, NULL,
                        N, 4 * C, C, scratch, st);
        matmul_backward(a->dnarrow, dw.fcw, dw.fcb, a->dwide, x.ln2, w.fcw, x.fch, N, C, 4 * C, scratch, st);
        layernorm_backward(a->dresidual, dw.ln2w, dw.ln2b, a->dnarrow, x.mid, w.ln2w, x.ln2_mean, x.ln2_rstd,
                           N, C, scratch, st);
        matmul_backward(a->dnarrow, dw.attprojw, dw.attprojb, a->dresidual, x.atty, w.attprojw, NULL,
                        N, C, C, scratch, st);
        attention_backward(kind, s, a->dwide, a->dnarrow, x.atty, x.att_saved, x.qkv, scratch, deterministic, st);
        if (re_ln) layernorm_forward(x.ln1, x.ln1_mean, x.ln1_rstd, x.res, w.ln1w, w.ln1b, N, C, st);
        matmul_backward(a->dnarrow, dw.qkvw, dw.qkvb, a->dwide, x.ln1, w.qkvw, NULL, N, C, 3 * C, scratch, st);
        layernorm_backward(a->dresidual, dw.ln1w, dw.ln1b, a->dnarrow, x.res, w.ln1w, x.ln1_mean, x.ln1_rstd,
                           N, C, scratch, st);
    }
    encoder_backward(d->wte, d->wpe, a->dresidual, host_inputs, B, T, C, scratch, st);
}

void gpt_zero_grads(GPT* g) {
    cudaCheck(cudaMemsetAsync(g->grads_memory, 0, g->num_params * sizeof(bf16), g->stream));
}

// The global gradient norm (before clipping), in fp32 on the GPU.
float gpt_grad_norm(GPT* g) {
    float norm2;
    global_norm_squared(g->acts.norm, g->grads_memory, g->num_params, g->acts.scratch, g->stream);
    cudaCheck(cudaMemcpyAsync(&norm2, g->acts.norm, sizeof(float), cudaMemcpyDeviceToHost, g->stream));
    cudaCheck(cudaStreamSynchronize(g->stream));
    return sqrtf(norm2);
}

// One AdamW step on every tensor with the gradients clipped to opt->grad_clip; returns the
// norm before clipping.
float gpt_update(GPT* g, const AdamWConfig* opt, float lr) {
    float norm = gpt_grad_norm(g);
    float grad_scale = (opt->grad_clip > 0.0f && norm > opt->grad_clip) ? opt->grad_clip / norm : 1.0f;
    g->adam_t++;
    size_t off = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t n = g->param_sizes[i];
        adamw_update(g->params_memory + off, g->master + off, g->grads_memory + off, g->m + off,
                     g->v + off, n, lr, opt->b1, opt->b2, g->adam_t, opt->eps,
                     param_decays[i] ? opt->weight_decay : 0.0f, grad_scale, g->stream);
        off += n;
    }
    return norm;
}

// ----------------------------------------------------------------------------------------------
// Files: the model checkpoint (llm.c compatible) and the training state

#define MODEL_MAGIC 20240326
#define MODEL_VERSION_FP32 3
#define MODEL_VERSION_BF16 5
#define STATE_MAGIC 20241130
#define STATE_VERSION 1
#define HEADER_INTS 256
#define IO_CHUNK ((size_t)64 << 20)

// Dies naming path unless the file has exactly the expected size.
void check_file_size(FILE* f, const char* path, long long expected) {
    struct stat st;
    if (fstat(fileno(f), &st) != 0) die("%s: cannot stat: %s", path, strerror(errno));
    if ((long long)st.st_size != expected)
        die("%s: %lld bytes, expected %lld: truncated or corrupt", path, (long long)st.st_size, expected);
}

// The header of a model checkpoint, checked (the file's size too): returns the config and
// version, or dies naming path.
GPTConfig read_model_header(FILE* f, const char* path, int* version) {
    int32_t h[HEADER_INTS];
    if (fread(h, sizeof(int32_t), HEADER_INTS, f) != HEADER_INTS)
        die("%s: too short for a model checkpoint header", path);
    if (h[0] != MODEL_MAGIC) die("%s: not a model checkpoint (magic %d, expected %d)", path, h[0], MODEL_MAGIC);
    if (h[1] != MODEL_VERSION_FP32 && h[1] != MODEL_VERSION_BF16)
        die("%s: unsupported checkpoint version %d (expected 3: fp32 or 5: bf16)", path, h[1]);
    GPTConfig c = {h[2], h[3], h[7], h[4], h[5], h[6]};
    if (c.maxT <= 0 || c.V <= 0 || c.L <= 0 || c.NH <= 0 || c.C <= 0 || c.C % c.NH != 0 ||
        c.C % 8 != 0 || c.Vp != padded_vocab(c.V))
        die("%s: corrupt header (maxT %d, V %d, L %d, NH %d, C %d, Vp %d)", path, c.maxT, c.V, c.L,
            c.NH, c.C, c.Vp);
    // Checked before anything is sized from the header, so a corrupt one is called corrupt.
    size_t elem = h[1] == MODEL_VERSION_BF16 ? sizeof(bf16) : sizeof(float);
    check_file_size(f, path, (long long)(HEADER_INTS * sizeof(int32_t) + count_params(&c) * elem));
    *version = h[1];
    return c;
}

int same_shape(const GPTConfig* a, const GPTConfig* b) {
    return a->maxT == b->maxT && a->V == b->V && a->L == b->L && a->NH == b->NH && a->C == b->C;
}

void describe_config(const GPTConfig* c, char* out, size_t len) {
    snprintf(out, len, "L %d C %d NH %d V %d context %d", c->L, c->C, c->NH, c->V, c->maxT);
}

// Loads the parameters of a version 3 or 5 checkpoint whose shape must be the model's.
void gpt_load_checkpoint(GPT* g, const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) die("%s: cannot open: %s", path, strerror(errno));
    int version;
    GPTConfig c = read_model_header(f, path, &version);
    if (!same_shape(&c, &g->config)) {
        char have[128], want[128];
        describe_config(&c, have, sizeof(have));
        describe_config(&g->config, want, sizeof(want));
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
int write_device(FILE* f, const void* dev, size_t bytes) {
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
int read_device(FILE* f, void* dev, size_t bytes) {
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

// Opens path's temporary sibling for writing; finish_atomic renames it into place.
FILE* open_atomic(const char* path, char* tmp, size_t tmp_len) {
    char err[ERR_LEN];
    FILE* f = atomic_open(path, tmp, tmp_len, err);
    if (!f) die("%s", err);
    return f;
}

void finish_atomic(FILE* f, const char* tmp, const char* path, int ok) {
    char err[ERR_LEN];
    if (atomic_close(f, tmp, path, ok, err) != 0) die("%s", err);
}

// The model as a version 5 (bf16) checkpoint, llm.c compatible.
void gpt_save_checkpoint(GPT* g, const char* path) {
    char tmp[4096];
    const GPTConfig* c = &g->config;
    int32_t h[HEADER_INTS] = {MODEL_MAGIC, MODEL_VERSION_BF16, c->maxT, c->V, c->L, c->NH, c->C, c->Vp};
    cudaCheck(cudaStreamSynchronize(g->stream));
    FILE* f = open_atomic(path, tmp, sizeof(tmp));
    int ok = fwrite(h, sizeof(h), 1, f) == 1 &&
             write_device(f, g->params_memory, g->num_params * sizeof(bf16)) == 0;
    finish_atomic(f, tmp, path, ok);
}

// What a resumed run must agree on, and where the interrupted one stood.
typedef struct {
    int step;                    // steps done
    GPTConfig config;
    int B, T, grad_accum, warmup_steps, steps;
    float lr, min_lr_frac, weight_decay, grad_clip;
    uint64_t seed;
    DataLoaderState train_loader;
    uint64_t sample_rng;
    int adam_t;
    // What changes the rounding, so an exact resume needs the same: attention kind, its
    // deterministic flag, RECOMPUTE_* flags, rows per classifier chunk.
    int attention, deterministic, recompute, classifier_rows;
} TrainingState;

// Training state file: int32 header[256] = [magic, version, step, maxT, V, L, NH, C, Vp, B, T,
// grad_accum, warmup_steps, steps, adam_t, lr, min_lr_frac, weight_decay, grad_clip (float bits),
// seed (2 ints, low first), train loader epoch (2 ints), step_in_epoch (2 ints), sample rng
// (2 ints), attention, deterministic, recompute, classifier_rows, 0...], then fp32 master
// weights, m, v (each num_params).
void pack_u64(int32_t* h, uint64_t v) { h[0] = (int32_t)(uint32_t)v; h[1] = (int32_t)(uint32_t)(v >> 32); }
uint64_t unpack_u64(const int32_t* h) { return (uint64_t)(uint32_t)h[0] | ((uint64_t)(uint32_t)h[1] << 32); }
int32_t float_bits(float f) { int32_t i; memcpy(&i, &f, 4); return i; }
float bits_float(int32_t i) { float f; memcpy(&f, &i, 4); return f; }

void save_training_state(GPT* g, const TrainingState* s, const char* path) {
    char tmp[4096];
    const GPTConfig* c = &s->config;
    int32_t h[HEADER_INTS] = {STATE_MAGIC, STATE_VERSION, s->step, c->maxT, c->V, c->L, c->NH, c->C,
                              c->Vp, s->B, s->T, s->grad_accum, s->warmup_steps, s->steps, s->adam_t,
                              float_bits(s->lr), float_bits(s->min_lr_frac),
                              float_bits(s->weight_decay), float_bits(s->grad_clip)};
    pack_u64(h + 19, s->seed);
    pack_u64(h + 21, (uint64_t)s->train_loader.epoch);
    pack_u64(h + 23, (uint64_t)s->train_loader.step_in_epoch);
    pack_u64(h + 25, s->sample_rng);
    h[27] = s->attention; h[28] = s->deterministic; h[29] = s->recompute; h[30] = s->classifier_rows;
    cudaCheck(cudaStreamSynchronize(g->stream));
    FILE* f = open_atomic(path, tmp, sizeof(tmp));
    int ok = fwrite(h, sizeof(h), 1, f) == 1 &&
             write_device(f, g->optimizer_memory, 3 * g->num_params * sizeof(float)) == 0;
    finish_atomic(f, tmp, path, ok);
}

// Reads the header of a training state file (the optimizer memory follows; g == NULL: header only).
TrainingState load_training_state(GPT* g, const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) die("%s: cannot open: %s", path, strerror(errno));
    int32_t h[HEADER_INTS];
    if (fread(h, sizeof(int32_t), HEADER_INTS, f) != HEADER_INTS) die("%s: too short for a training state", path);
    if (h[0] != STATE_MAGIC) die("%s: not a training state file (magic %d, expected %d)", path, h[0], STATE_MAGIC);
    if (h[1] != STATE_VERSION) die("%s: unsupported training state version %d", path, h[1]);
    TrainingState s;
    s.step = h[2];
    s.config = (GPTConfig){h[3], h[4], h[8], h[5], h[6], h[7]};
    s.B = h[9]; s.T = h[10]; s.grad_accum = h[11]; s.warmup_steps = h[12]; s.steps = h[13]; s.adam_t = h[14];
    s.lr = bits_float(h[15]); s.min_lr_frac = bits_float(h[16]);
    s.weight_decay = bits_float(h[17]); s.grad_clip = bits_float(h[18]);
    s.seed = unpack_u64(h + 19);
    s.train_loader.epoch = (int64_t)unpack_u64(h + 21);
    s.train_loader.step_in_epoch = (int64_t)unpack_u64(h + 23);
    s.sample_rng = unpack_u64(h + 25);
    s.attention = h[27]; s.deterministic = h[28]; s.recompute = h[29]; s.classifier_rows = h[30];
    const GPTConfig* c = &s.config;
    if (s.step < 0 || c->maxT <= 0 || c->V <= 0 || c->L <= 0 || c->NH <= 0 || c->C <= 0 ||
        c->C % c->NH != 0 || c->C % 8 != 0 || c->Vp != padded_vocab(c->V) || s.B <= 0 || s.T <= 0 ||
        s.grad_accum <= 0 || s.adam_t < 0)
        die("%s: corrupt training state header", path);
    check_file_size(f, path, (long long)(HEADER_INTS * sizeof(int32_t) + 3 * count_params(c) * sizeof(float)));
    if (g) {
        if (!same_shape(c, &g->config)) die("%s: made for another model shape", path);
        if (read_device(f, g->optimizer_memory, 3 * g->num_params * sizeof(float)) != 0)
            die("%s: read failed", path);
        g->adam_t = s.adam_t;
    }
    fclose(f);
    return s;
}

// Makes dir and its parents; dies naming the path on failure.
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

void checkpoint_paths(const char* dir, int step, char* model, char* state, size_t len) {
    if (snprintf(model, len, "%s/model_%08d.bin", dir, step) >= (int)len ||
        snprintf(state, len, "%s/state_%08d.bin", dir, step) >= (int)len)
        die("%s: path too long", dir);
}

// The latest step in dir with both model_%08d.bin and state_%08d.bin; -1 if none.
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

// ----------------------------------------------------------------------------------------------
// Sampling

int compare_descending(const void* a, const void* b) {
    float x = *(const float*)a, y = *(const float*)b;
    return (x < y) - (x > y);
}

// Draws a token from the logits (V) at the temperature (0: the most likely), among the top_k
// most likely when top_k > 0. fp32 softmax on the host.
int sample_token(const float* logits, int V, float temperature, int top_k, Rng* rng, float* probs) {
    int best = 0;
    for (int i = 1; i < V; i++) if (logits[i] > logits[best]) best = i;
    if (temperature <= 0.0f) return best;
    float cutoff = -INFINITY;
    if (top_k > 0 && top_k < V) {
        // The k-th largest logit, from a sorted copy.
        memcpy(probs, logits, (size_t)V * sizeof(float));
        qsort(probs, (size_t)V, sizeof(float), compare_descending);
        cutoff = probs[top_k - 1];
    }
    double sum = 0.0;
    for (int i = 0; i < V; i++) {
        probs[i] = logits[i] >= cutoff ? expf((logits[i] - logits[best]) / temperature) : 0.0f;
        sum += probs[i];
    }
    double u = rng_uniform(rng) * sum, acc = 0.0;
    for (int i = 0; i < V; i++) {
        acc += probs[i];
        if (u <= acc && probs[i] > 0.0f) return i;
    }
    return best;
}

// Generates n tokens after <|endoftext|>, printing the text as it comes; the forward sees the
// last g->T tokens (a sliding window).
void gpt_sample(GPT* g, const Tokenizer* tok, int n, float temperature, int top_k, Rng* rng) {
    const GPTConfig* c = &g->config;
    int* tokens = (int*)malloc((size_t)(n + 1) * sizeof(int));
    float* logits = (float*)malloc((size_t)c->V * sizeof(float));
    float* probs = (float*)malloc((size_t)c->V * sizeof(float));
    bf16* row = (bf16*)malloc((size_t)c->V * sizeof(bf16));
    if (!tokens || !logits || !probs || !row) die("out of host memory for sampling");
    tokens[0] = tokenizer_eot(tok);
    printf("sample: ");
    for (int i = 1; i <= n; i++) {
        int len = i < g->T ? i : g->T;
        const int* window = tokens + i - len;
        AttentionShape s = attention_shape(c, 1, len);
        const char* why = attention_unsupported(g->options.attention, s);
        if (why) die("sampling: attention cannot run at T = %d: %s", len, why);
        gpt_forward(g, window, 1, len);
        cudaCheck(cudaMemcpyAsync(row, gpt_logits(g, len - 1, 1), (size_t)c->V * sizeof(bf16),
                                  cudaMemcpyDeviceToHost, g->stream));
        cudaCheck(cudaStreamSynchronize(g->stream));
        for (int v = 0; v < c->V; v++) logits[v] = __bfloat162float(row[v]);
        tokens[i] = sample_token(logits, c->V, temperature, top_k, rng, probs);
        size_t bytes;
        const unsigned char* text = tokenizer_token(tok, tokens[i], &bytes);
        if (text) fwrite(text, 1, bytes, stdout);
    }
    printf("\n");
    fflush(stdout);
    free(tokens);
    free(logits);
    free(probs);
    free(row);
}

// ----------------------------------------------------------------------------------------------
// Training

typedef struct {
    const char* model;           // preset name
    int context;                 // maxT
    int model_given, context_given;   // set on the command line (they must match a checkpoint)
    const char* init_from;       // model checkpoint, or NULL
    const char* resume_dir;      // or NULL
    const char* train_data;      // shard glob
    const char* val_data;        // shard glob, "" for none, NULL: beside the train shards
    const char* tokenizer;       // or NULL
    int B, T;
    long long total_batch;       // tokens per step; 0: B * T
    int steps;                   // 0: one epoch
    float lr, min_lr_frac, weight_decay, grad_clip;
    int warmup_steps;
    int val_every, val_batches;
    int sample_every, sample_tokens, top_k;
    float temperature;
    int checkpoint_every;
    const char* out_dir;         // or NULL: no checkpoints
    uint64_t seed;
    ModelOptions model_options;  // attention, recomputation, classifier chunks
    const char* log_path;        // CSV, or NULL
    float peak_tflops;           // 0: from the device name
} TrainOptions;

void default_train_options(TrainOptions* o) {
    memset(o, 0, sizeof(*o));
    o->model = "d12";
    o->context = 1024;
    o->train_data = "datasets/tinyshakespeare/train_*.bin";
    o->val_data = NULL;
    o->B = 4;
    o->T = 1024;
    o->lr = 3e-4f;
    o->min_lr_frac = 0.0f;
    o->weight_decay = 0.1f;
    o->grad_clip = 1.0f;
    o->val_every = 100;
    o->val_batches = 20;
    o->sample_tokens = 128;
    o->temperature = 1.0f;
    o->seed = 1337;
    o->model_options.attention = ATTENTION_FLASH;
}

// Warmup from lr/warmup to lr, then a cosine down to lr * min_lr_frac at the last step.
float learning_rate(const TrainOptions* o, int step, int steps) {
    if (step <= o->warmup_steps) return o->lr * step / o->warmup_steps;
    float min_lr = o->lr * o->min_lr_frac;
    if (steps <= o->warmup_steps) return o->lr;
    double progress = (double)(step - o->warmup_steps) / (steps - o->warmup_steps);
    return (float)(min_lr + 0.5 * (o->lr - min_lr) * (1.0 + cos(M_PI * progress)));
}

// Dense bf16 peak (TFLOP/s) of the device, by name; 0 when unknown.
float device_peak_tflops(const char* name) {
    static const struct { const char* key; float tflops; } table[] = {
        {"H100", 989.0f}, {"H200", 989.0f}, {"H800", 989.0f}, {"GH200", 989.0f},
        {"B200", 2250.0f}, {"A100", 312.0f}, {"A800", 312.0f}, {"L40S", 362.0f}};
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (strstr(name, table[i].key)) return table[i].tflops;
    return 0.0f;
}

// The vocabulary stated in the header of the first shard matching pattern (0 if it says none).
int shard_vocab(const char* pattern) {
    glob_t gl;
    char err[ERR_LEN];
    if (glob(pattern, 0, NULL, &gl) != 0 || gl.gl_pathc == 0) die("no file matches %s", pattern);
    const char* path = gl.gl_pathv[0];
    int fd = open(path, O_RDONLY);
    if (fd < 0) die("%s: cannot open: %s", path, strerror(errno));
    ShardHeader h;
    if (shard_read_header(fd, path, 0, &h, err) != 0) die("%s", err);
    close(fd);
    globfree(&gl);
    return h.vocab_size;
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

size_t device_memory_used(void) {
    size_t free_bytes, total_bytes;
    cudaCheck(cudaMemGetInfo(&free_bytes, &total_bytes));
    return total_bytes - free_bytes;
}

void print_memory_table(const MemoryPlan* m, AttentionKind kind) {
    size_t free_bytes, total_bytes;
    char logits[64], saved[64];
    cudaCheck(cudaMemGetInfo(&free_bytes, &total_bytes));
    snprintf(logits, sizeof(logits), "logits (%d of %d rows)", m->logits_rows, m->rows);
    snprintf(saved, sizeof(saved), "attention saved (%s)", kind == ATTENTION_FLASH ? "flash: L" : "naive: P");
    printf("memory (GiB)\n");
    printf("  parameters (bf16)             %8.3f\n", GIB(m->params));
    printf("  gradients (bf16)              %8.3f\n", GIB(m->grads));
    printf("  master + AdamW m, v (fp32)    %8.3f\n", GIB(m->optimizer));
    printf("  activations                   %8.3f\n", GIB(m->activations));
    printf("  %-29s %8.3f\n", saved, GIB(m->attention_saved));
    printf("  backward buffers              %8.3f\n", GIB(m->backward));
    printf("  %-29s %8.3f\n", logits, GIB(m->logits));
    printf("  scratch (in the logits)       %8.3f\n", GIB(m->scratch));
    printf("  total                         %8.3f  (device: %.1f GiB, %.1f GiB in use)\n",
           GIB(memory_plan_total(m)), GIB(total_bytes), GIB(total_bytes - free_bytes));
}

// Mean loss over the first val_batches batches of the loader (from its start).
float validation_loss(GPT* g, DataLoader* dl, int batches) {
    char err[ERR_LEN];
    dataloader_reset(dl);
    double sum = 0.0;
    for (int i = 0; i < batches; i++) {
        if (dataloader_next(dl, g->host_tokens, g->host_targets, err) != 0) die("%s", err);
        gpt_forward(g, g->host_tokens, g->B, g->T);
        gpt_classifier(g, g->host_targets, g->B, g->T, 0.0f, 0);
        sum += gpt_mean_loss(g, g->B * g->T);
    }
    return (float)(sum / batches);
}

// Trains as the options say. losses (may be NULL) receives the train loss of step s at s - 1.
void train_run(const TrainOptions* opt_in, float* losses) {
    TrainOptions o = *opt_in;
    char err[ERR_LEN];
    int device_count = 0;
    if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) die("no CUDA device");
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));

    // The model shape: a preset, a checkpoint, or the interrupted run.
    GPTConfig config = {0, 0, 0, 0, 0, 0};
    TrainingState resume;
    memset(&resume, 0, sizeof(resume));
    char resume_model[4096], resume_state[4096];
    if (o.resume_dir) {
        if (o.init_from) die("--resume and --init-from exclude each other");
        int step = latest_checkpoint_step(o.resume_dir);
        if (step < 0) die("--resume %s: no model_*.bin / state_*.bin checkpoint pair in it", o.resume_dir);
        checkpoint_paths(o.resume_dir, step, resume_model, resume_state, sizeof(resume_model));
        resume = load_training_state(NULL, resume_state);
        config = resume.config;
        if (!o.out_dir) o.out_dir = o.resume_dir;
    } else if (o.init_from) {
        FILE* f = fopen(o.init_from, "rb");
        if (!f) die("--init-from %s: cannot open: %s", o.init_from, strerror(errno));
        int version;
        config = read_model_header(f, o.init_from, &version);
        fclose(f);
    }
    const ModelPreset* preset = NULL;
    for (int i = 0; i < NUM_MODEL_PRESETS; i++)
        if (!strcmp(o.model, model_presets[i].name)) preset = &model_presets[i];
    if (!preset) die("--model %s: unknown (d2, d6, d12, d24, d36, d48)", o.model);
    if (config.L) {
        const char* source = o.resume_dir ? o.resume_dir : o.init_from;
        if (o.model_given && (preset->L != config.L || preset->C != config.C || preset->NH != config.NH))
            die("--model %s (L %d C %d NH %d) does not match %s (L %d C %d NH %d)", o.model, preset->L,
                preset->C, preset->NH, source, config.L, config.C, config.NH);
        if (o.context_given && o.context != config.maxT)
            die("--context %d does not match %s (context %d)", o.context, source, config.maxT);
    } else {
        config.L = preset->L;
        config.C = preset->C;
        config.NH = preset->NH;
        config.maxT = o.context;
        if (o.context <= 0) die("--context %d must be positive", o.context);
    }

    Tokenizer* tok = NULL;
    if (o.tokenizer) {
        tok = tokenizer_load(o.tokenizer, err);
        if (!tok) die("%s", err);
    }
    if (!config.V) {
        config.V = tok ? tokenizer_vocab_size(tok) : shard_vocab(o.train_data);
        if (!config.V) die("%s: the shards do not state their vocabulary; give --tokenizer", o.train_data);
        config.Vp = padded_vocab(config.V);
    }
    if (tok && tokenizer_vocab_size(tok) != config.V)
        die("--tokenizer %s has %d tokens, the model %d", o.tokenizer, tokenizer_vocab_size(tok), config.V);

    // The batch.
    if (o.B <= 0 || o.T <= 0) die("-B %d -T %d: both must be positive", o.B, o.T);
    if (o.T > config.maxT) die("-T %d is longer than the model's context %d (--context)", o.T, config.maxT);
    long long tokens_per_micro = (long long)o.B * o.T;
    if (tokens_per_micro > INT_MAX) die("-B %d -T %d: B * T must stay below 2^31 tokens", o.B, o.T);
    if (o.total_batch == 0) o.total_batch = tokens_per_micro;
    if (o.total_batch < 0 || o.total_batch % tokens_per_micro != 0)
        die("--total-batch-size %lld is not a positive multiple of B * T = %lld", o.total_batch, tokens_per_micro);
    if (o.total_batch / tokens_per_micro > INT_MAX) die("--total-batch-size %lld: too many micro-steps", o.total_batch);
    int grad_accum = (int)(o.total_batch / tokens_per_micro);
    AttentionShape shape = attention_shape(&config, o.B, o.T);
    const ModelOptions* mo = &o.model_options;
    const char* why = attention_unsupported(mo->attention, shape);
    if (why) die("--attention %s: %s", attention_name(mo->attention), why);
    if (o.warmup_steps < 0 || o.lr <= 0.0f || o.min_lr_frac < 0.0f || o.min_lr_frac > 1.0f)
        die("--lr must be positive, --warmup-steps >= 0, --min-lr-frac in [0, 1]");

    DataLoader* train = dataloader_open(o.train_data, o.B, o.T, 0, 1, 1, o.seed, config.V, err);
    if (!train) die("--train-data: %s", err);
    DataLoader* val = NULL;
    // Without --val-data: the val shards beside the train shards ("train_" in the glob becomes
    // "val_"), when there are any; none otherwise.
    char val_glob[4096] = "";
    const char* train_at = strstr(o.train_data, "train_");
    if (!o.val_data && train_at) {
        snprintf(val_glob, sizeof(val_glob), "%.*sval_%s", (int)(train_at - o.train_data), o.train_data,
                 train_at + strlen("train_"));
        glob_t matches;
        if (glob(val_glob, 0, NULL, &matches) == 0) o.val_data = val_glob;
        globfree(&matches);
    }
    if (o.val_data && *o.val_data && o.val_every > 0) {
        val = dataloader_open(o.val_data, o.B, o.T, 0, 1, 0, o.seed, config.V, err);
        if (!val) die("--val-data: %s", err);
        if (o.val_batches > dataloader_batches_per_epoch(val)) o.val_batches = (int)dataloader_batches_per_epoch(val);
        if (o.val_batches <= 0) die("--val-batches must be positive");
    }
    if (o.steps <= 0) o.steps = (int)(dataloader_batches_per_epoch(train) / grad_accum);
    if (o.steps <= 0) die("--train-data %s: less than one step of data", o.train_data);

    GPT g;
    gpt_build(&g, config, o.B, o.T, mo);
    Rng sample_rng = {o.seed ^ 0x5851f42d4c957f2dULL};
    int start_step = 0;
    if (o.resume_dir) {
        const TrainingState* r = &resume;
        if (r->B != o.B || r->T != o.T || r->grad_accum != grad_accum)
            die("--resume %s: the run used -B %d -T %d with %d micro-steps, not -B %d -T %d with %d",
                o.resume_dir, r->B, r->T, r->grad_accum, o.B, o.T, grad_accum);
        if (r->seed != o.seed) die("--resume %s: the run used --seed %llu", o.resume_dir, (unsigned long long)r->seed);
        if (r->lr != o.lr || r->min_lr_frac != o.min_lr_frac || r->warmup_steps != o.warmup_steps ||
            r->weight_decay != o.weight_decay || r->grad_clip != o.grad_clip)
            die("--resume %s: the run used --lr %g --min-lr-frac %g --warmup-steps %d --weight-decay %g "
                "--grad-clip %g", o.resume_dir, r->lr, r->min_lr_frac, r->warmup_steps, r->weight_decay,
                r->grad_clip);
        if (r->attention != (int)mo->attention || r->deterministic != mo->deterministic ||
            r->recompute != mo->recompute || r->classifier_rows != g.plan.logits_rows) {
            char was[64];
            recompute_name(r->recompute, was, sizeof(was));
            die("--resume %s: the run used --attention %s%s --recompute %s with classifier chunks of %d rows; "
                "an exact resume needs the same", o.resume_dir, attention_name((AttentionKind)r->attention),
                r->deterministic ? " --deterministic" : "", was, r->classifier_rows);
        }
        if (r->steps != o.steps)
            printf("note: --steps %d, the run had %d: the learning-rate schedule changes\n", o.steps, r->steps);
        gpt_load_checkpoint(&g, resume_model);
        load_training_state(&g, resume_state);
        if (dataloader_restore(train, r->train_loader, err) != 0) die("%s: %s", resume_state, err);
        sample_rng.state = r->sample_rng;
        start_step = r->step;
    } else if (o.init_from) {
        gpt_load_checkpoint(&g, o.init_from);
    } else {
        gpt_init_random(&g, o.seed);
    }

    // What the run is.
    size_t P = g.num_params, Pwpe = g.param_sizes[1];
    printf("device: %s\n", prop.name);
    printf("model: L %d, C %d, NH %d, HS %d, vocab %d (padded %d), context %d, %zu parameters\n",
           config.L, config.C, config.NH, config.C / config.NH, config.V, config.Vp, config.maxT, P);
    printf("batch: B %d x T %d x %d micro-steps = %lld tokens per step, %d steps (from step %d)\n",
           o.B, o.T, grad_accum, o.total_batch, o.steps, start_step + 1);
    char recompute[64];
    recompute_name(mo->recompute, recompute, sizeof(recompute));
    printf("attention: %s%s; recompute in the backward: %s; classifier: %d chunk%s of %d rows\n",
           attention_name(mo->attention),
           mo->attention == ATTENTION_FLASH && !mo->deterministic ? "" : " (deterministic)", recompute,
           (int)ceil_div(g.plan.rows, g.plan.logits_rows), g.plan.logits_rows < g.plan.rows ? "s" : "",
           g.plan.logits_rows);
    printf("optimizer: AdamW lr %g, warmup %d, cosine to %g x lr, weight decay %g, grad clip %g\n",
           o.lr, o.warmup_steps, o.min_lr_frac, o.weight_decay, o.grad_clip);
    printf("train data: %s (%lld batches per epoch)\n", o.train_data, (long long)dataloader_batches_per_epoch(train));
    if (val) printf("val data: %s (%d batches every %d steps)\n", o.val_data, o.val_batches, o.val_every);
    print_memory_table(&g.plan, mo->attention);
    // Model FLOPs per token: 6 per weight for the matmuls forward and backward (every parameter
    // but wpe, which is only looked up; wte counts once, as the classifier), plus attention:
    // QK^T and PV, 2 * 2 * T * C per layer forward, times 3 with backward (causal masking ignored).
    double flops_per_token = 6.0 * (double)(P - Pwpe) + 12.0 * config.L * config.C * o.T;
    float peak = o.peak_tflops > 0.0f ? o.peak_tflops : device_peak_tflops(prop.name);
    if (peak > 0.0f) printf("MFU: %.3g GFLOP per token, peak %.0f TFLOP/s\n", flops_per_token * 1e-9, peak);
    else printf("MFU: unknown peak for this device (give --peak-tflops), shown as 0\n");

    FILE* log = NULL;
    if (o.log_path) {
        struct stat st;
        int append = o.resume_dir && stat(o.log_path, &st) == 0 && st.st_size > 0;
        log = fopen(o.log_path, append ? "a" : "w");
        if (!log) die("--log %s: cannot open: %s", o.log_path, strerror(errno));
        if (!append) fprintf(log, "step,loss,val_loss,lr,grad_norm,ms,tokens_per_s,mfu,mem_gib\n");
    }
    if (o.out_dir) make_dirs(o.out_dir);
    if (o.sample_every > 0 && !tok) printf("note: no --tokenizer, so no samples\n");

    AdamWConfig adam = {0.9f, 0.95f, 1e-8f, o.weight_decay, o.grad_clip};
    float dloss_scale = 1.0f / (float)((double)o.B * o.T * grad_accum);
    size_t peak_mem = 0;
    double total_time = 0.0;
    long long timed_tokens = 0;
    for (int step = start_step + 1; step <= o.steps; step++) {
        double t0 = now_seconds();
        float lr = learning_rate(&o, step, o.steps);
        gpt_zero_grads(&g);
        double loss_sum = 0.0;
        for (int micro = 0; micro < grad_accum; micro++) {
            if (dataloader_next(train, g.host_tokens, g.host_targets, err) != 0) die("--train-data: %s", err);
            gpt_forward(&g, g.host_tokens, o.B, o.T);
            gpt_classifier(&g, g.host_targets, o.B, o.T, dloss_scale, 1);
            gpt_backward(&g, g.host_tokens);
            // Waits for this micro-step before its host buffers take the next batch.
            loss_sum += gpt_mean_loss(&g, o.B * o.T);
        }
        float loss = (float)(loss_sum / grad_accum);
        if (!isfinite(loss)) die("the loss is %f at step %d: training diverged (try a lower --lr)", loss, step);
        float norm = gpt_update(&g, &adam, lr);
        cudaCheck(cudaStreamSynchronize(g.stream));
        double seconds = now_seconds() - t0;
        if (!isfinite(norm)) die("the gradient norm is %f at step %d: training diverged (try a lower --lr)", norm, step);
        if (losses) losses[step - 1] = loss;
        size_t used = device_memory_used();
        peak_mem = used > peak_mem ? used : peak_mem;
        double tokens_per_s = o.total_batch / seconds;
        double mfu = peak > 0.0f ? flops_per_token * tokens_per_s / (peak * 1e12) : 0.0;
        if (step > start_step + 1) {  // the first step pays for warm-up
            total_time += seconds;
            timed_tokens += o.total_batch;
        }
        float val_loss = NAN;
        if (val && (step % o.val_every == 0 || step == o.steps)) val_loss = validation_loss(&g, val, o.val_batches);
        printf("step %5d/%d | loss %.6f | lr %.3e | norm %.4f | %7.1f ms | %7.1fK tok/s | MFU %5.1f%% | mem %.2f GiB",
               step, o.steps, loss, lr, norm, seconds * 1e3, tokens_per_s * 1e-3, mfu * 100.0, GIB(peak_mem));
        if (!isnan(val_loss)) printf(" | val loss %.6f", val_loss);
        printf("\n");
        fflush(stdout);
        if (log) {
            fprintf(log, "%d,%.9g,", step, loss);
            if (!isnan(val_loss)) fprintf(log, "%.9g", val_loss);
            fprintf(log, ",%.9g,%.9g,%.3f,%.1f,%.4f,%.3f\n", lr, norm, seconds * 1e3, tokens_per_s, mfu,
                    GIB(peak_mem));
            fflush(log);
        }
        if (tok && o.sample_every > 0 && (step % o.sample_every == 0 || step == o.steps))
            gpt_sample(&g, tok, o.sample_tokens, o.temperature, o.top_k, &sample_rng);
        if (o.out_dir && ((o.checkpoint_every > 0 && step % o.checkpoint_every == 0) || step == o.steps)) {
            char model_path[4096], state_path[4096];
            checkpoint_paths(o.out_dir, step, model_path, state_path, sizeof(model_path));
            TrainingState s = {step, config, o.B, o.T, grad_accum, o.warmup_steps, o.steps, o.lr,
                               o.min_lr_frac, o.weight_decay, o.grad_clip, o.seed, dataloader_state(train),
                               sample_rng.state, g.adam_t, (int)mo->attention, mo->deterministic,
                               mo->recompute, g.plan.logits_rows};
            gpt_save_checkpoint(&g, model_path);
            save_training_state(&g, &s, state_path);
            printf("checkpoint: %s, %s\n", model_path, state_path);
        }
    }
    if (timed_tokens > 0)
        printf("done: %.1fK tokens/s on average after the first step, peak memory in use %.2f GiB\n",
               timed_tokens / total_time * 1e-3, GIB(peak_mem));
    if (log) fclose(log);
    dataloader_close(train);
    if (val) dataloader_close(val);
    if (tok) tokenizer_free(tok);
    gpt_free(&g);
}

// ----------------------------------------------------------------------------------------------
// Command line

#ifndef TESTING

static void usage(void) {
    printf(
        "usage: train_gpt [options]\n"
        "Trains a GPT-2 on token shards, on one GPU.\n"
        "model\n"
        "  --model NAME            d2, d6, d12 (124M), d24 (350M), d36 (774M), d48 (1.5B) [d12]\n"
        "  --context N             context length of the model [1024]\n"
        "  --init-from FILE        start from a model checkpoint (version 3 fp32 or 5 bf16)\n"
        "  --resume DIR            continue the run whose checkpoints are in DIR, exactly\n"
        "data\n"
        "  --train-data GLOB       training shards [datasets/tinyshakespeare/train_*.bin]\n"
        "  --val-data GLOB         validation shards, \"\" for none [the train glob with val_ for train_,\n"
        "                          when such shards exist]\n"
        "  --tokenizer FILE        tokenizer: sets the vocabulary and decodes samples\n"
        "                          (without it the vocabulary comes from the shards' header)\n"
        "batch and schedule\n"
        "  -B, --batch-size N      sequences per micro-step [4]\n"
        "  -T, --seq-len N         tokens per sequence [1024]\n"
        "  --total-batch-size N    tokens per optimizer step, a multiple of B*T [B*T]\n"
        "  --steps N               optimizer steps [one epoch]\n"
        "  --lr X                  peak learning rate [3e-4]\n"
        "  --warmup-steps N        linear warmup [0]\n"
        "  --min-lr-frac X         the cosine ends at X * lr [0]\n"
        "  --weight-decay X        AdamW weight decay of the 2-D weights [0.1]\n"
        "  --grad-clip X           global gradient norm clip, 0 for none [1.0]\n"
        "  --seed N                init, data order and sampling [1337]\n"
        "evaluation and output\n"
        "  --val-every N           validation loss every N steps, 0 for never [100]\n"
        "  --val-batches N         batches per validation [20]\n"
        "  --sample-every N        print a sample every N steps, 0 for never [0]\n"
        "  --sample-tokens N       tokens per sample [128]\n"
        "  --temperature X         sampling temperature, 0 for the most likely token [1.0]\n"
        "  --top-k N               sample among the K most likely tokens, 0 for all [0]\n"
        "  --checkpoint-every N    checkpoint every N steps (and always at the end) [0: end only]\n"
        "  --out-dir DIR           where checkpoints go; none without it (--resume: DIR)\n"
        "  --log FILE              a CSV line per step\n"
        "attention, memory and speed\n"
        "  --attention KIND        flash or naive [flash]\n"
        "  --deterministic         the flash backward without atomics (naive always is)\n"
        "  --recompute LIST        recompute in the backward instead of keeping per layer:\n"
        "                          gelu, layernorm, both (gelu,layernorm) or none [none]\n"
        "  --classifier-chunk N    rows of logits per classifier chunk, 0 for as many as\n"
        "                          fit in 1 GiB [0]\n"
        "  --peak-tflops X         the GPU's dense bf16 peak for MFU [from the device name]\n"
        "  -h, --help              this text\n");
}

static long long parse_integer(const char* flag, const char* s) {
    char* end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) die("%s: '%s' is not an integer", flag, s);
    return v;
}

static int parse_int(const char* flag, const char* s) {
    long long v = parse_integer(flag, s);
    if (v < -2147483647LL || v > 2147483647LL) die("%s: %s is out of range", flag, s);
    return (int)v;
}

// "none" or a comma-separated list of gelu and layernorm, as RECOMPUTE_* flags.
static int parse_recompute(const char* s) {
    if (!strcmp(s, "none")) return 0;
    int flags = 0;
    for (const char* p = s; *p;) {
        size_t len = strcspn(p, ",");
        if (len == 4 && !strncmp(p, "gelu", 4)) flags |= RECOMPUTE_GELU;
        else if (len == 9 && !strncmp(p, "layernorm", 9)) flags |= RECOMPUTE_LAYERNORM;
        else die("--recompute %s: expected none or a comma-separated list of gelu and layernorm", s);
        p += len;
        if (*p == ',' && *++p == '\0') die("--recompute %s: trailing comma", s);
    }
    return flags;
}

static float parse_float(const char* flag, const char* s) {
    char* end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !isfinite(v)) die("%s: '%s' is not a number", flag, s);
    return v;
}

int main(int argc, char** argv) {
    enum {
        OPT_MODEL = 256, OPT_CONTEXT, OPT_INIT_FROM, OPT_RESUME, OPT_TRAIN_DATA, OPT_VAL_DATA,
        OPT_TOKENIZER, OPT_TOTAL_BATCH, OPT_STEPS, OPT_LR, OPT_WARMUP, OPT_MIN_LR_FRAC, OPT_WD,
        OPT_GRAD_CLIP, OPT_SEED, OPT_VAL_EVERY, OPT_VAL_BATCHES, OPT_SAMPLE_EVERY, OPT_SAMPLE_TOKENS,
        OPT_TEMPERATURE, OPT_TOP_K, OPT_CHECKPOINT_EVERY, OPT_OUT_DIR, OPT_LOG, OPT_ATTENTION,
        OPT_DETERMINISTIC, OPT_RECOMPUTE, OPT_CLASSIFIER_CHUNK, OPT_PEAK_TFLOPS
    };
    static const struct option long_options[] = {
        {"model", required_argument, NULL, OPT_MODEL},
        {"context", required_argument, NULL, OPT_CONTEXT},
        {"init-from", required_argument, NULL, OPT_INIT_FROM},
        {"resume", required_argument, NULL, OPT_RESUME},
        {"train-data", required_argument, NULL, OPT_TRAIN_DATA},
        {"val-data", required_argument, NULL, OPT_VAL_DATA},
        {"tokenizer", required_argument, NULL, OPT_TOKENIZER},
        {"batch-size", required_argument, NULL, 'B'},
        {"seq-len", required_argument, NULL, 'T'},
        {"total-batch-size", required_argument, NULL, OPT_TOTAL_BATCH},
        {"steps", required_argument, NULL, OPT_STEPS},
        {"lr", required_argument, NULL, OPT_LR},
        {"warmup-steps", required_argument, NULL, OPT_WARMUP},
        {"min-lr-frac", required_argument, NULL, OPT_MIN_LR_FRAC},
        {"weight-decay", required_argument, NULL, OPT_WD},
        {"grad-clip", required_argument, NULL, OPT_GRAD_CLIP},
        {"seed", required_argument, NULL, OPT_SEED},
        {"val-every", required_argument, NULL, OPT_VAL_EVERY},
        {"val-batches", required_argument, NULL, OPT_VAL_BATCHES},
        {"sample-every", required_argument, NULL, OPT_SAMPLE_EVERY},
        {"sample-tokens", required_argument, NULL, OPT_SAMPLE_TOKENS},
        {"temperature", required_argument, NULL, OPT_TEMPERATURE},
        {"top-k", required_argument, NULL, OPT_TOP_K},
        {"checkpoint-every", required_argument, NULL, OPT_CHECKPOINT_EVERY},
        {"out-dir", required_argument, NULL, OPT_OUT_DIR},
        {"log", required_argument, NULL, OPT_LOG},
        {"attention", required_argument, NULL, OPT_ATTENTION},
        {"deterministic", no_argument, NULL, OPT_DETERMINISTIC},
        {"recompute", required_argument, NULL, OPT_RECOMPUTE},
        {"classifier-chunk", required_argument, NULL, OPT_CLASSIFIER_CHUNK},
        {"peak-tflops", required_argument, NULL, OPT_PEAK_TFLOPS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    TrainOptions o;
    default_train_options(&o);
    int c;
    opterr = 0;  // the errors below name the option
    while ((c = getopt_long(argc, argv, ":B:T:h", long_options, NULL)) != -1) {
        switch (c) {
        case OPT_MODEL: o.model = optarg; o.model_given = 1; break;
        case OPT_CONTEXT: o.context = parse_int("--context", optarg); o.context_given = 1; break;
        case OPT_INIT_FROM: o.init_from = optarg; break;
        case OPT_RESUME: o.resume_dir = optarg; break;
        case OPT_TRAIN_DATA: o.train_data = optarg; break;
        case OPT_VAL_DATA: o.val_data = optarg; break;
        case OPT_TOKENIZER: o.tokenizer = optarg; break;
        case 'B': o.B = parse_int("-B", optarg); break;
        case 'T': o.T = parse_int("-T", optarg); break;
        case OPT_TOTAL_BATCH: o.total_batch = parse_integer("--total-batch-size", optarg); break;
        case OPT_STEPS: o.steps = parse_int("--steps", optarg); break;
        case OPT_LR: o.lr = parse_float("--lr", optarg); break;
        case OPT_WARMUP: o.warmup_steps = parse_int("--warmup-steps", optarg); break;
        case OPT_MIN_LR_FRAC: o.min_lr_frac = parse_float("--min-lr-frac", optarg); break;
        case OPT_WD: o.weight_decay = parse_float("--weight-decay", optarg); break;
        case OPT_GRAD_CLIP: o.grad_clip = parse_float("--grad-clip", optarg); break;
        case OPT_SEED: o.seed = (uint64_t)parse_integer("--seed", optarg); break;
        case OPT_VAL_EVERY: o.val_every = parse_int("--val-every", optarg); break;
        case OPT_VAL_BATCHES: o.val_batches = parse_int("--val-batches", optarg); break;
        case OPT_SAMPLE_EVERY: o.sample_every = parse_int("--sample-every", optarg); break;
        case OPT_SAMPLE_TOKENS: o.sample_tokens = parse_int("--sample-tokens", optarg); break;
        case OPT_TEMPERATURE: o.temperature = parse_float("--temperature", optarg); break;
        case OPT_TOP_K: o.top_k = parse_int("--top-k", optarg); break;
        case OPT_CHECKPOINT_EVERY: o.checkpoint_every = parse_int("--checkpoint-every", optarg); break;
        case OPT_OUT_DIR: o.out_dir = optarg; break;
        case OPT_LOG: o.log_path = optarg; break;
        case OPT_ATTENTION:
            if (!strcmp(optarg, "flash")) o.model_options.attention = ATTENTION_FLASH;
            else if (!strcmp(optarg, "naive")) o.model_options.attention = ATTENTION_NAIVE;
            else die("--attention %s: expected flash or naive", optarg);
            break;
        case OPT_DETERMINISTIC: o.model_options.deterministic = 1; break;
        case OPT_RECOMPUTE: o.model_options.recompute = parse_recompute(optarg); break;
        case OPT_CLASSIFIER_CHUNK:
            o.model_options.classifier_rows = parse_int("--classifier-chunk", optarg);
            if (o.model_options.classifier_rows < 0) die("--classifier-chunk %s must be >= 0", optarg);
            break;
        case OPT_PEAK_TFLOPS: o.peak_tflops = parse_float("--peak-tflops", optarg); break;
        case 'h': usage(); return 0;
        case ':': die("%s needs a value (train_gpt --help lists the options)", argv[optind - 1]);
        default: die("unknown option %s (train_gpt --help lists the options)", argv[optind - 1]);
        }
    }
    if (optind < argc) die("unexpected argument '%s' (train_gpt --help lists the options)", argv[optind]);
    if (o.sample_tokens <= 0) die("--sample-tokens %d must be positive", o.sample_tokens);
    if (o.temperature < 0.0f) die("--temperature %g must be >= 0", o.temperature);
    if (o.top_k < 0) die("--top-k %d must be >= 0", o.top_k);
    if (o.val_every < 0 || o.sample_every < 0 || o.checkpoint_every < 0 || o.steps < 0)
        die("--steps, --val-every, --sample-every and --checkpoint-every must be >= 0");
    train_run(&o, NULL);
    return 0;
}

#endif
