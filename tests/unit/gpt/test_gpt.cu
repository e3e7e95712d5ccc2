// tests/unit/gpt/test_gpt.cu: the GPT of the gpt/ library against the float64 numpy reference, in both
// architectures, the modern one whose attention sees a key window per row (documents, and the
// window pattern full,9), and each with the parts of the 2026 recipe (an embedding norm, residual
// lambdas, value embeddings, the smear, the backout, on the modern one a QK scale of 1.25)
// ($FLASHGPT_TESTDATA/gpt_reference.bin, gpt_modern_reference.bin, gpt_masked_reference.bin,
// gpt_parts_reference.bin and gpt_gpt2_parts_reference.bin from tests/reference/gen_gpt_reference.py:
// B=2, T=37, maxT=40, V=97, Vp=128, L=2 (3 with the parts), NH=2, C=128): logits (B, T, V) and
// loss, every parameter gradient (the residual lambdas', the value embeddings' and their gates',
// the smear's and the backout's too) and the grad norm, then 10 AdamW steps on the same batch
// (the modern model and the modern one with the parts also 10 Muon steps); for the naive and the flash attention, and with the
// activations recomputed in the backward (layernorm: the norms, RMSNorm's too; gelu: GPT-2's
// alone, as ReLU^2 keeps nothing else to recompute) and the classifier in chunks of rows; the
// gradients of that batch through a model built for a larger one.
// Then a resume with the train_gpt program: N steps straight vs N/2 steps, checkpoint, resume,
// on shards written here (AdamW and Muon, Muon with its variants (qkvw as q, k and v, Polar Express,
// NorMuon, cautious decay), GPT-2 and the modern recipe, the modern recipe with documents and a
// window pattern, its tokenizer made here, and with the 2026 recipe's parts, a version 9 model;
// Muon's float64 tests are tests/unit/gpt/test_muon.cu); a run from train_gpt --save-init's file
// against the run from the seed; context parallelism simulated, both architectures, the modern
// one with documents and windows and the modern one with the parts but the smear;
// resumes with FP8 matmuls (--fp8 mlp,head: delayed scaling, whose amax histories the training
// state keeps, and the gradients in bf16), the final training state compared too;
// the memory sizes (linear in T for flash, host only); naive and flash training side by side on
// tinyshakespeare (the test text, TEST_TEXT), their loss curves compared; FP8 MLP and head against
// bf16 alike, in both architectures, within a bound from FP8's precision (test_fp8_loss_curves).
//
// Tolerances. bf16 keeps 8 significant bits: one rounding is up to 2^-9 = 0.2% relative, and
// every activation, weight and gradient is rounded many times along the two layers; the errors
// measured on an H200 (naive / flash) are in brackets; each tolerance leaves at least 3x room:
//   logits   2e-2 relative L2 error [5.0e-3]: roundings of 0.2% in ~10 matmuls/layernorms
//   loss     2e-3 relative [6e-6, 1.4e-5]: the mean over 74 positions averages the logit
//            errors, which are mostly independent, out
//   grads    2e-2 relative L2 error per tensor [worst 6.0e-3, 5.7e-3]: the backward goes through
//            the bf16 activations, bf16 dlogits and bf16 gradient buffers
//   scalars  0.5 relative L2 error for the gradient of a scalar that scales a whole stream: the
//            residual and x0 lambdas, the smear's and the backout's [worst 0.33 x0, 0.16 resid,
//            0.14 backout, 0.035 smear, modern with the parts]: one sum of the batch's B T C
//            products whose terms cancel to 3e-4 (x0), 6.7e-4 (backout), 3.9e-3 (smear) of
//            their magnitudes in the reference (the norms make the loss nearly invariant to the
//            stream's scale), so each term's bf16 error of ~1% survives the sum; 0.5 still fails
//            a gradient that is zero, of the wrong sign or a factor 2 off
//   norm     2e-3 relative [8e-5, 1e-4]: a sum over 0.4M squares averages the errors out
//   steps    1e-2 relative per step's loss, AdamW's and Muon's [worst 9.8e-4, 7.9e-4]: the
//            update divides by sqrt(v), so the small gradients that rounding perturbs most move as
//            far as the large ones; 10 steps compound it. 3e-2 with the smear or the backout
//            [worst 1.8e-2]: Adam moves their scalars at 100 times the rate, steered by the
//            gradients above
// Resume and determinism are exact: bitwise equal losses and parameters.
#include <math.h>
#include <string.h>
#include <unistd.h>
#include "common/bytes.h"
#include "common/output_path.h"
#include "common/rng.h"
#include "data/shard.h"
#include "gpt/checkpoint.h"
#include "gpt/gpt.h"
#include "gpt/optimizer.h"
#include "gpt/sampler.h"
#include "gpt/schedule.h"
#include "layers/muon.h"
#include "tests/reference/reference_file.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint_folder.h"
#include "tests/lib/test.h"


#define TOL_LOGITS 2e-2
#define TOL_LOSS 2e-3
#define TOL_GRAD 2e-2
#define TOL_GRAD_SCALAR 0.5
#define TOL_NORM 2e-3
#define TOL_STEPS 1e-2
#define TOL_STEPS_SCALARS 3e-2

typedef struct {
    const char* model;   // "" (GPT-2's file) or "modern " (the test names say which)
    int B, T, nsteps, muon_steps;
    GPTConfig config;
    size_t P;
    float hyper[16];     // AdamW's lr, b1, b2, eps, weight decay, grad clip; Muon's lr, momentum,
                         // embedding lr, head lr, vector lr, b1, b2, eps, weight decay
    int* inputs;      // (B, T)
    int* targets;     // (B, T)
    float* params;    // (P)
    float* logits;    // (B, T, V)
    float loss;
    float* grads;     // (P)
    float grad_norm;
    float* losses;    // (nsteps) AdamW's
    float* muon_losses;   // (muon_steps)
} Reference;

static int read_floats(FILE* f, float* out, size_t n) { return fread(out, sizeof(float), n, f) == n; }

// 0 and a filled ref, or -1 with why.
static int load_reference(const char* path, Reference* r, char* why) {
    ReferenceHeader h;
    FILE* f = open_reference(path, 20241129, "tests/reference/gen_gpt_reference.py", &h, why);
    if (!f) return -1;
    r->B = h.B;
    r->T = h.T;
    r->config = h.config;
    r->nsteps = h.nsteps;
    r->muon_steps = h.ints[12];
    r->P = h.P;
    size_t N = (size_t)r->B * r->T, V = r->config.V;
    r->inputs = (int*)malloc(N * sizeof(int));
    r->targets = (int*)malloc(N * sizeof(int));
    r->params = (float*)malloc(r->P * sizeof(float));
    r->logits = (float*)malloc(N * V * sizeof(float));
    r->grads = (float*)malloc(r->P * sizeof(float));
    r->losses = (float*)malloc(r->nsteps * sizeof(float));
    r->muon_losses = (float*)malloc((r->muon_steps + 1) * sizeof(float));
    int ok = read_floats(f, r->hyper, 16) && fread(r->inputs, sizeof(int), N, f) == N &&
             fread(r->targets, sizeof(int), N, f) == N && read_floats(f, r->params, r->P) &&
             read_floats(f, r->logits, N * V) && read_floats(f, &r->loss, 1) &&
             read_floats(f, r->grads, r->P) && read_floats(f, &r->grad_norm, 1) &&
             read_floats(f, r->losses, r->nsteps) && read_floats(f, r->muon_losses, r->muon_steps);
    fclose(f);
    if (!ok) set_err(why, "%s: truncated", path);
    return ok ? 0 : -1;
}

// The tolerance of tensor i's gradient (above).
static double gradient_tolerance(int i) {
    return i == PARAM_RESID_LAMBDA || i == PARAM_X0_LAMBDA || i == PARAM_SMEAR_LAMBDA || i == PARAM_BACKOUT_LAMBDA
               ? TOL_GRAD_SCALAR
               : TOL_GRAD;
}

