// gpt/inference.cu: gpt/inference.h. The prompt runs through the block of the training model
// (gpt/block.h), layer by layer on one layer's buffers, each layer's keys and values then copied
// into every sequence's cache; each step then walks the same operations (gpt/model_ops.h) on B
// rows, one per sequence, as five kernels a layer (layers/matmul_rows.h for the linear layers,
// attention/decode.h for one query per sequence against that sequence's cache) and those of the
// 2026 recipe's parts it has (enqueue_block), replayed from one of two captured graphs. With
// QK-norm or rotary the QKV layer writes the new key into the cache as it comes (a head spans
// several of matmul_rows' blocks of 16 columns, so its norm does not fit that epilogue), and the
// decode attention norms and rotates the query and that key, writing the key back
// (attention/decode.h's DecodeQK).
#include "gpt/inference.h"

#include <math.h>
#include <string.h>
#include "common/bytes.h"
#include "common/error.h"
#include "gpt/activations.h"
#include "gpt/sampler.h"
#include "layers/backout.h"
#include "layers/classifier.h"
#include "layers/encoder.h"
#include "layers/matmul.h"
#include "layers/matmul_rows.h"
#include "layers/residual_lambdas.h"
#include "layers/rmsnorm.h"
#include "layers/smear.h"
#include "layers/value_embedding.h"
#include "device/bf16.cuh"
#include "device/launch.cuh"

// Carves the allocation at base (NULL: sizes only) into m's buffers; fills m->sizes.
static void layout(InferenceModel* m, char* base, const GPTConfig* c, int B, int length, int prompt_max) {
    size_t C = c->C, off = 0, P = prompt_max;
    const Architecture* arch = &c->arch;
    InferenceSizes* sizes = &m->sizes;
    memset(sizes, 0, sizeof(*sizes));
    auto carve = [&](size_t bytes, size_t* part) {
        char* at = base ? base + off : NULL;
        off += carve_round_up(bytes);
        *part += carve_round_up(bytes);
        return at;
    };
    bf16* params = (bf16*)carve(count_params(c) * sizeof(bf16), &sizes->params);
    if (base) point_params(&m->params, params, c);
    m->kv_cache = (bf16*)carve((size_t)c->L * B * length * 2 * C * sizeof(bf16), &sizes->kv_cache);
    // The prompt's activations: one layer's, reused by every layer, and nothing kept for a
    // backward: the stream in and out of a block share a buffer, as do the two norms' outputs
    // and their statistics. The architecture's only (gpt/activations.h).
    BlockActivations* a = &m->prompt;
    auto carve_prompt = [&](size_t width) { return (bf16*)carve(P * width * C * sizeof(bf16), &sizes->prompt); };
    size_t qk_rstd_width = 2 * (size_t)c->NH;   // QK-norm's rstd per row: each head's q and k
    a->res = a->res_next = carve_prompt(1);
    a->x = arch->residual_lambdas ? a->res : NULL;   // the lambdas make res of it in place
    a->x0 = arch->residual_lambdas ? carve_prompt(1) : NULL;
    a->qkv = carve_prompt(3);
    a->atty = carve_prompt(1);
    a->mid = carve_prompt(1);
    a->fch_gelu = carve_prompt(4);
    a->ln1 = a->ln2 = carve_prompt(1);
    a->fch = arch->relu2 ? NULL : carve_prompt(4);
    a->ln1_mean = a->ln2_mean = arch->rms_norm ? NULL : (float*)carve(P * sizeof(float), &sizes->prompt);
    a->ln1_rstd = a->ln2_rstd = (float*)carve(P * sizeof(float), &sizes->prompt);
    a->qk_rstd = arch->qk_norm ? (float*)carve(P * qk_rstd_width * sizeof(float), &sizes->prompt) : NULL;
    a->value_gate = arch->value_embeddings ? (float*)carve(P * c->NH * sizeof(float), &sizes->prompt) : NULL;
    a->att_saved = carve(attention_saved_bytes(&m->attention[0], attention_shape(c, 1, prompt_max)), &sizes->prompt);
    m->prompt_tokens = (int*)carve(P * sizeof(int), &sizes->prompt);
    m->prompt_unsmeared = arch->smear ? carve_prompt(1) : NULL;
    m->prompt_rows = arch->rotary ? (int*)carve(P * sizeof(int), &sizes->prompt) : NULL;
    size_t rows = B;
    auto carve_step = [&](size_t width) { return (bf16*)carve(rows * width * C * sizeof(bf16), &sizes->step); };
    StepActivations* r = &m->step;
    r->x = carve_step(1);
    r->x0 = arch->residual_lambdas ? carve_step(1) : NULL;
    r->qkv = carve_step(3);
    r->atty = carve_step(1);
    r->mid = carve_step(1);
    r->fch_gelu = carve_step(4);
    auto carve_step_floats = [&](size_t width) { return (float*)carve(rows * width * sizeof(float), &sizes->step); };
    r->ln1 = arch->value_embeddings ? carve_step(1) : NULL;
    r->ln1_mean = arch->value_embeddings && !arch->rms_norm ? carve_step_floats(1) : NULL;
    r->ln1_rstd = arch->value_embeddings ? carve_step_floats(1) : NULL;
    r->value_gate = arch->value_embeddings ? carve_step_floats(c->NH) : NULL;
    r->unsmeared = arch->smear ? carve_step(1) : NULL;
    r->smear_prev = arch->smear ? carve_step(1) : NULL;
    r->backout_mid = arch->backout ? carve_step(1) : NULL;
    for (int i = 0; i < 2; i++) m->logits_of[i] = (bf16*)carve(rows * c->Vp * sizeof(bf16), &sizes->step);
    AttentionShape cache = attention_shape(c, B, length);
    m->decode_scratch = carve(attention_decode_scratch_bytes(&m->attention[0], cache), &sizes->step);
    m->tokens = (int*)carve(rows * sizeof(int), &sizes->step);
    m->positions = (int*)carve(rows * sizeof(int), &sizes->step);
    m->seed = (uint64_t*)carve(sizeof(uint64_t), &sizes->step);
}

