// tests/unit/gpt/test_profile.cu: the step profile (gpt/profile.h). On the CPU, the floors' arithmetic
// for a d2 shape (L 2, C 128, NH 2, Vp 128; B 2, T 64: N = 128 rows), counted here by hand, of
// GPT-2 with AdamW, of the modern architecture (with a window) and of Muon's update.
// On a GPU, a d2 training step with the profile on, GPT-2 + AdamW, modern + Muon, and modern +
// Muon with the 2026 recipe's parts (the value embeddings' token groups a mark of their own): every
// part that works has a positive time, every other none, the parts add up to no more than the
// step's wall time, the events made beforehand suffice, and the step computes the same bits as
// without the profile. Also on the CPU, the MFU the trainer prints (gpt/mfu.h) for one GPU and for
// several, with FP8 matmuls counted against twice the peak.
#include <math.h>
#include <string.h>
#include "common/clock.h"
#include "gpt/gpt.h"
#include "gpt/profile.h"
#include "gpt/mfu.h"
#include "tests/lib/test.h"

static const GPTConfig D2 = {.maxT = 64, .V = 97, .Vp = 128, .L = 2, .NH = 2, .C = 128, .arch = ARCHITECTURE_GPT2};
static const GPTConfig D2_MODERN = {.maxT = 64, .V = 97, .Vp = 128, .L = 2, .NH = 2, .C = 128,
                                    .arch = ARCHITECTURE_MODERN};

// Relative equality: the counts are sums of products of small integers, exact in a double.
static int same(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b); }

static void check_count(const char* what, double got, double want) {
    CHECK(same(got, want), "%s: %.0f, by hand %.0f", what, got, want);
}

