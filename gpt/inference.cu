// gpt/inference.cu: gpt/inference.h. The prompt runs layer by layer through the prompt
// buffers (one layer's activations, reused by every layer) on the training model's kernels, its
// keys and values copied into every sequence's cache; each step then runs the same blocks on B
// rows, one per sequence, as five kernels a layer (layers/matmul_rows.h for the linear layers,
// attention/decode.h for one query per sequence against that sequence's cache), replayed from
// one of two captured graphs.
#include "gpt/inference.h"

#include <math.h>
#include <string.h>
#include "attention/decode.h"
#include "common/bytes.h"
#include "common/error.h"
#include "gpt/activations.h"
#include "gpt/sampler.h"
#include "layers/classifier.h"
#include "layers/encoder.h"
#include "layers/layernorm.h"
#include "layers/matmul.h"
#include "layers/matmul_rows.h"
#include "layers/kernel_common.cuh"

// Carves the allocation at base (NULL: sizes only) into m's buffers; fills the plan.
static void layout(InferenceModel* m, char* base, const GPTConfig* c, int B, int length, int prompt_max) {
    size_t C = c->C, off = 0, P = prompt_max;
    InferencePlan* plan = &m->plan;
    memset(plan, 0, sizeof(*plan));
    auto carve = [&](size_t bytes, size_t* part) {
        char* at = base ? base + off : NULL;
        off += carve_round_up(bytes);
        *part += carve_round_up(bytes);
        return at;
    };
    bf16* params = (bf16*)carve(count_params(c) * sizeof(bf16), &plan->params);
    if (base) point_params(&m->params, params, c);
    m->kv_cache = (bf16*)carve((size_t)c->L * B * length * 2 * C * sizeof(bf16), &plan->kv_cache);
    // A layer's activations on n rows, each buffer a width of C's. The step fuses its layernorms
    // and GELU into matmul_rows and keeps no ln, fch, mean or rstd (they stay NULL).
    auto carve_rows = [&](RowBuffers* r, size_t n, bool unfused, size_t* part) {
        bf16** rows_of[] = {&r->x, &r->qkv, &r->atty, &r->mid, &r->fch_gelu, &r->ln, &r->fch};
        const size_t widths[] = {1, 3, 1, 1, 4, 1, 4};
        for (int i = 0; i < (unfused ? 7 : 5); i++) *rows_of[i] = (bf16*)carve(n * widths[i] * C * sizeof(bf16), part);
        if (!unfused) return;
        r->mean = (float*)carve(n * sizeof(float), part);
        r->rstd = (float*)carve(n * sizeof(float), part);
    };
    carve_rows(&m->prompt, P, true, &plan->prompt);
    size_t lse_bytes = attention_saved_bytes(&m->attention, attention_shape(c, 1, prompt_max));
    m->prompt_lse = (float*)carve(lse_bytes, &plan->prompt);
    m->prompt_tokens = (int*)carve(P * sizeof(int), &plan->prompt);
    size_t rows = B;
    carve_rows(&m->step, rows, false, &plan->step);
    for (int i = 0; i < 2; i++) m->logits_of[i] = (bf16*)carve(rows * c->Vp * sizeof(bf16), &plan->step);
    m->decode_scratch = carve(decode_attention_scratch_bytes(attention_shape(c, B, length)), &plan->step);
    m->tokens = (int*)carve(rows * sizeof(int), &plan->step);
    m->positions = (int*)carve(rows * sizeof(int), &plan->step);
    m->seed = (uint64_t*)carve(sizeof(uint64_t), &plan->step);
}

size_t inference_plan_total(const InferencePlan* m) { return m->params + m->kv_cache + m->prompt + m->step; }