size_t inference_sizes_total(const InferenceSizes* m) { return m->params + m->kv_cache + m->prompt + m->step; }

void inference_sizes_print(const InferenceSizes* m) {
    size_t free_bytes, total_bytes;
    cudaCheck(cudaMemGetInfo(&free_bytes, &total_bytes));
    fprintf(stderr, "memory (GiB): parameters (bf16) %.3f, KV cache %.3f, prompt activations %.3f, decoding %.3f; "
            "total %.3f (device: %.1f GiB)\n", GIB(m->params), GIB(m->kv_cache), GIB(m->prompt), GIB(m->step),
           GIB(inference_sizes_total(m)), GIB(total_bytes));
}

// The seed reaches the GPU, and the host's generator starts from it, at the next prompt: the
// step the GPU runs ahead keeps the seed of the draws it continues.
void inference_set_seed(InferenceModel* m, uint64_t seed) { m->draw.seed = seed; }

// The copies go on the model's stream (non-blocking: the legacy stream's copies would not be
// ordered before its kernels); a copy from pageable memory has read it when it returns.
void inference_copy_params(InferenceModel* m, const bf16* params) {
    cudaCheck(cudaMemcpyAsync(m->params.wte, params, count_params(&m->config) * sizeof(bf16),
                              cudaMemcpyDeviceToDevice, m->stream));
}

void inference_set_params(InferenceModel* m, const float* values) {
    upload_params(m->params.wte, values, &m->config, m->stream);
}

// Layer l's cache as views (attention/params.h): K and V of every sequence, length rows each.
static void cache_views(const InferenceModel* m, int l, AttentionTensor* k, AttentionTensor* v) {
    long long C = m->config.C, HS = C / m->config.NH, row = 2 * C, batch = (long long)m->length * row;
    bf16* base = m->kv_cache + (size_t)l * m->B * batch;
    *k = (AttentionTensor){base, batch, row, (int)HS};
    *v = (AttentionTensor){base + C, batch, row, (int)HS};
}

__global__ void advance_kernel(int* positions, int B) {
    grid_dependency_wait();   // the step's kernels have read the positions
    if (threadIdx.x < B) positions[threadIdx.x]++;
}

