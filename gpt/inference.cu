// gpt/inference.cu: gpt/inference.h. The prompt runs layer by layer through the prompt
// buffers (one layer's activations, reused by every layer), its keys and values copied into
// every sequence's cache; each step then runs the same blocks on B rows, one per sequence, its
// attention one query per sequence against that sequence's cache (attention/decode.h).
#include "gpt/inference.h"

#include <math.h>
#include <string.h>
#include "attention/decode.h"
#include "common/error.h"
#include "gpt/activations.h"
#include "gpt/sampler.h"
#include "layers/classifier.h"
#include "layers/encoder.h"
#include "layers/layernorm.h"
#include "layers/matmul.h"

#define GIB(x) ((double)(x) / (1024.0 * 1024.0 * 1024.0))

static size_t align_up(size_t n) { return (n + 255) / 256 * 256; }

// Carves the allocation at base (NULL: sizes only) into m's buffers; fills the plan.
static void layout(InferenceModel* m, char* base, const GPTConfig* c, int B, int length, int prompt_max) {
    size_t C = c->C, off = 0, P = prompt_max;
    InferencePlan* plan = &m->plan;
    memset(plan, 0, sizeof(*plan));
    auto carve = [&](size_t bytes, size_t* part) {
        char* at = base ? base + off : NULL;
        off += align_up(bytes);
        *part += align_up(bytes);
        return at;
    };
    bf16* params = (bf16*)carve(count_params(c) * sizeof(bf16), &plan->params);
    if (base) point_params(&m->params, params, c);
    m->kv_cache = (bf16*)carve((size_t)c->L * B * length * 2 * C * sizeof(bf16), &plan->kv_cache);
    // A layer's activations on n rows, each buffer a width of C's.
    auto carve_rows = [&](RowBuffers* r, size_t n, size_t* part) {
        bf16** rows_of[] = {&r->x, &r->ln, &r->qkv, &r->atty, &r->mid, &r->fch, &r->fch_gelu};
        const size_t widths[] = {1, 1, 3, 1, 1, 4, 4};
        for (int i = 0; i < 7; i++) *rows_of[i] = (bf16*)carve(n * widths[i] * C * sizeof(bf16), part);
        r->mean = (float*)carve(n * sizeof(float), part);
        r->rstd = (float*)carve(n * sizeof(float), part);
    };
    carve_rows(&m->prompt, P, &plan->prompt);
    size_t lse_bytes = attention_saved_bytes(&m->attention, attention_shape(c, 1, prompt_max));
    m->prompt_lse = (float*)carve(lse_bytes, &plan->prompt);
    m->prompt_tokens = (int*)carve(P * sizeof(int), &plan->prompt);
    size_t rows = B;
    carve_rows(&m->step, rows, &plan->step);
    m->logits = (bf16*)carve(rows * c->Vp * sizeof(bf16), &plan->step);
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
    cudaCheck(cudaMallocHost((void**)&m->host_tokens, (size_t)B * sizeof(int)));
    cudaCheck(cudaMallocHost((void**)&m->host_positions_staging, (size_t)B * sizeof(int)));
    cudaCheck(cudaMallocHost((void**)&m->host_row, (size_t)B * c.Vp * sizeof(bf16)));   // copied in the graph
    m->host_logits = (float*)malloc((size_t)c.V * sizeof(float));
    m->host_scratch = (float*)malloc(2 * (size_t)c.V * sizeof(float));
    if (!m->host_logits || !m->host_scratch) die("out of host memory for the draws");
    inference_set_seed(m, draw.seed);
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

// The transformer blocks on N rows of r->x; attend runs each layer's attention on r->qkv into
// r->atty.
template <class Attend>
static void blocks(const InferenceModel* m, int N, const RowBuffers* r, Attend attend) {
    const GPTConfig* c = &m->config;
    int C = c->C;
    cudaStream_t st = m->stream;
    for (int l = 0; l < c->L; l++) {
        LayerParameters w = layer_parameters(&m->params, l, C);
        layernorm_forward(r->ln, r->mean, r->rstd, r->x, w.ln1w, w.ln1b, N, C, st);
        matmul_forward(r->qkv, NULL, r->ln, w.qkvw, w.qkvb, NULL, N, C, 3 * C, st);
        attend(l);
        matmul_forward(r->mid, NULL, r->atty, w.attprojw, w.attprojb, r->x, N, C, C, st);
        layernorm_forward(r->ln, r->mean, r->rstd, r->mid, w.ln2w, w.ln2b, N, C, st);
        matmul_forward(r->fch_gelu, r->fch, r->ln, w.fcw, w.fcb, NULL, N, C, 4 * C, st);
        matmul_forward(r->x, NULL, r->fch_gelu, w.fcprojw, w.fcprojb, r->mid, N, 4 * C, C, st);
    }
}

__global__ void advance_kernel(int* positions, int B) {
    if (threadIdx.x < B) positions[threadIdx.x]++;
}

// The draw after the logits of the step's rows: on the GPU (its ids into tokens and
// host_tokens), or, with top-k or top-p, the logits copied out (the host draws after the sync).
static void enqueue_draw(InferenceModel* m) {
    const GPTConfig* c = &m->config;
    const DrawSettings* d = &m->draw;
    if (d->top_k == 0 && d->top_p >= 1.0f) {
        classifier_sample(m->tokens, m->logits, m->B, c->V, c->Vp, d->temperature, m->seed, m->positions,
                          m->stream);
        cudaCheck(cudaMemcpyAsync(m->host_tokens, m->tokens, (size_t)m->B * sizeof(int), cudaMemcpyDeviceToHost,
                                  m->stream));
    } else {
        cudaCheck(cudaMemcpyAsync(m->host_row, m->logits, (size_t)m->B * c->Vp * sizeof(bf16),
                                  cudaMemcpyDeviceToHost, m->stream));
    }
    advance_kernel<<<1, m->B, 0, m->stream>>>(m->positions, m->B);
    cudaCheckLaunch();
}

// After the stream is done: the host's draws, when it draws, into host_tokens and tokens.
static void finish_draw(InferenceModel* m) {
    cudaCheck(cudaStreamSynchronize(m->stream));
    const GPTConfig* c = &m->config;
    const DrawSettings* d = &m->draw;
    if (d->top_k == 0 && d->top_p >= 1.0f) return;
    for (int b = 0; b < m->B; b++) {
        for (int v = 0; v < c->V; v++) m->host_logits[v] = __bfloat162float(m->host_row[(size_t)b * c->Vp + v]);
        m->host_tokens[b] =
            sample_token(m->host_logits, c->V, d->temperature, d->top_k, d->top_p, &m->rng, m->host_scratch);
    }
    cudaCheck(cudaMemcpyAsync(m->tokens, m->host_tokens, (size_t)m->B * sizeof(int), cudaMemcpyHostToDevice,
                              m->stream));
}

void inference_prompt(InferenceModel* m, const int* prompt, int n) {
    const GPTConfig* c = &m->config;
    int C = c->C;
    cudaStream_t st = m->stream;
    if (n < 1 || n > m->prompt_max || n >= m->length)
        die("inference_prompt: %d tokens, the model holds prompts of 1 to %d and %d positions", n, m->prompt_max,
            m->length);
    cudaCheck(cudaStreamSynchronize(st));   // the staging buffers are free again
    cudaCheck(cudaMemcpyAsync(m->prompt_tokens, prompt, (size_t)n * sizeof(int), cudaMemcpyHostToDevice, st));
    encoder_forward(m->prompt.x, m->prompt_tokens, m->params.wte, m->params.wpe, 1, n, C, st);
    AttentionShape s = attention_shape(c, 1, n);
    const bf16* qkv = m->prompt.qkv;
    blocks(m, n, &m->prompt, [&](int l) {
               // Every sequence's cache takes the prompt's keys and values (rows 0..n-1).
               AttentionTensor k, v;
               cache_views(m, l, &k, &v);
               for (int b = 0; b < m->B; b++)
                   cudaCheck(cudaMemcpy2DAsync(k.ptr + b * k.batch, k.row * sizeof(bf16), qkv + C,
                                               3 * C * sizeof(bf16), 2 * C * sizeof(bf16), n,
                                               cudaMemcpyDeviceToDevice, st));
               attention_forward(&m->attention, s, m->prompt.atty, m->prompt_lse, qkv, NULL, st);
           });
    // The last position's lnf and logits, once per sequence (each draws its own token).
    for (int b = 0; b < m->B; b++)
        layernorm_forward(m->step.ln + (size_t)b * C, m->step.mean + b, m->step.rstd + b,
                          m->prompt.x + (size_t)(n - 1) * C, m->params.lnfw, m->params.lnfb, 1, C, st);
    matmul_forward(m->logits, NULL, m->step.ln, m->params.wte, NULL, NULL, m->B, C, c->Vp, st);
    // The draw of the token at position n keys its noise by position n - 1, the logits' own.
    for (int b = 0; b < m->B; b++) m->host_positions_staging[b] = n - 1;
    cudaCheck(cudaMemcpyAsync(m->positions, m->host_positions_staging, (size_t)m->B * sizeof(int),
                              cudaMemcpyHostToDevice, st));
    enqueue_draw(m);
    finish_draw(m);
    m->host_positions = n;
}

// One step on the GPU: the B tokens at their positions through every block, their keys and
// values into the caches, the logits and (on the GPU) the draw, the positions one further.
static void enqueue_step(InferenceModel* m) {
    const GPTConfig* c = &m->config;
    int C = c->C, B = m->B, HS = C / c->NH;
    cudaStream_t st = m->stream;
    encoder_forward_at(m->step.x, m->tokens, m->positions, m->params.wte, m->params.wpe, B, C, st);
    bf16 *qkv = m->step.qkv, *atty = m->step.atty;
    blocks(m, B, &m->step, [&](int l) {
               AttentionTensor k, v;
               cache_views(m, l, &k, &v);
               // The B new rows: Q, K, V of sequence b in row b of qkv.
               AttentionTensor q_new = {qkv, 3LL * C, 0, HS}, k_new = q_new, v_new = q_new;
               k_new.ptr += C;
               v_new.ptr += 2 * C;
               kv_cache_append(&k, &v, &k_new, &v_new, B, c->NH, HS, m->positions, st);
               AttentionParams p;
               memset(&p, 0, sizeof(p));
               p.shape = attention_shape(c, B, m->length);
               p.q = q_new;
               p.k = k;
               p.v = v;
               p.o = (AttentionTensor){atty, (long long)C, 0, HS};
               attention_decode(&m->attention, &p, m->positions, m->decode_scratch, st);
           });
    layernorm_forward(m->step.ln, m->step.mean, m->step.rstd, m->step.x, m->params.lnfw, m->params.lnfb, B, C, st);
    matmul_forward(m->logits, NULL, m->step.ln, m->params.wte, NULL, NULL, B, C, c->Vp, st);
    enqueue_draw(m);
}

void inference_step(InferenceModel* m) {
    if (m->host_positions == 0) die("inference_step: no prompt yet (inference_prompt)");
    if (m->host_positions >= m->length)
        die("inference_step: position %d, the cache holds %d", m->host_positions, m->length);
    if (!m->step_graph) {
        cudaGraph_t graph;
        cudaCheck(cudaStreamBeginCapture(m->stream, cudaStreamCaptureModeThreadLocal));
        enqueue_step(m);
        cudaCheck(cudaStreamEndCapture(m->stream, &graph));
        cudaCheck(cudaGraphInstantiate(&m->step_graph, graph, 0));
        cudaCheck(cudaGraphDestroy(graph));
    }
    cudaCheck(cudaGraphLaunch(m->step_graph, m->stream));
    finish_draw(m);
    m->host_positions++;
}

void inference_free(InferenceModel* m) {
    if (m->step_graph) cudaCheck(cudaGraphExecDestroy(m->step_graph));
    cudaCheck(cudaStreamDestroy(m->stream));
    cudaCheck(cudaFree(m->memory));
    cudaCheck(cudaFreeHost(m->host_tokens));
    cudaCheck(cudaFreeHost(m->host_positions_staging));
    cudaCheck(cudaFreeHost(m->host_row));
    free(m->host_logits);
    free(m->host_scratch);
}