static void copy_bf16_to_floats(float* out, const bf16* dev, size_t n) {
    bf16* host = (bf16*)malloc(n * sizeof(bf16));
    cudaCheck(cudaMemcpy(host, dev, n * sizeof(bf16), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) out[i] = __bfloat162float(host[i]);
    free(host);
}

// "naive", "flash", or e.g. "flash recompute gelu,layernorm chunk 24".
static void mode_name(const ModelOptions* m, char* out, size_t len) {
    char recompute[64];
    recompute_name(m->recompute, recompute, sizeof(recompute));
    int n = snprintf(out, len, "%s", attention_kind_name(m->attention.kind));
    if (m->recompute) n += snprintf(out + n, len - n, " recompute %s", recompute);
    if (m->classifier_rows) snprintf(out + n, len - n, " chunk %d", m->classifier_rows);
}

// The parts of a reference test, by name: "gpt [modern ]forward <mode>", ...; Muon's where the
// file has Muon steps.
static const char* const REFERENCE_PARTS[4] = {"forward", "backward", "adamw", "muon"};
static int reference_parts(int muon_steps) { return muon_steps ? 4 : 3; }

// steps updates of the model g on the reference batch from its initial parameters, the loss
// before each against losses (TOL_STEPS, TOL_STEPS_SCALARS with the smear or the backout); the
// test called name.
static void check_steps(GPT* g, const Reference* r, const float* losses, int steps, const char* name,
                        const char* mode) {
    int B = r->B, T = r->T, N = B * T;
    double tolerance = r->config.arch.smear || r->config.arch.backout ? TOL_STEPS_SCALARS : TOL_STEPS;
    test_begin(name);
    gpt_set_params(g, r->params);
    double worst_step = 0.0;
    for (int t = 0; t < steps; t++) {
        gpt_zero_grads(g);
        gpt_forward(g, r->inputs, B, T);
        gpt_classifier(g, r->targets, B, T, 1.0f / N, 1);
        gpt_backward(g, r->inputs, 1);
        float step_loss = gpt_mean_loss(g);
        StepRates rates = optimizer_rates(&g->optimizer, g->optimizer.lr);
        gpt_update(g, &rates);
        double err = fabs(step_loss - losses[t]) / fabs(losses[t]);
        worst_step = err > worst_step ? err : worst_step;
        CHECK(err < tolerance, "step %d: loss %.6f vs reference %.6f", t + 1, step_loss, losses[t]);
        if (t == steps - 1)
            printf("    %s%s: loss after %d %s steps %.6f vs %.6f, worst relative error %.2e\n", r->model, mode, t,
                   optimizer_name(g->optimizer.kind), step_loss, losses[t], worst_step);
    }
    test_end();
}

static void test_reference(const Reference* r, ModelOptions opt) {
    char name[192], mode[128];
    const GPTConfig* c = &r->config;
    int B = r->B, T = r->T, N = B * T, V = c->V, Vp = c->Vp;
    const char* model = r->model;
    opt.attention.deterministic = 1;
    mode_name(&opt, mode, sizeof(mode));
    const char* why = model_attention_unsupported(c, &opt, B, T);
    if (why) {
        for (int i = 0; i < reference_parts(r->muon_steps); i++) {
            snprintf(name, sizeof(name), "gpt %s%s %s", model, REFERENCE_PARTS[i], mode);
            test_skip(name, why);
        }
        return;
    }
    GPT g;
    const float* h = r->hyper;
    OptimizerConfig adamw = {.kind = OPTIMIZER_ADAMW, .lr = h[0], .b1 = h[1], .b2 = h[2], .eps = h[3],
                             .weight_decay = h[4], .grad_clip = h[5]};
    gpt_build(&g, *c, B, T, &opt, NULL, &adamw);
    gpt_set_params(&g, r->params);

    // Forward: logits, a chunk of rows at a time, and loss.
    snprintf(name, sizeof(name), "gpt %sforward %s", model, mode);
    test_begin(name);
    cudaCheck(cudaMemset(g.acts_memory, 0xff, memory_sizes_total(&g.sizes) - g.sizes.params - g.sizes.grads -
                         g.sizes.optimizer));  // NaN everywhere: an unwritten activation shows
    gpt_forward(&g, r->inputs, B, T);
    gpt_classifier(&g, r->targets, B, T, 0.0f, 0);
    float loss = gpt_mean_loss(&g);
    // The mean on the GPU is the host's arithmetic on the losses, bit for bit: each batch's losses
    // added in double in order, its mean rounded to float, the batches' means added in double.
    float host_means[2];
    for (int k = 0; k < 2; k++) {
        int rows = k && B > 1 ? B - 1 : B, cols = T;   // then a batch of the first B - 1 rows
        gpt_forward(&g, r->inputs, rows, cols);
        gpt_classifier(&g, r->targets, rows, cols, 0.0f, 0);
        cudaCheck(cudaStreamSynchronize(g.stream));
        double sum = 0.0;
        for (int i = 0; i < rows * cols; i++) sum += g.host_losses[i];
        host_means[k] = (float)(sum / (rows * cols));
    }
    float two = gpt_mean_loss(&g), host_two = (float)(((double)host_means[0] + host_means[1]) / 2);
    CHECK(memcmp(&loss, &host_means[0], sizeof(float)) == 0 && memcmp(&two, &host_two, sizeof(float)) == 0,
          "the mean loss on the GPU %.9g, of two batches %.9g; on the host %.9g, %.9g", loss, two, host_means[0],
          host_two);
    int chunk = g.sizes.logits_rows;
    if (opt.classifier_rows) CHECK(chunk == opt.classifier_rows, "chunks of %d rows, asked for %d", chunk, opt.classifier_rows);
    float* logits_chunk = (float*)malloc((size_t)chunk * Vp * sizeof(float));
    float* logits = (float*)malloc((size_t)N * V * sizeof(float));
    for (int row = 0; row < N; row += chunk) {
        int rows = N - row < chunk ? N - row : chunk;
        copy_bf16_to_floats(logits_chunk, gpt_logits(&g, row, rows), (size_t)rows * Vp);
        for (int i = 0; i < rows; i++)
            memcpy(logits + (size_t)(row + i) * V, logits_chunk + (size_t)i * Vp, V * sizeof(float));
    }
    double err_logits = relative_l2(logits, r->logits, (size_t)N * V);
    double err_loss = fabs(loss - r->loss) / fabs(r->loss);
    printf("    %s%s: logits relative L2 error %.2e, loss %.6f vs %.6f (relative error %.2e)\n",
           model, mode, err_logits, loss, r->loss, err_loss);
    CHECK(err_logits < TOL_LOGITS, "logits relative L2 error %.3e >= %.0e", err_logits, TOL_LOGITS);
    CHECK(err_loss < TOL_LOSS, "loss %.6f vs reference %.6f", loss, r->loss);
    test_end();
    free(logits_chunk);
    free(logits);

    // Backward: every tensor's gradient, the norm, and the same bits on a second run.
    snprintf(name, sizeof(name), "gpt %sbackward %s", model, mode);
    test_begin(name);
    float* grads = (float*)malloc(r->P * sizeof(float));
    bf16* first = (bf16*)malloc(r->P * sizeof(bf16));
    bf16* second = (bf16*)malloc(r->P * sizeof(bf16));
    for (int run = 0; run < 2; run++) {
        gpt_zero_grads(&g);
        gpt_forward(&g, r->inputs, B, T);
        gpt_classifier(&g, r->targets, B, T, 1.0f / N, 1);
        gpt_backward(&g, r->inputs, 1);
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
        if (n == 0) continue;   // not in the architecture
        double err = relative_l2(grads + off, r->grads + off, n);
        printf("    %s%s: d%-9s relative L2 error %.2e\n", model, mode, param_names[i], err);
        CHECK(err < gradient_tolerance(i), "d%s relative L2 error %.3e >= %.0e", param_names[i], err,
              gradient_tolerance(i));
        if (err > worst) { worst = err; worst_name = param_names[i]; }
        off += n;
    }
    float norm = gpt_grad_norm(&g);
    double err_norm = fabs(norm - r->grad_norm) / r->grad_norm;
    printf("    %s%s: worst gradient d%s %.2e; grad norm %.6f vs %.6f (relative error %.2e)\n",
           model, mode, worst_name, worst, norm, r->grad_norm, err_norm);
    CHECK(err_norm < TOL_NORM, "grad norm %.6f vs reference %.6f", norm, r->grad_norm);
    test_end();
    free(grads);
    free(first);
    free(second);

    // The optimizers: nsteps updates on the same batch, comparing the loss before each.
    snprintf(name, sizeof(name), "gpt %sadamw %s", model, mode);
    check_steps(&g, r, r->losses, r->nsteps, name, mode);
    gpt_free(&g);
    if (!r->muon_steps) return;
    OptimizerConfig muon = {.kind = OPTIMIZER_MUON, .lr = h[6], .momentum = h[7], .embedding_lr = h[8],
                            .head_lr = h[9], .vector_lr = h[10], .b1 = h[11], .b2 = h[12], .eps = h[13],
                            .embedding_b1 = h[11], .embedding_b2 = h[12], .head_b1 = h[11], .head_b2 = h[12],
                            .weight_decay = h[14], .grad_clip = h[5]};
    gpt_build(&g, *c, B, T, &opt, NULL, &muon);
    snprintf(name, sizeof(name), "gpt %smuon %s", model, mode);
    check_steps(&g, r, r->muon_losses, r->muon_steps, name, mode);
    gpt_free(&g);
}

// The reference batch through a model built for a larger one (B + 1 rows of maxT tokens), as
// evaluation runs smaller forwards: the backward takes the shape of the forward, whose
// activations it reads, and gives the reference's gradients (TOL_GRAD). Every activation is NaN
// before the forward, so a backward over the rows the forward did not write fails. With rotary
// the rows take the positions of the forward's T, not the model's.
#define SMALLER_FORWARD_NAME "gpt %sbackward of a forward smaller than the model's batch"

static void test_backward_of_smaller_forward(const Reference* r) {
    char name[192];
    snprintf(name, sizeof(name), SMALLER_FORWARD_NAME, r->model);
    const GPTConfig* c = &r->config;
    int B = r->B, T = r->T, N = B * T;
    ModelOptions opt = {.attention = {.kind = ATTENTION_FLASH, .deterministic = 1}};
    test_begin(name);
    GPT g;
    gpt_build(&g, *c, B + 1, c->maxT, &opt, NULL, NULL);
    gpt_set_params(&g, r->params);
    cudaCheck(cudaMemset(g.acts_memory, 0xff, memory_sizes_total(&g.sizes) - g.sizes.params - g.sizes.grads -
                         g.sizes.optimizer));   // NaN
    gpt_zero_grads(&g);
    gpt_forward(&g, r->inputs, B, T);
    gpt_classifier(&g, r->targets, B, T, 1.0f / N, 1);
    gpt_backward(&g, r->inputs, 1);
    float* grads = (float*)malloc(r->P * sizeof(float));
    copy_bf16_to_floats(grads, g.grads_memory, r->P);
    size_t off = 0;
    double worst = 0.0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        double err = relative_l2(grads + off, r->grads + off, g.param_sizes[i]);
        CHECK(err < gradient_tolerance(i), "d%s relative L2 error %.3e >= %.0e", param_names[i], err,
              gradient_tolerance(i));
        worst = err > worst ? err : worst;
        off += g.param_sizes[i];
    }
    printf("    built for %d x %d, forward and backward of %d x %d: worst gradient error %.2e\n", B + 1, c->maxT, B, T,
           worst);
    test_end();
    free(grads);
    gpt_free(&g);
}

