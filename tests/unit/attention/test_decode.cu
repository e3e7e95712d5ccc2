// tests/unit/attention/test_decode.cu: generation with a KV cache.
// 1. attention_decode (one query against the cached keys, its position read on the GPU)
//    against a float64 reference of the same row of causal attention, for HS 64 and 128, at
//    positions inside the first chunk of keys, on its edges and past it (several chunks
//    merged), with the output poisoned (NaN) before each call. Tolerance 1e-2 relative L2: the
//    inputs are bf16 values, taken exactly; sums and the softmax run in fp32 (errors ~1e-6), so
//    the bf16 rounding of O (2^-9 relative at most) dominates [measured below 3e-3].
//    With a sliding window (1, 256, 300 keys): the reference sees the position's last `window`
//    keys, and the cache rows before them hold NaN in K and V during the call, so that a row
//    read there (which the window says is not read) makes the output NaN.
//    With the query's transform (QK-norm and rotary, each alone, HS 16 to 256, with and without
//    windows, positions past 2^16 in a cache of 70 000): the cache as the prompt's pass leaves
//    it (layers/rotary.h's forward on every row at its position) but for the query's row, raw;
//    the reference takes the transformed rows, and after the call the cache's keys and values
//    from the window's first row on are the transformed cache's, bit for bit (the query's own
//    key, which the call writes back, included: the same numerics as the forward, which
//    tests/unit/layers/test_modern_layers.cu holds to float64 at 70 000 + t and up to 2^24). The positions
//    put the own key first and last in its chunk of 256 keys.
// 2. The same kernel for three sequences at positions of their own (5, 300, 1025), read on the
//    GPU, in one launch: each against its own reference. Then the same once more with the
//    positions written by the kernel just before the call: that kernel lets the call start at
//    once (programmatic dependent launch) and writes them only after about 5 ms, over 1025, 5
//    and 300, so that a call reading them before its wait takes another sequence's keys, or
//    rows loaded for a position that is not the one after the wait. (Where the call cannot
//    start early, as under a sanitizer that serialises kernels, this passes either way.) Both
//    again with QK-norm and rotary, each sequence's own key written back checked bit for bit.
// 3. The inference model (gpt/inference.h): a d2-sized GPT (L 2, C 128, NH 2, V 300) whose
//    weights are scaled up so its logits spread over several nats, samples of one prompt
//    decoded together by the captured step, and for each sample at every step its own prefix
//    through a full gpt_forward of the training model: the logits agree within 2e-2 relative
//    L2 (bf16: the two paths round at different places). Greedy (3 samples): every sample draws
//    the same tokens with the same logits, and the full forward's most likely token is the one
//    drawn wherever its lead over the second exceeds 0.1 nats (closer calls can flip under bf16
//    noise of ~1e-2; how many were that close is printed). At temperature 1 (3 samples, drawn on
//    the GPU) the samples go apart and each keeps its own prefix's logits; with top-k 5 (2
//    samples, drawn on the host) every draw is among the full forward's 5 most likely.
//    The same three for a model of the modern architecture (rotary and QK-norm on the step's q
//    and k in the decode attention, which writes k back to the cache; RMSNorm and ReLU^2 in the
//    fused layers, the untied head, the soft-capped draw on the GPU and on the host). Then with
//    attention's windows: the modern model with the pattern full,24 (layer 1's decoding reads
//    the last 24 cache rows of the 96, its prompt the masked flash forward) greedy, and GPT-2's
//    with a window of 16 with top-k 5, against the full forward of the same architecture (flash
//    with the windows). Then the parts of the 2026 recipe (the embedding's norm in the prompt's
//    and the step's stem; the QK scale in the flash forward's and the decode attention's scale;
//    the residual lambdas before each block of the prompt and of the step, x0 kept for each; the
//    value embeddings of layer 1, their gates from ln1 in the step, the sum in the KV cache; the
//    smear of the prompt and of each step, whose token looks back to the one before; the backout
//    of the middle block's output, kept by the prompt for its last position and by each step; these
//    two models with 3 layers)
//    on the modern model, greedy, and on GPT-2's (without the QK scale, which needs QK-norm) with
//    top-k 5.
// 4. inference_set_seed, with the draws on the GPU and on the host: a seed set between steps
//    changes no draw until the next prompt, which draws what a model built with that seed draws.
// 5. A model with documents ends each sample at the first document token it draws
//    (generate_tokens): with the document token set to the one the greedy samples of the model
//    without documents draw third, the same samples stop there.
#include <math.h>
#include <string.h>
#include "attention/attention.h"
#include "common/rng.h"
#include "device/launch.cuh"
#include "gpt/generation.h"
#include "gpt/gpt.h"
#include "gpt/inference.h"
#include "layers/rmsnorm.h"
#include "layers/rotary.h"
#include "tests/lib/test.h"

static float rng_symmetric(Rng* rng) { return (float)(2.0 * rng_uniform(rng) - 1.0); }

// The query's transform of a test (decode.h's DecodeQK): none, QK-norm and rotary, or either alone.
enum { QK_NONE, QK_BOTH, QK_NORM, QK_ROTARY };
static const char* const QK_NAMES[] = {"", ", QK-norm and rotary", ", QK-norm", ", rotary"};
#define TEST_ROTARY_BASE 10000.0f

