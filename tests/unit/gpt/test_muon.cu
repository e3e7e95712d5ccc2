// tests/unit/gpt/test_muon.cu: Muon (layers/muon.h, gpt_update under --optimizer muon) against the float64
// numpy reference ($FLASHGPT_TESTDATA/muon_reference.bin from tests/reference/gen_muon_reference.py, on the
// tiny GPT-2 of tests/reference/gen_gpt_reference.py: L 2, C 128):
// - newton_schulz on a batch of matrices of each shape Muon takes there, and a wide one, its
//   scratch poisoned (NaN) first; twice, for the same bits;
// - one gpt_update from a run's state (momentum, Adam moments, step 3) with clipped gradients and
//   a learning-rate scale: every tensor's master weights, m and v; twice, for the same bits;
// - 10 Muon steps of the model on one batch: the loss before each;
// - ZeRO-1 by matrices, its ranks simulated in this process (2 and 3, each a model that updates
//   its own parts): each parameter updated by exactly one rank, as the one-GPU update does it.
//
// Tolerances. bf16 keeps 8 significant bits; numbers in brackets are what emulating the GPU's
// roundings in numpy gives (each product rounded to bf16); each tolerance leaves 3x room or more:
//   newton_schulz     5e-2 relative L2 per batch [1.1e-2 to 1.7e-2]: 15 products, each rounded,
//                     and the quintic's slope (a = 3.4) at the small singular values
//   matrices' update  5e-2 relative L2 of the change of the master weights: the same
//   momentum, Adam    1e-5 relative L2: fp32 arithmetic on exact inputs [about 1e-7]
//   Adam's update     1e-4 relative L2 of the change: fp32, and the division by sqrt(v)
//   10 steps' losses  1e-2 relative, as the AdamW test's [Newton-Schulz alone: 2e-4]: the
//                     forward and backward in bf16
//   simulated ranks   momentum and Adam bit for bit (the same kernels on the same elements);
//                     the matrices' change within 5e-2 (cuBLASLt may take another algorithm for
//                     a batch of fewer matrices)
#include <math.h>
#include <string.h>
#include <vector>
#include "gpt/gpt.h"
#include "layers/muon.h"
#include "tests/lib/device_vectors.h"
#include "tests/reference/reference_file.h"
#include "tests/lib/test.h"

#define TOL_NS 5e-2
#define TOL_STATE 1e-5
#define TOL_ADAM 1e-4
#define TOL_STEPS 1e-2

typedef struct {
    int count, rows, cols;
    std::vector<float> input, output;
} NewtonSchulzCase;

typedef struct {
    int B, T, nsteps, t0;
    GPTConfig config;
    size_t P;
    float hyper[16];
    std::vector<NewtonSchulzCase> cases;
    std::vector<int> inputs, targets;
    std::vector<float> params, grads, m0, v0, master1, m1, v1, losses;
} Reference;

static int read_floats(FILE* f, std::vector<float>& out, size_t n) {
    out.resize(n);
    return fread(out.data(), sizeof(float), n, f) == n;
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
        int32_t shape[3];
        ok = fread(shape, sizeof(int32_t), 3, f) == 3;
        c.count = shape[0], c.rows = shape[1], c.cols = shape[2];
        size_t n = (size_t)c.count * c.rows * c.cols;
        ok = ok && read_floats(f, c.input, n) && read_floats(f, c.output, n);
        r->cases.push_back(c);
    }
    size_t N = (size_t)r->B * r->T, P = r->P;
    r->inputs.resize(N);
    r->targets.resize(N);
    ok = ok && fread(r->inputs.data(), sizeof(int), N, f) == N && fread(r->targets.data(), sizeof(int), N, f) == N &&
         read_floats(f, r->params, P) && read_floats(f, r->grads, P) && read_floats(f, r->m0, P) &&
         read_floats(f, r->v0, P) && read_floats(f, r->master1, P) && read_floats(f, r->m1, P) &&
         read_floats(f, r->v1, P) && read_floats(f, r->losses, r->nsteps);
    fclose(f);
    if (!ok) set_err(why, "%s: truncated", path);
    return ok ? 0 : -1;
}

static void test_newton_schulz(const Reference* r) {
    test_begin("muon newton-schulz against float64");
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
            const bf16* out = newton_schulz(x, c.count, c.rows, c.cols, scratch, &legacy);
            runs[run] = from_device(out, n);
        }
        CHECK(memcmp(runs[0].data(), runs[1].data(), n * sizeof(float)) == 0, "(%d, %d, %d): two runs differ",
              c.count, c.rows, c.cols);
        size_t each = (size_t)c.rows * c.cols;
        double worst = 0.0;
        for (int k = 0; k < c.count; k++)
            worst = fmax(worst, relative_l2(runs[0].data() + k * each, c.output.data() + k * each, each));
        printf("    (%d, %d, %d): worst relative L2 error %.2e\n", c.count, c.rows, c.cols, worst);
        CHECK(worst < TOL_NS, "(%d, %d, %d): relative L2 error %.3e >= %.0e", c.count, c.rows, c.cols, worst, TOL_NS);
        cudaCheck(cudaFree(x));
        cudaCheck(cudaFree(scratch));
    }
    matmul_stream_free(&legacy);
    test_end();
}