void inference_plan_print(const InferencePlan* m) {
    size_t free_bytes, total_bytes;
    cudaCheck(cudaMemGetInfo(&free_bytes, &total_bytes));
    fprintf(stderr, "memory (GiB): parameters (bf16) %.3f, KV cache %.3f, prompt activations %.3f, decoding %.3f; "
            "total %.3f (device: %.1f GiB)\n", GIB(m->params), GIB(m->kv_cache), GIB(m->prompt), GIB(m->step),
           GIB(inference_plan_total(m)), GIB(total_bytes));
}

// The copies go on the model's stream (non-blocking: the legacy stream's copies would not be
// ordered before its kernels); a copy from pageable memory has read it when it returns.
void inference_set_seed(InferenceModel* m, uint64_t seed) {
    m->rng.state = seed;
    cudaCheck(cudaMemcpyAsync(m->seed, &seed, sizeof(seed), cudaMemcpyHostToDevice, m->stream));
}

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
    if (d->top_k == 0 && d->top_p >= 1.0f) {
        classifier_sample(m->tokens, m->logits_of[p], m->B, c->V, c->Vp, d->temperature, m->seed, m->positions,
                          m->stream);
        cudaCheck(cudaMemcpyAsync(m->host_tokens_of[p], m->tokens, (size_t)m->B * sizeof(int),
                                  cudaMemcpyDeviceToHost, m->stream));
    } else {
        cudaCheck(cudaMemcpyAsync(m->host_row, m->logits_of[p], (size_t)m->B * c->Vp * sizeof(bf16),
                                  cudaMemcpyDeviceToHost, m->stream));
    }
    launch_overlapped(advance_kernel, dim3(1), dim3(m->B), 0, m->stream, m->positions, m->B);
}

// logits_of[p] (B, Vp) = lnf(step.x) @ wte^T.
static void lm_head(InferenceModel* m, int p) {
    RowsEpilogue lnf = {m->params.lnfw, m->params.lnfb};
    matmul_rows_forward(m->logits_of[p], m->step.x, m->params.wte, &lnf, m->B, m->config.C, m->config.Vp, m->stream);
}

static int draws_on_gpu(const InferenceModel* m) { return m->draw.top_k == 0 && m->draw.top_p >= 1.0f; }

// Once copy p's work is done: its logits and tokens become the caller's, the host's draws (when
// it draws) going into them and into tokens.
static void finish_draw(InferenceModel* m, int p) {
    cudaCheck(cudaEventSynchronize(m->step_done[p]));
    m->logits = m->logits_of[p];
    m->host_tokens = m->host_tokens_of[p];
    const GPTConfig* c = &m->config;
    const DrawSettings* d = &m->draw;
    if (draws_on_gpu(m)) return;
    for (int b = 0; b < m->B; b++) {
        for (int v = 0; v < c->V; v++) m->host_logits[v] = __bfloat162float(m->host_row[(size_t)b * c->Vp + v]);
        m->host_tokens[b] =
            sample_token(m->host_logits, c->V, d->temperature, d->top_k, d->top_p, &m->rng, m->host_scratch);
    }
    cudaCheck(cudaMemcpyAsync(m->tokens, m->host_tokens, (size_t)m->B * sizeof(int), cudaMemcpyHostToDevice,
                              m->stream));
}

