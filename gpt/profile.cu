// gpt/profile.cu: the step profile (gpt/profile.h): the events, each part's work and floor,
// and the table.
#include "gpt/profile.h"

#include <stdlib.h>
#include <string.h>

const char* const profile_part_names[NUM_PROFILE_PARTS] = {
    "embedding", "layernorm", "qkv matmul", "attention", "attention proj",
    "MLP up (fc+GELU)", "MLP down (fcproj)", "classifier", "update (norm+AdamW)"};

void profile_init(Profile* p) { memset(p, 0, sizeof(*p)); }

void profile_free(Profile* p) {
    for (int i = 0; i < p->capacity; i++) cudaCheck(cudaEventDestroy(p->marks[i].event));
    free(p->marks);
    memset(p, 0, sizeof(*p));
}

void profile_reserve(Profile* p, int marks) {
    if (marks <= p->capacity) return;
    ProfileMark* grown = (ProfileMark*)realloc(p->marks, (size_t)marks * sizeof(ProfileMark));
    if (!grown) die("out of host memory for %d profile events", marks);
    for (int i = p->capacity; i < marks; i++) cudaCheck(cudaEventCreate(&grown[i].event));
    p->marks = grown;
    p->capacity = marks;
}

void profile_record(Profile* p, int part, int phase, cudaStream_t stream) {
    if (p->count == p->pass_end)
        die("profile: a mark (%s) past the count its pass gave profile_start",
            part < 0 ? "start" : profile_part_names[part]);
    if (p->count == p->capacity) profile_reserve(p, p->capacity ? 2 * p->capacity : 256);
    ProfileMark* m = &p->marks[p->count++];
    m->part = part;
    m->phase = phase;
    cudaCheck(cudaEventRecord(m->event, stream));
}

void profile_collect(Profile* p, double ms[NUM_PROFILE_PARTS][NUM_PROFILE_PHASES]) {
    memset(ms, 0, sizeof(double) * NUM_PROFILE_PARTS * NUM_PROFILE_PHASES);
    if (p->count == 0) return;
    cudaCheck(cudaEventSynchronize(p->marks[p->count - 1].event));
    for (int i = 0; i < p->count; i++) {
        const ProfileMark* m = &p->marks[i];
        if (m->part < 0) continue;
        if (i == 0) die("profile: the mark of %s comes before any start", profile_part_names[m->part]);
        float elapsed;
        cudaCheck(cudaEventElapsedTime(&elapsed, p->marks[i - 1].event, m->event));
        ms[m->part][m->phase] += elapsed;
    }
    p->count = 0;
}

// ----------------------------------------------------------------------------------------------
// Work and floors. bf16 activations and weights (2 bytes), fp32 statistics and optimizer state
// (4 bytes), int32 tokens. A gradient that is accumulated (+=) is read and written.

static PartWork add_work(PartWork a, PartWork b) { return (PartWork){a.flops + b.flops, a.bytes + b.bytes}; }
static PartWork scale_work(PartWork a, double k) { return (PartWork){a.flops * k, a.bytes * k}; }

// out (n, out_dim) = inp (n, in_dim) @ weight^T (+ bias) (+ residual, read), GELU's
// pre-activation also written when gelu. The backward: dinp, dweight += and dbias +=; with inp_gelu the input came out of a
// GELU, whose derivative the dinp epilogue applies (it reads the pre-activation, n x in_dim).
static PartWork matmul_forward_work(double n, double in_dim, double out_dim, int bias, int gelu, int residual) {
    double elems = n * in_dim + out_dim * in_dim + (bias ? out_dim : 0) + n * out_dim * (gelu || residual ? 2 : 1);
    return (PartWork){2.0 * n * in_dim * out_dim, 2.0 * elems};
}
static PartWork matmul_backward_work(double n, double in_dim, double out_dim, int bias, int inp_gelu) {
    double reads = n * out_dim + n * in_dim * (inp_gelu ? 2 : 1) + out_dim * in_dim;
    double writes = n * in_dim + 2.0 * out_dim * in_dim + (bias ? 2.0 * out_dim : 0);
    return (PartWork){4.0 * n * in_dim * out_dim, 2.0 * (reads + writes)};
}