// The draw after the logits of copy p's rows: on the GPU (its ids into tokens and
// host_tokens_of[p]), or, with top-k or top-p, the logits copied out (the host draws after).
static void enqueue_draw(InferenceModel* m, int p) {
    const GPTConfig* c = &m->config;
    const DrawSettings* d = &m->draw;
    float softcap = head_ops(&c->arch).softcap;
    if (d->top_k == 0 && d->top_p >= 1.0f) {
        if (softcap > 0.0f)
            classifier_sample_softcap(m->tokens, m->logits_of[p], m->B, c->V, c->Vp, softcap, d->temperature,
                                      m->seed, m->positions, m->stream);
        else classifier_sample(m->tokens, m->logits_of[p], m->B, c->V, c->Vp, d->temperature, m->seed, m->positions,
                               m->stream);
        cudaCheck(cudaMemcpyAsync(m->host_tokens_of[p], m->tokens, (size_t)m->B * sizeof(int),
                                  cudaMemcpyDeviceToHost, m->stream));
    } else {
        cudaCheck(cudaMemcpyAsync(m->host_logits, m->logits_of[p], (size_t)m->B * c->Vp * sizeof(bf16),
                                  cudaMemcpyDeviceToHost, m->stream));
    }
    launch_overlapped(advance_kernel, dim3(1), dim3(m->B), 0, m->stream, m->positions, m->B);
}

// The norm a step's linear layer takes in before its matmul (RowsEpilogue's), with its weight
// and bias where it has them.
static RowsEpilogue step_norm(NormKind norm, const bf16* weight, const bf16* bias) {
    RowsEpilogue e = {};
    switch (norm) {
    case NORM_LAYERNORM:
        e.ln_weight = weight;
        e.ln_bias = bias;
        break;
    case NORM_RMSNORM: e.rms_norm = 1; break;
    }
    return e;
}

// The head's operations on step.x (B, C): logits_of[p] (B, Vp) = lnf(step.x) @ head^T (wte, or
// lm_head) in one matmul_rows kernel; the draw applies the soft cap.
static void lm_head(InferenceModel* m, int p) {
    const GPTConfig* c = &m->config;
    const HeadOps head = head_ops(&c->arch);
    RowsEpilogue before = {};   // a norm's, which the matmul after it takes in first
    for (int i = 0; i < head.count; i++) {
        switch (head.op[i]) {
        case HEAD_BACKOUT:   // in place: the norm fused into the matmul after it reads the result
            backout_forward(m->step.x, m->step.x, m->step.backout_mid, m->params.backout_lambda, m->B, c->C,
                            m->stream);
            break;
        case HEAD_NORM: before = step_norm(head.norm, m->params.lnfw, m->params.lnfb); break;
        case HEAD_LOGITS:
            matmul_rows_forward(m->logits_of[p], m->step.x, head_weights(&m->params, c), &before, m->B, c->C, c->Vp,
                                m->stream);
            break;
        }
    }
}

static int draws_on_gpu(const InferenceModel* m) { return m->draw.top_k == 0 && m->draw.top_p >= 1.0f; }

// Once copy p's work is done: its tokens become the caller's (host_tokens), the host's draws
// (when it draws) going into them and into tokens.
static void finish_draw(InferenceModel* m, int p) {
    cudaCheck(cudaEventSynchronize(m->step_done[p]));
    m->host_tokens = m->host_tokens_of[p];
    const GPTConfig* c = &m->config;
    const DrawSettings* d = &m->draw;
    if (draws_on_gpu(m)) return;
    float cap = head_ops(&c->arch).softcap;
    for (int b = 0; b < m->B; b++) {
        for (int v = 0; v < c->V; v++) {
            float x = __bfloat162float(m->host_logits[(size_t)b * c->Vp + v]);
            m->draw_logits[v] = cap > 0.0f ? cap * tanhf(x / cap) : x;
        }
        m->host_tokens[b] =
            sample_token(m->draw_logits, c->V, d->temperature, d->top_k, d->top_p, &m->rng, m->draw_scratch);
    }
    cudaCheck(cudaMemcpyAsync(m->tokens, m->host_tokens, (size_t)m->B * sizeof(int), cudaMemcpyHostToDevice,
                              m->stream));
}

