// tests/test_gpt.cu: the whole GPT-2 of train_gpt.cu against the float64 numpy reference
// ($FLASHGPT_TESTDATA/gpt_reference.bin from tests/gen_gpt_reference.py: B=2, T=37, maxT=40,
// V=97, Vp=128, L=2, NH=2, C=128): logits (B, T, V) and loss, every parameter gradient and the
// grad norm, then 10 AdamW steps on the same batch; for the naive and the flash attention.
// Then a resume: N steps straight vs N/2 steps, checkpoint, resume, on shards written here.
//
// Tolerances. bf16 keeps 8 significant bits: one rounding is up to 2^-9 = 0.2% relative, and
// every activation, weight and gradient is rounded many times along the two layers; the errors
// measured on an H200 (naive / flash) are in brackets; each tolerance leaves at least 3x room:
//   logits   2e-2 relative L2 error [5.0e-3]: roundings of 0.2% in ~10 matmuls/layernorms
//   loss     2e-3 relative [6e-6, 1.4e-5]: the mean over 74 positions averages the logit
//            errors, which are mostly independent, out
//   grads    2e-2 relative L2 error per tensor [worst 6.0e-3, 5.7e-3]: the backward goes through
//            the bf16 activations, bf16 dlogits and bf16 gradient buffers
//   norm     2e-3 relative [8e-5, 1e-4]: a sum over 0.4M squares averages the errors out
//   AdamW    1e-2 relative per step's loss [worst 9.8e-4, 7.9e-4]: the update divides by
//            sqrt(v), so the small gradients that rounding perturbs most move as far as the
//            large ones; 10 steps compound it
// Resume and determinism are exact: bitwise equal losses and parameters.
#define TESTING
#include "train_gpt.cu"
#include "tests/test.h"

#define TOL_LOGITS 2e-2
#define TOL_LOSS 2e-3
#define TOL_GRAD 2e-2
#define TOL_NORM 2e-3
#define TOL_ADAMW 1e-2

typedef struct {
    int B, T, nsteps;
    GPTConfig config;
    size_t P;
    float hyper[16];
    int* inputs;      // (B, T)
    int* targets;     // (B, T)
    float* params;    // (P)
    float* logits;    // (B, T, V)
    float loss;
    float* grads;     // (P)
    float grad_norm;
    float* losses;    // (nsteps)
} Reference;

static int read_floats(FILE* f, float* out, size_t n) { return fread(out, sizeof(float), n, f) == n; }

// 0 and a filled ref, or -1 with why.
static int load_reference(const char* path, Reference* r, char* why) {
    FILE* f = fopen(path, "rb");
    if (!f) {
        set_err(why, "%s: cannot open (tests/gen_gpt_reference.py writes it)", path);
        return -1;
    }
    int32_t h[256];
    if (fread(h, sizeof(int32_t), 256, f) != 256 || h[0] != 20241129 || h[1] != 1) {
        set_err(why, "%s: bad header", path);
        fclose(f);
        return -1;
    }
    r->B = h[2];
    r->T = h[3];
    r->config = (GPTConfig){h[4], h[5], h[6], h[7], h[8], h[9]};
    r->nsteps = h[10];
    r->P = (size_t)h[11];
    if (r->P != count_params(&r->config)) {
        set_err(why, "%s: %zu parameters, the model has %zu", path, r->P, count_params(&r->config));
        fclose(f);
        return -1;
    }
    size_t N = (size_t)r->B * r->T, V = r->config.V;
    r->inputs = (int*)malloc(N * sizeof(int));
    r->targets = (int*)malloc(N * sizeof(int));
    r->params = (float*)malloc(r->P * sizeof(float));
    r->logits = (float*)malloc(N * V * sizeof(float));
    r->grads = (float*)malloc(r->P * sizeof(float));
    r->losses = (float*)malloc(r->nsteps * sizeof(float));
    int ok = read_floats(f, r->hyper, 16) && fread(r->inputs, sizeof(int), N, f) == N &&
             fread(r->targets, sizeof(int), N, f) == N && read_floats(f, r->params, r->P) &&
             read_floats(f, r->logits, N * V) && read_floats(f, &r->loss, 1) &&
             read_floats(f, r->grads, r->P) && read_floats(f, &r->grad_norm, 1) &&
             read_floats(f, r->losses, r->nsteps);
    fclose(f);
    if (!ok) set_err(why, "%s: truncated", path);
    return ok ? 0 : -1;
}

