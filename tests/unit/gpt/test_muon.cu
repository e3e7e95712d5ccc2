// tests/unit/gpt/test_muon.cu: Muon and its variants (layers/muon.h, gpt_update under --optimizer muon)
// against the float64 numpy reference ($FLASHGPT_TESTDATA/muon_reference.bin from
// tests/reference/gen_muon_reference.py; the tiny GPT-2 of tests/reference/gen_gpt_reference.py: L 2,
// C 128, and for the updates a model of four heads: L 1, C 256). A variant: --muon-qkv (fused,
// split, head-pairs), --muon-ns (quintic, polar), --cautious-weight-decay, --normuon and its beta,
// the weight decay.
// - newton_schulz on a batch of matrices of each shape Muon takes there, a wide one and head
//   pairs, with the quintic's and Polar Express's coefficients, its scratch poisoned (NaN) first;
//   twice, for the same bits;
// - newton_schulz with coefficients of its own on matrices of orthonormal rows (so each iteration
//   scales them by a x + b x^3 + c x^5 of the last scale x, known on the host): each iteration's
//   (a, b, c) and the norm's factor are the ones given, tall and wide;
// - one gpt_update of each variant from a run's state (momentum, Adam moments, step 3) with
//   clipped gradients and a learning-rate scale: every tensor's master weights, m and v (NorMuon's
//   moments in v); twice, for the same bits;
// - one gpt_update with the embeddings' own Adam betas (--embedding-beta1 and 2): their tensors
//   bit for bit those of an update with every group at those betas, every other Adam tensor those
//   of an update without;
// - 10 Muon steps of the model on one batch, plain and with every variant: the loss before each;
// - ZeRO-1 by matrices, its ranks simulated in this process (2 and 3, each a model that updates
//   its own parts), plain and with every variant (head pairs, NorMuon): each parameter updated by
//   exactly one rank, as the one-GPU update does it.
//
// Tolerances. bf16 keeps 8 significant bits; numbers in brackets are what emulating the GPU's
// roundings in numpy gives (each product rounded to bf16); each tolerance leaves 3x room or more:
//   newton_schulz     5e-2 relative L2 per batch [1.0e-2 to 1.3e-2, either coefficient set]: 15
//                     products, each rounded, and the polynomials' slopes at the small singular
//                     values. A kernel on the quintic's coefficients is 0.2 off Polar Express's.
//   own coefficients  2e-2 relative per entry [2.4e-3]; the norm's factor ignored, the first
//                     iteration's coefficients for all, or b and c swapped: 200% off or more
//   matrices' update  5e-2 relative L2 of the change of the master weights [1.0e-2 to 1.8e-2;
//                     cautious decay where the signs differ, or everywhere: 0.11 or more off, at
//                     the reference's weight decay of 0.5; NorMuon by the other side: 0.13 or more]
//   NorMuon moments   5e-2 relative L2 of v's change [2e-3 to 1.3e-2]
//   momentum, Adam    1e-5 relative L2: fp32 arithmetic on exact inputs [about 1e-7]
//   Adam's update     1e-4 relative L2 of the change: fp32, and the division by sqrt(v)
//   10 steps' losses  1e-2 relative, as the AdamW test's [Newton-Schulz alone: 2e-4]: the
//                     forward and backward in bf16
//   simulated ranks   momentum and Adam bit for bit (the same kernels on the same elements);
//                     the matrices' change and NorMuon's moments within 5e-2 (cuBLASLt may take
//                     another algorithm for a batch of fewer matrices)
#include <math.h>
#include <string.h>
#include <vector>
#include "gpt/gpt.h"
#include "layers/muon.h"
#include "tests/lib/device_vectors.h"
#include "tests/reference/reference_file.h"
#include "tests/lib/test.h"

#define TOL_NS 5e-2
#define TOL_COEFFICIENTS 2e-2
#define TOL_STATE 1e-5
#define TOL_ADAM 1e-4
#define TOL_STEPS 1e-2

typedef struct {
    int count, rows, cols, ns;
    std::vector<float> input, output;
} NewtonSchulzCase;

// Muon's settings of a variant, as the file holds them.
typedef struct {
    int qkv, ns, cautious, normuon;
    float weight_decay, beta2;
} Variant;