static void decode_kernel_name(char* name, size_t len, int HS, int T, int window, int qk) {
    snprintf(name, len, "attention_decode HS%d T=%d", HS, T);
    if (window) snprintf(name + strlen(name), len - strlen(name), " window %d", window);
    snprintf(name + strlen(name), len - strlen(name), "%s", QK_NAMES[qk]);
}

static DecodeQK decode_qk(int qk) {
    return (DecodeQK){qk == QK_BOTH || qk == QK_NORM ? RMSNORM_EPS : 0.0f,
                      qk == QK_BOTH || qk == QK_ROTARY ? TEST_ROTARY_BASE : 0.0f};
}

// The caches of B sequences of T rows in the fused qkv (B * T rows) as the prompt's pass leaves
// them: qk's QK-norm and rotary (layers/rotary.h's forward) on every row at its position in its
// sequence, in place on the GPU; the result also into host (B * T rows).
static void transform_caches(bf16* qkv, bf16* host, int B, int T, int NH, int HS, int qk) {
    int N = B * T;
    int* rows = (int*)malloc((size_t)N * sizeof(int));
    for (int i = 0; i < N; i++) rows[i] = i % T;
    int* d_rows;
    float* rstd;
    cudaCheck(cudaMalloc((void**)&d_rows, (size_t)N * sizeof(int)));
    cudaCheck(cudaMalloc((void**)&rstd, (size_t)N * 2 * NH * sizeof(float)));
    cudaCheck(cudaMemcpy(d_rows, rows, (size_t)N * sizeof(int), cudaMemcpyHostToDevice));
    DecodeQK t = decode_qk(qk);
    qk_norm_rotary_forward(qkv, t.norm_eps > 0.0f ? rstd : NULL, t.rotary_base > 0.0f ? d_rows : NULL, N, NH, HS,
                           TEST_ROTARY_BASE, 0);
    cudaCheck(cudaMemcpy(host, qkv, (size_t)N * 3 * NH * HS * sizeof(bf16), cudaMemcpyDeviceToHost));
    cudaCheck(cudaFree(d_rows));
    cudaCheck(cudaFree(rstd));
    free(rows);
}