// Every sequence's cache rows 0..n-1 of a layer take the prompt's keys and values, columns
// C..3C of the layer's qkv (n, 3C): a thread per 8 of a row's 2C values, written to each of the
// B sequences. C is a multiple of 8 (the head sizes attention takes are).
__global__ void fill_caches_kernel(bf16x8* cache, long long batch, long long row, const bf16x8* qkv, int n, int C8,
                                   int B) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= (long long)n * 2 * C8) return;
    long long t = i / (2 * C8), j = i % (2 * C8);
    bf16x8 kv = qkv[t * 3 * C8 + C8 + j];
    for (int b = 0; b < B; b++) cache[b * batch + t * row + j] = kv;
}

// The prompt's keys and values of layer l (in m->prompt.qkv) into every sequence's cache.
static void fill_caches(InferenceModel* m, int l, int n) {
    AttentionTensor k, v;
    cache_views(m, l, &k, &v);
    int C8 = m->config.C / 8, block = 256;
    fill_caches_kernel<<<(unsigned)ceil_div((long long)n * 2 * C8, block), block, 0, m->stream>>>(
        (bf16x8*)k.ptr, k.batch / 8, k.row / 8, (const bf16x8*)m->prompt.qkv, n, C8, m->B);
    cudaCheckLaunch();
}

// Replays the step's next copy.
static void launch_step(InferenceModel* m) {
    int p = m->next_graph;
    cudaCheck(cudaGraphLaunch(m->step_graph[p], m->stream));
    cudaCheck(cudaEventRecord(m->step_done[p], m->stream));
    m->next_graph = 1 - p;
    m->launched++;
}

// The prompt's row (C) into each of the B rows of dst (B, C): every sequence starts from it.
static void copy_row_to_each(bf16* dst, const bf16* row, int B, int C, cudaStream_t st) {
    for (int b = 0; b < B; b++)
        cudaCheck(cudaMemcpyAsync(dst + (size_t)b * C, row, (size_t)C * sizeof(bf16), cudaMemcpyDeviceToDevice, st));
}

void inference_prompt(InferenceModel* m, const int* prompt, int n) {
    const GPTConfig* c = &m->config;
    int C = c->C;
    cudaStream_t st = m->stream;
    if (n < 1 || n > m->prompt_max || n >= m->length)
        die("inference_prompt: %d tokens, the model holds prompts of 1 to %d and %d positions", n, m->prompt_max,
            m->length);
    cudaCheck(cudaStreamSynchronize(st));   // a step run ahead is dropped; the staging buffers are free
    m->launched = 0;
    // The draws start from the seed, on the GPU and on the host.
    m->rng.state = m->draw.seed;
    cudaCheck(cudaMemcpyAsync(m->seed, &m->draw.seed, sizeof(uint64_t), cudaMemcpyHostToDevice, st));
    cudaCheck(cudaMemcpyAsync(m->prompt_tokens, prompt, (size_t)n * sizeof(int), cudaMemcpyHostToDevice, st));
    // The stem into prompt.res, or with the smear into prompt_unsmeared, which it then smears
    // into prompt.res; each sequence's smear then looks back to the prompt's last token.
    const StemOps stem = stem_ops(&c->arch);
    bf16* unsmeared = m->prompt_unsmeared ? m->prompt_unsmeared : m->prompt.res;
    for (int i = 0; i < stem.count; i++) {
        switch (stem.op[i]) {
        case STEM_EMBEDDING:
            encoder_forward(unsmeared, m->prompt_tokens, m->params.wte, m->params.wpe, 1, n, C, st);
            break;
        case STEM_EMBEDDING_NORM: rmsnorm_forward(unsmeared, NULL, unsmeared, n, C, st); break;
        case STEM_SMEAR:
            smear_forward(m->prompt.res, unsmeared, m->params.smear_gate, m->params.smear_lambda, 1, n, C,
                          SMEAR_GATE_CHANNELS, st);
            copy_row_to_each(m->step.smear_prev, unsmeared + (size_t)(n - 1) * C, m->B, C, st);
            break;
        }
    }
    // The stem's output, which the residual lambdas of every block read.
    if (m->prompt.x0)
        cudaCheck(cudaMemcpyAsync(m->prompt.x0, m->prompt.res, (size_t)n * C * sizeof(bf16), cudaMemcpyDeviceToDevice,
                                  st));
    BlockPass pass = {&c->arch, c->L,       m->attention, attention_shape(c, 1, n), m->prompt_rows, 0, NULL, NULL,
                      &m->matmul, NULL,     NULL,         0,                        m->prompt_tokens};
    for (int l = 0; l < c->L; l++) {
        LayerParameters w = layer_parameters(&m->params, l, c);
        block_forward(&pass, l, &m->prompt, &w);
        fill_caches(m, l, n);   // from the block's qkv, before the next block writes it
        if (m->step.backout_mid && l == architecture_backout_layer(c->L))   // the head's, of the last position
            copy_row_to_each(m->step.backout_mid, m->prompt.res_next + (size_t)(n - 1) * C, m->B, C, st);
    }
    // The last position's logits, in every sequence's row (each draws its own token).
    copy_row_to_each(m->step.x, m->prompt.res_next + (size_t)(n - 1) * C, m->B, C, st);
    lm_head(m, 0);
    // The draw of the token at position n keys its noise by position n - 1, the logits' own.
    for (int b = 0; b < m->B; b++) m->prompt_positions[b] = n - 1;
    cudaCheck(cudaMemcpyAsync(m->positions, m->prompt_positions, (size_t)m->B * sizeof(int),
                              cudaMemcpyHostToDevice, st));
    enqueue_draw(m, 0);
    cudaCheck(cudaEventRecord(m->step_done[0], st));
    finish_draw(m, 0);
    m->position = n;
    m->next_graph = 1;
    if (draws_on_gpu(m)) launch_step(m);   // ahead: the first step runs while the caller takes these
}