// Shards of a small repetitive token stream, so the model has something to learn; with a document
// token (>= 0; else -1), a document starts every DOCUMENT_TOKENS tokens (more than a window of a
// test run's pattern, fewer than its rows), and the token is nowhere else.
#define DOCUMENT_TOKENS 23
static void write_shard(const char* path, int n, int vocab, uint64_t seed, int document_token) {
    char err[ERR_LEN];
    int* tokens = (int*)malloc((size_t)n * sizeof(int));
    Rng rng = {seed};
    for (int i = 0; i < n; i++) {
        tokens[i] = (i % 7 == 0) ? (int)(rng_next(&rng) % vocab) : (i * 3 + i / 7) % vocab;
        if (document_token >= 0 && (i % DOCUMENT_TOKENS == 0) != (tokens[i] == document_token))
            tokens[i] = i % DOCUMENT_TOKENS == 0 ? document_token : (document_token + 1) % vocab;
    }
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

// The train loss column of a train_gpt CSV log, by step (losses[step - 1]), as written (%.9g,
// which gives a float back exactly); steps not in the log stay NAN.
static void read_log_losses(const char* path, float* losses, int steps) {
    for (int i = 0; i < steps; i++) losses[i] = NAN;
    FILE* f = fopen(path, "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof(line), f)) {
        int step;
        float loss;
        if (sscanf(line, "%d,%g,", &step, &loss) == 2 && step >= 1 && step <= steps) losses[step - 1] = loss;
    }
    fclose(f);
}

// Runs the train_gpt program (built beside the tests, in the repository root) with the
// arguments; its output goes to log_path. 0 when it exited with status 0.
static int run_train_gpt(const char* args, const char* log_path) {
    char command[16384];
    snprintf(command, sizeof(command), "./train_gpt %s > %s 2>&1", args, log_path);
    return system(command) == 0 ? 0 : -1;
}

// Runs of the train_gpt program on shards written here: a small repetitive token stream of 4
// batches per epoch for training (B 4, T 32) and 2 for validation; every run takes 6 steps of
// 2 micro-batches' tokens, with a warmup and a cosine, validation and checkpoints every 3 steps.
#define RUN_B 4
#define RUN_T 32
#define RUN_STEPS 6
typedef struct {
    char dir[1024];
    char common[8192];   // the arguments every run shares
} TrainRuns;

// A tokenizer of RUN_VOCAB ids at path, learnt from a text made here (letters drawn from a few,
// in words); returns its <|endoftext|> id.
#define RUN_VOCAB 300
static int write_run_tokenizer(const char* path) {
    size_t n = 1 << 16;
    unsigned char* text = (unsigned char*)malloc(n);
    Rng rng = {17};
    for (size_t i = 0; i < n; i++) text[i] = i % 6 == 5 ? ' ' : (unsigned char)('a' + rng_next(&rng) % 8);
    Tokenizer* tok = tokenizer_train(text, n, RUN_VOCAB, 0);
    char err[ERR_LEN];
    CHECK(tok && tokenizer_vocab_size(tok) == RUN_VOCAB, "a tokenizer of %d ids was not learnt", RUN_VOCAB);
    CHECK(tokenizer_save(tok, path, err) == 0, "%s", err);
    int eot = tokenizer_eot(tok);
    tokenizer_free(tok);
    free(text);
    return eot;
}

// document_token: the shards' documents (write_shard), -1 for none.
static void train_runs_init(TrainRuns* runs, const char* name, int document_token) {
    char train_path[4096], val_path[4096];
    snprintf(runs->dir, sizeof(runs->dir), "%s/%s", test_env("FLASHGPT_TMP", "/tmp"), name);
    // The folder is this test's own, emptied first: train_gpt refuses to start a run in a folder
    // that holds an earlier run's checkpoints.
    char clear[1200];
    snprintf(clear, sizeof(clear), "rm -rf '%s'", runs->dir);
    CHECK(system(clear) == 0, "%s", clear);
    char err[ERR_LEN];
    CHECK(make_dirs(runs->dir, err) == 0, "%s", err);
    snprintf(train_path, sizeof(train_path), "%s/train_000.bin", runs->dir);
    snprintf(val_path, sizeof(val_path), "%s/val_000.bin", runs->dir);
    write_shard(train_path, 4 * RUN_B * RUN_T + 1, RUN_VOCAB, 1, document_token);
    write_shard(val_path, 2 * RUN_B * RUN_T + 1, RUN_VOCAB, 2, document_token);
    snprintf(runs->common, sizeof(runs->common),
             "--model d2 --context 64 --train-data '%s/train_*.bin' --val-data '%s' -T %d "
             "--total-batch-size %d --steps %d --lr 1e-3 --warmup-steps 2 --min-lr-frac 0.1 --val-every 3 "
             "--val-batches 2 --checkpoint-every 3 --seed 42",
             runs->dir, val_path, RUN_T, 2 * RUN_B * RUN_T, RUN_STEPS);
}

// One run called label with the extra arguments, checkpoints in dir/out; its losses by step
// (NAN for steps it did not take). 0 when it succeeded.
static int train_runs_run(const TrainRuns* runs, const char* label, const char* out, const char* extra,
                          float losses[RUN_STEPS]) {
    char args[16384], csv[4200], log[4200];
    snprintf(csv, sizeof(csv), "%s/%s.csv", runs->dir, label);
    snprintf(log, sizeof(log), "%s/%s.out", runs->dir, label);
    remove(csv);
    snprintf(args, sizeof(args), "%s %s --log '%s' %s", runs->common, extra, csv,
             strstr(extra, "--resume") ? "" : "--out-dir");
    if (!strstr(extra, "--resume")) snprintf(args + strlen(args), sizeof(args) - strlen(args), " '%s/%s'", runs->dir, out);
    int status = run_train_gpt(args, log);
    read_log_losses(csv, losses, RUN_STEPS);
    if (status != 0) test_fail("%s: train_gpt failed (see %s)", label, log);
    return status;
}

// train_runs_init for runs of the architecture's options arch_args: with --document-mask the
// shards hold documents and every run takes a tokenizer made here, whose <|endoftext|> starts
// them.
static void train_runs_init_arch(TrainRuns* runs, const char* folder, const char* arch_args) {
    char tokenizer[4200];
    snprintf(tokenizer, sizeof(tokenizer), "%s/%s_tokenizer.bin", test_env("FLASHGPT_TMP", "/tmp"), folder);
    int documents = strstr(arch_args, "--document-mask") != NULL;
    train_runs_init(runs, folder, documents ? write_run_tokenizer(tokenizer) : -1);
    if (documents)
        snprintf(runs->common + strlen(runs->common), sizeof(runs->common) - strlen(runs->common), " --tokenizer '%s'",
                 tokenizer);
}

// Moves the step's checkpoint aside (dir/label_model.bin, dir/label_state.bin), so that a resume
// starts from the checkpoint before it.
static void keep_final_checkpoint(const TrainRuns* runs, const char* out, const char* label, char* kept_model,
                                  char* kept_state, size_t len) {
    char out_dir[4096], model[4096], state[4096];
    snprintf(out_dir, sizeof(out_dir), "%s/%s", runs->dir, out);
    checkpoint_paths(out_dir, RUN_STEPS, model, state, sizeof(model));
    snprintf(kept_model, len, "%s/%s_model.bin", runs->dir, label);
    snprintf(kept_state, len, "%s/%s_state.bin", runs->dir, label);
    CHECK(rename(model, kept_model) == 0 && rename(state, kept_state) == 0, "no step-%d checkpoint in %s", RUN_STEPS,
          out_dir);
}

// 6 steps straight vs resuming from the step-3 checkpoint: the same losses and the same final
// model, bit for bit (same_state: the same final training state too, FP8's histories in it). The
// data loader crosses epochs with shuffling. The runs go to folder. arch_args (the architecture's
// options, or any the resumed run takes from the checkpoint) go to the straight run alone: the
// resumed one takes them from the checkpoint (train_runs_init_arch: documents).
static void test_resume(const char* name, const char* folder, const char* mode_args, const char* arch_args,
                        int same_state) {
    test_begin(name);
    TrainRuns runs;
    train_runs_init_arch(&runs, folder, arch_args);
    char extra[8192], kept_model[4200], kept_state[4200], model6[4096], state6[4096], out_dir[4096];
    float straight[RUN_STEPS], resumed[RUN_STEPS];
    snprintf(extra, sizeof(extra), "-B %d %s %s", RUN_B, mode_args, arch_args);
    train_runs_run(&runs, "straight", "run", extra, straight);
    keep_final_checkpoint(&runs, "run", "straight", kept_model, kept_state, sizeof(kept_model));
    snprintf(out_dir, sizeof(out_dir), "%s/run", runs.dir);
    snprintf(extra, sizeof(extra), "-B %d %s --resume '%s'", RUN_B, mode_args, out_dir);
    train_runs_run(&runs, "resumed", "run", extra, resumed);
    for (int i = 0; i < RUN_STEPS; i++) {
        if (i < RUN_STEPS / 2) CHECK(isnan(resumed[i]), "the resumed run did step %d again", i + 1);
        else CHECK(memcmp(&straight[i], &resumed[i], sizeof(float)) == 0,
                   "step %d: loss %.9g straight, %.9g resumed", i + 1, straight[i], resumed[i]);
    }
    CHECK(straight[RUN_STEPS - 1] < straight[0], "the loss did not go down: %.6f -> %.6f", straight[0],
          straight[RUN_STEPS - 1]);
    checkpoint_paths(out_dir, RUN_STEPS, model6, state6, sizeof(model6));
    CHECK(files_equal(kept_model, model6), "the final model differs between the straight and the resumed run");
    if (same_state)
        CHECK(files_equal(kept_state, state6),
              "the final training state differs between the straight and the resumed run");
    test_end();
}

// Data parallelism through NCCL with one rank (--gpus 1: the launcher, the rendezvous, the
// communicator, the averaging and with --zero 1 the sharded update and the all-gather, all of
// world size 1; under Muon the shard by matrices and its broadcasts) gives the losses of the run
// without it, bit for bit (deterministic attention; an average over one rank is the value
// itself). optimizer: the runs' optimizer options; the runs go to folder.
static void test_data_parallel_one_rank(const char* name, const char* folder, const char* optimizer) {
    test_begin(name);
    TrainRuns runs;
    train_runs_init(&runs, folder, -1);
    float plain[RUN_STEPS], dp[RUN_STEPS], zero[RUN_STEPS], resumed[RUN_STEPS];
    char extra[4400], kept[4200], kept_state[4200];
    snprintf(extra, sizeof(extra), "-B %d --deterministic %s", RUN_B, optimizer);
    train_runs_run(&runs, "plain", "plain", extra, plain);
    snprintf(extra, sizeof(extra), "-B %d --deterministic --gpus 1 %s", RUN_B, optimizer);
    train_runs_run(&runs, "dp", "dp", extra, dp);
    snprintf(extra, sizeof(extra), "-B %d --deterministic --gpus 1 --zero 1 %s", RUN_B, optimizer);
    train_runs_run(&runs, "zero", "zero", extra, zero);
    for (int i = 0; i < RUN_STEPS; i++) {
        CHECK(memcmp(&plain[i], &dp[i], sizeof(float)) == 0, "step %d: %.9g alone, %.9g through NCCL", i + 1,
              plain[i], dp[i]);
        CHECK(memcmp(&plain[i], &zero[i], sizeof(float)) == 0, "step %d: %.9g alone, %.9g with --zero 1", i + 1,
              plain[i], zero[i]);
    }
    // The run without ranks resumed through NCCL with the sharded optimizer state (read back
    // shard by shard), from its step-3 checkpoint.
    keep_final_checkpoint(&runs, "plain", "plain", kept, kept_state, sizeof(kept));
    snprintf(extra, sizeof(extra), "-B %d --deterministic --gpus 1 --zero 1 %s --resume '%s/plain'", RUN_B, optimizer,
             runs.dir);
    train_runs_run(&runs, "plain_resumed_zero", "plain", extra, resumed);
    for (int i = RUN_STEPS / 2; i < RUN_STEPS; i++)
        CHECK(memcmp(&plain[i], &resumed[i], sizeof(float)) == 0, "step %d: %.9g straight, %.9g resumed with --zero 1",
              i + 1, plain[i], resumed[i]);
    test_end();
}

// Each step's loss of a within tol relative of b's, from step from + 1 on; the worst difference.
static double check_close_losses(const float* a, const float* b, int from, double tol, const char* what) {
    double worst = 0.0;
    for (int i = from; i < RUN_STEPS; i++) {
        double d = fabs((double)a[i] - b[i]) / fabs((double)b[i]);
        worst = isnan(d) ? INFINITY : fmax(worst, d);
        CHECK(d <= tol, "%s, step %d: %.6f against %.6f", what, i + 1, a[i], b[i]);
    }
    return worst;
}

// 1, with the case said SKIPPED, where fewer than 2 GPUs are.
static int skipped_below_two_gpus(const char* name) {
    int devices = 0;
    cudaCheck(cudaGetDeviceCount(&devices));
    if (devices >= 2) return 0;
    test_skip(name, "fewer than 2 GPUs");
    return 1;
}

// Context parallelism simulated on this GPU (the N ranks of the group in one process, the ring's
// moves copies in memory): d6 runs of 2 and 4 ranks per sequence give the losses of the run
// without it within bf16 noise, in either architecture (the modern one's rotary takes each zigzag
// chunk's global positions: a chunk rotated by its local ones would not give the run's losses) (the ring rounds each block's partial output to bf16 before its
// merge, and six layers and six AdamW steps carry that on): TOL_CP relative per step [2.4e-3
// and 1.3e-3 for 2 and 4 ranks on an H200; d2 runs, 4e-5]. Then, with 2 GPUs, the ring through
// NCCL against the same ring simulated: they differ in nothing but where the blocks run. With
// documents and windows (train_runs_init_arch), the ring's masks at the chunks' global positions
// (documents of 23 tokens and a window of 8 keys across chunks of 8 and 4) give the same losses.
#define TOL_CP 1e-2
static void test_context_parallel(const char* simulated_name, const char* nccl_name, const char* folder,
                                  const char* arch_args) {
    test_begin(simulated_name);
    TrainRuns runs;
    train_runs_init_arch(&runs, folder, arch_args);
    float plain[RUN_STEPS], cp[3][RUN_STEPS];
    char extra[512], label[32];
    snprintf(extra, sizeof(extra), "-B %d --deterministic --model d6 %s", RUN_B, arch_args);
    train_runs_run(&runs, "plain", "plain", extra, plain);
    for (int n = 2, k = 0; n <= 4; n *= 2, k++) {
        snprintf(extra, sizeof(extra), "-B %d --deterministic --model d6 %s --context-parallel %d", RUN_B, arch_args, n);
        snprintf(label, sizeof(label), "cp%d", n);
        train_runs_run(&runs, label, label, extra, cp[k]);
        printf("    %d ranks: worst relative loss difference %.2e\n", n, check_close_losses(cp[k], plain, 0, TOL_CP, label));
    }
    test_end();
    if (skipped_below_two_gpus(nccl_name)) return;
    test_begin(nccl_name);
    snprintf(extra, sizeof(extra), "-B %d --deterministic --model d6 %s --context-parallel 2 --gpus 2", RUN_B, arch_args);
    train_runs_run(&runs, "cp2_nccl", "cp2_nccl", extra, cp[2]);
    check_close_losses(cp[2], cp[0], 0, TOL_CP, "through NCCL against simulated");
    test_end();
}

// Two ranks of micro-batch B against one rank of B with 2 micro-steps: the same samples in
// every step (rank r's batch k is the loader's batch 2k + r, as the one rank's micro-steps are),
// so the same losses within bf16 noise (the two add their gradients in another order and
// rounding): TOL_DP relative per step; with and without --zero 1. Then resumes: the 2-rank
// run's step-3 checkpoint finished on 1 rank, and the 1-rank run's on 2 ranks, each against the
// run it came from.
#define TOL_DP 2e-3

static void test_data_parallel_two_ranks(const char* name, const char* folder, const char* optimizer) {
    if (skipped_below_two_gpus(name)) return;
    test_begin(name);
    TrainRuns runs;
    train_runs_init(&runs, folder, -1);
    float one[RUN_STEPS], two[RUN_STEPS], two_zero[RUN_STEPS], resumed[RUN_STEPS];
    char extra[4096], kept[4200], kept_state[4200];
    snprintf(extra, sizeof(extra), "-B %d %s", RUN_B, optimizer);
    train_runs_run(&runs, "one", "one", extra, one);
    snprintf(extra, sizeof(extra), "-B %d --gpus 2 %s", RUN_B, optimizer);
    train_runs_run(&runs, "two", "two", extra, two);
    snprintf(extra, sizeof(extra), "-B %d --gpus 2 --zero 1 %s", RUN_B, optimizer);
    train_runs_run(&runs, "two_zero", "two_zero", extra, two_zero);
    check_close_losses(two, one, 0, TOL_DP, "2 ranks against 1");
    check_close_losses(two_zero, one, 0, TOL_DP, "2 ranks with --zero 1 against 1");
    keep_final_checkpoint(&runs, "two_zero", "two_zero", kept, kept_state, sizeof(kept));
    snprintf(extra, sizeof(extra), "-B %d %s --resume '%s/two_zero'", RUN_B, optimizer, runs.dir);
    train_runs_run(&runs, "resume_2_to_1", "two_zero", extra, resumed);
    check_close_losses(resumed, two_zero, RUN_STEPS / 2, TOL_DP, "2 ranks (--zero 1) resumed on 1");
    keep_final_checkpoint(&runs, "one", "one", kept, kept_state, sizeof(kept));
    snprintf(extra, sizeof(extra), "-B %d --gpus 2 --zero 1 %s --resume '%s/one'", RUN_B, optimizer, runs.dir);
    train_runs_run(&runs, "resume_1_to_2", "one", extra, resumed);
    check_close_losses(resumed, one, RUN_STEPS / 2, TOL_DP, "1 rank resumed on 2 (--zero 1)");
    test_end();
}

// Two runs with --deterministic from the same seed: the same losses and the same final model and
// training state, bit for bit.
static void test_deterministic_runs(const char* name, const char* mode_args) {
    test_begin(name);
    TrainRuns runs;
    train_runs_init(&runs, "gpt_deterministic", -1);
    float losses[2][RUN_STEPS];
    char extra[8192], dirs[2][4096], models[2][4096], states[2][4096];
    const char* labels[2] = {"first", "second"};
    snprintf(extra, sizeof(extra), "-B %d %s", RUN_B, mode_args);
    for (int k = 0; k < 2; k++) {
        train_runs_run(&runs, labels[k], labels[k], extra, losses[k]);
        snprintf(dirs[k], sizeof(dirs[k]), "%s/%s", runs.dir, labels[k]);
        checkpoint_paths(dirs[k], RUN_STEPS, models[k], states[k], sizeof(models[k]));
    }
    for (int i = 0; i < RUN_STEPS; i++)
        CHECK(!isnan(losses[0][i]) && memcmp(&losses[0][i], &losses[1][i], sizeof(float)) == 0,
              "step %d: loss %.9g, then %.9g", i + 1, losses[0][i], losses[1][i]);
    CHECK(files_equal(models[0], models[1]), "the final models differ");
    CHECK(files_equal(states[0], states[1]), "the final training states differ");
    test_end();
}

// The steps reported a step late (validation and checkpoints every 3 steps: the others are
// reported once the next is queued) against a run that reports each step before it queues the next
// (validation after every step): the same losses and norms bit for bit, and each log and each
// stdout holds every step's line once, in order.
static void test_lagged_reports(const char* name) {
    test_begin(name);
    TrainRuns runs;
    train_runs_init(&runs, "gpt_lagged_reports", -1);
    const char* labels[2] = {"lagged", "waited"};
    float losses[2][RUN_STEPS], norms[2][RUN_STEPS];
    char extra[256];
    for (int k = 0; k < 2; k++) {
        snprintf(extra, sizeof(extra), "-B %d --deterministic%s", RUN_B, k ? " --val-every 1" : "");
        train_runs_run(&runs, labels[k], labels[k], extra, losses[k]);
        char path[4200], line[512];
        int next = 1, wrong = 0;
        snprintf(path, sizeof(path), "%s/%s.csv", runs.dir, labels[k]);
        FILE* f = fopen(path, "r");
        while (f && fgets(line, sizeof(line), f)) {
            int step;
            if (sscanf(line, "%d,", &step) != 1) continue;   // the header
            // step,loss,val_loss,lr,grad_norm,...: the norm is the fifth column.
            const char* c = line;
            for (int comma = 0; comma < 4 && c; comma++) c = strchr(c, ',') ? strchr(c, ',') + 1 : NULL;
            if (step != next || !c || step > RUN_STEPS) wrong = 1;
            else norms[k][step - 1] = strtof(c, NULL);
            next = step + 1;
        }
        if (f) fclose(f);
        CHECK(f && !wrong && next == RUN_STEPS + 1, "%s: the log's steps are not 1 to %d once each, in order", labels[k],
              RUN_STEPS);
        snprintf(path, sizeof(path), "%s/%s.out", runs.dir, labels[k]);
        f = fopen(path, "r");
        next = 1;
        wrong = 0;
        while (f && fgets(line, sizeof(line), f)) {
            int step, steps;
            if (sscanf(line, "step %d/%d |", &step, &steps) != 2) continue;
            wrong |= step != next++;
        }
        if (f) fclose(f);
        CHECK(f && !wrong && next == RUN_STEPS + 1, "%s: stdout's step lines are not 1 to %d once each, in order",
              labels[k], RUN_STEPS);
    }
    for (int i = 0; i < RUN_STEPS; i++)
        CHECK(!isnan(losses[0][i]) && memcmp(&losses[0][i], &losses[1][i], sizeof(float)) == 0 &&
              memcmp(&norms[0][i], &norms[1][i], sizeof(float)) == 0,
              "step %d: loss %.9g norm %.9g reported late, %.9g %.9g at once", i + 1, losses[0][i], norms[0][i],
              losses[1][i], norms[1][i]);
    test_end();
}

// train_gpt --save-init writes the model a run of its seed starts from: the run from that file
// (--init-from, the same seed for the data order) takes the steps of the run from the seed, bit
// for bit (deterministic attention).
static void test_saved_init(const char* name) {
    test_begin(name);
    TrainRuns runs;
    train_runs_init(&runs, "gpt_saved_init", -1);
    float seeded[RUN_STEPS], loaded[RUN_STEPS];
    char init[4200], log[4200], args[16384], extra[8400];
    snprintf(init, sizeof(init), "%s/init.bin", runs.dir);
    snprintf(log, sizeof(log), "%s/save_init.out", runs.dir);
    snprintf(args, sizeof(args), "%s -B %d --save-init '%s'", runs.common, RUN_B, init);
    CHECK(run_train_gpt(args, log) == 0, "train_gpt --save-init failed (see %s)", log);
    snprintf(extra, sizeof(extra), "-B %d --deterministic", RUN_B);
    train_runs_run(&runs, "seeded", "seeded", extra, seeded);
    snprintf(extra, sizeof(extra), "-B %d --deterministic --init-from '%s'", RUN_B, init);
    train_runs_run(&runs, "loaded", "loaded", extra, loaded);
    for (int i = 0; i < RUN_STEPS; i++)
        CHECK(!isnan(seeded[i]) && memcmp(&seeded[i], &loaded[i], sizeof(float)) == 0,
              "step %d: loss %.9g from the seed, %.9g from --save-init's file", i + 1, seeded[i], loaded[i]);
    test_end();
}

// Host-side pieces: the sampler.
static void test_sampler(void) {
    test_begin("gpt sampler");
    float logits[5] = {0.0f, 3.0f, 1.0f, 2.5f, -1.0f}, scratch[10];
    Rng rng = {3};
    CHECK(sample_token(logits, 5, 0.0f, 0, 1.0f, &rng, scratch) == 1, "temperature 0 must pick the largest");
    int counts[5] = {0};
    for (int i = 0; i < 2000; i++) counts[sample_token(logits, 5, 1.0f, 2, 1.0f, &rng, scratch)]++;
    CHECK(counts[0] + counts[2] + counts[4] == 0, "top-k 2 drew outside the two largest");
    // p(1) / p(3) = e^0.5 = 1.65
    CHECK(counts[1] > 1.3 * counts[3] && counts[1] < 2.1 * counts[3], "top-2 draws %d vs %d", counts[1], counts[3]);
    // Probabilities at temperature 1: 0.552, 0.335, 0.075, 0.028, 0.010 (tokens 1, 3, 2, 0, 4):
    // top-p 0.7 keeps tokens 1 and 3 (0.887), 0.4 keeps token 1 alone.
    int nucleus[5] = {0}, alone = 1;
    for (int i = 0; i < 2000; i++) nucleus[sample_token(logits, 5, 1.0f, 0, 0.7f, &rng, scratch)]++;
    for (int i = 0; i < 200; i++) alone &= sample_token(logits, 5, 1.0f, 0, 0.4f, &rng, scratch) == 1;
    CHECK(nucleus[0] + nucleus[2] + nucleus[4] == 0 && nucleus[1] > 0 && nucleus[3] > 0,
          "top-p 0.7 drew %d %d %d %d %d", nucleus[0], nucleus[1], nucleus[2], nucleus[3], nucleus[4]);
    CHECK(alone, "top-p 0.4 drew a token other than the most likely");
    test_end();
}

// The parameters by architecture (host only): GPT-2's d12 has llm.c's 124 475 904 (its layout
// unchanged), the modern one wte, the blocks' matrices and lm_head alone (162 201 600), every
// other tensor of size 0, lm_head last. The init: from one seed, wte is the same draw in both
// (the draws go tensor by tensor); zero_init leaves attprojw, fcprojw and lm_head zero; without
// it lm_head is drawn, its padding rows zero.
static void test_parameters_by_architecture(void) {
    test_begin("gpt parameters by architecture: sizes, order and init");
    GPTConfig gpt2 = {.maxT = 1024, .V = 50257, .Vp = padded_vocab(50257), .L = 12, .NH = 12, .C = 768,
                      .arch = ARCHITECTURE_GPT2};
    GPTConfig modern = gpt2;
    modern.arch = (Architecture)ARCHITECTURE_MODERN;
    CHECK(count_params(&gpt2) == 124475904, "GPT-2 d12: %zu parameters", count_params(&gpt2));
    CHECK(count_params(&modern) == 162201600, "modern d12: %zu parameters", count_params(&modern));
    GPTConfig lambdas = modern;
    lambdas.arch.residual_lambdas = 1;
    CHECK(count_params(&lambdas) == 162201600 + 2 * 12, "modern d12 with residual lambdas: %zu parameters",
          count_params(&lambdas));
    // Value embeddings on the 6 odd layers of 12: a (Vp, C) table and a (NH, 12) gate each.
    GPTConfig values = modern;
    values.arch.value_embeddings = 1;
    CHECK(count_params(&values) == 162201600 + 6 * ((size_t)50304 * 768 + 12 * 12),
          "modern d12 with value embeddings: %zu parameters", count_params(&values));
    values.arch.smear = 1;   // its gate's 24 weights and its lambda
    CHECK(count_params(&values) == 162201600 + 6 * ((size_t)50304 * 768 + 12 * 12) + 25,
          "modern d12 with value embeddings and the smear: %zu parameters", count_params(&values));
    values.arch.backout = 1;   // its lambda
    CHECK(count_params(&values) == 162201600 + 6 * ((size_t)50304 * 768 + 12 * 12) + 26,
          "modern d12 with value embeddings, the smear and the backout: %zu parameters", count_params(&values));
    size_t sizes[NUM_PARAM_TENSORS];
    param_sizes(&modern, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        int present = i == PARAM_WTE || param_table[i].group == GROUP_MATRIX || i == PARAM_LM_HEAD;
        CHECK((sizes[i] > 0) == present, "modern: %s has %zu elements", param_names[i], sizes[i]);
    }
    CHECK(sizes[PARAM_LM_HEAD] == sizes[PARAM_WTE], "lm_head has %zu elements", sizes[PARAM_LM_HEAD]);
    // A small model's init, both ways.
    gpt2 = (GPTConfig){.maxT = 40, .V = 97, .Vp = 128, .L = 2, .NH = 2, .C = 128, .arch = ARCHITECTURE_GPT2};
    modern = gpt2;
    modern.arch = (Architecture)ARCHITECTURE_MODERN;
    GPTConfig drawn = modern;
    drawn.arch.zero_init = 0;
    size_t P2 = count_params(&gpt2), PM = count_params(&modern);
    float* a = (float*)malloc(P2 * sizeof(float));
    float* b = (float*)malloc(PM * sizeof(float));
    float* d = (float*)malloc(PM * sizeof(float));
    init_param_values(a, &gpt2, 3, INIT_SCHEME_DEFAULT);
    init_param_values(b, &modern, 3, INIT_SCHEME_DEFAULT);
    init_param_values(d, &drawn, 3, INIT_SCHEME_DEFAULT);
    size_t wte = (size_t)gpt2.Vp * gpt2.C, real = (size_t)gpt2.V * gpt2.C;
    CHECK(memcmp(a, b, wte * sizeof(float)) == 0, "wte differs between the architectures from one seed");
    param_sizes(&modern, sizes);
    size_t off = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; off += sizes[i++]) {
        int zero = i == PARAM_ATTPROJW || i == PARAM_FCPROJW || i == PARAM_LM_HEAD;
        size_t nonzero_b = 0, nonzero_d = 0;
        for (size_t j = 0; j < sizes[i]; j++) {
            nonzero_b += b[off + j] != 0.0f;
            nonzero_d += d[off + j] != 0.0f;
        }
        if (sizes[i]) CHECK(zero ? nonzero_b == 0 : nonzero_b > sizes[i] / 2, "modern: %s has %zu values not zero",
                            param_names[i], nonzero_b);
        if (i == PARAM_LM_HEAD) {
            size_t padding = 0;
            for (size_t j = real; j < sizes[i]; j++) padding += d[off + j] != 0.0f;
            CHECK(nonzero_d > real / 2 && padding == 0, "lm_head drawn: %zu values not zero, %zu in its padding",
                  nonzero_d, padding);
        }
    }
    free(a);
    free(b);
    free(d);
    test_end();
}