typedef struct {
    Variant variant;
    std::vector<float> master, v;
} UpdateCase;

typedef struct {
    Variant variant;
    std::vector<float> losses;
} StepsCase;

typedef struct {
    int B, T, nsteps, t0;
    GPTConfig config;      // the tiny GPT-2 of the steps
    size_t P;
    float hyper[16];
    std::vector<NewtonSchulzCase> cases;
    GPTConfig update_config;   // the model of the updates
    size_t update_P;
    std::vector<float> start, grads, m0, v0, m1;
    std::vector<UpdateCase> updates;
    std::vector<int> inputs, targets;
    std::vector<float> params;
    std::vector<StepsCase> runs;
} Reference;

static int read_floats(FILE* f, std::vector<float>& out, size_t n) {
    out.resize(n);
    return fread(out.data(), sizeof(float), n, f) == n;
}

static int read_variant(FILE* f, Variant* v) {
    int32_t ints[4];
    float floats[2];
    if (fread(ints, sizeof(int32_t), 4, f) != 4 || fread(floats, sizeof(float), 2, f) != 2) return 0;
    *v = (Variant){ints[0], ints[1], ints[2], ints[3], floats[0], floats[1]};
    return v->qkv >= 0 && v->qkv < NUM_MUON_QKV && v->ns >= 0 && v->ns < NUM_NEWTON_SCHULZ;
}

// 0 and a filled ref, or -1 with why.
static int load_reference(const char* path, Reference* r, char* why) {
    ReferenceHeader header;
    FILE* f = open_reference(path, 20261202, "tests/reference/gen_muon_reference.py", &header, why);
    if (!f) return -1;
    const int32_t* h = header.ints;
    r->B = header.B;
    r->T = header.T;
    r->config = header.config;
    r->nsteps = header.nsteps;
    r->P = header.P;
    r->t0 = h[13];
    int ok = fread(r->hyper, sizeof(float), 16, f) == 16;
    for (int i = 0; ok && i < h[12]; i++) {
        NewtonSchulzCase c;
        int32_t shape[4];
        ok = fread(shape, sizeof(int32_t), 4, f) == 4 && shape[3] >= 0 && shape[3] < NUM_NEWTON_SCHULZ;
        c.count = shape[0], c.rows = shape[1], c.cols = shape[2], c.ns = shape[3];
        size_t n = (size_t)c.count * c.rows * c.cols;
        ok = ok && read_floats(f, c.input, n) && read_floats(f, c.output, n);
        r->cases.push_back(c);
    }
    int32_t shape[6];
    ok = ok && fread(shape, sizeof(int32_t), 6, f) == 6;
    r->update_config = (GPTConfig){.maxT = shape[0], .V = shape[1], .Vp = padded_vocab(shape[1]), .L = shape[2],
                                   .NH = shape[3], .C = shape[4], .arch = r->config.arch};
    r->update_P = (size_t)shape[5];
    ok = ok && r->update_P == count_params(&r->update_config);
    size_t U = r->update_P;
    ok = ok && read_floats(f, r->start, U) && read_floats(f, r->grads, U) && read_floats(f, r->m0, U) &&
         read_floats(f, r->v0, U) && read_floats(f, r->m1, U);
    for (int i = 0; ok && i < h[14]; i++) {
        UpdateCase u;
        ok = read_variant(f, &u.variant) && read_floats(f, u.master, U) && read_floats(f, u.v, U);
        r->updates.push_back(u);
    }
    size_t N = (size_t)r->B * r->T;
    r->inputs.resize(N);
    r->targets.resize(N);
    ok = ok && fread(r->inputs.data(), sizeof(int), N, f) == N && fread(r->targets.data(), sizeof(int), N, f) == N &&
         read_floats(f, r->params, r->P);
    for (int i = 0; ok && i < h[15]; i++) {
        StepsCase s;
        ok = read_variant(f, &s.variant) && read_floats(f, s.losses, r->nsteps);
        r->runs.push_back(s);
    }
    fclose(f);
    if (!ok) set_err(why, "%s: truncated or out of range", path);
    return ok ? 0 : -1;
}