// ||a - b|| / ||b|| over n values (a in bf16 on the device side, given as floats).
static double relative_l2(const float* a, const float* b, size_t n) {
    double diff = 0.0, ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        diff += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        ref += (double)b[i] * b[i];
    }
    return ref > 0.0 ? sqrt(diff / ref) : sqrt(diff);
}

static void copy_bf16_to_floats(float* out, const bf16* dev, size_t n) {
    bf16* host = (bf16*)malloc(n * sizeof(bf16));
    cudaCheck(cudaMemcpy(host, dev, n * sizeof(bf16), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) out[i] = __bfloat162float(host[i]);
    free(host);
}

static const char* kind_name(AttentionKind k) { return k == ATTENTION_FLASH ? "flash" : "naive"; }

static void test_reference(const Reference* r, AttentionKind kind) {
    char name[128];
    const GPTConfig* c = &r->config;
    int B = r->B, T = r->T, N = B * T, V = c->V, Vp = c->Vp;
    const char* why = attention_unsupported(kind, attention_shape(c, B, T));
    if (why) {
        const char* parts[] = {"forward", "backward", "adamw"};
        for (int i = 0; i < 3; i++) {
            snprintf(name, sizeof(name), "gpt %s %s", parts[i], kind_name(kind));
            test_skip(name, why);
        }
        return;
    }
    GPT g;
    gpt_build(&g, *c, B, T, kind, 1);
    gpt_set_params(&g, r->params);

    // Forward: logits and loss.
    snprintf(name, sizeof(name), "gpt forward %s", kind_name(kind));
    test_begin(name);
    cudaCheck(cudaMemset(g.acts_memory, 0xff, memory_plan_total(&g.plan) - g.plan.params - g.plan.grads -
                         g.plan.optimizer));  // NaN everywhere: an unwritten activation shows
    gpt_forward(&g, r->inputs, B, T);
    gpt_classifier(&g, r->targets, B, T, 0.0f, 0);
    float loss = gpt_mean_loss(&g, N);
    float* logits_full = (float*)malloc((size_t)N * Vp * sizeof(float));
    float* logits = (float*)malloc((size_t)N * V * sizeof(float));
    copy_bf16_to_floats(logits_full, g.acts.logits, (size_t)N * Vp);
    for (int i = 0; i < N; i++) memcpy(logits + (size_t)i * V, logits_full + (size_t)i * Vp, V * sizeof(float));
    double err_logits = relative_l2(logits, r->logits, (size_t)N * V);
    double err_loss = fabs(loss - r->loss) / fabs(r->loss);
    printf("    %s: logits relative L2 error %.2e, loss %.6f vs %.6f (relative error %.2e)\n",
           kind_name(kind), err_logits, loss, r->loss, err_loss);
    CHECK(err_logits < TOL_LOGITS, "logits relative L2 error %.3e >= %.0e", err_logits, TOL_LOGITS);
    CHECK(err_loss < TOL_LOSS, "loss %.6f vs reference %.6f", loss, r->loss);
    test_end();
    free(logits_full);
    free(logits);

    // Backward: every tensor's gradient, the norm, and the same bits on a second run.
    snprintf(name, sizeof(name), "gpt backward %s", kind_name(kind));
    test_begin(name);
    float* grads = (float*)malloc(r->P * sizeof(float));
    bf16* first = (bf16*)malloc(r->P * sizeof(bf16));
    bf16* second = (bf16*)malloc(r->P * sizeof(bf16));
    for (int run = 0; run < 2; run++) {
        gpt_zero_grads(&g);
        gpt_forward(&g, r->inputs, B, T);
        gpt_classifier(&g, r->targets, B, T, 1.0f / N, 1);
        gpt_backward(&g, r->inputs);
        cudaCheck(cudaStreamSynchronize(g.stream));
        cudaCheck(cudaMemcpy(run ? second : first, g.grads_memory, r->P * sizeof(bf16), cudaMemcpyDeviceToHost));
    }
    CHECK(memcmp(first, second, r->P * sizeof(bf16)) == 0, "two backward runs gave different gradient bits");
    for (size_t i = 0; i < r->P; i++) grads[i] = __bfloat162float(first[i]);
    size_t off = 0;
    double worst = 0.0;
    const char* worst_name = "";
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t n = g.param_sizes[i];
        double err = relative_l2(grads + off, r->grads + off, n);
        printf("    %s: d%-9s relative L2 error %.2e\n", kind_name(kind), param_names[i], err);
        CHECK(err < TOL_GRAD, "d%s relative L2 error %.3e >= %.0e", param_names[i], err, TOL_GRAD);
        if (err > worst) { worst = err; worst_name = param_names[i]; }
        off += n;
    }
    float norm = gpt_grad_norm(&g);
    double err_norm = fabs(norm - r->grad_norm) / r->grad_norm;
    printf("    %s: worst gradient d%s %.2e; grad norm %.6f vs %.6f (relative error %.2e)\n",
           kind_name(kind), worst_name, worst, norm, r->grad_norm, err_norm);
    CHECK(err_norm < TOL_NORM, "grad norm %.6f vs reference %.6f", norm, r->grad_norm);
    test_end();
    free(grads);
    free(first);
    free(second);

    // AdamW: nsteps updates on the same batch, comparing the loss before each.
    snprintf(name, sizeof(name), "gpt adamw %s", kind_name(kind));
    test_begin(name);
    AdamWConfig adam = {r->hyper[0], r->hyper[1], r->hyper[2], r->hyper[3], r->hyper[4], r->hyper[5]};
    gpt_set_params(&g, r->params);
    double worst_step = 0.0;
    for (int t = 0; t < r->nsteps; t++) {
        gpt_zero_grads(&g);
        gpt_forward(&g, r->inputs, B, T);
        gpt_classifier(&g, r->targets, B, T, 1.0f / N, 1);
        gpt_backward(&g, r->inputs);
        float step_loss = gpt_mean_loss(&g, N);
        gpt_update(&g, &adam, adam.lr);
        double err = fabs(step_loss - r->losses[t]) / fabs(r->losses[t]);
        worst_step = err > worst_step ? err : worst_step;
        CHECK(err < TOL_ADAMW, "step %d: loss %.6f vs reference %.6f", t + 1, step_loss, r->losses[t]);
        if (t == r->nsteps - 1)
            printf("    %s: loss after %d AdamW steps %.6f vs %.6f, worst relative error %.2e\n",
                   kind_name(kind), t, step_loss, r->losses[t], worst_step);
    }
    test_end();
    gpt_free(&g);
}