static void test_floors(void) {
    test_begin("profile floors: FLOPs and bytes of a d2 step");
    ProfileShape s = {.rows = 2, .cols = 64, .context_parallel = 1, .micro_steps = 1, .classifier_rows = 128,
                      .params = count_params(&D2), .updated_params = count_params(&D2)};
    PartWork w[NUM_PROFILE_PARTS][NUM_PROFILE_PHASES];
    profile_work(&D2, &s, w);
    // qkv: 2 N C 3C per layer; bytes 2 (N C + 3C C + 3C + N 3C) per layer.
    check_count("qkv forward FLOPs", w[PART_QKV][PHASE_FORWARD].flops, 2.0 * 128 * 128 * 384 * 2);
    check_count("qkv forward bytes", w[PART_QKV][PHASE_FORWARD].bytes, 2.0 * (16384 + 49152 + 384 + 49152) * 2);
    check_count("qkv backward FLOPs", w[PART_QKV][PHASE_BACKWARD].flops, 4.0 * 128 * 128 * 384 * 2);
    // MLP up writes GELU's input and output: 2 (N C + 4C C + 4C + 2 N 4C) per layer.
    check_count("MLP up forward bytes", w[PART_MLP_UP][PHASE_FORWARD].bytes, 2.0 * (16384 + 65536 + 512 + 131072) * 2);
    // Causal attention: 2 B NH T^2 HS per layer forward, 2.5 times that backward.
    check_count("attention forward FLOPs", w[PART_ATTENTION][PHASE_FORWARD].flops, 2.0 * 2 * 2 * 64 * 64 * 64 * 2);
    check_count("attention backward FLOPs", w[PART_ATTENTION][PHASE_BACKWARD].flops, 2.5 * 2 * 2 * 2 * 64 * 64 * 64 * 2);
    check_count("classifier forward FLOPs", w[PART_CLASSIFIER][PHASE_FORWARD].flops, 2.0 * 128 * 128 * 128);
    check_count("classifier backward FLOPs", w[PART_CLASSIFIER][PHASE_BACKWARD].flops, 4.0 * 128 * 128 * 128);
    // 5 layernorms: 2 (2 N C + 2 C) + 8 N bytes each.
    check_count("layernorm forward bytes", w[PART_NORM][PHASE_FORWARD].bytes, 5 * (2.0 * (32768 + 256) + 1024));
    // attention proj reads the residual stream too: 2 (N C + C C + C + 2 N C) per layer.
    check_count("attention proj forward bytes", w[PART_ATTPROJ][PHASE_FORWARD].bytes, 2.0 * (16384 + 16384 + 128 + 32768) * 2);
    check_count("update bytes", w[PART_UPDATE][PHASE_UPDATE].bytes, 30.0 * count_params(&D2));
    for (int part = 0; part < NUM_PROFILE_PARTS; part++)
        CHECK(w[part][PHASE_UPDATE].bytes == 0 || part == PART_UPDATE, "%s has update work", profile_part_names[part]);
    CHECK(w[PART_UPDATE][PHASE_FORWARD].bytes == 0 && w[PART_UPDATE][PHASE_BACKWARD].bytes == 0,
          "the update has forward or backward work");

    // Two micro-steps: twice the work, but the update's.
    ProfileShape twice = s;
    twice.micro_steps = 2;
    PartWork w2[NUM_PROFILE_PARTS][NUM_PROFILE_PHASES];
    profile_work(&D2, &twice, w2);
    check_count("qkv forward FLOPs, 2 micro-steps", w2[PART_QKV][PHASE_FORWARD].flops, 2 * w[PART_QKV][PHASE_FORWARD].flops);
    check_count("update bytes, 2 micro-steps", w2[PART_UPDATE][PHASE_UPDATE].bytes, w[PART_UPDATE][PHASE_UPDATE].bytes);

    // Context parallel over 2 ranks: simulated (both ranks' rows here, 4 rows of 32) the same
    // attention as without; one rank of an NCCL group (2 rows of 32) half of it.
    ProfileShape simulated = s, one_rank = s;
    simulated.rows = 4, simulated.cols = 32, simulated.context_parallel = 2;
    one_rank.cols = 32, one_rank.context_parallel = 2;
    profile_work(&D2, &simulated, w2);
    check_count("attention FLOPs, 2 ranks simulated", w2[PART_ATTENTION][PHASE_FORWARD].flops,
                w[PART_ATTENTION][PHASE_FORWARD].flops);
    profile_work(&D2, &one_rank, w2);
    check_count("attention FLOPs, one of 2 ranks", w2[PART_ATTENTION][PHASE_FORWARD].flops,
                w[PART_ATTENTION][PHASE_FORWARD].flops / 2);

    // The floor is the slower of the two.
    check_count("floor set by FLOPs", work_floor_seconds((PartWork){790e12, 4.3e9}, 790e12, 4.3e12), 1.0);
    check_count("floor set by bytes", work_floor_seconds((PartWork){790e9, 4.3e12}, 790e12, 4.3e12), 1.0);
    test_end();
}