// The memory sizes (host only, no device needed), d12 with GPT-2's vocabulary: flash keeps
// L (L, B, NH, T) fp32 per layer and nothing grows faster than T, so the whole model is
// a + b T (its second difference over T, 2T, 3T is zero but for the 256-byte rounding of each
// part); naive keeps P (L, B, NH, T, T) bf16. The logits stay within 1 GiB however many rows,
// and each recomputation frees exactly the layers it no longer keeps; the modern architecture's
// buffers differ from GPT-2's by exactly the ones it has not and the ones it adds, documents
// add their bounds alone, the embedding norm its input and rstd, the residual lambdas the stream
// each block takes and x0's fp32 gradient, the value embeddings their gates, the gates' gradient
// and the rows grouped by token, the smear its input, the backout its output and the middle
// block's gradient.
static void test_memory_sizes(void) {
    test_begin("gpt memory sizes");
    GPTConfig c = {.maxT = 0, .V = 50257, .Vp = padded_vocab(50257), .L = 12, .NH = 12, .C = 768,
                   .arch = ARCHITECTURE_GPT2};
    size_t L = c.L, NH = c.NH, C = c.C;
    ModelOptions flash = {.attention = {.kind = ATTENTION_FLASH}}, naive = {.attention = {.kind = ATTENTION_NAIVE}};
    double total[3];
    for (int i = 0; i < 3; i++) {
        size_t T = 32768 * (size_t)(i + 1);
        c.maxT = (int)T;
        MemorySizes m = gpt_memory_sizes(&c, 1, (int)T, &flash, NULL, NULL);
        total[i] = (double)memory_sizes_total(&m);
        CHECK(m.attention_saved == L * NH * T * sizeof(float), "flash keeps %zu bytes at T %zu", m.attention_saved, T);
        CHECK(m.logits <= CLASSIFIER_CHUNK_BYTES, "logits of %zu bytes at T %zu", m.logits, T);
        if (i == 2) printf("    flash, B 1, T %zu: %.2f GiB in all\n", T, GIB(total[i]));
    }
    double curvature = total[2] - 2.0 * total[1] + total[0];
    CHECK(fabs(curvature) < 1e6, "flash memory is not linear in T: second difference %.0f bytes", curvature);
    c.maxT = 4096;
    MemorySizes m = gpt_memory_sizes(&c, 1, 4096, &naive, NULL, NULL);
    CHECK(m.attention_saved == L * NH * 4096 * 4096 * sizeof(bf16), "naive keeps %zu bytes", m.attention_saved);
    c.maxT = 1024;
    size_t N = 64 * 1024;
    MemorySizes none = gpt_memory_sizes(&c, 64, 1024, &naive, NULL, NULL);
    ModelOptions re = naive;
    re.recompute = RECOMPUTE_GELU;
    MemorySizes gelu = gpt_memory_sizes(&c, 64, 1024, &re, NULL, NULL);
    re.recompute = RECOMPUTE_GELU | RECOMPUTE_LAYERNORM;
    MemorySizes both = gpt_memory_sizes(&c, 64, 1024, &re, NULL, NULL);
    CHECK(none.activations - gelu.activations == (L - 1) * N * 4 * C * sizeof(bf16),
          "recompute gelu frees %zu bytes", none.activations - gelu.activations);
    CHECK(gelu.activations - both.activations == (2 * L - 1) * N * C * sizeof(bf16),
          "recompute layernorm frees %zu bytes", gelu.activations - both.activations);
    printf("    naive, B 64, T 1024: %.2f GiB, recompute gelu %.2f GiB, gelu,layernorm %.2f GiB\n",
           GIB(memory_sizes_total(&none)), GIB(memory_sizes_total(&gelu)), GIB(memory_sizes_total(&both)));
    // FP8 (--fp8 mlp,head) adds each FP8 layer's two quantised copies of its weight (OC x C bytes
    // each) and its input kept transposed (N x C bytes), the head's on a classifier chunk, and one
    // scratch for the largest: the head's backward, dlogits quantised and transposed (2 bytes a
    // logit of a chunk, as many as the bf16 logits take); with the gradients in bf16 no input is
    // kept and the scratch is the forwards' (the fcproj's input quantised: N 4C bytes). The rest is
    // bf16's.
    ModelOptions fp8 = naive;
    fp8.fp8 = FP8_MLP | FP8_HEAD;
    MemorySizes with_fp8 = gpt_memory_sizes(&c, 64, 1024, &fp8, NULL, NULL);
    size_t rows = (size_t)with_fp8.logits_rows, Vp = (size_t)c.Vp, states = 3 * sizeof(Fp8Scale);
    size_t weights = L * 2 * (2 * 4 * C * C) + 2 * Vp * C, inputs = L * N * 5 * C + rows * C;
    size_t scratch = matmul_fp8_scratch_bytes((int)rows, (int)C, (int)Vp, 1);
    CHECK(scratch >= 2 * rows * Vp && scratch >= matmul_fp8_scratch_bytes((int)N, (int)C, 4 * (int)C, 1) &&
              scratch >= matmul_fp8_scratch_bytes((int)N, 4 * (int)C, (int)C, 1),
          "the head's FP8 scratch is %zu bytes, not the largest", scratch);
    CHECK(with_fp8.fp8 == weights + inputs + (2 * L + 1) * states + scratch,
          "FP8 takes %zu bytes, expected %zu", with_fp8.fp8, weights + inputs + (2 * L + 1) * states + scratch);
    CHECK(memory_sizes_total(&with_fp8) - memory_sizes_total(&none) == with_fp8.fp8, "FP8 changes the rest");
    fp8.fp8_grad_bf16 = 1;
    MemorySizes bf16_grads = gpt_memory_sizes(&c, 64, 1024, &fp8, NULL, NULL);
    size_t forward_scratch = matmul_fp8_scratch_bytes((int)N, 4 * (int)C, (int)C, 0);
    CHECK(forward_scratch >= N * 4 * C && forward_scratch < N * 4 * C + 256, "the forwards' scratch is %zu bytes",
          forward_scratch);
    CHECK(bf16_grads.fp8 == weights + (2 * L + 1) * states + forward_scratch,
          "FP8 with bf16 gradients takes %zu bytes, expected %zu", bf16_grads.fp8,
          weights + (2 * L + 1) * states + forward_scratch);
    printf("    naive, B 64, T 1024, fp8 mlp,head: %.2f GiB of it FP8's (gradients in bf16: %.2f GiB)\n",
           GIB(with_fp8.fp8), GIB(bf16_grads.fp8));
    // The modern architecture keeps no GELU input (ReLU^2 its output alone) and no layernorm
    // means; it adds QK-norm's rstd of each head's q and k, and rotary's positions.
    GPTConfig modern = c;
    modern.arch = (Architecture)ARCHITECTURE_MODERN;
    MemorySizes m_modern = gpt_memory_sizes(&modern, 64, 1024, &naive, NULL, NULL);
    size_t freed = L * N * 4 * C * sizeof(bf16) + (2 * L + 1) * N * sizeof(float);
    size_t added = L * N * 2 * NH * sizeof(float) + N * sizeof(int);
    CHECK(none.activations - m_modern.activations == freed - added, "the modern architecture's activations are %zu "
          "bytes fewer than GPT-2's, expected %zu", none.activations - m_modern.activations, freed - added);
    // Documents add their bounds, two ints a row; windows add nothing.
    GPTConfig masked = modern;
    masked.arch.window_count = 2;
    masked.arch.windows[0] = 256;
    MemorySizes m_windows = gpt_memory_sizes(&masked, 64, 1024, &naive, NULL, NULL);
    masked.arch.documents = 1;
    masked.arch.document_token = 50256;
    MemorySizes m_masked = gpt_memory_sizes(&masked, 64, 1024, &naive, NULL, NULL);
    CHECK(m_windows.activations == m_modern.activations &&
          m_masked.activations - m_modern.activations == 2 * N * sizeof(int),
          "windows add %zu bytes of activations, documents %zu", m_windows.activations - m_modern.activations,
          m_masked.activations - m_modern.activations);
    // The embedding norm keeps the embedding before it (B, T, C) and its rstd (B, T).
    GPTConfig parts = modern;
    parts.arch.embedding_norm = 1;
    MemorySizes m_normed = gpt_memory_sizes(&parts, 64, 1024, &naive, NULL, NULL);
    CHECK(m_normed.activations - m_modern.activations == N * C * sizeof(bf16) + N * sizeof(float),
          "the embedding norm adds %zu bytes of activations", m_normed.activations - m_modern.activations);
    // The residual lambdas keep the stream each block takes (L, B, T, C) besides the one it
    // leaves, and the backward x0's fp32 gradient (B, T, C).
    parts.arch.residual_lambdas = 1;
    MemorySizes m_lambdas = gpt_memory_sizes(&parts, 64, 1024, &naive, NULL, NULL);
    CHECK(m_lambdas.activations - m_normed.activations == L * N * C * sizeof(bf16) &&
          m_lambdas.backward - m_normed.backward == N * C * sizeof(float),
          "the residual lambdas add %zu bytes of activations, %zu of backward buffers",
          m_lambdas.activations - m_normed.activations, m_lambdas.backward - m_normed.backward);
    // The value embeddings keep their gates (L, B, T, NH) fp32, and the backward their gradient
    // (B, T, NH) and the batch's rows grouped by token (3 B T + 1 ints).
    parts.arch.value_embeddings = 1;
    MemorySizes m_values = gpt_memory_sizes(&parts, 64, 1024, &naive, NULL, NULL);
    CHECK(m_values.activations - m_lambdas.activations == L * N * NH * sizeof(float) &&
          m_values.backward - m_lambdas.backward ==
              N * NH * sizeof(float) + carve_round_up((3 * N + 1) * sizeof(int)),
          "the value embeddings add %zu bytes of activations, %zu of backward buffers",
          m_values.activations - m_lambdas.activations, m_values.backward - m_lambdas.backward);
    // The smear keeps the stem's output before it (B, T, C).
    parts.arch.smear = 1;
    MemorySizes m_smear = gpt_memory_sizes(&parts, 64, 1024, &naive, NULL, NULL);
    CHECK(m_smear.activations - m_values.activations == N * C * sizeof(bf16) && m_smear.backward == m_values.backward,
          "the smear adds %zu bytes of activations", m_smear.activations - m_values.activations);
    // The backout keeps the stream it leaves for the final norm, and the backward the middle
    // block's gradient until it gets there (B, T, C) each.
    parts.arch.backout = 1;
    MemorySizes m_backout = gpt_memory_sizes(&parts, 64, 1024, &naive, NULL, NULL);
    CHECK(m_backout.activations - m_smear.activations == N * C * sizeof(bf16) &&
          m_backout.backward - m_smear.backward == N * C * sizeof(bf16),
          "the backout adds %zu bytes of activations, %zu of backward buffers", m_backout.activations - m_smear.activations,
          m_backout.backward - m_smear.backward);
    // The optimizers: the same state (master, m, v), and under Muon the Newton-Schulz scratch of
    // its largest batch of matrices, fcw's (L, 4C, C); ZeRO-1 over 4 ranks cuts it to 3 layers'.
    OptimizerConfig adamw = optimizer_defaults(OPTIMIZER_ADAMW), muon = optimizer_defaults(OPTIMIZER_MUON);
    MemorySizes with_adamw = gpt_memory_sizes(&c, 64, 1024, &naive, NULL, &adamw);
    MemorySizes with_muon = gpt_memory_sizes(&c, 64, 1024, &naive, NULL, &muon);
    CHECK(with_adamw.optimizer == 3 * none.params / sizeof(bf16) * sizeof(float) && with_adamw.optimizer_scratch == 0 &&
          none.optimizer == 0, "AdamW's state %zu bytes, scratch %zu", with_adamw.optimizer, with_adamw.optimizer_scratch);
    CHECK(with_muon.optimizer == with_adamw.optimizer &&
          with_muon.optimizer_scratch == muon_scratch_bytes((int)L, 4 * (int)C, (int)C),
          "Muon's state %zu bytes, scratch %zu", with_muon.optimizer, with_muon.optimizer_scratch);
    DataParallel four = {.comm = NULL, .rank = 3, .world_size = 4, .zero_stage = 1};
    MemorySizes sharded = gpt_memory_sizes(&c, 64, 1024, &naive, &four, &muon);
    CHECK(sharded.optimizer_scratch == muon_scratch_bytes((int)L / 4, 4 * (int)C, (int)C),
          "Muon's scratch on rank 3 of 4: %zu bytes", sharded.optimizer_scratch);
    printf("    Muon's Newton-Schulz scratch at d12: %.3f GiB; of rank 3 of 4 with ZeRO-1: %.3f GiB\n",
           GIB(with_muon.optimizer_scratch), GIB(sharded.optimizer_scratch));
    test_end();
}

