// tests/test_decode.cu: generation with a KV cache.
// 1. attention_decode (one query against the cached keys, its position read on the GPU)
//    against a float64 reference of the same row of causal attention, for HS 64 and 128, at
//    positions inside the first chunk of keys, on its edges and past it (several chunks
//    merged), with the output poisoned (NaN) before each call. Tolerance 1e-2 relative L2: the
//    inputs are bf16 values, taken exactly; sums and the softmax run in fp32 (errors ~1e-6), so
//    the bf16 rounding of O (2^-9 relative at most) dominates [measured below 3e-3].
// 2. The inference model (gpt/inference.h): a d2-sized GPT (L 2, C 128, NH 2, V 300) whose
//    weights are scaled up so its logits spread over several nats, three greedy samples of the
//    same prompt decoded together by the captured step, and at every step the same prefix
//    through a full gpt_forward of the training model: every sample draws the same tokens with
//    the same logits, the logits agree with the full forward's within 2e-2 relative L2 (bf16:
//    the two paths round at different places), and the full forward's most likely token is the
//    one drawn wherever its lead over the second exceeds 0.1 nats (closer calls can flip under
//    bf16 noise of ~1e-2; how many were that close is printed).
#include <math.h>
#include <string.h>
#include "attention/attention.h"
#include "common/rng.h"
#include "gpt/gpt.h"
#include "gpt/inference.h"
#include "tests/test.h"

static float rng_symmetric(Rng* rng) { return (float)(2.0 * rng_uniform(rng) - 1.0); }