// Replays the step's next copy.
static void launch_step(InferenceModel* m) {
    int p = m->next_graph;
    cudaCheck(cudaGraphLaunch(m->step_graph[p], m->stream));
    cudaCheck(cudaEventRecord(m->step_done[p], m->stream));
    m->next_graph = 1 - p;
    m->launched++;
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
    cudaCheck(cudaMemcpyAsync(m->prompt_tokens, prompt, (size_t)n * sizeof(int), cudaMemcpyHostToDevice, st));
    encoder_forward(m->prompt.x, m->prompt_tokens, m->params.wte, m->params.wpe, 1, n, C, st);
    AttentionShape s = attention_shape(c, 1, n);
    const RowBuffers* r = &m->prompt;
    for (int l = 0; l < c->L; l++) {
        LayerParameters w = layer_parameters(&m->params, l, C);
        layernorm_forward(r->ln, r->mean, r->rstd, r->x, w.ln1w, w.ln1b, n, C, st);
        matmul_forward(r->qkv, NULL, r->ln, w.qkvw, w.qkvb, NULL, n, C, 3 * C, st);
        // Every sequence's cache takes the prompt's keys and values (rows 0..n-1).
        AttentionTensor k, v;
        cache_views(m, l, &k, &v);
        for (int b = 0; b < m->B; b++)
            cudaCheck(cudaMemcpy2DAsync(k.ptr + b * k.batch, k.row * sizeof(bf16), r->qkv + C, 3 * C * sizeof(bf16),
                                        2 * C * sizeof(bf16), n, cudaMemcpyDeviceToDevice, st));
        attention_forward(&m->attention, s, r->atty, m->prompt_lse, r->qkv, NULL, st);
        matmul_forward(r->mid, NULL, r->atty, w.attprojw, w.attprojb, r->x, n, C, C, st);
        layernorm_forward(r->ln, r->mean, r->rstd, r->mid, w.ln2w, w.ln2b, n, C, st);
        matmul_forward(r->fch_gelu, r->fch, r->ln, w.fcw, w.fcb, NULL, n, C, 4 * C, st);
        matmul_forward(r->x, NULL, r->fch_gelu, w.fcprojw, w.fcprojb, r->mid, n, 4 * C, C, st);
    }
    // The last position's logits, in every sequence's row (each draws its own token).
    for (int b = 0; b < m->B; b++)
        cudaCheck(cudaMemcpyAsync(m->step.x + (size_t)b * C, m->prompt.x + (size_t)(n - 1) * C, C * sizeof(bf16),
                                  cudaMemcpyDeviceToDevice, st));
    lm_head(m, 0);
    // The draw of the token at position n keys its noise by position n - 1, the logits' own.
    for (int b = 0; b < m->B; b++) m->host_positions_staging[b] = n - 1;
    cudaCheck(cudaMemcpyAsync(m->positions, m->host_positions_staging, (size_t)m->B * sizeof(int),
                              cudaMemcpyHostToDevice, st));
    enqueue_draw(m, 0);
    cudaCheck(cudaEventRecord(m->step_done[0], st));
    finish_draw(m, 0);
    m->host_positions = n;
    m->next_graph = 1;
    if (draws_on_gpu(m)) launch_step(m);   // ahead: the first step runs while the caller takes these
}