// Layer l's block on the step's B rows, a case per operation: every linear layer is one
// matmul_rows kernel with the norm before it and the bias, activation, residual or cache write
// after it fused in, and with the attention that is five kernels a layer, each starting while
// the one before ends. The 2026 recipe's parts add kernels of their own: the residual lambdas
// one, a layer with value embeddings three (ln1, which its gate reads, the gate, the embedding's
// add). QK-norm and rotary of the new query and key are the attention's (their raw key goes into
// the cache, which the attention rewrites).
static void enqueue_block(InferenceModel* m, int l) {
    const GPTConfig* c = &m->config;
    const BlockOps ops = block_ops(&c->arch, l, c->L);
    int C = c->C, B = m->B, HS = C / c->NH;
    cudaStream_t st = m->stream;
    const StepActivations* r = &m->step;
    LayerParameters w = layer_parameters(&m->params, l, c);
    AttentionTensor k, v;
    cache_views(m, l, &k, &v);
    RowsEpilogue before = {};   // a norm's, which the linear layer after it takes in first
    DecodeQK qk = {};
    const DecodeQK* transform = NULL;   // QK-norm and rotary's, which the attention after them applies
    for (int i = 0; i < ops.count; i++) {
        switch (ops.op[i]) {
        case BLOCK_RESIDUAL_LAMBDAS:   // in place: the norm and the residual add after it read the result
            residual_lambdas_forward(r->x, r->x, r->x0, w.resid_lambda, w.x0_lambda, B, C, st);
            break;
        case BLOCK_NORM1: before = step_norm(ops.norm, w.ln1w, w.ln1b); break;
        case BLOCK_VALUE_GATE:   // the gate reads ln1 itself, which the QKV layer after it takes in fused
            norm_forward(ops.norm, r->ln1, r->ln1_mean, r->ln1_rstd, r->x, w.ln1w, w.ln1b, B, C, st);
            value_gate_forward(r->value_gate, r->ln1, w.value_gate, B, C, c->NH, VALUE_GATE_CHANNELS, st);
            break;
        case BLOCK_QKV: {
            // Q, K, V of sequence b go to row b of qkv, its K and V also to row positions[b] of
            // its cache.
            RowsEpilogue e = before;
            e.bias = w.qkvb;
            e.cache = k.ptr;
            e.cache_batch = k.batch;
            e.cache_row = k.row;
            e.cache_from = C;
            e.positions = m->positions;
            matmul_rows_forward(r->qkv, r->x, w.qkvw, &e, B, C, 3 * C, st);
            break;
        }
        case BLOCK_VALUE_EMBEDDING:   // into qkv's values and the cache row the QKV layer wrote them to
            value_embedding_forward(r->qkv + 2 * C, 3 * C, m->tokens, w.value_embedding, r->value_gate, v.ptr, v.batch,
                                    v.row, m->positions, B, c->NH, HS, st);
            break;
        case BLOCK_QK_NORM_ROTARY:
            qk = (DecodeQK){ops.qk_norm ? RMSNORM_EPS : 0.0f, ops.rotary ? ops.rotary_base : 0.0f};
            transform = &qk;
            break;
        case BLOCK_ATTENTION: {
            AttentionParams a;
            memset(&a, 0, sizeof(a));
            a.shape = attention_shape(c, B, m->length);
            a.q = (AttentionTensor){r->qkv, 3LL * C, 0, HS};
            a.k = k;
            a.v = v;
            a.o = (AttentionTensor){r->atty, (long long)C, 0, HS};
            attention_decode(block_attention(&c->arch, m->attention, l), &a, m->positions, transform,
                             m->decode_scratch, st);
            break;
        }
        case BLOCK_ATTPROJ: {
            RowsEpilogue e = {.bias = w.attprojb, .residual = r->x};
            matmul_rows_forward(r->mid, r->atty, w.attprojw, &e, B, C, C, st);
            break;
        }
        case BLOCK_NORM2: before = step_norm(ops.norm, w.ln2w, w.ln2b); break;
        case BLOCK_FC: {
            RowsEpilogue e = before;
            e.bias = w.fcb;
            switch (ops.activation) {
            case ACTIVATION_GELU: e.gelu = 1; break;
            case ACTIVATION_RELU2: e.relu2 = 1; break;
            }
            matmul_rows_forward(r->fch_gelu, r->mid, w.fcw, &e, B, C, 4 * C, st);
            break;
        }
        case BLOCK_FCPROJ: {
            RowsEpilogue e = {.bias = w.fcprojb, .residual = r->mid};
            matmul_rows_forward(r->x, r->fch_gelu, w.fcprojw, &e, B, 4 * C, C, st);
            break;
        }
        }
    }
}