static OptimizerConfig muon_config(const Reference* r) {
    const float* h = r->hyper;
    return (OptimizerConfig){.kind = OPTIMIZER_MUON, .lr = h[0], .momentum = h[1], .embedding_lr = h[2],
                             .vector_lr = h[3], .b1 = h[4], .b2 = h[5], .eps = h[6], .weight_decay = h[7],
                             .grad_clip = h[8]};
}

static const ModelOptions MODEL_OPTIONS = {.attention = {.kind = ATTENTION_NAIVE}};

// g's parameters and state as the reference's update starts from: the gradients, the moments and
// the step count of a run (a one-GPU model: its arrays in parameter order).
static void set_update_start(GPT* g, const Reference* r) {
    gpt_set_params(g, r->params.data());
    to_device(g->grads_memory, r->grads);
    cudaCheck(cudaMemcpy(g->m, r->m0.data(), r->P * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(g->v, r->v0.data(), r->P * sizeof(float), cudaMemcpyHostToDevice));
    g->adam_t = r->t0;
}

static void test_update(const Reference* r) {
    test_begin("muon one update against float64: master weights, momentum, Adam moments");
    OptimizerConfig muon = muon_config(r);
    GPT g;
    gpt_build(&g, r->config, r->B, r->T, &MODEL_OPTIONS, NULL, &muon);
    size_t P = r->P;
    std::vector<float> master[2];
    for (int run = 0; run < 2; run++) {
        set_update_start(&g, r);
        cudaCheck(cudaMemset(g.optimizer_scratch, 0xff, g.sizes.optimizer_scratch));
        StepRates rates = optimizer_rates(&g.optimizer, g.optimizer.lr * r->hyper[9]);
        gpt_update(&g, &rates);
        cudaCheck(cudaStreamSynchronize(g.stream));
        master[run] = from_device(g.master, P);
    }
    CHECK(memcmp(master[0].data(), master[1].data(), P * sizeof(float)) == 0, "two updates gave different bits");
    std::vector<float> m = from_device(g.m, P), v = from_device(g.v, P);
    std::vector<float> change(P), expected(P);
    for (size_t i = 0; i < P; i++) {
        change[i] = (float)((double)master[0][i] - r->params[i]);
        expected[i] = (float)((double)r->master1[i] - r->params[i]);
    }
    size_t off = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; off += g.param_sizes[i++]) {
        size_t n = g.param_sizes[i];
        int matrix = param_table[i].group == GROUP_MATRIX;
        double err = relative_l2(change.data() + off, expected.data() + off, n);
        double err_m = relative_l2(m.data() + off, r->m1.data() + off, n);
        double err_v = matrix ? 0.0 : relative_l2(v.data() + off, r->v1.data() + off, n);
        double tol = matrix ? TOL_NS : TOL_ADAM;
        printf("    %-9s change %.2e, m %.2e, v %.2e\n", param_names[i], err, err_m, err_v);
        CHECK(err < tol, "%s: the change of the master weights is %.3e off (relative L2) >= %.0e", param_names[i], err,
              tol);
        CHECK(err_m < TOL_STATE && err_v < TOL_STATE, "%s: m %.3e, v %.3e off >= %.0e", param_names[i], err_m, err_v,
              TOL_STATE);
        if (matrix)
            for (size_t j = 0; j < n; j++)
                if (v[off + j] != r->v0[off + j]) {
                    test_fail("%s: Muon changed Adam's v", param_names[i]);
                    break;
                }
    }
    gpt_free(&g);
    test_end();
}

static void test_steps(const Reference* r) {
    test_begin("muon 10 steps on one batch against float64");
    OptimizerConfig muon = muon_config(r);
    GPT g;
    int B = r->B, T = r->T, N = B * T;
    gpt_build(&g, r->config, B, T, &MODEL_OPTIONS, NULL, &muon);
    gpt_set_params(&g, r->params.data());
    double worst = 0.0;
    for (int t = 0; t < r->nsteps; t++) {
        gpt_zero_grads(&g);
        gpt_forward(&g, r->inputs.data(), B, T);
        gpt_classifier(&g, r->targets.data(), B, T, 1.0f / N, 1);
        gpt_backward(&g, r->inputs.data(), 1);
        float loss = gpt_mean_loss(&g, N);
        StepRates rates = optimizer_rates(&g.optimizer, g.optimizer.lr);
        gpt_update(&g, &rates);
        double err = fabs(loss - r->losses[t]) / fabs(r->losses[t]);
        worst = fmax(worst, err);
        CHECK(err < TOL_STEPS, "step %d: loss %.6f vs reference %.6f", t + 1, loss, r->losses[t]);
    }
    printf("    loss %.6f -> %.6f (reference %.6f), worst relative error %.2e\n", r->losses[0],
           r->losses[r->nsteps - 1], r->losses[r->nsteps - 1], worst);
    gpt_free(&g);
    test_end();
}