// The modern architecture (RMSNorm, QK-norm + rotary, ReLU^2, no biases, an untied head), layer 0
// with a window of 16 keys, under AdamW; then Muon's update of its matrices. N C = 16384.
static void test_floors_modern(void) {
    test_begin("profile floors: the modern architecture, a window, and Muon's update");
    GPTConfig c = D2_MODERN;
    c.arch.window_count = 2;
    c.arch.windows[0] = 16;
    double P = 2 * 16384 + 2 * (3 + 1 + 4 + 4) * 16384.0;   // wte, lm_head; the layers' four matrices
    CHECK(count_params(&c) == (size_t)P, "%zu parameters, by hand %.0f", count_params(&c), P);
    ProfileShape s = {.rows = 2, .cols = 64, .context_parallel = 1, .micro_steps = 1, .classifier_rows = 128,
                      .params = (size_t)P, .updated_params = (size_t)P};
    PartWork w[NUM_PROFILE_PARTS][NUM_PROFILE_PHASES];
    profile_work(&c, &s, w);
    // No wpe: 4 N token bytes, wte rows read and the output written: 2 (2 N C); the backward
    // adds to dwte's 128 rows: 2 (N C + 2 Vp C).
    check_count("embedding forward bytes", w[PART_EMBEDDING][PHASE_FORWARD].bytes, 512 + 2.0 * 32768);
    check_count("embedding backward bytes", w[PART_EMBEDDING][PHASE_BACKWARD].bytes, 512 + 2.0 * (16384 + 32768));
    // 5 RMSNorms: x in, out and the fp32 rstd out, 2 (2 N C) + 4 N; backward dout, x, rstd in and
    // dx +=, 2 (4 N C) + 4 N.
    check_count("norms forward bytes", w[PART_NORM][PHASE_FORWARD].bytes, 5 * (2.0 * 32768 + 512));
    check_count("norms backward bytes", w[PART_NORM][PHASE_BACKWARD].bytes, 5 * (2.0 * 65536 + 512));
    // No bias: 2 (N C + 3C C + N 3C) per layer.
    check_count("qkv forward bytes", w[PART_QKV][PHASE_FORWARD].bytes, 2.0 * (16384 + 49152 + 49152) * 2);
    check_count("qkv forward FLOPs", w[PART_QKV][PHASE_FORWARD].flops, 2.0 * 128 * 128 * 384 * 2);
    // q and k read and written, 2 (4 N C); rstd (N, 2 NH) fp32 written, positions (N) int32 read.
    check_count("qk-norm + rotary forward bytes", w[PART_QK_NORM_ROTARY][PHASE_FORWARD].bytes,
                (2.0 * 65536 + 4 * 4 * 128 + 4 * 128) * 2);
    // dq, dk read and written, q and k read, 2 (6 N C); rstd and positions read.
    check_count("qk-norm + rotary backward bytes", w[PART_QK_NORM_ROTARY][PHASE_BACKWARD].bytes,
                (2.0 * 98304 + 4 * 4 * 128 + 4 * 128) * 2);
    CHECK(w[PART_QK_NORM_ROTARY][PHASE_FORWARD].flops == 0, "qk-norm + rotary counts tensor-core FLOPs");
    // ReLU^2: h written, read and relu(h)^2 written, 2 (N C + 4C C + 3 N 4C) per layer.
    check_count("MLP up forward bytes", w[PART_MLP_UP][PHASE_FORWARD].bytes, 2.0 * (16384 + 65536 + 196608) * 2);
    // MLP down backward: dout, relu(h)^2 and the weight read, dinp and dweight +=, then the
    // pass reads dinp and relu(h)^2 and writes dinp: 2 (N C + 2 N 4C + 4C C + N 4C + 2 4C C + 2 N 4C).
    check_count("MLP down backward bytes", w[PART_MLP_DOWN][PHASE_BACKWARD].bytes,
                2.0 * (16384 + 2 * 65536 + 65536 + 65536 + 2 * 65536 + 2 * 65536) * 2);
    // Attention over T 64: layer 0 sees at most 16 keys, 64 16 - 16^2 / 2 = 896 pairs; layer 1
    // the causal half, 2048 pairs; 4 HS FLOPs a pair, head and sequence forward.
    check_count("attention forward FLOPs", w[PART_ATTENTION][PHASE_FORWARD].flops, 4.0 * 64 * 2 * 2 * (896 + 2048));
    check_count("attention backward FLOPs", w[PART_ATTENTION][PHASE_BACKWARD].flops,
                2.5 * 4 * 64 * 2 * 2 * (896 + 2048));
    // The untied head moves what the tied wte did: 2 (N C + Vp C + 3 N Vp) + 8 N forward.
    check_count("classifier forward bytes", w[PART_CLASSIFIER][PHASE_FORWARD].bytes, 2.0 * 81920 + 1024);
    check_count("classifier backward bytes", w[PART_CLASSIFIER][PHASE_BACKWARD].bytes, 2.0 * 98304);
    check_count("update bytes, AdamW", w[PART_UPDATE][PHASE_UPDATE].bytes, 30 * P);
    CHECK(w[PART_UPDATE][PHASE_UPDATE].flops == 0, "AdamW's update counts FLOPs");

    // Muon on every matrix of both layers; Adam on wte and lm_head. Newton-Schulz, 5 iterations
    // on (C, l): 4 C^2 l + 2 C^3 FLOPs, 2 (3 C l + 4 C^2) bytes; l = 3C, C, 4C, 4C: 56 C^3 and
    // 2 (52 C^2) a layer; the passes 30 bytes a matrix element.
    ProfileShape muon = s;
    muon.muon_matrices[PARAM_QKVW] = muon.muon_matrices[PARAM_ATTPROJW] = 2;
    muon.muon_matrices[PARAM_FCW] = muon.muon_matrices[PARAM_FCPROJW] = 2;
    profile_work(&c, &muon, w);
    double C3 = 128.0 * 128 * 128, C2 = 128.0 * 128;
    check_count("update FLOPs, Muon", w[PART_UPDATE][PHASE_UPDATE].flops, 5 * 2 * 56 * C3);
    check_count("update bytes, Muon", w[PART_UPDATE][PHASE_UPDATE].bytes,
                2 * P + 28 * 32768 + 30 * 2 * 12 * C2 + 5 * 2 * 2 * 52 * C2);
    // One rank's ZeRO-1 share: one qkvw matrix (3C, C) alone, 3 C^2 parameters.
    ProfileShape share = s;
    share.updated_params = 3 * 16384;
    share.muon_matrices[PARAM_QKVW] = 1;
    profile_work(&c, &share, w);
    check_count("update FLOPs, one qkvw", w[PART_UPDATE][PHASE_UPDATE].flops, 5 * 14 * C3);
    check_count("update bytes, one qkvw", w[PART_UPDATE][PHASE_UPDATE].bytes,
                2 * P + 30 * 3 * C2 + 5 * 2 * (9 + 4) * C2);
    // That qkvw as q, k and v (--muon-qkv split), three (C, C) matrices of 6 C^3 and 2 (3 C^2 +
    // 4 C^2) bytes an iteration, with NorMuon's read of the update (32 bytes an element).
    ProfileShape split = share;
    split.muon_qkv = MUON_QKV_SPLIT;
    split.normuon = 1;
    split.muon_matrices[PARAM_QKVW] = 3;
    profile_work(&c, &split, w);
    check_count("update FLOPs, q, k and v", w[PART_UPDATE][PHASE_UPDATE].flops, 5 * 3 * 6 * C3);
    check_count("update bytes, q, k and v", w[PART_UPDATE][PHASE_UPDATE].bytes,
                2 * P + 32 * 3 * C2 + 5 * 3 * 2 * (3 + 4) * C2);
    test_end();
}