// v in words: "head-pairs polar, cautious decay 0.5, NorMuon 0.9".
static void describe_variant(const Variant* v, char* out, size_t len) {
    int n = snprintf(out, len, "%s %s, %sdecay %g", muon_qkv_name(v->qkv), newton_schulz_name(v->ns),
                     v->cautious ? "cautious " : "", v->weight_decay);
    if (v->normuon) snprintf(out + n, len - n, ", NorMuon %g", v->beta2);
}

static void test_newton_schulz(const Reference* r) {
    test_begin("muon newton-schulz against float64, quintic and polar express");
    MatmulStream legacy;   // the legacy stream, with a workspace of its own
    matmul_stream_init(&legacy, 0);
    for (const NewtonSchulzCase& c : r->cases) {
        size_t n = (size_t)c.count * c.rows * c.cols, bytes = newton_schulz_scratch_bytes(c.count, c.rows, c.cols);
        bf16* x;
        void* scratch;
        cudaCheck(cudaMalloc(&x, n * sizeof(bf16)));
        cudaCheck(cudaMalloc(&scratch, bytes));
        std::vector<float> runs[2];
        for (int run = 0; run < 2; run++) {
            cudaCheck(cudaMemset(scratch, 0xff, bytes));   // NaN: a value read before it is written shows
            to_device(x, c.input);
            const bf16* out = newton_schulz(x, c.count, c.rows, c.cols, &newton_schulz_coefficients[c.ns], scratch,
                                            &legacy);
            runs[run] = from_device(out, n);
        }
        const char* ns = newton_schulz_name(c.ns);
        CHECK(memcmp(runs[0].data(), runs[1].data(), n * sizeof(float)) == 0, "(%d, %d, %d) %s: two runs differ",
              c.count, c.rows, c.cols, ns);
        size_t each = (size_t)c.rows * c.cols;
        double worst = 0.0;
        for (int k = 0; k < c.count; k++)
            worst = fmax(worst, relative_l2(runs[0].data() + k * each, c.output.data() + k * each, each));
        printf("    (%d, %d, %d) %s: worst relative L2 error %.2e\n", c.count, c.rows, c.cols, ns, worst);
        CHECK(worst < TOL_NS, "(%d, %d, %d) %s: relative L2 error %.3e >= %.0e", c.count, c.rows, c.cols, ns, worst,
              TOL_NS);
        cudaCheck(cudaFree(x));
        cudaCheck(cudaFree(scratch));
    }
    matmul_stream_free(&legacy);
    test_end();
}

// Coefficients of the test's own, each iteration's different, and a norm's factor of 2: on a
// matrix whose s rows (or, tall, columns) are orthonormal, X = x Q at every iteration, with x
// from 1 / (2 sqrt(s)) taken to a x + b x^3 + c x^5 by each.
static const NewtonSchulzCoefficients OWN_COEFFICIENTS = {
    2.0f, {{2.0f, 8.0f, 0.0f}, {1.0f, 0.0f, 40.0f}, {0.5f, 4.0f, -2.0f}, {1.5f, -1.0f, 0.0f}, {1.0f, 2.0f, 3.0f}}};

static void test_newton_schulz_own_coefficients(void) {
    test_begin("muon newton-schulz takes each iteration's coefficients and the norm's factor");
    MatmulStream legacy;
    matmul_stream_init(&legacy, 0);
    const int shapes[2][2] = {{16, 40}, {48, 16}};   // wide, tall; s = 16
    const int count = 3;
    for (int i = 0; i < 2; i++) {
        int rows = shapes[i][0], cols = shapes[i][1], s = rows < cols ? rows : cols;
        double x = 1.0 / (OWN_COEFFICIENTS.norm_scale * sqrt((double)s));
        for (int k = 0; k < NEWTON_SCHULZ_STEPS; k++) {
            const float* abc = OWN_COEFFICIENTS.abc[k];
            x = abc[0] * x + abc[1] * x * x * x + abc[2] * x * x * x * x * x;
        }
        // Matrix j: ones at (t, (t + 3 j) mod the longer side) along the shorter side, 5 times larger.
        size_t n = (size_t)count * rows * cols;
        std::vector<float> in(n, 0.0f), want(n, 0.0f);
        for (int j = 0; j < count; j++)
            for (int t = 0; t < s; t++) {
                int l = (t + 3 * j) % (rows > cols ? rows : cols);
                size_t at = (size_t)j * rows * cols + (rows <= cols ? (size_t)t * cols + l : (size_t)l * cols + t);
                in[at] = 5.0f;
                want[at] = (float)x;
            }
        bf16* d;
        void* scratch;
        size_t bytes = newton_schulz_scratch_bytes(count, rows, cols);
        cudaCheck(cudaMalloc(&d, n * sizeof(bf16)));
        cudaCheck(cudaMalloc(&scratch, bytes));
        to_device(d, in);
        std::vector<float> got = from_device(newton_schulz(d, count, rows, cols, &OWN_COEFFICIENTS, scratch, &legacy), n);
        double worst = 0.0;
        for (size_t e = 0; e < n; e++)
            worst = fmax(worst, want[e] ? fabs(got[e] / want[e] - 1.0) : fabs(got[e] / x));
        printf("    (%d, %d, %d): each entry x = %.6f, worst relative error %.2e\n", count, rows, cols, x, worst);
        CHECK(worst < TOL_COEFFICIENTS, "(%d, %d): an entry %.3e off x = %.6f", rows, cols, worst, x);
        cudaCheck(cudaFree(d));
        cudaCheck(cudaFree(scratch));
    }
    matmul_stream_free(&legacy);
    test_end();
}