// Loss curves of a GPT of 2 layers (C 128, 2 heads of 64) on the bytes of tinyshakespeare (V 256),
// B 16 x T 256, CURVE_STEPS AdamW steps (lr 2e-3, 20 warmup steps, cosine to 0.1) from the same
// init (seed 7) on the same batches, runs that differ in one option.
#define CURVE_STEPS 300
#define CURVE_B 16
#define CURVE_T 256

// The test text of the loss-curve test called name, the test begun, its length in n and in ok
// whether it holds two sequences of CURVE_T (checked); NULL, the test said SKIPPED, without it.
static unsigned char* begin_curve_test(const char* name, long* n, int* ok) {
    size_t len;
    unsigned char* text = test_text(name, &len);
    if (!text) return NULL;
    test_begin(name);
    *n = (long)len;
    *ok = *n > 2 * CURVE_T;
    CHECK(*ok, "the test text has %ld bytes, fewer than two sequences", *n);
    return text;
}

// The curve of a model of arch with the options mo on text (n bytes), into curve; *logit_rms (when
// not NULL): the root mean square of the logits of the last batch after the last step.
static void loss_curve(const Architecture* arch, const ModelOptions* mo, const unsigned char* text, long n,
                       float curve[CURVE_STEPS], float* logit_rms) {
    GPTConfig c = {.maxT = CURVE_T, .V = 256, .Vp = 256, .L = 2, .NH = 2, .C = 128, .arch = *arch};
    StepSchedule schedule = {.warmup_steps = 20, .min_lr_frac = 0.1f};
    OptimizerConfig adamw = optimizer_defaults(OPTIMIZER_ADAMW);
    adamw.lr = 2e-3f;
    GPT g;
    gpt_build(&g, c, CURVE_B, CURVE_T, mo, NULL, &adamw);
    gpt_init_random(&g, 7, INIT_SCHEME_DEFAULT);
    static int tokens[CURVE_B * CURVE_T], targets[CURVE_B * CURVE_T];
    for (int step = 0; step < CURVE_STEPS; step++) {
        for (int b = 0; b < CURVE_B; b++) {
            size_t start = ((size_t)step * CURVE_B + b) * CURVE_T % (size_t)(n - CURVE_T - 1);
            for (int t = 0; t < CURVE_T; t++) {
                tokens[b * CURVE_T + t] = text[start + t];
                targets[b * CURVE_T + t] = text[start + t + 1];
            }
        }
        gpt_zero_grads(&g);
        gpt_forward(&g, tokens, CURVE_B, CURVE_T);
        gpt_classifier(&g, targets, CURVE_B, CURVE_T, 1.0f / (CURVE_B * CURVE_T), 1);
        gpt_backward(&g, tokens, 1);
        curve[step] = gpt_mean_loss(&g);
        StepRates rates = step_rates(&schedule, &adamw, step + 1, CURVE_STEPS);
        gpt_update(&g, &rates);
    }
    if (logit_rms) {
        size_t rows = (size_t)g.sizes.logits_rows, count = rows * c.Vp;
        float* logits = (float*)malloc(count * sizeof(float));
        gpt_forward(&g, tokens, CURVE_B, CURVE_T);
        copy_bf16_to_floats(logits, gpt_logits(&g, 0, (int)rows), count);
        double sum = 0.0;
        for (size_t i = 0; i < count; i++) sum += (double)logits[i] * logits[i];
        *logit_rms = (float)sqrt(sum / (double)count);
        free(logits);
    }
    gpt_free(&g);
}