// ZeRO-1 by matrices with W ranks simulated: a model per rank (DataParallel without a
// communicator: its own parts alone), each given the same parameters and gradients.
static void test_simulated_ranks(const Reference* r) {
    test_begin("muon ZeRO-1 by matrices, 2 and 3 ranks simulated: each parameter updated once, as on one GPU");
    OptimizerConfig muon = muon_config(r);
    size_t P = r->P;
    GPT one;
    gpt_build(&one, r->config, r->B, r->T, &MODEL_OPTIONS, NULL, &muon);
    set_update_start(&one, r);
    StepRates rates = optimizer_rates(&muon, muon.lr);
    gpt_update(&one, &rates);
    std::vector<float> one_master = from_device(one.master, P), one_m = from_device(one.m, P);
    gpt_free(&one);
    std::vector<float> start = r->params;
    for (size_t i = 0; i < P; i++) start[i] = __bfloat162float(__float2bfloat16(start[i]));
    for (int W = 2; W <= 3; W++) {
        std::vector<int> owner(P, -1);
        double worst = 0.0;
        for (int rank = 0; rank < W; rank++) {
            DataParallel dp = {.comm = NULL, .rank = rank, .world_size = W, .zero_stage = 1};
            GPT g;
            gpt_build(&g, r->config, r->B, r->T, &MODEL_OPTIONS, &dp, &muon);
            gpt_set_params(&g, r->params.data());
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
            std::vector<float> master = from_device(g.master, g.shard.shard_size), m = from_device(g.m, g.shard.shard_size);
            size_t tensor_begin = 0;
            for (int i = 0; i < NUM_PARAM_TENSORS; tensor_begin += g.param_sizes[i++]) {
                ZeroShardPart part = zero_shard_part(&g.shard, g.zero_tensors, i, rank);
                int matrix = param_table[i].group == GROUP_MATRIX;
                CHECK(!matrix || part.count == 0 || (part.param_index - tensor_begin) % g.zero_tensors[i].unit == 0,
                      "W %d rank %d: %s's part starts inside a matrix", W, rank, param_names[i]);
                double diff = 0.0, ref = 0.0;
                for (size_t j = 0; j < part.count; j++) {
                    size_t p = part.param_index + j, s = part.shard_offset + j;
                    if (owner[p] >= 0) test_fail("W %d: parameter %zu updated by ranks %d and %d", W, p, owner[p], rank);
                    owner[p] = rank;
                    float want = one_master[p], got = master[s];
                    if (m[s] != one_m[p] || (!matrix && got != want)) {
                        test_fail("W %d rank %d: %s element %zu: m %g, master %g; one GPU: %g, %g", W, rank,
                                  param_names[i], j, m[s], got, one_m[p], want);
                        break;
                    }
                    diff += ((double)got - want) * ((double)got - want);
                    ref += ((double)want - r->params[p]) * ((double)want - r->params[p]);
                }
                if (matrix && part.count) worst = fmax(worst, sqrt(diff / ref));
            }
            // What another rank updates stays as it was here (the all-gather brings it).
            for (size_t p = 0; p < P; p++)
                if (owner[p] != rank && params[p] != start[p]) {
                    test_fail("W %d rank %d: parameter %zu changed, rank %d owns it", W, rank, p, owner[p]);
                    break;
                }
            gpt_free(&g);
        }
        size_t missed = 0;
        for (size_t p = 0; p < P; p++) missed += owner[p] < 0;
        CHECK(missed == 0, "W %d: %zu parameters updated by no rank", W, missed);
        printf("    %d ranks: the matrices' change within %.2e of one GPU's (relative L2)\n", W, worst);
        CHECK(worst < TOL_NS, "W %d: the matrices' change %.3e off one GPU's", W, worst);
    }
    test_end();
}

int main(void) {
    const char* names[] = {"muon newton-schulz against float64",
                           "muon one update against float64: master weights, momentum, Adam moments",
                           "muon 10 steps on one batch against float64",
                           "muon ZeRO-1 by matrices, 2 and 3 ranks simulated: each parameter updated once, as on one GPU"};
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        for (const char* name : names) test_skip(name, "no CUDA device");
        return test_exit_code();
    }
    char path[4096], why[ERR_LEN];
    snprintf(path, sizeof(path), "%s/muon_reference.bin", test_env("FLASHGPT_TESTDATA", "build/testdata"));
    static Reference r;
    if (load_reference(path, &r, why) != 0) {
        test_begin("muon reference file");
        CHECK(0, "%s", why);
        test_end();
        return test_exit_code();
    }
    test_newton_schulz(&r);
    test_update(&r);
    test_steps(&r);
    test_simulated_ranks(&r);
    return test_exit_code();
}