static OptimizerConfig muon_config(const Reference* r, const Variant* v) {
    const float* h = r->hyper;
    return (OptimizerConfig){.kind = OPTIMIZER_MUON, .lr = h[0], .momentum = h[1], .embedding_lr = h[2],
                             .vector_lr = h[3], .b1 = h[4], .b2 = h[5], .eps = h[6], .embedding_b1 = h[4],
                             .embedding_b2 = h[5], .head_b1 = h[4], .head_b2 = h[5], .weight_decay = v->weight_decay,
                             .grad_clip = h[7], .muon_qkv = v->qkv, .muon_ns = v->ns,
                             .cautious_weight_decay = v->cautious, .normuon = v->normuon, .normuon_beta2 = v->beta2};
}

static const ModelOptions MODEL_OPTIONS = {.attention = {.kind = ATTENTION_NAIVE}};
#define UPDATE_B 1
#define UPDATE_T 8

// g's parameters and state as the reference's update starts from: the gradients, the moments and
// the step count of a run (a one-GPU model: its arrays in parameter order).
static void set_update_start(GPT* g, const Reference* r) {
    gpt_set_params(g, r->start.data());
    to_device(g->grads_memory, r->grads);
    cudaCheck(cudaMemcpy(g->m, r->m0.data(), r->update_P * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(g->v, r->v0.data(), r->update_P * sizeof(float), cudaMemcpyHostToDevice));
    g->adam_t = r->t0;
}

// ||(a - base) - (b - base)|| / ||b - base|| over n values: a change against the reference's.
static double change_error(const float* a, const float* b, const float* base, size_t n) {
    double diff = 0.0, ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        diff += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        ref += ((double)b[i] - base[i]) * ((double)b[i] - base[i]);
    }
    return ref > 0.0 ? sqrt(diff / ref) : sqrt(diff);
}