// The mean of the last 50 steps of a curve.
static double last_steps_mean(const float curve[CURVE_STEPS]) {
    double mean = 0.0;
    for (int step = CURVE_STEPS - 50; step < CURVE_STEPS; step++) mean += curve[step] / 50.0;
    return mean;
}

// Naive and flash attention train a model to the same losses (5.57 -> 2.45 nats per byte); only
// the attention differs (flash with its atomics, as training has it). Both start from the same
// bits; the roundings that differ (naive rounds the scores to bf16, flash keeps them in fp32; the
// order of the dQ sums) move the runs apart by bf16 noise, which the updates carry along but do
// not amplify over this many steps; it is largest early, while the loss falls fastest, and
// differs from run to run (flash's atomics). Tolerances, 5x and 10x the largest of two runs on an
// H200 (in brackets):
//   per step      |loss_naive - loss_flash| < TOL_CURVE_STEP nats [worst 1.8e-3 at step 21,
//                 5.8e-3 at step 16]
//   last 50 steps |difference of the means| < TOL_CURVE_MEAN nats [below 1e-4, 2e-4]
// and both runs learn: the mean loss of the last 50 steps is at least 1.5 nats below the first.
#define TOL_CURVE_STEP 0.03
#define TOL_CURVE_MEAN 0.002
static void test_loss_curves(void) {
    const char* name = "gpt naive vs flash loss curves";
    long n;
    int ok;
    unsigned char* text = begin_curve_test(name, &n, &ok);
    if (!text) return;
    static float curves[2][CURVE_STEPS];
    const AttentionKind kinds[2] = {ATTENTION_NAIVE, ATTENTION_FLASH};
    const Architecture gpt2 = ARCHITECTURE_GPT2;
    for (int k = 0; ok && k < 2; k++) {
        ModelOptions mo = {.attention = {.kind = kinds[k]}};
        loss_curve(&gpt2, &mo, text, n, curves[k], NULL);
    }
    if (ok) {
        double worst = 0.0, mean[2] = {last_steps_mean(curves[0]), last_steps_mean(curves[1])};
        int worst_step = 0;
        for (int step = 0; step < CURVE_STEPS; step++) {
            double d = fabs((double)curves[0][step] - curves[1][step]);
            if (d > worst) { worst = d; worst_step = step + 1; }
        }
        printf("    loss naive %.4f -> %.4f, flash %.4f -> %.4f (means of the last 50 steps); "
               "worst step difference %.4f (step %d), mean difference %.4f\n",
               curves[0][0], mean[0], curves[1][0], mean[1], worst, worst_step, fabs(mean[0] - mean[1]));
        CHECK(worst < TOL_CURVE_STEP, "step %d: naive %.4f, flash %.4f", worst_step,
              curves[0][worst_step - 1], curves[1][worst_step - 1]);
        CHECK(fabs(mean[0] - mean[1]) < TOL_CURVE_MEAN, "last 50 steps: naive %.4f, flash %.4f", mean[0], mean[1]);
        for (int k = 0; k < 2; k++)
            CHECK(mean[k] < curves[k][0] - 1.5, "%s did not learn: %.4f -> %.4f", attention_kind_name(kinds[k]),
                  curves[k][0], mean[k]);
    }
    test_end();
    free(text);
}