void profile_work(const GPTConfig* c, const ProfileShape* s, PartWork work[NUM_PROFILE_PARTS][NUM_PROFILE_PHASES]) {
    memset(work, 0, sizeof(PartWork) * NUM_PROFILE_PARTS * NUM_PROFILE_PHASES);
    double N = (double)s->rows * s->cols, C = c->C, L = c->L, NH = c->NH, HS = C / NH, Vp = c->Vp;
    double chunks = (double)ceil_div((long long)s->rows * s->cols, s->classifier_rows);
    PartWork (*w)[NUM_PROFILE_PHASES] = work;

    // Embedding: a wte row per token and a row's positions; the backward adds them to dwte's
    // rows (at most Vp of them) and dwpe.
    double wte_rows = N < Vp ? N : Vp;
    w[PART_EMBEDDING][PHASE_FORWARD] = (PartWork){0, 4 * N + 2 * (N * C + s->cols * C + N * C)};
    w[PART_EMBEDDING][PHASE_BACKWARD] = (PartWork){0, 4 * N + 2 * (N * C + 2 * wte_rows * C + 2 * s->cols * C)};

    // LayerNorm, 2L + 1 of them: x, weight and bias in, out and fp32 mean, rstd out; the
    // backward reads dout, x, mean, rstd and weight and adds to dx, dweight, dbias.
    double norms = 2 * L + 1;
    w[PART_LAYERNORM][PHASE_FORWARD] = scale_work((PartWork){0, 2 * (2 * N * C + 2 * C) + 8 * N}, norms);
    w[PART_LAYERNORM][PHASE_BACKWARD] = scale_work((PartWork){0, 2 * (4 * N * C + 5 * C) + 8 * N}, norms);

    w[PART_QKV][PHASE_FORWARD] = scale_work(matmul_forward_work(N, C, 3 * C, 1, 0, 0), L);
    w[PART_QKV][PHASE_BACKWARD] = scale_work(matmul_backward_work(N, C, 3 * C, 1, 0), L);
    w[PART_ATTPROJ][PHASE_FORWARD] = scale_work(matmul_forward_work(N, C, C, 1, 0, 1), L);
    w[PART_ATTPROJ][PHASE_BACKWARD] = scale_work(matmul_backward_work(N, C, C, 1, 0), L);
    w[PART_MLP_UP][PHASE_FORWARD] = scale_work(matmul_forward_work(N, C, 4 * C, 1, 1, 0), L);
    w[PART_MLP_UP][PHASE_BACKWARD] = scale_work(matmul_backward_work(N, C, 4 * C, 1, 0), L);
    w[PART_MLP_DOWN][PHASE_FORWARD] = scale_work(matmul_forward_work(N, 4 * C, C, 1, 0, 1), L);
    w[PART_MLP_DOWN][PHASE_BACKWARD] = scale_work(matmul_backward_work(N, 4 * C, C, 1, 1), L);

    // Causal attention: QK^T and PV over half the T x T square, 2 * NH * T^2 * HS per sequence
    // forward, 2.5 times that backward. With context parallelism a local row is a rank's share,
    // 1/cp of a sequence of cp * cols tokens. Forward: qkv in, O and the fp32 log-sum-exp out;
    // backward: qkv, O, dO and the log-sum-exp in, dqkv out.
    double cp = s->context_parallel, cols = s->cols;
    double attention_flops = 2.0 * s->rows * NH * cp * cols * cols * HS;
    w[PART_ATTENTION][PHASE_FORWARD] = scale_work((PartWork){attention_flops, 2 * (4 * N * C) + 4 * N * NH}, L);
    w[PART_ATTENTION][PHASE_BACKWARD] = scale_work((PartWork){2.5 * attention_flops, 2 * (8 * N * C) + 4 * N * NH}, L);

    // Classifier: logits = lnf @ wte^T chunk by chunk (wte read per chunk), then one pass over
    // the logits: losses out, dlogits over them; the backward: dlnf = dlogits @ wte, dwte +=.
    w[PART_CLASSIFIER][PHASE_FORWARD] = (PartWork){2 * N * C * Vp, 2 * (N * C + chunks * Vp * C + 3 * N * Vp) + 8 * N};
    w[PART_CLASSIFIER][PHASE_BACKWARD] = (PartWork){4 * N * C * Vp, 2 * (N * Vp + 2 * N * C + 3 * chunks * Vp * C)};

    for (int part = 0; part < NUM_PROFILE_PARTS; part++)
        for (int phase = 0; phase < NUM_PROFILE_PHASES; phase++)
            w[part][phase] = scale_work(w[part][phase], s->micro_steps);

    // Once per step: the norm reads every gradient; AdamW reads a gradient and the fp32 master,
    // m and v, writes those three and the bf16 parameter.
    w[PART_UPDATE][PHASE_UPDATE] = add_work((PartWork){0, 2.0 * s->params}, (PartWork){0, 28.0 * s->updated_params});
}