// The batch of the profiled steps.
static int step_tokens[2 * 64], step_targets[2 * 64];

// One optimizer step as train_gpt takes it, on the batch above.
static float train_step(GPT* g, int B, int T) {
    gpt_zero_grads(g);
    gpt_forward(g, step_tokens, B, T);
    gpt_classifier(g, step_targets, B, T, 1.0f / (B * T), 1);
    gpt_backward(g, step_tokens, 1);
    float loss = gpt_mean_loss(g);
    StepRates rates = optimizer_rates(&g->optimizer, g->optimizer.lr);
    gpt_update(g, &rates);
    cudaCheck(cudaStreamSynchronize(g->stream));
    return loss;
}

static void test_profiled_step(const char* name, const GPTConfig* c, OptimizerKind kind) {
    int B = 2, T = 64;
    // The recomputations the MLP allows and chunks of 32 rows: the most marks a step records.
    ModelOptions opt = {.attention = {.kind = ATTENTION_FLASH, .deterministic = 1},
                        .recompute = (c->arch.relu2 ? 0 : RECOMPUTE_GELU) | RECOMPUTE_LAYERNORM,
                        .classifier_rows = 32};
    const char* why = attention_unsupported(&opt.attention, attention_shape(c, B, T));
    if (why) {
        test_skip(name, why);
        return;
    }
    test_begin(name);
    GPT g;
    OptimizerConfig optimizer = optimizer_defaults(kind);
    if (kind == OPTIMIZER_ADAMW) optimizer.lr = 1e-3f;
    gpt_build(&g, *c, B, T, &opt, NULL, &optimizer);
    size_t P = g.num_params;
    float* start = (float*)malloc(P * sizeof(float));
    bf16* profiled = (bf16*)malloc(P * sizeof(bf16));
    bf16* plain = (bf16*)malloc(P * sizeof(bf16));
    if (!start || !profiled || !plain) die("out of host memory");
    init_param_values(start, c, 42, INIT_SCHEME_DEFAULT);
    for (int i = 0; i < B * T; i++) {
        step_tokens[i] = (i * 31 + 7) % c->V;
        step_targets[i] = (i * 17 + 3) % c->V;
    }
    gpt_set_params(&g, start);
    train_step(&g, B, T);   // warm-up: cuBLASLt's first calls

    Profile prof;
    profile_init(&prof);
    int reserved = gpt_profile_marks(&g, 1);
    profile_reserve(&prof, reserved);
    gpt_set_params(&g, start);
    g.profile = &prof;
    double t0 = now_seconds();
    float loss_profiled = train_step(&g, B, T);
    double step_seconds = now_seconds() - t0;
    g.profile = NULL;
    CHECK(prof.capacity == reserved, "the step needed %d events, gpt_profile_marks said %d", prof.capacity, reserved);
    double ms[NUM_PROFILE_PARTS][NUM_PROFILE_PHASES];
    profile_collect(&prof, ms);
    cudaCheck(cudaMemcpy(profiled, g.params_memory, P * sizeof(bf16), cudaMemcpyDeviceToHost));

    PartWork work[NUM_PROFILE_PARTS][NUM_PROFILE_PHASES];
    ProfileShape shape = {.rows = B, .cols = T, .context_parallel = 1, .micro_steps = 1,
                          .classifier_rows = g.sizes.logits_rows, .params = P, .updated_params = P};
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) shape.muon_matrices[i] = gpt_muon_matrices(&g, i);
    CHECK(kind != OPTIMIZER_MUON || shape.muon_matrices[PARAM_FCW] == c->L, "Muon takes %d fcw matrices of %d",
          shape.muon_matrices[PARAM_FCW], c->L);
    profile_work(c, &shape, work);
    double sum = 0;
    for (int part = 0; part < NUM_PROFILE_PARTS; part++)
        for (int phase = 0; phase < NUM_PROFILE_PHASES; phase++) {
            int works = work[part][phase].flops > 0 || work[part][phase].bytes > 0;
            if (works) CHECK(ms[part][phase] > 0, "%s, phase %d: no time", profile_part_names[part], phase);
            else CHECK(ms[part][phase] == 0, "%s, phase %d: %.3f ms and no work", profile_part_names[part], phase,
                       ms[part][phase]);
            sum += ms[part][phase];
        }
    CHECK(sum <= step_seconds * 1e3, "the parts add up to %.3f ms, the step took %.3f ms", sum, step_seconds * 1e3);
    ProfileSummary summary = {.step = 2, .step_seconds = step_seconds, .mfu = 0, .peak_tflops = 0,
                              .flops_per_s = H200_DENSE_BF16_FLOPS, .bytes_per_s = H200_MEMORY_BYTES_PER_S};
    profile_print(stdout, &summary, ms, work);

    // The same step without the profile: the same loss and parameters, bit for bit.
    gpt_set_params(&g, start);
    float loss_plain = train_step(&g, B, T);
    cudaCheck(cudaMemcpy(plain, g.params_memory, P * sizeof(bf16), cudaMemcpyDeviceToHost));
    CHECK(memcmp(&loss_profiled, &loss_plain, sizeof(float)) == 0, "loss %.9g profiled, %.9g without",
          loss_profiled, loss_plain);
    CHECK(memcmp(profiled, plain, P * sizeof(bf16)) == 0, "the parameters differ with the profile on");
    test_end();
    profile_free(&prof);
    gpt_free(&g);
    free(start);
    free(profiled);
    free(plain);
}