// One step on the GPU: the B tokens at their positions through every block, their keys and
// values into the caches, the logits and (on the GPU) the draw, the positions one further. On B
// rows every linear layer is one matmul_rows kernel with the layernorm before it and the bias,
// GELU, residual or cache write after it fused in; with the attention that is five kernels a
// layer, each starting while the one before ends.
static void enqueue_step(InferenceModel* m, int p) {
    const GPTConfig* c = &m->config;
    int C = c->C, B = m->B, HS = C / c->NH;
    cudaStream_t st = m->stream;
    const RowBuffers* r = &m->step;
    encoder_forward_at(r->x, m->tokens, m->positions, m->params.wte, m->params.wpe, B, C, st);
    for (int l = 0; l < c->L; l++) {
        LayerParameters w = layer_parameters(&m->params, l, C);
        AttentionTensor k, v;
        cache_views(m, l, &k, &v);
        // Q, K, V of sequence b in row b of qkv; K and V also into row positions[b] of its cache.
        RowsEpilogue qkv = {w.ln1w, w.ln1b, w.qkvb, 0, NULL, k.ptr, k.batch, k.row, C, m->positions};
        matmul_rows_forward(r->qkv, r->x, w.qkvw, &qkv, B, C, 3 * C, st);
        AttentionParams p;
        memset(&p, 0, sizeof(p));
        p.shape = attention_shape(c, B, m->length);
        p.q = (AttentionTensor){r->qkv, 3LL * C, 0, HS};
        p.k = k;
        p.v = v;
        p.o = (AttentionTensor){r->atty, (long long)C, 0, HS};
        attention_decode(&m->attention, &p, m->positions, m->decode_scratch, st);
        RowsEpilogue attproj = {NULL, NULL, w.attprojb, 0, r->x};
        matmul_rows_forward(r->mid, r->atty, w.attprojw, &attproj, B, C, C, st);
        RowsEpilogue fc = {w.ln2w, w.ln2b, w.fcb, 1, NULL};
        matmul_rows_forward(r->fch_gelu, r->mid, w.fcw, &fc, B, C, 4 * C, st);
        RowsEpilogue fcproj = {NULL, NULL, w.fcprojb, 0, r->mid};
        matmul_rows_forward(r->x, r->fch_gelu, w.fcprojw, &fcproj, B, 4 * C, C, st);
    }
    lm_head(m, p);
    enqueue_draw(m, p);
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
    m->attention.kind = ATTENTION_FLASH;
    layout(m, NULL, &c, B, length, prompt_max);
    size_t need = inference_plan_total(&m->plan);
    char err[ERR_LEN];
    if (gpu_memory_unfit(need, err)) die("inference_build for %d sequences of %d positions: %s", B, length, err);
    matmul_init();
    cudaCheck(cudaMalloc((void**)&m->memory, need));
    layout(m, m->memory, &c, B, length, prompt_max);
    cudaCheck(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
    // Zeros once: the decode attention's counters start at zero and every call leaves them so.
    cudaCheck(cudaMemsetAsync(m->memory, 0, need, m->stream));
    for (int i = 0; i < 2; i++) {
        cudaCheck(cudaMallocHost((void**)&m->host_tokens_of[i], (size_t)B * sizeof(int)));
        cudaCheck(cudaEventCreateWithFlags(&m->step_done[i], cudaEventDisableTiming));
    }
    cudaCheck(cudaMallocHost((void**)&m->host_positions_staging, (size_t)B * sizeof(int)));
    cudaCheck(cudaMallocHost((void**)&m->host_row, (size_t)B * c.Vp * sizeof(bf16)));   // copied in the graph
    m->host_logits = (float*)malloc((size_t)c.V * sizeof(float));
    m->host_scratch = (float*)malloc(2 * (size_t)c.V * sizeof(float));
    if (!m->host_logits || !m->host_scratch) die("out of host memory for the draws");
    inference_set_seed(m, draw.seed);
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
    if (m->host_positions == 0) die("inference_step: no prompt yet (inference_prompt)");
    if (m->host_positions >= m->length)
        die("inference_step: position %d, the cache holds %d", m->host_positions, m->length);
    if (m->launched == 0) launch_step(m);
    int p = m->launched == 2 ? m->next_graph : 1 - m->next_graph;   // the oldest step launched
    // With the draw on the GPU the step after runs ahead, so the GPU does not wait for the host.
    if (m->launched == 1 && draws_on_gpu(m) && m->host_positions + 1 < m->length) launch_step(m);
    finish_draw(m, p);
    m->launched--;
    m->host_positions++;
}

void inference_free(InferenceModel* m) {
    cudaCheck(cudaStreamSynchronize(m->stream));
    for (int p = 0; p < 2; p++) {
        cudaCheck(cudaGraphExecDestroy(m->step_graph[p]));
        cudaCheck(cudaEventDestroy(m->step_done[p]));
        cudaCheck(cudaFreeHost(m->host_tokens_of[p]));
    }
    cudaCheck(cudaStreamDestroy(m->stream));
    cudaCheck(cudaFree(m->memory));
    cudaCheck(cudaFreeHost(m->host_positions_staging));
    cudaCheck(cudaFreeHost(m->host_row));
    free(m->host_logits);
    free(m->host_scratch);
}