static void test_update(const Reference* r) {
    test_begin("muon one update of each variant against float64: master weights, momentum, Adam moments, NorMuon's");
    size_t P = r->update_P;
    for (const UpdateCase& u : r->updates) {
        char what[128];
        describe_variant(&u.variant, what, sizeof(what));
        OptimizerConfig muon = muon_config(r, &u.variant);
        GPT g;
        gpt_build(&g, r->update_config, UPDATE_B, UPDATE_T, &MODEL_OPTIONS, NULL, &muon);
        std::vector<float> master[2], v[2];
        for (int run = 0; run < 2; run++) {
            set_update_start(&g, r);
            cudaCheck(cudaMemset(g.optimizer_scratch, 0xff, g.sizes.optimizer_scratch));
            StepRates rates = optimizer_rates(&g.optimizer, g.optimizer.lr * r->hyper[8]);
            gpt_update(&g, &rates);
            cudaCheck(cudaStreamSynchronize(g.stream));
            master[run] = from_device(g.master, P);
            v[run] = from_device(g.v, P);
        }
        CHECK(memcmp(master[0].data(), master[1].data(), P * sizeof(float)) == 0 &&
              memcmp(v[0].data(), v[1].data(), P * sizeof(float)) == 0, "%s: two updates gave different bits", what);
        std::vector<float> m = from_device(g.m, P);
        printf("    %s\n", what);
        size_t off = 0;
        for (int i = 0; i < NUM_PARAM_TENSORS; off += g.param_sizes[i++]) {
            size_t n = g.param_sizes[i];
            if (!n) continue;
            int matrix = param_table[i].group == GROUP_MATRIX;
            double err = change_error(master[0].data() + off, u.master.data() + off, r->start.data() + off, n);
            double err_m = relative_l2(m.data() + off, r->m1.data() + off, n);
            double err_v = matrix ? change_error(v[0].data() + off, u.v.data() + off, r->v0.data() + off, n)
                                  : relative_l2(v[0].data() + off, u.v.data() + off, n);
            double tol = matrix ? TOL_NS : TOL_ADAM, tol_v = matrix ? TOL_NS : TOL_STATE;
            printf("      %-9s change %.2e, m %.2e, v %.2e\n", param_names[i], err, err_m, err_v);
            CHECK(err < tol, "%s: %s: the change of the master weights is %.3e off (relative L2) >= %.0e", what,
                  param_names[i], err, tol);
            CHECK(err_m < TOL_STATE && err_v < tol_v, "%s: %s: m %.3e, v %.3e off", what, param_names[i], err_m, err_v);
            // Without NorMuon Muon leaves v as it was, bit for bit.
            if (matrix && !u.variant.normuon)
                CHECK(memcmp(v[0].data() + off, r->v0.data() + off, n * sizeof(float)) == 0, "%s: %s: Muon changed v",
                      what, param_names[i]);
        }
        gpt_free(&g);
    }
    test_end();
}

// One gpt_update of o from the reference's start: the master weights, m and v.
static void update_once(const Reference* r, const OptimizerConfig* o, std::vector<float> out[3]) {
    GPT g;
    gpt_build(&g, r->update_config, UPDATE_B, UPDATE_T, &MODEL_OPTIONS, NULL, o);
    set_update_start(&g, r);
    StepRates rates = optimizer_rates(&g.optimizer, g.optimizer.lr);
    gpt_update(&g, &rates);
    cudaCheck(cudaStreamSynchronize(g.stream));
    out[0] = from_device(g.master, r->update_P);
    out[1] = from_device(g.m, r->update_P);
    out[2] = from_device(g.v, r->update_P);
    gpt_free(&g);
}

static void test_group_betas(const Reference* r) {
    test_begin("muon Adam's groups at their own betas: the embeddings' as every group at them, the rest as without");
    const Variant plain = {};
    OptimizerConfig base = muon_config(r, &plain), own = base, every = base;
    own.embedding_b1 = every.embedding_b1 = every.b1 = every.head_b1 = 0.7f;
    own.embedding_b2 = every.embedding_b2 = every.b2 = every.head_b2 = 0.99f;
    std::vector<float> a[3], b[3], c[3];
    update_once(r, &own, a);
    update_once(r, &every, b);
    update_once(r, &base, c);
    size_t sizes[NUM_PARAM_TENSORS], off = 0;
    param_sizes(&r->update_config, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; off += sizes[i++]) {
        if (!sizes[i] || param_table[i].group == GROUP_MATRIX) continue;
        // The embeddings take the betas of their own; every other Adam tensor the vectors'.
        const std::vector<float>* want = param_table[i].group == GROUP_EMBEDDING ? b : c;
        for (int k = 0; k < 3; k++)
            CHECK(memcmp(a[k].data() + off, want[k].data() + off, sizes[i] * sizeof(float)) == 0,
                  "%s: array %d is not the update at %s betas", param_names[i], k,
                  want == b ? "the embeddings' own" : "the vectors'");
        if (param_table[i].group == GROUP_EMBEDDING)
            CHECK(memcmp(a[2].data() + off, c[2].data() + off, sizes[i] * sizeof(float)) != 0,
                  "%s: v is the one at the vectors' betas", param_names[i]);
    }
    test_end();
}