// FP8 MLP and head (--fp8 mlp,head, current scaling, E5M2 gradients) against bf16, the same
// training otherwise (flash attention), in the architecture arch_name. The bound, from FP8's
// precision: E4M3 keeps 3 significant bits after the leading one, so rounding to nearest leaves
// each element a relative error within 2^-4, uniform: RMS 2^-4 / sqrt(3); a product of two such
// operands (input and weight) over C or 4C terms of mixed sign carries noise of RMS
// sigma = sqrt(2) 2^-4 / sqrt(3) = 0.051 of its output's RMS. Each of the k = 2L + 1 = 5 FP8
// products reaches the logits no larger, relative to them, than to its own output (an MLP's
// output is added to a residual stream at least as large and then normed), so the logits carry
// noise of RMS at most sqrt(k) sigma z, z the logits' RMS (measured: bf16's at the end). The
// loss, smooth in the logits, moves with zero-mean noise at second order: by its mean,
// (1/2) Var(noise) (1 - sum p^2) <= k sigma^2 z^2 / 2 = TOL_FP8_PER_LOGIT2 z^2. The last 50
// steps' means of the two runs must be that close (plus bf16's own TOL_CURVE_MEAN); the
// gradients' E5M2 noise (sigma 0.10) is zero-mean, which AdamW averages over steps like the
// batches' own. And FP8 learns: 1.5 nats below its first loss.
#define TOL_FP8_PER_LOGIT2 (5.0 * 2.0 / 3.0 * 0x1p-8 / 2.0)
static void test_fp8_loss_curves(const char* arch_name) {
    char name[128];
    snprintf(name, sizeof(name), "gpt %s fp8 mlp,head vs bf16 loss curves", arch_name);
    long n;
    int ok;
    unsigned char* text = begin_curve_test(name, &n, &ok);
    if (!text) return;
    static float curves[2][CURVE_STEPS];
    const Architecture arch = strcmp(arch_name, "modern") ? (Architecture)ARCHITECTURE_GPT2
                                                          : (Architecture)ARCHITECTURE_MODERN;
    float z = 0.0f;
    for (int k = 0; ok && k < 2; k++) {
        ModelOptions mo = {.attention = {.kind = ATTENTION_FLASH}, .fp8 = k ? FP8_MLP | FP8_HEAD : 0};
        loss_curve(&arch, &mo, text, n, curves[k], k ? NULL : &z);
    }
    if (ok) {
        double mean[2] = {last_steps_mean(curves[0]), last_steps_mean(curves[1])};
        double bound = TOL_FP8_PER_LOGIT2 * (double)z * z + TOL_CURVE_MEAN;
        printf("    loss bf16 %.4f -> %.4f, fp8 %.4f -> %.4f (means of the last 50 steps), difference %.4f; logits' "
               "RMS %.3f, bound %.4f\n", curves[0][0], mean[0], curves[1][0], mean[1], fabs(mean[0] - mean[1]), z,
               bound);
        CHECK(fabs(mean[0] - mean[1]) < bound, "last 50 steps: bf16 %.4f, fp8 %.4f, more than %.4f apart", mean[0],
              mean[1], bound);
        CHECK(mean[1] < curves[1][0] - 1.5, "fp8 did not learn: %.4f -> %.4f", curves[1][0], mean[1]);
    }
    test_end();
    free(text);
}