// d12 at T 1024: 6 * 124.0M weights + 12 L C T = 857.9 MFLOP a token; 588.6K tokens/s on one
// H200 is 51.1% of 989 TFLOP/s, and twice the tokens on two GPUs is the same utilisation.
static void test_mfu(void) {
    test_begin("mfu: model FLOPs over the peak of every GPU of the run, FP8's at twice the peak");
    GPTConfig d12 = {.maxT = 1024, .V = 50257, .Vp = 50304, .L = 12, .NH = 12, .C = 768, .arch = ARCHITECTURE_GPT2};
    double f = flops_per_token(&d12, 1024);
    double want = 6.0 * ((double)count_params(&d12) - 1024.0 * 768) + 12.0 * 12 * 768 * 1024;
    check_count("d12 FLOPs per token", f, want);
    double one = model_flops_utilisation(f, 588.6e3, 989.0f, 1), two = model_flops_utilisation(f, 2 * 588.6e3, 989.0f, 2);
    CHECK(fabs(one - f * 588.6e3 / 989e12) < 1e-12 && one > 0.45 && one < 0.56, "one GPU: MFU %.4f", one);
    CHECK(same(two, one), "two GPUs with twice the tokens: MFU %.4f, one GPU %.4f", two, one);
    CHECK(model_flops_utilisation(f, 588.6e3, 0.0f, 1) == 0.0, "an unknown peak gives a nonzero MFU");
    // FP8 (--fp8 mlp,head): the MLP's 2 x 4C x C weights a layer and the tied head's Vp x C run in
    // FP8, 6 FLOPs per weight, 2 with the gradients in bf16; they count at half in the MFU's basis.
    double fp8_weights = 12.0 * 8 * 768 * 768 + 50304.0 * 768;
    check_count("d12 FP8 FLOPs per token", fp8_flops_per_token(&d12, 1, 1, 0), 6.0 * fp8_weights);
    check_count("d12 FP8 FLOPs per token, gradients in bf16", fp8_flops_per_token(&d12, 1, 1, 1), 2.0 * fp8_weights);
    check_count("d12 FP8 FLOPs per token, the head alone", fp8_flops_per_token(&d12, 0, 1, 0), 6.0 * 50304 * 768);
    check_count("d12 MFU basis with FP8 MLP and head", mfu_flops_per_token(f, fp8_flops_per_token(&d12, 1, 1, 0)),
                f - 3.0 * fp8_weights);
    test_end();
}

int main(void) {
    test_floors();
    test_floors_modern();
    test_mfu();
    const char* gpt2 = "profile of a d2 step, GPT-2 + AdamW: every part timed, the sum within the step, the same bits";
    const char* modern = "profile of a d2 step, modern + Muon: every part timed, the sum within the step, the same bits";
    const char* parts = "profile of a d2 step, modern + Muon with the 2026 recipe's parts: every part timed, the sum "
                        "within the step, the same bits";
    GPTConfig d2_parts = D2_MODERN;
    d2_parts.arch.embedding_norm = d2_parts.arch.residual_lambdas = d2_parts.arch.value_embeddings = 1;
    d2_parts.arch.smear = d2_parts.arch.backout = 1;
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        test_skip(gpt2, "no CUDA device");
        test_skip(modern, "no CUDA device");
        test_skip(parts, "no CUDA device");
    } else {
        test_profiled_step(gpt2, &D2, OPTIMIZER_ADAMW);
        test_profiled_step(modern, &D2_MODERN, OPTIMIZER_MUON);
        test_profiled_step(parts, &d2_parts, OPTIMIZER_MUON);
    }
    return test_exit_code();
}