static void test_steps(const Reference* r) {
    test_begin("muon 10 steps on one batch against float64, plain and with every variant");
    int B = r->B, T = r->T, N = B * T;
    for (const StepsCase& run : r->runs) {
        char what[128];
        describe_variant(&run.variant, what, sizeof(what));
        OptimizerConfig muon = muon_config(r, &run.variant);
        GPT g;
        gpt_build(&g, r->config, B, T, &MODEL_OPTIONS, NULL, &muon);
        gpt_set_params(&g, r->params.data());
        double worst = 0.0;
        for (int t = 0; t < r->nsteps; t++) {
            gpt_zero_grads(&g);
            gpt_forward(&g, r->inputs.data(), B, T);
            gpt_classifier(&g, r->targets.data(), B, T, 1.0f / N, 1);
            gpt_backward(&g, r->inputs.data(), 1);
            float loss = gpt_mean_loss(&g);
            StepRates rates = optimizer_rates(&g.optimizer, g.optimizer.lr);
            gpt_update(&g, &rates);
            double err = fabs(loss - run.losses[t]) / fabs(run.losses[t]);
            worst = fmax(worst, err);
            CHECK(err < TOL_STEPS, "%s, step %d: loss %.6f vs reference %.6f", what, t + 1, loss, run.losses[t]);
        }
        printf("    %s: loss %.6f -> %.6f (reference), worst relative error %.2e\n", what, run.losses[0],
               run.losses[r->nsteps - 1], worst);
        gpt_free(&g);
    }
    test_end();
}

// ZeRO-1 by matrices with W ranks simulated for the update u: a model per rank (DataParallel
// without a communicator: its own parts alone), each given the same parameters and gradients.
static void check_simulated_ranks(const Reference* r, const UpdateCase* u) {
    char what[128];
    describe_variant(&u->variant, what, sizeof(what));
    OptimizerConfig muon = muon_config(r, &u->variant);
    size_t P = r->update_P;
    GPT one;
    gpt_build(&one, r->update_config, UPDATE_B, UPDATE_T, &MODEL_OPTIONS, NULL, &muon);
    set_update_start(&one, r);
    StepRates rates = optimizer_rates(&muon, muon.lr);
    gpt_update(&one, &rates);
    std::vector<float> one_master = from_device(one.master, P), one_m = from_device(one.m, P),
                       one_v = from_device(one.v, P);
    gpt_free(&one);
    std::vector<float> start = r->start;
    for (size_t i = 0; i < P; i++) start[i] = __bfloat162float(__float2bfloat16(start[i]));
    for (int W = 2; W <= 3; W++) {
        std::vector<int> owner(P, -1);
        double worst = 0.0, worst_v = 0.0;
        for (int rank = 0; rank < W; rank++) {
            DataParallel dp = {.comm = NULL, .rank = rank, .world_size = W, .zero_stage = 1};
            GPT g;
            gpt_build(&g, r->update_config, UPDATE_B, UPDATE_T, &MODEL_OPTIONS, &dp, &muon);
            gpt_set_params(&g, r->start.data());
            to_device(g.grads_memory, r->grads);
            // The run's state of this rank's parts, from the whole arrays.
            for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
                ZeroShardPart part = zero_shard_part(&g.shard, g.zero_tensors, i, rank);
                size_t bytes = part.count * sizeof(float);
                cudaCheck(cudaMemcpy(g.m + part.shard_offset, r->m0.data() + part.param_index, bytes, cudaMemcpyHostToDevice));
                cudaCheck(cudaMemcpy(g.v + part.shard_offset, r->v0.data() + part.param_index, bytes, cudaMemcpyHostToDevice));
            }
            g.adam_t = r->t0;
            gpt_update(&g, &rates);
            std::vector<float> params = from_device(g.params_memory, P);
            std::vector<float> master = from_device(g.master, g.shard.shard_size), m = from_device(g.m, g.shard.shard_size),
                               v = from_device(g.v, g.shard.shard_size);
            size_t tensor_begin = 0;
            for (int i = 0; i < NUM_PARAM_TENSORS; tensor_begin += g.param_sizes[i++]) {
                ZeroShardPart part = zero_shard_part(&g.shard, g.zero_tensors, i, rank);
                int matrix = param_table[i].group == GROUP_MATRIX;
                CHECK(!matrix || part.count == 0 || (part.param_index - tensor_begin) % g.zero_tensors[i].unit == 0,
                      "%s, W %d rank %d: %s's part starts inside a matrix", what, W, rank, param_names[i]);
                double diff = 0.0, ref = 0.0, diff_v = 0.0, ref_v = 0.0;
                for (size_t j = 0; j < part.count; j++) {
                    size_t p = part.param_index + j, s = part.shard_offset + j;
                    if (owner[p] >= 0)
                        test_fail("%s, W %d: parameter %zu updated by ranks %d and %d", what, W, p, owner[p], rank);
                    owner[p] = rank;
                    float want = one_master[p], got = master[s];
                    if (m[s] != one_m[p] || (!matrix && (got != want || v[s] != one_v[p]))) {
                        test_fail("%s, W %d rank %d: %s element %zu: m %g, master %g; one GPU: %g, %g", what, W, rank,
                                  param_names[i], j, m[s], got, one_m[p], want);
                        break;
                    }
                    diff += ((double)got - want) * ((double)got - want);
                    ref += ((double)want - r->start[p]) * ((double)want - r->start[p]);
                    diff_v += ((double)v[s] - one_v[p]) * ((double)v[s] - one_v[p]);
                    ref_v += ((double)one_v[p] - r->v0[p]) * ((double)one_v[p] - r->v0[p]);
                }
                if (matrix && part.count) worst = fmax(worst, sqrt(diff / ref));
                if (matrix && part.count && ref_v > 0.0) worst_v = fmax(worst_v, sqrt(diff_v / ref_v));
                if (matrix && part.count && !u->variant.normuon)
                    CHECK(diff_v == 0.0, "%s, W %d rank %d: %s's v changed without NorMuon", what, W, rank,
                          param_names[i]);
            }
            // What another rank updates stays as it was here (the all-gather brings it).
            for (size_t p = 0; p < P; p++)
                if (owner[p] != rank && params[p] != start[p]) {
                    test_fail("%s, W %d rank %d: parameter %zu changed, rank %d owns it", what, W, rank, p, owner[p]);
                    break;
                }
            gpt_free(&g);
        }
        size_t missed = 0;
        for (size_t p = 0; p < P; p++) missed += owner[p] < 0;
        CHECK(missed == 0, "%s, W %d: %zu parameters updated by no rank", what, W, missed);
        printf("    %s, %d ranks: the matrices' change within %.2e of one GPU's, NorMuon's moments %.2e (relative L2)\n",
               what, W, worst, worst_v);
        CHECK(worst < TOL_NS && worst_v < TOL_NS, "%s, W %d: the matrices' change %.3e, moments %.3e off one GPU's",
              what, W, worst, worst_v);
    }
}