static void test_decode_kernel(int HS, int T) {
    char name[128];
    snprintf(name, sizeof(name), "attention_decode HS%d T=%d", HS, T);
    test_begin(name);
    const int NH = 3;
    AttentionShape s = {1, T, NH, HS, 1, 1.0f / sqrtf((float)HS)};
    AttentionPlan plan = {ATTENTION_FLASH};
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
    cudaCheck(cudaMalloc(&scratch, attention_decode_scratch_bytes(s)));
    cudaCheck(cudaMemcpy(qkv, host, n * sizeof(bf16), cudaMemcpyHostToDevice));
    const int positions[] = {0, 1, 77, 255, 256, 1023, 1024, 1025, 2047, T - 1};
    bf16* got = (bf16*)malloc((size_t)NH * HS * sizeof(bf16));
    double* scores = (double*)malloc((size_t)T * sizeof(double));
    double worst = 0.0;
    for (size_t k = 0; k < sizeof(positions) / sizeof(positions[0]); k++) {
        int pos = positions[k];
        if (pos >= T) continue;
        cudaCheck(cudaMemset(out, 0xff, (size_t)NH * HS * sizeof(bf16)));   // NaN
        // The cache is the fused qkv; the query is row pos's.
        AttentionParams p = attention_fused_params(s, qkv, out, NULL, NULL, NULL);
        p.q.ptr += (long long)pos * p.q.row;
        cudaCheck(cudaMemcpy(position, &pos, sizeof(int), cudaMemcpyHostToDevice));
        attention_decode(&plan, &p, position, scratch, 0);
        cudaCheck(cudaMemcpy(got, out, (size_t)NH * HS * sizeof(bf16), cudaMemcpyDeviceToHost));
        for (int h = 0; h < NH; h++) {
            const bf16* q = host + (size_t)pos * row + (size_t)h * HS;
            double m = -INFINITY, l = 0.0, diff = 0.0, ref = 0.0;
            for (int j = 0; j <= pos; j++) {
                const bf16* kj = host + (size_t)j * row + (size_t)(NH + h) * HS;
                double dot = 0.0;
                for (int d = 0; d < HS; d++) dot += (double)__bfloat162float(q[d]) * __bfloat162float(kj[d]);
                scores[j] = dot * s.scale;
                m = fmax(m, scores[j]);
            }
            for (int j = 0; j <= pos; j++) l += exp(scores[j] - m);
            for (int d = 0; d < HS; d++) {
                double o = 0.0;
                for (int j = 0; j <= pos; j++)
                    o += exp(scores[j] - m) * __bfloat162float(host[(size_t)j * row + (size_t)(2 * NH + h) * HS + d]);
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
    free(host);
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

// The logits the inference model's last step (or prompt) left for sample b.
static void inference_logits(const InferenceModel* m, int b, float* out) {
    int V = m->config.V;
    bf16* host = (bf16*)malloc((size_t)V * sizeof(bf16));
    cudaCheck(cudaMemcpy(host, m->step.logits + (size_t)b * m->config.Vp, (size_t)V * sizeof(bf16),
                         cudaMemcpyDeviceToHost));
    for (int v = 0; v < V; v++) out[v] = __bfloat162float(host[v]);
    free(host);
}

#define CACHED_NAME "inference model: greedy samples decoded together equal a full forward per token"

static void test_cached_generation(void) {
    test_begin(CACHED_NAME);
    const int prompt_len = 7, length = 96, samples = 3;
    GPTConfig c = {.maxT = 128, .V = 300, .Vp = padded_vocab(300), .L = 2, .NH = 2, .C = 128};
    ModelOptions mo = {.attention = {.kind = ATTENTION_FLASH}};
    size_t P = count_params(&c);
    float* values = (float*)malloc(P * sizeof(float));
    init_param_values(values, &c, 11);
    size_t sizes[NUM_PARAM_TENSORS], off = 0;
    param_sizes(&c, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        for (size_t j = 0; param_decays[i] && j < sizes[i]; j++) values[off + j] *= 10.0f;
        off += sizes[i];
    }
    static InferenceModel cached;
    static GPT full;
    inference_build(&cached, c, samples, length, prompt_len, (DrawSettings){0.0f, 0, 1.0f, 1});
    gpt_build(&full, c, 1, length, &mo, NULL);
    inference_set_params(&cached, values);
    gpt_set_params(&full, values);
    int tokens[96];
    Rng rng = {5};
    for (int i = 0; i < prompt_len; i++) tokens[i] = (int)(rng_next(&rng) % c.V);
    float* a = (float*)malloc((size_t)c.V * sizeof(float));
    float* a_other = (float*)malloc((size_t)c.V * sizeof(float));
    float* b = (float*)malloc((size_t)c.V * sizeof(float));
    inference_prompt(&cached, tokens, prompt_len);
    double worst = 0.0;
    int close_calls = 0, differing_samples = 0;
    for (int pos = prompt_len; pos < length; pos++) {
        if (pos > prompt_len) inference_step(&cached);
        // The draw of every sample, from logits of the prefix tokens[0..pos).
        tokens[pos] = cached.host_tokens[0];
        inference_logits(&cached, 0, a);
        for (int s = 1; s < samples; s++) {
            inference_logits(&cached, s, a_other);
            if (cached.host_tokens[s] != tokens[pos] || memcmp(a, a_other, (size_t)c.V * sizeof(float)) != 0)
                differing_samples++;
        }
        // The full forward of the same prefix.
        gpt_forward(&full, tokens, 1, pos);
        logits_row(&full, pos - 1, b);
        double diff = 0.0, ref = 0.0;
        for (int v = 0; v < c.V; v++) {
            diff += ((double)a[v] - b[v]) * ((double)a[v] - b[v]);
            ref += (double)b[v] * b[v];
        }
        double err = sqrt(diff / ref);
        worst = fmax(worst, err);
        CHECK(err < 2e-2, "position %d: the logits differ by %.3g relative L2", pos, err);
        float lead_full;
        int full_token = argmax(b, c.V, &lead_full);
        if (lead_full > 0.1f) CHECK(full_token == tokens[pos], "position %d: cache chose %d, full forward %d (lead %.3f)",
                                    pos, tokens[pos], full_token, lead_full);
        else close_calls++;
    }
    CHECK(differing_samples == 0, "%d steps where the greedy samples differ", differing_samples);
    printf("    %d tokens x %d samples; worst logits error %.2e; %d steps within 0.1 nats of a tie\n",
           length - prompt_len, samples, worst, close_calls);
    test_end();
    inference_free(&cached);
    gpt_free(&full);
    free(values);
    free(a);
    free(a_other);
    free(b);
}

int main(void) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        const char* names[] = {"attention_decode HS64 T=3000", "attention_decode HS128 T=3000",
                               "attention_decode HS64 T=40",
                               CACHED_NAME};
        for (int i = 0; i < 4; i++) test_skip(names[i], "no CUDA device");
        return test_exit_code();
    }
    test_decode_kernel(64, 3000);
    test_decode_kernel(128, 3000);
    test_decode_kernel(64, 40);
    test_cached_generation();
    return test_exit_code();
}