// One step on the GPU: the B tokens at their positions through the stem, every block and the
// head (gpt/model_ops.h), their keys and values into the caches, the logits and (on the GPU) the
// draw, the positions one further.
static void enqueue_step(InferenceModel* m, int p) {
    const GPTConfig* c = &m->config;
    const StemOps stem = stem_ops(&c->arch);
    bf16* unsmeared = m->step.unsmeared ? m->step.unsmeared : m->step.x;
    for (int i = 0; i < stem.count; i++) {
        switch (stem.op[i]) {
        case STEM_EMBEDDING:
            encoder_forward_at(unsmeared, m->tokens, m->positions, m->params.wte, m->params.wpe, m->B, c->C,
                               m->stream);
            break;
        case STEM_EMBEDDING_NORM: rmsnorm_forward(unsmeared, NULL, unsmeared, m->B, c->C, m->stream); break;
        case STEM_SMEAR:   // a step's token always has one before it: the prompt's last, or the step's before
            smear_step(m->step.x, unsmeared, m->step.smear_prev, m->params.smear_gate, m->params.smear_lambda, m->B,
                       c->C, SMEAR_GATE_CHANNELS, m->stream);
            break;
        }
    }
    if (m->step.x0)
        cudaCheck(cudaMemcpyAsync(m->step.x0, m->step.x, (size_t)m->B * c->C * sizeof(bf16), cudaMemcpyDeviceToDevice,
                                  m->stream));
    for (int l = 0; l < c->L; l++) {
        enqueue_block(m, l);
        if (m->step.backout_mid && l == architecture_backout_layer(c->L))
            cudaCheck(cudaMemcpyAsync(m->step.backout_mid, m->step.x, (size_t)m->B * c->C * sizeof(bf16),
                                      cudaMemcpyDeviceToDevice, m->stream));
    }
    lm_head(m, p);
    enqueue_draw(m, p);
}

void inference_attention_plans(const Architecture* arch, AttentionPlan plans[ARCHITECTURE_MAX_WINDOWS]) {
    const AttentionPlan flash = {ATTENTION_FLASH};
    block_attention_plans(arch, &flash, NULL, NULL, plans);
}