// Shards of a small repetitive token stream, so the model has something to learn.
static void write_shard(const char* path, int n, int vocab, uint64_t seed) {
    char err[ERR_LEN];
    int* tokens = (int*)malloc((size_t)n * sizeof(int));
    Rng rng = {seed};
    for (int i = 0; i < n; i++) tokens[i] = (i % 7 == 0) ? (int)(rng_next(&rng) % vocab) : (i * 3 + i / 7) % vocab;
    if (shard_write(path, tokens, (size_t)n, vocab, err) != 0) die("%s", err);
    free(tokens);
}

static int files_equal(const char* a, const char* b) {
    FILE* fa = fopen(a, "rb");
    FILE* fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) same = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

// 6 steps straight (checkpoints at 3 and 6) vs resuming from the step-3 checkpoint: the same
// losses and the same final model, bit for bit. The data loader crosses epochs (5 batches each)
// with shuffling, and each step takes 2 micro-batches.
static void test_resume(void) {
    test_begin("gpt resume bit-exact");
    char dir[1024], train_path[4096], val_path[4096], pattern[4096];
    snprintf(dir, sizeof(dir), "%s/gpt_resume", test_env("FLASHGPT_TMP", "/tmp"));
    make_dirs(dir);
    snprintf(train_path, sizeof(train_path), "%s/train_000.bin", dir);
    snprintf(val_path, sizeof(val_path), "%s/val_000.bin", dir);
    snprintf(pattern, sizeof(pattern), "%s/train_*.bin", dir);
    const int B = 4, T = 32, steps = 6, vocab = 300;
    write_shard(train_path, 5 * B * T + 1, vocab, 1);
    write_shard(val_path, 2 * B * T + 1, vocab, 2);
    char out_dir[4096];
    snprintf(out_dir, sizeof(out_dir), "%s/run", dir);

    TrainOptions o;
    default_train_options(&o);
    o.model = "d2";
    o.context = 64;
    o.train_data = pattern;
    o.val_data = val_path;
    o.B = B;
    o.T = T;
    o.total_batch = 2 * B * T;
    o.steps = steps;
    o.lr = 1e-3f;
    o.warmup_steps = 2;
    o.min_lr_frac = 0.1f;
    o.val_every = 3;
    o.val_batches = 2;
    o.checkpoint_every = 3;
    o.out_dir = out_dir;
    o.seed = 42;
    float straight[6], resumed[6];
    for (int i = 0; i < steps; i++) straight[i] = resumed[i] = NAN;
    train_run(&o, straight);

    char model6[4096], state6[4096], kept_model[4096];
    checkpoint_paths(out_dir, steps, model6, state6, sizeof(model6));
    snprintf(kept_model, sizeof(kept_model), "%s/straight_model.bin", dir);
    CHECK(rename(model6, kept_model) == 0 && unlink(state6) == 0, "no step-%d checkpoint in %s", steps, out_dir);

    o.resume_dir = out_dir;
    o.out_dir = NULL;
    train_run(&o, resumed);
    for (int i = 0; i < steps; i++) {
        if (i < steps / 2) CHECK(isnan(resumed[i]), "the resumed run did step %d again", i + 1);
        else CHECK(memcmp(&straight[i], &resumed[i], sizeof(float)) == 0,
                   "step %d: loss %.9g straight, %.9g resumed", i + 1, straight[i], resumed[i]);
    }
    CHECK(straight[steps - 1] < straight[0], "the loss did not go down: %.6f -> %.6f", straight[0], straight[steps - 1]);
    CHECK(files_equal(kept_model, model6), "the final model differs between the straight and the resumed run");
    test_end();
}