// window 0: every key up to the position's. qk: the call transforms the query and its own key
// (decode.h's DecodeQK); the cache holds the other keys transformed (transform_caches) and the
// query's row raw, and after the call the cache's keys and values from the window's first row
// on must be those of the transformed cache, bit for bit (the own key as layers/rotary.h's
// forward writes it).
static void test_decode_kernel(int HS, int T, int window, int qk) {
    char name[128];
    decode_kernel_name(name, sizeof(name), HS, T, window, qk);
    test_begin(name);
    const int NH = 3;
    AttentionShape s = {1, T, NH, HS, 1, 1.0f / sqrtf((float)HS)};
    AttentionPlan plan = {ATTENTION_FLASH};
    plan.mask.window = window;
    const DecodeQK transform = decode_qk(qk);
    int* position;
    cudaCheck(cudaMalloc((void**)&position, sizeof(int)));
    size_t row = 3 * (size_t)NH * HS, n = (size_t)T * row;
    bf16* host = (bf16*)malloc(n * sizeof(bf16));
    Rng rng = {(uint64_t)HS * 7919 + T};
    for (size_t i = 0; i < n; i++) host[i] = __float2bfloat16(2.0f * rng_symmetric(&rng));
    bf16 *qkv, *out;
    void* scratch;
    cudaCheck(cudaMalloc((void**)&qkv, n * sizeof(bf16)));
    cudaCheck(cudaMalloc((void**)&out, (size_t)NH * HS * sizeof(bf16)));
    cudaCheck(cudaMalloc(&scratch, attention_decode_scratch_bytes(&plan, s)));
    cudaCheck(cudaMemset(scratch, 0, attention_decode_scratch_bytes(&plan, s)));   // once: the calls leave it zeroed
    cudaCheck(cudaMemcpy(qkv, host, n * sizeof(bf16), cudaMemcpyHostToDevice));
    // want: the cache the call must see, and the values of the reference.
    bf16* want = host;
    bf16* after = NULL;
    if (qk) {
        want = (bf16*)malloc(n * sizeof(bf16));
        after = (bf16*)malloc(n * sizeof(bf16));
        transform_caches(qkv, want, 1, T, NH, HS, qk);
    }
    // The query's own key first and last in its chunk of 256, in the first round of a block's
    // keys and the last, past 2^16 (T 70 000).
    const int positions[] = {0, 1, 77, 255, 256, 1023, 1024, 1025, 2047, 65791, 65792, T - 1};
    bf16* got = (bf16*)malloc((size_t)NH * HS * sizeof(bf16));
    double* scores = (double*)malloc((size_t)T * sizeof(double));
    double worst = 0.0;
    for (size_t k = 0; k < sizeof(positions) / sizeof(positions[0]); k++) {
        int pos = positions[k];
        if (pos >= T) continue;
        cudaCheck(cudaMemset(out, 0xff, (size_t)NH * HS * sizeof(bf16)));   // NaN
        // The cache is the fused qkv; the query is row pos's, raw where the call transforms it.
        AttentionParams p = attention_fused_params(s, qkv, out, NULL, NULL, NULL);
        p.q.ptr += (long long)pos * p.q.row;
        size_t pitch = row * sizeof(bf16), kv_bytes = 2 * (size_t)NH * HS * sizeof(bf16);
        if (qk) cudaCheck(cudaMemcpy(qkv + pos * row, host + pos * row, pitch, cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(position, &pos, sizeof(int), cudaMemcpyHostToDevice));
        // The rows before the window: K and V NaN (0xFFFF) during the call.
        int lo = window && pos - window + 1 > 0 ? pos - window + 1 : 0;
        if (lo > 0) cudaCheck(cudaMemset2D(qkv + (size_t)NH * HS, pitch, 0xff, kv_bytes, lo));
        attention_decode(&plan, &p, position, qk ? &transform : NULL, scratch, 0);
        cudaCheck(cudaMemcpy(got, out, (size_t)NH * HS * sizeof(bf16), cudaMemcpyDeviceToHost));
        if (qk) {
            cudaCheck(cudaMemcpy(after, qkv, n * sizeof(bf16), cudaMemcpyDeviceToHost));
            int differing = 0;
            for (int t = lo; t < T; t++)
                differing += memcmp(after + t * row + NH * HS, want + t * row + NH * HS, kv_bytes) != 0;
            CHECK(differing == 0, "position %d: %d rows of the cache's keys and values are not the prompt pass's%s",
                  pos, differing,
                  memcmp(after + pos * row + NH * HS, want + pos * row + NH * HS, kv_bytes) ? ", its own among them"
                                                                                           : "");
            cudaCheck(cudaMemcpy(qkv + pos * row, want + pos * row, pitch, cudaMemcpyHostToDevice));
        }
        if (lo > 0)
            cudaCheck(cudaMemcpy2D(qkv + (size_t)NH * HS, pitch, want + (size_t)NH * HS, pitch, kv_bytes, lo,
                                   cudaMemcpyHostToDevice));
        for (int h = 0; h < NH; h++) {
            const bf16* q = want + (size_t)pos * row + (size_t)h * HS;
            double m = -INFINITY, l = 0.0, diff = 0.0, ref = 0.0;
            for (int j = lo; j <= pos; j++) {
                const bf16* kj = want + (size_t)j * row + (size_t)(NH + h) * HS;
                double dot = 0.0;
                for (int d = 0; d < HS; d++) dot += (double)__bfloat162float(q[d]) * __bfloat162float(kj[d]);
                scores[j] = dot * s.scale;
                m = fmax(m, scores[j]);
            }
            for (int j = lo; j <= pos; j++) l += exp(scores[j] - m);
            for (int d = 0; d < HS; d++) {
                double o = 0.0;
                for (int j = lo; j <= pos; j++)
                    o += exp(scores[j] - m) * __bfloat162float(want[(size_t)j * row + (size_t)(2 * NH + h) * HS + d]);
                o /= l;
                double g = __bfloat162float(got[(size_t)h * HS + d]);
                diff += (g - o) * (g - o);
                ref += o * o;
                if (isnan(g)) diff = INFINITY;
            }
            double err = sqrt(diff / ref);
            worst = fmax(worst, err);
            CHECK(err < 1e-2, "position %d head %d: relative L2 error %.3g", pos, h, err);
        }
    }
    printf("    worst relative L2 error %.2e\n", worst);
    test_end();
    if (want != host) free(want);
    free(host);
    free(after);
    free(got);
    free(scores);
    cudaCheck(cudaFree(qkv));
    cudaCheck(cudaFree(out));
    cudaCheck(cudaFree(scratch));
    cudaCheck(cudaFree(position));
}

static void logits_row(GPT* g, int row, float* out) {
    int V = g->config.V;
    bf16* host = (bf16*)malloc((size_t)V * sizeof(bf16));
    cudaCheck(cudaMemcpyAsync(host, gpt_logits(g, row, 1), (size_t)V * sizeof(bf16), cudaMemcpyDeviceToHost,
                              g->stream));
    cudaCheck(cudaStreamSynchronize(g->stream));
    for (int v = 0; v < V; v++) out[v] = __bfloat162float(host[v]);
    free(host);
}

static int argmax(const float* x, int n, float* lead) {
    int best = 0, second = -1;
    for (int i = 1; i < n; i++) {
        if (x[i] > x[best]) { second = best; best = i; }
        else if (second < 0 || x[i] > x[second]) second = i;
    }
    *lead = x[best] - x[second];
    return best;
}

// The logits the inference model's last step (or prompt) left for sample b: those of the graph
// copy whose tokens the caller has (the step run ahead writes the other copy's).
static void inference_logits(const InferenceModel* m, int b, float* out) {
    int V = m->config.V;
    const bf16* logits = m->logits_of[m->host_tokens == m->host_tokens_of[0] ? 0 : 1];
    bf16* host = (bf16*)malloc((size_t)V * sizeof(bf16));
    cudaCheck(cudaMemcpy(host, logits + (size_t)b * m->config.Vp, (size_t)V * sizeof(bf16), cudaMemcpyDeviceToHost));
    for (int v = 0; v < V; v++) out[v] = __bfloat162float(host[v]);
    free(host);
}

// The inference model against a full forward of the training model, for each sample of its
// own prefix: samples decoded together under draw settings d. Greedy: every sample draws the
// same tokens with the same logits, and the full forward's most likely token is the one drawn
// wherever its lead over the second exceeds 0.1 nats. At a temperature the samples go apart,
// and each one's logits must still be its own prefix's (a cache row mixed up with another's
// would not be); with top-k each draw must be among the k most likely of the logits it was drawn
// from (soft-capped as the draw takes them), which the check before holds to the full forward's:
// the full forward's own top k can differ where two logits are closer than the cache's bf16
// noise (the modern model's logits, scaled up, spread wider).
// The d2-sized GPT of the inference tests, in either architecture, and its parameters: the
// contract's init with the weights scaled up, so that the logits spread over several nats (the
// modern one's drawn too where its init has zeros: the projections and the head), residual
// lambdas of each layer's own, value gates, the smear and the backout away from zero.
static const GPTConfig SMALL_GPT = {.maxT = 128, .V = 300, .Vp = padded_vocab(300), .L = 2, .NH = 2, .C = 128,
                                    .arch = ARCHITECTURE_GPT2};
static const GPTConfig SMALL_MODERN = {.maxT = 128, .V = 300, .Vp = padded_vocab(300), .L = 2, .NH = 2, .C = 128,
                                       .arch = ARCHITECTURE_MODERN};

static float* small_gpt_values(const GPTConfig* c) {
    float* values = (float*)malloc(count_params(c) * sizeof(float));
    GPTConfig drawn = *c;
    drawn.arch.zero_init = 0;
    init_param_values(values, &drawn, 11, INIT_SCHEME_DEFAULT);
    size_t sizes[NUM_PARAM_TENSORS], off = 0;
    param_sizes(c, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        for (size_t j = 0; param_table[i].decay_scale && j < sizes[i]; j++) values[off + j] *= 10.0f;
        // The residual lambdas of each layer away from their init (1 and 0), so that x0 counts.
        for (size_t j = 0; i == PARAM_RESID_LAMBDA && j < sizes[i]; j++) values[off + j] = 0.75f + 0.5f * j;
        for (size_t j = 0; i == PARAM_X0_LAMBDA && j < sizes[i]; j++) values[off + j] = 0.5f - 0.25f * j;
        // The value gates' weights away from zero, so that the gates spread over (0, 3).
        for (size_t j = 0; i == PARAM_VALUE_GATE && j < sizes[i]; j++) values[off + j] = 0.5f * sinf(1.0f + j);
        // The smear's gate and scale away from zero, a smear that shows.
        for (size_t j = 0; i == PARAM_SMEAR_GATE && j < sizes[i]; j++) values[off + j] = 0.3f * cosf(2.0f + j);
        for (size_t j = 0; i == PARAM_SMEAR_LAMBDA && j < sizes[i]; j++) values[off + j] = 0.75f;
        for (size_t j = 0; i == PARAM_BACKOUT_LAMBDA && j < sizes[i]; j++) values[off + j] = 0.75f;
        off += sizes[i];
    }
    return values;
}

static void check_inference(const char* name, const GPTConfig* config, int samples, DrawSettings d) {
    test_begin(name);
    const int prompt_len = 7, length = 96;
    GPTConfig c = *config;
    ModelOptions mo = {.attention = {.kind = ATTENTION_FLASH}};
    float* values = small_gpt_values(&c);
    static InferenceModel cached;
    static GPT full;
    inference_build(&cached, c, samples, length, prompt_len, d);
    gpt_build(&full, c, 1, length, &mo, NULL, NULL);
    inference_set_params(&cached, values);
    gpt_set_params(&full, values);
    int* tokens = (int*)malloc((size_t)samples * length * sizeof(int));   // (samples, length)
    Rng rng = {5};
    for (int i = 0; i < prompt_len; i++) tokens[i] = (int)(rng_next(&rng) % c.V);
    for (int s = 1; s < samples; s++) memcpy(tokens + (size_t)s * length, tokens, prompt_len * sizeof(int));
    float* a = (float*)malloc((size_t)c.V * sizeof(float));
    float* first = (float*)malloc((size_t)c.V * sizeof(float));
    float* b = (float*)malloc((size_t)c.V * sizeof(float));
    inference_prompt(&cached, tokens, prompt_len);
    double worst = 0.0;
    int close_calls = 0, differing = 0, outside_top_k = 0;
    for (int pos = prompt_len; pos < length; pos++) {
        if (pos > prompt_len) inference_step(&cached);
        for (int s = 0; s < samples; s++) {
            int* mine = tokens + (size_t)s * length;
            mine[pos] = cached.host_tokens[s];
            inference_logits(&cached, s, a);
            if (s == 0) memcpy(first, a, (size_t)c.V * sizeof(float));
            else if (d.temperature == 0.0f && (mine[pos] != tokens[pos] || memcmp(a, first, (size_t)c.V * 4) != 0))
                differing++;
            // The full forward of this sample's prefix.
            gpt_forward(&full, mine, 1, pos);
            logits_row(&full, pos - 1, b);
            double diff = 0.0, ref = 0.0;
            for (int v = 0; v < c.V; v++) {
                diff += ((double)a[v] - b[v]) * ((double)a[v] - b[v]);
                ref += (double)b[v] * b[v];
            }
            double err = sqrt(diff / ref);
            worst = fmax(worst, err);
            CHECK(err < 2e-2, "sample %d position %d: the logits differ by %.3g relative L2", s, pos, err);
            CHECK(mine[pos] >= 0 && mine[pos] < c.V, "sample %d position %d: token %d", s, pos, mine[pos]);
            if (d.temperature == 0.0f) {
                float lead;
                int full_token = argmax(b, c.V, &lead);
                if (lead > 0.1f) CHECK(full_token == mine[pos], "position %d: cache chose %d, full forward %d (lead %.3f)",
                                       pos, mine[pos], full_token, lead);
                else close_calls++;
            }
            if (d.top_k > 0) {
                float cap = c.arch.softcap;
                auto capped = [&](float x) { return cap > 0.0f ? cap * tanhf(x / cap) : x; };
                int above = 0;
                for (int v = 0; v < c.V; v++) above += capped(a[v]) > capped(a[mine[pos]]);
                outside_top_k += above >= d.top_k;
            }
        }
    }
    CHECK(differing == 0, "%d draws where the greedy samples differ", differing);
    CHECK(outside_top_k == 0, "%d draws outside the top %d", outside_top_k, d.top_k);
    printf("    %d tokens x %d samples; worst logits error %.2e; %d greedy steps within 0.1 nats of a tie\n",
           length - prompt_len, samples, worst, close_calls);
    test_end();
    inference_free(&cached);
    gpt_free(&full);
    free(values);
    free(tokens);
    free(a);
    free(first);
    free(b);
}

// The tokens m draws for each of its sequences after the prompt, steps + 1 of them (out: (steps
// + 1, B)); set_at >= 0: inference_set_seed(m, seed) after that many steps.
static void draw_after_prompt(InferenceModel* m, const int* prompt, int n, int steps, int set_at, uint64_t seed,
                              int* out) {
    inference_prompt(m, prompt, n);
    for (int i = 0; i <= steps; i++) {
        if (i > 0) inference_step(m);
        memcpy(out + (size_t)i * m->B, m->host_tokens, (size_t)m->B * sizeof(int));
        if (i == set_at) inference_set_seed(m, seed);
    }
}

// inference_set_seed takes effect at the next prompt, for the draws on the GPU and on the host
// alike: the same prompt draws the same tokens again; a seed set between steps changes none of
// the draws that follow (the GPU had run a step ahead with the old one); the next prompt draws
// what a model built with the new seed draws. Two samples at temperature 1 (the noise apart).
#define SEED_STEPS 24
static const char* const SEED_NAMES[2] = {
    "inference_set_seed applies from the next prompt, draws on the GPU",
    "inference_set_seed applies from the next prompt, draws on the host (top-k 5)"};

static void check_seed(const char* name, DrawSettings d) {
    test_begin(name);
    const int B = 2, n = 5, length = 64, per_run = (SEED_STEPS + 1) * B;
    const uint64_t other_seed = d.seed + 1000;
    const int prompt[n] = {1, 2, 3, 4, 5};
    float* values = small_gpt_values(&SMALL_GPT);
    static InferenceModel m, fresh;
    DrawSettings other = d;
    other.seed = other_seed;
    inference_build(&m, SMALL_GPT, B, length, n, d);
    inference_build(&fresh, SMALL_GPT, B, length, n, other);
    inference_set_params(&m, values);
    inference_set_params(&fresh, values);
    int first[per_run], again[per_run], seed_set[per_run], next[per_run], other_model[per_run];
    draw_after_prompt(&m, prompt, n, SEED_STEPS, -1, 0, first);
    draw_after_prompt(&m, prompt, n, SEED_STEPS, -1, 0, again);
    draw_after_prompt(&m, prompt, n, SEED_STEPS, 3, other_seed, seed_set);
    draw_after_prompt(&m, prompt, n, SEED_STEPS, -1, 0, next);
    draw_after_prompt(&fresh, prompt, n, SEED_STEPS, -1, 0, other_model);
    CHECK(memcmp(again, first, sizeof(first)) == 0, "the same prompt and seed drew other tokens");
    CHECK(memcmp(seed_set, first, sizeof(first)) == 0, "a seed set between steps changed the draws after it");
    CHECK(memcmp(next, other_model, sizeof(first)) == 0,
          "the prompt after inference_set_seed drew other tokens than a model built with that seed");
    CHECK(memcmp(next, first, sizeof(first)) != 0, "the two seeds drew the same tokens");
    test_end();
    inference_free(&m);
    inference_free(&fresh);
    free(values);
}

static const char* const INFERENCE_NAMES[10] = {
    "inference model: 3 greedy samples decoded together equal a full forward per token",
    "inference model: 3 samples at temperature 1, each its own prefix's logits",
    "inference model: 2 samples with top-k 5 (drawn on the host), each its own prefix's logits",
    "inference model, modern: 3 greedy samples decoded together equal a full forward per token",
    "inference model, modern: 3 samples at temperature 1 (soft-capped draw on the GPU), each its own prefix's logits",
    "inference model, modern: 2 samples with top-k 5 (soft-capped draw on the host), each its own prefix's logits",
    "inference model, modern with the windows full,24: 3 greedy samples decoded together equal a full forward per token",
    "inference model, GPT-2 with a window of 16: 2 samples with top-k 5, each its own prefix's logits",
    "inference model, modern with the 2026 recipe's parts: 3 greedy samples decoded together equal a full forward "
    "per token",
    "inference model, GPT-2 with the 2026 recipe's parts: 2 samples with top-k 5, each its own prefix's logits"};

static void test_inference(void) {
    for (int k = 0; k < 2; k++) {
        const GPTConfig* c = k ? &SMALL_MODERN : &SMALL_GPT;
        check_inference(INFERENCE_NAMES[3 * k], c, 3, (DrawSettings){0.0f, 0, 1.0f, 1});
        check_inference(INFERENCE_NAMES[3 * k + 1], c, 3, (DrawSettings){1.0f, 0, 1.0f, 2});
        check_inference(INFERENCE_NAMES[3 * k + 2], c, 2, (DrawSettings){1.0f, 5, 1.0f, 3});
    }
    GPTConfig windowed = SMALL_MODERN, gpt2_window = SMALL_GPT;
    windowed.arch.window_count = 2;
    windowed.arch.windows[1] = 24;
    gpt2_window.arch.window_count = 1;
    gpt2_window.arch.windows[0] = 16;
    check_inference(INFERENCE_NAMES[6], &windowed, 3, (DrawSettings){0.0f, 0, 1.0f, 6});
    check_inference(INFERENCE_NAMES[7], &gpt2_window, 2, (DrawSettings){1.0f, 5, 1.0f, 7});
    GPTConfig modern_parts = SMALL_MODERN, gpt2_parts = SMALL_GPT;
    modern_parts.arch.embedding_norm = gpt2_parts.arch.embedding_norm = 1;
    modern_parts.arch.residual_lambdas = gpt2_parts.arch.residual_lambdas = 1;
    modern_parts.arch.value_embeddings = gpt2_parts.arch.value_embeddings = 1;
    modern_parts.arch.smear = gpt2_parts.arch.smear = 1;
    modern_parts.arch.backout = gpt2_parts.arch.backout = 1;
    modern_parts.L = gpt2_parts.L = 3;   // the backout's middle block is not the last, whose share the norm scales away
    modern_parts.arch.qk_scale = 1.25f;
    check_inference(INFERENCE_NAMES[8], &modern_parts, 3, (DrawSettings){0.0f, 0, 1.0f, 8});
    check_inference(INFERENCE_NAMES[9], &gpt2_parts, 2, (DrawSettings){1.0f, 5, 1.0f, 9});
    check_seed(SEED_NAMES[0], (DrawSettings){1.0f, 0, 1.0f, 4});
    check_seed(SEED_NAMES[1], (DrawSettings){1.0f, 5, 1.0f, 5});
}

// The greedy samples of test_samples_end_with_their_document: 2 sequences, at most 10 tokens each.
#define END_SAMPLES 2
#define END_STEPS 10

// generate_tokens' tokens of every sequence, as they come: (END_STEPS, END_SAMPLES).
typedef struct {
    int tokens[END_STEPS * END_SAMPLES];
} Drawn;
static void keep_tokens(const int* tokens, int i, void* user) {
    memcpy(((Drawn*)user)->tokens + i * END_SAMPLES, tokens, END_SAMPLES * sizeof(int));
}

// The tokens the greedy samples of the modern model (documents starting at token doc; -1: none)
// draw after a prompt, up to END_STEPS; returns how many.
static int greedy_samples(int doc, Drawn* d) {
    const int prompt[5] = {1, 2, 3, 4, 5};
    GPTConfig c = SMALL_MODERN;
    c.arch.documents = doc >= 0;
    c.arch.document_token = doc >= 0 ? doc : 0;
    float* values = small_gpt_values(&SMALL_MODERN);
    static InferenceModel m;
    inference_build(&m, c, END_SAMPLES, 32, 5, (DrawSettings){0.0f, 0, 1.0f, 8});
    inference_set_params(&m, values);
    int n = generate_tokens(&m, prompt, 5, END_STEPS, NULL, keep_tokens, d);
    inference_free(&m);
    free(values);
    return n;
}

#define DOCUMENT_END_NAME "generate_tokens: the samples of a model with documents end at the first document token"
static void test_samples_end_with_their_document(void) {
    test_begin(DOCUMENT_END_NAME);
    Drawn plain, ended;
    int n_plain = greedy_samples(-1, &plain);
    int token = plain.tokens[2 * END_SAMPLES], end = 0;   // sample 0's third token, and where it first is
    while (plain.tokens[end * END_SAMPLES] != token) end++;
    int n_ended = greedy_samples(token, &ended);
    CHECK(n_plain == END_STEPS, "the model without documents drew %d tokens, asked for %d", n_plain, END_STEPS);
    CHECK(n_ended == end + 1, "the samples with documents drew %d tokens, the first document token is their %d-th",
          n_ended, end + 1);
    CHECK(memcmp(plain.tokens, ended.tokens, (size_t)n_ended * END_SAMPLES * sizeof(int)) == 0,
          "the samples with documents drew other tokens before their end");
    test_end();
}

// Three sequences whose queries sit at positions of their own (device): each against the float64
// reference of its own cache, one launch for all. With QK-norm and rotary, each sequence's cache
// as the prompt's pass leaves it (transform_caches) but for its query's row, raw, which the call
// transforms: the reference takes the transformed rows, and the keys the call writes back must
// be those, bit for bit.
static const char* const BATCHED_NAMES[2] = {
    "attention_decode: 3 sequences at positions 5, 300 and 1025 in one launch",
    "attention_decode: 3 sequences at positions 5, 300 and 1025 in one launch, QK-norm and rotary"};
static const char* const LATE_NAMES[2] = {
    "attention_decode: the positions the kernel before writes, late, are the ones it takes",
    "attention_decode: the positions the kernel before writes, late, are the ones it takes, QK-norm and rotary"};
#define LATE_DELAY_CYCLES 10000000LL   // about 5 ms

// Lets the kernel after it start at once, then after delay_cycles copies n positions into place.
__global__ void write_positions_late_kernel(int* positions, const int* final_positions, int n, long long delay_cycles) {
    grid_dependents_launch();
    long long start = clock64();
    while (clock64() - start < delay_cycles) {}
    for (int i = 0; i < n; i++) positions[i] = final_positions[i];
}

// late: the positions hold these until the kernel before the call writes the real ones.
static void test_decode_batched(const char* name, const int* late, int qk) {
    test_begin(name);
    const int NH = 2, HS = 64, T = 1100, B = 3, pos[B] = {5, 300, 1025};
    AttentionShape s = {B, T, NH, HS, 1, 1.0f / sqrtf((float)HS)};
    AttentionPlan plan = {ATTENTION_FLASH};
    size_t row = 3 * (size_t)NH * HS, n = (size_t)B * T * row, C = (size_t)NH * HS;
    bf16* host = (bf16*)malloc(n * sizeof(bf16));
    bf16* host_q = (bf16*)malloc((size_t)B * row * sizeof(bf16));
    Rng rng = {99};
    for (size_t i = 0; i < n; i++) host[i] = __float2bfloat16(2.0f * rng_symmetric(&rng));
    for (int b = 0; b < B; b++) memcpy(host_q + b * row, host + ((size_t)b * T + pos[b]) * row, row * sizeof(bf16));
    bf16 *qkv, *q, *out;
    int *positions, *final_positions;
    void* scratch;
    cudaStream_t stream;
    cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaCheck(cudaMalloc((void**)&final_positions, B * sizeof(int)));
    cudaCheck(cudaMalloc((void**)&qkv, n * sizeof(bf16)));
    cudaCheck(cudaMalloc((void**)&q, (size_t)B * row * sizeof(bf16)));
    cudaCheck(cudaMalloc((void**)&out, (size_t)B * C * sizeof(bf16)));
    cudaCheck(cudaMalloc((void**)&positions, B * sizeof(int)));
    cudaCheck(cudaMalloc(&scratch, attention_decode_scratch_bytes(&plan, s)));
    cudaCheck(cudaMemset(scratch, 0, attention_decode_scratch_bytes(&plan, s)));   // once: the calls leave it zeroed
    cudaCheck(cudaMemcpy(qkv, host, n * sizeof(bf16), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(q, host_q, (size_t)B * row * sizeof(bf16), cudaMemcpyHostToDevice));
    bf16* want = host;   // the cache and queries of the reference
    const DecodeQK transform = decode_qk(qk);
    if (qk) {
        want = (bf16*)malloc(n * sizeof(bf16));
        transform_caches(qkv, want, B, T, NH, HS, qk);
        for (int b = 0; b < B; b++) {   // the query's row raw
            size_t at = ((size_t)b * T + pos[b]) * row;
            cudaCheck(cudaMemcpy(qkv + at, host + at, row * sizeof(bf16), cudaMemcpyHostToDevice));
        }
    }
    cudaCheck(cudaMemcpy(final_positions, pos, B * sizeof(int), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(positions, late ? late : pos, B * sizeof(int), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(out, 0xff, (size_t)B * C * sizeof(bf16)));   // NaN
    cudaCheck(cudaDeviceSynchronize());   // the legacy stream's copies and sets, before the stream's work
    // K and V are the fused cache's; each sequence's query is its row of q.
    AttentionParams p = attention_fused_params(s, qkv, out, NULL, NULL, NULL);
    p.q = (AttentionTensor){q, (long long)row, 0, HS};
    p.o = (AttentionTensor){out, (long long)C, 0, HS};
    if (late) {
        write_positions_late_kernel<<<1, 1, 0, stream>>>(positions, final_positions, B, LATE_DELAY_CYCLES);
        cudaCheckLaunch();
    }
    attention_decode(&plan, &p, positions, qk ? &transform : NULL, scratch, stream);
    bf16* got = (bf16*)malloc((size_t)B * C * sizeof(bf16));
    cudaCheck(cudaMemcpyAsync(got, out, (size_t)B * C * sizeof(bf16), cudaMemcpyDeviceToHost, stream));
    cudaCheck(cudaStreamSynchronize(stream));
    for (int b = 0; qk && b < B; b++) {
        size_t at = ((size_t)b * T + pos[b]) * row + C;
        bf16 key[NH * HS];
        cudaCheck(cudaMemcpy(key, qkv + at, C * sizeof(bf16), cudaMemcpyDeviceToHost));
        CHECK(memcmp(key, want + at, C * sizeof(bf16)) == 0, "sequence %d: its own key is not the prompt pass's", b);
    }
    double* scores = (double*)malloc((size_t)T * sizeof(double));
    double worst = 0.0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const bf16* seq = want + (size_t)b * T * row;
            const bf16* query = want + ((size_t)b * T + pos[b]) * row;
            double m = -INFINITY, l = 0.0, diff = 0.0, ref = 0.0;
            for (int j = 0; j <= pos[b]; j++) {
                double dot = 0.0;
                for (int d = 0; d < HS; d++)
                    dot += (double)__bfloat162float(query[h * HS + d]) *
                           __bfloat162float(seq[(size_t)j * row + (NH + h) * HS + d]);
                scores[j] = dot * s.scale;
                m = fmax(m, scores[j]);
            }
            for (int j = 0; j <= pos[b]; j++) l += exp(scores[j] - m);
            for (int d = 0; d < HS; d++) {
                double o = 0.0;
                for (int j = 0; j <= pos[b]; j++)
                    o += exp(scores[j] - m) * __bfloat162float(seq[(size_t)j * row + (2 * NH + h) * HS + d]);
                o /= l;
                double g = __bfloat162float(got[b * C + h * HS + d]);
                diff += (g - o) * (g - o);
                ref += o * o;
                if (isnan(g)) diff = INFINITY;
            }
            double err = sqrt(diff / ref);
            worst = fmax(worst, err);
            CHECK(err < 1e-2, "sequence %d (position %d) head %d: relative L2 error %.3g", b, pos[b], h, err);
        }
    printf("    worst relative L2 error %.2e\n", worst);
    test_end();
    if (want != host) free(want);
    free(host);
    free(host_q);
    free(got);
    free(scores);
    void* all[] = {qkv, q, out, positions, final_positions, scratch};
    for (int i = 0; i < 6; i++) cudaCheck(cudaFree(all[i]));
    cudaCheck(cudaStreamDestroy(stream));
}

// (HS, T, window, qk) of test_decode_kernel.
static const int DECODE_KERNEL_CASES[][4] = {
    {64, 3000, 0, QK_NONE},   {128, 3000, 0, QK_NONE},  {64, 40, 0, QK_NONE},         {64, 3000, 1, QK_NONE},
    {64, 3000, 300, QK_NONE}, {128, 3000, 256, QK_NONE}, {64, 3000, 0, QK_BOTH},      {128, 3000, 256, QK_BOTH},
    {64, 70000, 300, QK_BOTH}, {16, 600, 0, QK_NORM},   {32, 600, 1, QK_ROTARY},      {256, 1100, 0, QK_BOTH}};
#define DECODE_KERNEL_COUNT (sizeof(DECODE_KERNEL_CASES) / sizeof(DECODE_KERNEL_CASES[0]))

int main(void) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        char name[128];
        for (size_t i = 0; i < DECODE_KERNEL_COUNT; i++) {
            const int* c = DECODE_KERNEL_CASES[i];
            decode_kernel_name(name, sizeof(name), c[0], c[1], c[2], c[3]);
            test_skip(name, "no CUDA device");
        }
        const char* names[] = {BATCHED_NAMES[0], LATE_NAMES[0], BATCHED_NAMES[1], LATE_NAMES[1], INFERENCE_NAMES[0],
                               INFERENCE_NAMES[1], INFERENCE_NAMES[2], INFERENCE_NAMES[3], INFERENCE_NAMES[4],
                               INFERENCE_NAMES[5], INFERENCE_NAMES[6], INFERENCE_NAMES[7], INFERENCE_NAMES[8],
                               INFERENCE_NAMES[9], SEED_NAMES[0], SEED_NAMES[1], DOCUMENT_END_NAME};
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) test_skip(names[i], "no CUDA device");
        return test_exit_code();
    }
    for (size_t i = 0; i < DECODE_KERNEL_COUNT; i++) {
        const int* c = DECODE_KERNEL_CASES[i];
        test_decode_kernel(c[0], c[1], c[2], c[3]);
    }
    static const int late[3] = {1025, 5, 300};
    for (int qk = 0; qk < 2; qk++) {
        test_decode_batched(BATCHED_NAMES[qk], NULL, qk ? QK_BOTH : QK_NONE);
        test_decode_batched(LATE_NAMES[qk], late, qk ? QK_BOTH : QK_NONE);
    }
    test_inference();
    test_samples_end_with_their_document();
    return test_exit_code();
}