void inference_build(InferenceModel* m, GPTConfig c, int B, int length, int prompt_max, DrawSettings draw) {
    if (B < 1 || B > INFERENCE_MAX_SEQUENCES || length < 2 || length > c.maxT || prompt_max < 1 || prompt_max >= length)
        die("inference_build: %d sequences (1 to %d) of %d positions (2 to the context, %d), prompts up to %d",
            B, INFERENCE_MAX_SEQUENCES, length, c.maxT, prompt_max);
    memset(m, 0, sizeof(*m));
    m->config = c;
    m->B = B;
    m->length = length;
    m->prompt_max = prompt_max;
    m->draw = draw;
    inference_attention_plans(&c.arch, m->attention);
    layout(m, NULL, &c, B, length, prompt_max);
    size_t need = inference_sizes_total(&m->sizes);
    char err[ERR_LEN];
    if (gpu_memory_unfit(need, err)) die("inference_build for %d sequences of %d positions: %s", B, length, err);
    cudaCheck(cudaMalloc((void**)&m->memory, need));
    layout(m, m->memory, &c, B, length, prompt_max);
    cudaCheck(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
    matmul_stream_init(&m->matmul, m->stream);
    // Zeros once: the decode attention's counters start at zero and every call leaves them so.
    cudaCheck(cudaMemsetAsync(m->memory, 0, need, m->stream));
    if (m->prompt_rows) {
        int* rows = (int*)malloc((size_t)prompt_max * sizeof(int));
        if (!rows) die("out of host memory for the prompt's positions");
        for (int t = 0; t < prompt_max; t++) rows[t] = t;
        // From pageable memory: the copy has read rows when it returns.
        cudaCheck(cudaMemcpyAsync(m->prompt_rows, rows, (size_t)prompt_max * sizeof(int), cudaMemcpyHostToDevice,
                                  m->stream));
        free(rows);
    }
    for (int i = 0; i < 2; i++) {
        cudaCheck(cudaMallocHost((void**)&m->host_tokens_of[i], (size_t)B * sizeof(int)));
        cudaCheck(cudaEventCreateWithFlags(&m->step_done[i], cudaEventDisableTiming));
    }
    cudaCheck(cudaMallocHost((void**)&m->prompt_positions, (size_t)B * sizeof(int)));
    cudaCheck(cudaMallocHost((void**)&m->host_logits, (size_t)B * c.Vp * sizeof(bf16)));   // copied in the graph
    m->draw_logits = (float*)malloc((size_t)c.V * sizeof(float));
    m->draw_scratch = (float*)malloc(2 * (size_t)c.V * sizeof(float));
    if (!m->draw_logits || !m->draw_scratch) die("out of host memory for the draws");
    // The step reads every input from the GPU (tokens, positions, seed), so it is captured once
    // for each copy of its outputs.
    for (int p = 0; p < 2; p++) {
        cudaGraph_t graph;
        cudaCheck(cudaStreamBeginCapture(m->stream, cudaStreamCaptureModeThreadLocal));
        enqueue_step(m, p);
        cudaCheck(cudaStreamEndCapture(m->stream, &graph));
        cudaCheck(cudaGraphInstantiate(&m->step_graph[p], graph, 0));
        cudaCheck(cudaGraphDestroy(graph));
    }
}

void inference_step(InferenceModel* m) {
    if (m->position == 0) die("inference_step: no prompt yet (inference_prompt)");
    if (m->position >= m->length)
        die("inference_step: position %d, the cache holds %d", m->position, m->length);
    if (m->launched == 0) launch_step(m);
    int p = m->launched == 2 ? m->next_graph : 1 - m->next_graph;   // the oldest step launched
    // With the draw on the GPU the step after runs ahead, so the GPU does not wait for the host.
    if (m->launched == 1 && draws_on_gpu(m) && m->position + 1 < m->length) launch_step(m);
    finish_draw(m, p);
    m->launched--;
    m->position++;
}

void inference_free(InferenceModel* m) {
    cudaCheck(cudaStreamSynchronize(m->stream));
    for (int p = 0; p < 2; p++) {
        cudaCheck(cudaGraphExecDestroy(m->step_graph[p]));
        cudaCheck(cudaEventDestroy(m->step_done[p]));
        cudaCheck(cudaFreeHost(m->host_tokens_of[p]));
    }
    matmul_stream_free(&m->matmul);
    cudaCheck(cudaStreamDestroy(m->stream));
    cudaCheck(cudaFree(m->memory));
    cudaCheck(cudaFreeHost(m->prompt_positions));
    cudaCheck(cudaFreeHost(m->host_logits));
    free(m->draw_logits);
    free(m->draw_scratch);
}