static void test_simulated_ranks(const Reference* r) {
    test_begin("muon ZeRO-1 by matrices, 2 and 3 ranks simulated, plain and with every variant: each parameter "
               "updated once, as on one GPU");
    check_simulated_ranks(r, &r->updates.front());
    check_simulated_ranks(r, &r->updates.back());
    test_end();
}

int main(void) {
    const char* names[] = {
        "muon newton-schulz against float64, quintic and polar express",
        "muon newton-schulz takes each iteration's coefficients and the norm's factor",
        "muon one update of each variant against float64: master weights, momentum, Adam moments, NorMuon's",
        "muon Adam's groups at their own betas: the embeddings' as every group at them, the rest as without",
        "muon 10 steps on one batch against float64, plain and with every variant",
        "muon ZeRO-1 by matrices, 2 and 3 ranks simulated, plain and with every variant: each parameter updated once, "
        "as on one GPU"};
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        for (const char* name : names) test_skip(name, "no CUDA device");
        return test_exit_code();
    }
    char path[4096], why[ERR_LEN];
    snprintf(path, sizeof(path), "%s/muon_reference.bin", test_env("FLASHGPT_TESTDATA", "build/testdata"));
    static Reference r;
    if (load_reference(path, &r, why) != 0 || r.updates.empty() || r.runs.empty()) {
        test_begin("muon reference file");
        CHECK(0, "%s", r.updates.empty() ? "no updates in the reference file" : why);
        test_end();
        return test_exit_code();
    }
    test_newton_schulz(&r);
    test_newton_schulz_own_coefficients();
    test_update(&r);
    test_group_betas(&r);
    test_steps(&r);
    test_simulated_ranks(&r);
    return test_exit_code();
}