// ----------------------------------------------------------------------------------------------
// The table

// A time, or "-" where the part does nothing in that phase.
static void print_ms(FILE* out, double ms, PartWork w) {
    if (ms == 0.0 && w.flops == 0.0 && w.bytes == 0.0) fprintf(out, " %9s", "-");
    else fprintf(out, " %9.3f", ms);
}

void profile_print(FILE* out, const ProfileSummary* s, const double ms[NUM_PROFILE_PARTS][NUM_PROFILE_PHASES],
                   const PartWork work[NUM_PROFILE_PARTS][NUM_PROFILE_PHASES]) {
    double step_ms = s->step_seconds * 1e3;
    double sum_ms[NUM_PROFILE_PHASES] = {0}, sum_total = 0, sum_floor = 0;
    fprintf(out, "profile of step %d: floors at %.0f TFLOP/s dense bf16 and %.2f TB/s\n", s->step,
            s->flops_per_s * 1e-12, s->bytes_per_s * 1e-12);
    fprintf(out, "%-20s %9s %9s %9s %7s %9s %8s  %s\n", "part", "fwd ms", "bwd ms", "total ms", "% step",
            "floor ms", "x floor", "floor by");
    for (int part = 0; part < NUM_PROFILE_PARTS; part++) {
        double total = 0, floor = 0, compute = 0, memory = 0;
        for (int phase = 0; phase < NUM_PROFILE_PHASES; phase++) {
            PartWork w = work[part][phase];
            total += ms[part][phase];
            sum_ms[phase] += ms[part][phase];
            floor += 1e3 * work_floor_seconds(w, s->flops_per_s, s->bytes_per_s);
            compute += w.flops / s->flops_per_s;
            memory += w.bytes / s->bytes_per_s;
        }
        sum_total += total;
        sum_floor += floor;
        fprintf(out, "%-20s", profile_part_names[part]);
        print_ms(out, ms[part][PHASE_FORWARD], work[part][PHASE_FORWARD]);
        print_ms(out, ms[part][PHASE_BACKWARD], work[part][PHASE_BACKWARD]);
        fprintf(out, " %9.3f %7.1f %9.3f %8.2f  %s\n", total, 100.0 * total / step_ms, floor,
                floor > 0 ? total / floor : 0.0, compute >= memory ? "FLOPs" : "bytes");
    }
    fprintf(out, "%-20s %9.3f %9.3f %9.3f %7.1f %9.3f %8.2f\n", "all parts", sum_ms[PHASE_FORWARD],
            sum_ms[PHASE_BACKWARD], sum_total, 100.0 * sum_total / step_ms, sum_floor,
            sum_floor > 0 ? sum_total / sum_floor : 0.0);
    fprintf(out, "%-20s %29.3f %7.1f\n", "step (wall clock)", step_ms, 100.0);
    fprintf(out, "%-20s %29.3f %7.1f  host, syncs, data, other ranks\n", "outside the parts",
            step_ms - sum_total, 100.0 * (step_ms - sum_total) / step_ms);
    if (s->mfu > 0) fprintf(out, "MFU %.1f%% of %.0f TFLOP/s", 100.0 * s->mfu, s->peak_tflops);
    else fprintf(out, "MFU unknown (no peak for this device)");
    fprintf(out, "; the floors add up to %.1f%% of the step\n", 100.0 * sum_floor / step_ms);
    fflush(out);
}