int main(void) {
    test_sampler();
    test_parameters_by_architecture();
    test_memory_sizes();
    // The float64 reference in every mode the trainer has: the recomputations and the
    // classifier chunks (N = 74 rows: chunks of 16 and 24 end on a partial one) must not
    // change the result beyond bf16 noise. The modern model keeps no GELU to recompute.
    const ModelOptions modes[] = {
        {.attention = {.kind = ATTENTION_NAIVE, .deterministic = 1}},
        {.attention = {.kind = ATTENTION_FLASH, .deterministic = 1}},
        {.attention = {.kind = ATTENTION_NAIVE, .deterministic = 1}, .recompute = RECOMPUTE_GELU,
         .classifier_rows = 16},
        {.attention = {.kind = ATTENTION_FLASH, .deterministic = 1}, .recompute = RECOMPUTE_GELU | RECOMPUTE_LAYERNORM,
         .classifier_rows = 24},
    };
    const ModelOptions modern_modes[] = {
        {.attention = {.kind = ATTENTION_NAIVE, .deterministic = 1}},
        {.attention = {.kind = ATTENTION_FLASH, .deterministic = 1}},
        {.attention = {.kind = ATTENTION_NAIVE, .deterministic = 1}, .classifier_rows = 16},
        {.attention = {.kind = ATTENTION_FLASH, .deterministic = 1}, .recompute = RECOMPUTE_LAYERNORM,
         .classifier_rows = 24},
    };
    const int n_modes = sizeof(modes) / sizeof(modes[0]);
    // Resume: naive, and flash (deterministic) with every memory option.
    const char* resume_flash_args = "--attention flash --deterministic --recompute gelu,layernorm --classifier-chunk 40";
    const char* resume_naive_args = "--attention naive";
    const char* resume_flash_name = "gpt resume bit-exact flash recompute gelu,layernorm chunk 40";
    const char* resume_naive_name = "gpt resume bit-exact naive";
    // Muon at a learning rate that moves a d2 in 6 steps.
    const char* muon_args = "--optimizer muon --lr 0.02";
    const char* resume_muon_args = "--optimizer muon --lr 0.02 --attention flash --deterministic";
    const char* resume_muon_name = "gpt resume bit-exact muon";
    // Muon's variants, every one: its state a version 5 file, NorMuon's moments in v.
    const char* resume_variants_args = "--optimizer muon --lr 0.02 --attention flash --deterministic --muon-qkv split "
                                       "--muon-ns polar --normuon --cautious-weight-decay --weight-decay 0.1";
    const char* resume_variants_name = "gpt resume bit-exact muon variants: q, k and v, polar express, normuon, "
                                       "cautious weight decay";
    // Head pairs and NorMuon: the shard by head pairs, NorMuon's moments in each rank's v.
    const char* variants_args = "--optimizer muon --lr 0.02 --muon-qkv head-pairs --normuon";
    // The modern recipe (its own defaults: Muon's wte at 0.05), with its memory options.
    const char* resume_modern_args =
        "--arch modern --optimizer muon --lr 0.02 --attention flash --deterministic --recompute layernorm "
        "--classifier-chunk 40";
    const char* resume_modern_name = "gpt resume bit-exact modern muon recompute layernorm chunk 40";
    // Key windows: the modern recipe with documents and long and short layers (resumed without
    // --arch: the architecture, and Muon's defaults for it, the modern ones, from the checkpoint);
    // GPT-2's with a window in the naive path (a GPT-2 with a window is a version 7 model: llm.c's
    // versions have no slot for it, and a resume that lost it would not take the straight run's
    // steps).
    const char* resume_masked_args = "--optimizer muon --lr 0.02 --attention flash --deterministic";
    const char* resume_masked_arch = "--arch modern --document-mask --window-pattern full,8";
    const char* resume_masked_name = "gpt resume bit-exact modern muon --document-mask --window-pattern full,8";
    const char* resume_window_arch = "--window 8";
    const char* resume_window_name = "gpt resume bit-exact naive --window 8 (GPT-2's architecture, version 7)";
    // The 2026 recipe's parts on the modern recipe (a version 9 model, resumed without them on the
    // command line: from the checkpoint).
    // Context parallel takes them but the smear (a chunk's first token would look back into another
    // chunk), which train_gpt refuses there.
    const char* ring_parts_arch = "--arch modern --embedding-norm 1 --qk-scale 1.25 --residual-lambdas 1 "
                                  "--value-embeddings 1 --backout 1";
    const char* parts_arch = "--arch modern --embedding-norm 1 --qk-scale 1.25 --residual-lambdas 1 "
                             "--value-embeddings 1 --backout 1 --smear 1";
    const char* resume_parts_name = "gpt resume bit-exact modern muon with the 2026 recipe's parts (version 9)";
    // FP8 (--fp8 mlp,head), every state version 6, the final states compared too: delayed scaling
    // on GPT-2's GELU MLP and tied head with every recomputation (its histories in the state);
    // the modern recipe's ReLU^2 and untied head under Muon, the FP8 settings taken from the
    // checkpoint; current scaling with the gradients in bf16 (no FP8 state).
    const char* fp8_names[3] = {"gpt resume bit-exact fp8 mlp,head delayed, recompute gelu,layernorm",
                                "gpt resume bit-exact modern muon fp8 mlp,head delayed, settings from the checkpoint",
                                "gpt resume bit-exact fp8 mlp,head, gradients in bf16"};
    const char* fp8_curve_names[2] = {"gpt gpt2 fp8 mlp,head vs bf16 loss curves",
                                      "gpt modern fp8 mlp,head vs bf16 loss curves"};
    const char* deterministic_name = "gpt --deterministic muon: two runs, the same bits";
    const char* saved_init_name = "gpt --save-init: the run from its file takes the steps of the run from the seed";
    const char* lagged_name = "gpt reports a step late: the losses and norms of a run reporting each step at once, "
                              "every step's line once, in order";
    const char* dp1_name = "gpt data parallel through NCCL, one rank, with and without --zero 1: the same losses, resumed too";
    const char* dp1_muon_name = "gpt data parallel through NCCL, one rank, muon, with and without --zero 1 (by matrices)";
    const char* dp1_variants_name = "gpt data parallel through NCCL, one rank, muon head pairs and normuon, with and "
                                    "without --zero 1 (by head pairs)";
    const char* dp2_name = "gpt data parallel, 2 ranks against 1 with 2 micro-steps, --zero 0 and 1, resume 2->1 and 1->2";
    const char* dp2_muon_name = "gpt data parallel, muon, 2 ranks against 1, --zero 0 and 1 (by matrices), resume 2->1 and 1->2";
    // The 2026 preset (its Muon by head pairs, NorMuon, weight decay, wsd; every part, the value
    // embeddings' tables and the scalars in the shards' flat ranges) at a rate that moves a d2.
    const char* preset_2026_args = "--arch 2026 --lr 0.02";
    const char* dp1_2026_name = "gpt data parallel through NCCL, one rank, --arch 2026, with and without --zero 1";
    const char* dp2_2026_name = "gpt data parallel, --arch 2026, 2 ranks against 1, --zero 0 and 1, resume 2->1 and 1->2";
    const char* cp_names[4][2] = {
        {"gpt context parallel simulated on one GPU, 2 and 4 ranks: the losses of the run without it",
         "gpt context parallel through NCCL on 2 GPUs: the losses of the simulated ring"},
        {"gpt modern context parallel simulated on one GPU, 2 and 4 ranks: the losses of the run without it",
         "gpt modern context parallel through NCCL on 2 GPUs: the losses of the simulated ring"},
        {"gpt masked modern context parallel simulated on one GPU, 2 and 4 ranks: the losses of the run without it",
         "gpt masked modern context parallel through NCCL on 2 GPUs: the losses of the simulated ring"},
        {"gpt modern with parts but the smear context parallel simulated on one GPU, 2 and 4 ranks: the losses of the "
         "run without it",
         "gpt modern with parts but the smear context parallel through NCCL on 2 GPUs: the losses of the simulated "
         "ring"}};
    int devices = 0;
    // The reference files: GPT-2's in every mode, the modern one's in those it has (with Muon),
    // the masked one's in the modern one's (AdamW alone); the 2026 recipe's parts on the modern
    // model as the modern one's, on GPT-2's as GPT-2's (AdamW alone).
    const int n_files = 5;
    const char* files[n_files] = {"gpt_reference.bin", "gpt_modern_reference.bin", "gpt_masked_reference.bin",
                                  "gpt_parts_reference.bin", "gpt_gpt2_parts_reference.bin"};
    const char* models[n_files] = {"", "modern ", "masked modern ", "modern with parts ", "gpt2 with parts "};
    const ModelOptions* file_modes[n_files] = {modes, modern_modes, modern_modes, modern_modes, modes};
    const int file_muon_steps[n_files] = {0, 1, 0, 1, 0};
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        for (int k = 0; k < n_files; k++)
            for (int i = 0; i < n_modes; i++) {
                char name[192], mode[128];
                mode_name(&file_modes[k][i], mode, sizeof(mode));
                for (int j = 0; j < reference_parts(file_muon_steps[k]); j++) {
                    snprintf(name, sizeof(name), "gpt %s%s %s", models[k], REFERENCE_PARTS[j], mode);
                    test_skip(name, "no CUDA device");
                }
            }
        for (int k = 0; k < n_files; k++) {
            char name[192];
            snprintf(name, sizeof(name), SMALLER_FORWARD_NAME, models[k]);
            test_skip(name, "no CUDA device");
        }
        const char* runs[] = {resume_naive_name, resume_flash_name, resume_muon_name, resume_variants_name,
                              resume_modern_name, resume_masked_name, resume_window_name, resume_parts_name,
                              deterministic_name, saved_init_name, lagged_name, dp1_name, dp1_muon_name, dp1_variants_name,
                              dp2_name, dp2_muon_name};
        for (const char* run : runs) test_skip(run, "no CUDA device");
        for (int k = 0; k < 4; k++)
            for (int j = 0; j < 2; j++) test_skip(cp_names[k][j], "no CUDA device");
        test_skip("gpt naive vs flash loss curves", "no CUDA device");
        for (const char* fp8 : fp8_names) test_skip(fp8, "no CUDA device");
        for (const char* fp8 : fp8_curve_names) test_skip(fp8, "no CUDA device");
        return test_exit_code();
    }
    for (int k = 0; k < n_files; k++) {
        char path[4096], why[ERR_LEN];
        snprintf(path, sizeof(path), "%s/%s", test_env("FLASHGPT_TESTDATA", "build/testdata"), files[k]);
        Reference r;
        if (load_reference(path, &r, why) != 0) {
            test_begin(files[k]);
            CHECK(0, "%s", why);
            test_end();
            continue;
        }
        r.model = models[k];
        for (int i = 0; i < n_modes; i++) test_reference(&r, file_modes[k][i]);
        test_backward_of_smaller_forward(&r);
    }
    test_resume(resume_naive_name, "gpt_resume_naive", resume_naive_args, "", 0);
    test_resume(resume_flash_name, "gpt_resume_flash", resume_flash_args, "", 0);
    test_resume(resume_muon_name, "gpt_resume_muon", resume_muon_args, "", 0);
    test_resume(resume_variants_name, "gpt_resume_variants", resume_variants_args, "", 0);
    test_resume(resume_modern_name, "gpt_resume_modern", resume_modern_args, "", 0);
    test_resume(resume_masked_name, "gpt_resume_masked", resume_masked_args, resume_masked_arch, 0);
    test_resume(resume_window_name, "gpt_resume_window", resume_naive_args, resume_window_arch, 0);
    test_resume(resume_parts_name, "gpt_resume_parts", resume_masked_args, parts_arch, 0);
    int major = 0, minor = 0;
    cudaCheck(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    cudaCheck(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
    if (major * 10 + minor >= 89) {
        test_resume(fp8_names[0], "gpt_resume_fp8",
                    "--attention flash --deterministic --recompute gelu,layernorm --fp8 mlp,head --fp8-scaling delayed",
                    "", 1);
        test_resume(fp8_names[1], "gpt_resume_fp8_modern", resume_muon_args,
                    "--arch modern --fp8 mlp,head --fp8-scaling delayed", 1);
        test_resume(fp8_names[2], "gpt_resume_fp8_bf16_grad", "--attention naive --fp8 mlp,head --fp8-grad bf16", "",
                    1);
    } else {
        for (const char* fp8 : fp8_names) test_skip(fp8, "no FP8 tensor cores (compute capability below 8.9)");
    }
    test_deterministic_runs(deterministic_name, resume_muon_args);
    test_saved_init(saved_init_name);
    test_lagged_reports(lagged_name);
    test_data_parallel_one_rank(dp1_name, "gpt_dp1", "");
    test_data_parallel_one_rank(dp1_muon_name, "gpt_dp1_muon", muon_args);
    test_data_parallel_one_rank(dp1_variants_name, "gpt_dp1_variants", variants_args);
    test_data_parallel_one_rank(dp1_2026_name, "gpt_dp1_2026", preset_2026_args);
    test_data_parallel_two_ranks(dp2_name, "gpt_dp2", "");
    test_data_parallel_two_ranks(dp2_muon_name, "gpt_dp2_muon", muon_args);
    test_data_parallel_two_ranks(dp2_2026_name, "gpt_dp2_2026", preset_2026_args);
    test_context_parallel(cp_names[0][0], cp_names[0][1], "gpt_cp", "");
    test_context_parallel(cp_names[1][0], cp_names[1][1], "gpt_cp_modern", "--arch modern");
    test_context_parallel(cp_names[2][0], cp_names[2][1], "gpt_cp_masked", resume_masked_arch);
    test_context_parallel(cp_names[3][0], cp_names[3][1], "gpt_cp_parts", ring_parts_arch);
    test_loss_curves();
    for (int k = 0; k < 2; k++) {
        if (major * 10 + minor >= 89) test_fp8_loss_curves(k ? "modern" : "gpt2");
        else test_skip(fp8_curve_names[k], "no FP8 tensor cores (compute capability below 8.9)");
    }
    return test_exit_code();
}