// Host-side pieces: the learning-rate schedule and the sampler.
static void test_schedule_and_sampler(void) {
    test_begin("gpt lr schedule and sampler");
    TrainOptions o;
    default_train_options(&o);
    o.lr = 1.0f;
    o.warmup_steps = 10;
    o.min_lr_frac = 0.1f;
    CHECK(fabsf(learning_rate(&o, 1, 110) - 0.1f) < 1e-6f, "warmup step 1: %g", learning_rate(&o, 1, 110));
    CHECK(fabsf(learning_rate(&o, 10, 110) - 1.0f) < 1e-6f, "end of warmup: %g", learning_rate(&o, 10, 110));
    CHECK(fabsf(learning_rate(&o, 60, 110) - 0.55f) < 1e-6f, "cosine midpoint: %g", learning_rate(&o, 60, 110));
    CHECK(fabsf(learning_rate(&o, 110, 110) - 0.1f) < 1e-6f, "last step: %g", learning_rate(&o, 110, 110));
    float logits[5] = {0.0f, 3.0f, 1.0f, 2.5f, -1.0f}, probs[5];
    Rng rng = {3};
    CHECK(sample_token(logits, 5, 0.0f, 0, &rng, probs) == 1, "temperature 0 must pick the largest");
    int counts[5] = {0};
    for (int i = 0; i < 2000; i++) counts[sample_token(logits, 5, 1.0f, 2, &rng, probs)]++;
    CHECK(counts[0] + counts[2] + counts[4] == 0, "top-k 2 drew outside the two largest");
    // p(1) / p(3) = e^0.5 = 1.65
    CHECK(counts[1] > 1.3 * counts[3] && counts[1] < 2.1 * counts[3], "top-2 draws %d vs %d", counts[1], counts[3]);
    test_end();
}

int main(void) {
    test_schedule_and_sampler();
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        const char* names[] = {"gpt forward naive", "gpt backward naive", "gpt adamw naive", "gpt forward flash",
                               "gpt backward flash", "gpt adamw flash", "gpt resume bit-exact"};
        for (int i = 0; i < 7; i++) test_skip(names[i], "no CUDA device");
        return test_exit_code();
    }
    char path[4096], why[ERR_LEN];
    snprintf(path, sizeof(path), "%s/gpt_reference.bin", test_env("FLASHGPT_TESTDATA", "build/testdata"));
    Reference r;
    if (load_reference(path, &r, why) != 0) {
        test_begin("gpt reference file");
        CHECK(0, "%s", why);
        test_end();
    } else {
        test_reference(&r, ATTENTION_NAIVE);
        test_reference(&r, ATTENTION_FLASH);
    }
    test_resume();
    return test_exit_code();
}
