// gpt/profile.cu: the step profile (gpt/profile.h): the events, each part's work and floor,
// and the table.
#include "gpt/profile.h"

#include <stdlib.h>
#include <string.h>
#include "gpt/optimizer.h"
#include "layers/muon.h"

const char* const profile_part_names[NUM_PROFILE_PARTS] = {
    "embedding", "residual lambdas", "norms (ln1, ln2, lnf, emb)", "qkv matmul", "value embeddings",
    "qk-norm + rotary", "attention", "attention proj",
    "MLP up (fc+activation)", "MLP down (fcproj)", "classifier", "update (norm+optimizer)"};

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

// out (n, out_dim) = inp (n, in_dim) @ weight^T (+ bias); out_moves: the (n, out_dim) tensors
// moved, 1 for out alone, 2 with the residual read (the C matrix) or GELU's pre-activation written
// too, 3 with ReLU^2's pass after the matmul (h written, read, and relu(h)^2 written in its place).
static PartWork matmul_forward_work(double n, double in_dim, double out_dim, int bias, int out_moves) {
    double elems = n * in_dim + out_dim * in_dim + (bias ? out_dim : 0) + n * out_dim * out_moves;
    return (PartWork){2.0 * n * in_dim * out_dim, 2.0 * elems};
}
// The backward: dinp, dweight += and dbias +=. act_moves: where the input came out of an
// activation, the (n, in_dim) tensors its backward moves besides dinp's write: GELU's dinp
// epilogue reads the pre-activation (1); ReLU^2's pass reads dinp and relu(h)^2 and writes dinp
// (3). 0: no activation.
static PartWork matmul_backward_work(double n, double in_dim, double out_dim, int bias, int act_moves) {
    double reads = n * out_dim + n * in_dim * (1 + act_moves) + out_dim * in_dim;
    double writes = n * in_dim + 2.0 * out_dim * in_dim + (bias ? 2.0 * out_dim : 0);
    return (PartWork){4.0 * n * in_dim * out_dim, 2.0 * (reads + writes)};
}

// Muon's work on count matrices of (rows, cols) (layers/muon.cu): the momentum pass (the gradient
// and m in, m and u out: 12 bytes an element), u's Frobenius norm (2) and scaling (4), the update
// (u and the master in, the master and the parameter out: 12), NorMuon's read of the update (2);
// and five Newton-Schulz iterations
// on each, X taken with its shorter side s first (l the longer): A = X X^T, P = b A + c A A,
// X = P X + a X, 4 s^2 l + 2 s^3 FLOPs and 3 s l + 4 s^2 bf16 elements moved (each product's
// inputs read once, its output written once).
static PartWork muon_work(double count, double rows, double cols, int normuon) {
    double s = rows < cols ? rows : cols, l = rows < cols ? cols : rows;
    PartWork iteration = {4 * s * s * l + 2 * s * s * s, 2 * (3 * s * l + 4 * s * s)};
    return add_work((PartWork){0, (normuon ? 32 : 30) * count * rows * cols},
                    scale_work(iteration, count * NEWTON_SCHULZ_STEPS));
}

void profile_work(const GPTConfig* c, const ProfileShape* s, PartWork work[NUM_PROFILE_PARTS][NUM_PROFILE_PHASES]) {
    memset(work, 0, sizeof(PartWork) * NUM_PROFILE_PARTS * NUM_PROFILE_PHASES);
    const Architecture* a = &c->arch;
    double N = (double)s->rows * s->cols, C = c->C, L = c->L, NH = c->NH, HS = C / NH, Vp = c->Vp;
    double chunks = (double)ceil_div((long long)s->rows * s->cols, s->classifier_rows);
    int bias = a->bias;
    PartWork (*w)[NUM_PROFILE_PHASES] = work;

    // Embedding: a wte row per token and a row's positions (wpe, without rotary); the backward
    // adds them to dwte's rows (at most Vp of them) and dwpe. dwte has these rows alone with an
    // untied head (the head's gradient is the classifier's).
    double wte_rows = N < Vp ? N : Vp, wpe_rows = a->rotary ? 0 : s->cols;
    w[PART_EMBEDDING][PHASE_FORWARD] = (PartWork){0, 4 * N + 2 * (N * C + wpe_rows * C + N * C)};
    w[PART_EMBEDDING][PHASE_BACKWARD] = (PartWork){0, 4 * N + 2 * (N * C + 2 * wte_rows * C + 2 * wpe_rows * C)};
    // The smear: its input and the row before it in, out; backward, dout and the rows before for
    // the gates, dout twice and dx out, and the gates' sums (three fp32 per token).
    if (a->smear) {
        w[PART_EMBEDDING][PHASE_FORWARD] = add_work(w[PART_EMBEDDING][PHASE_FORWARD], (PartWork){0, 2 * (3 * N * C)});
        w[PART_EMBEDDING][PHASE_BACKWARD] =
            add_work(w[PART_EMBEDDING][PHASE_BACKWARD], (PartWork){0, 2 * (2 * N * C) + 2 * (3 * N * C) + 24 * N});
    }

    // The norms, 2L + 1 of them. LayerNorm: x, weight and bias in, out and fp32 mean, rstd out;
    // the backward reads dout, x, mean, rstd and weight and adds to dx, dweight, dbias. RMSNorm
    // has no weights and no mean: x in, out and rstd out; dout, x and rstd in, dx +=.
    double norms = 2 * L + 1;
    PartWork one_forward = {0, 2 * (2 * N * C + 2 * C) + 8 * N}, one_backward = {0, 2 * (4 * N * C + 5 * C) + 8 * N};
    if (a->rms_norm) {
        one_forward = (PartWork){0, 2 * (2 * N * C) + 4 * N};
        one_backward = (PartWork){0, 2 * (4 * N * C) + 4 * N};
    }
    w[PART_NORM][PHASE_FORWARD] = scale_work(one_forward, norms);
    w[PART_NORM][PHASE_BACKWARD] = scale_work(one_backward, norms);
    // The embedding's norm is an RMSNorm whatever the blocks' norm; its backward zeroes dx first.
    if (a->embedding_norm) {
        w[PART_NORM][PHASE_FORWARD] = add_work(w[PART_NORM][PHASE_FORWARD], (PartWork){0, 2 * (2 * N * C) + 4 * N});
        w[PART_NORM][PHASE_BACKWARD] =
            add_work(w[PART_NORM][PHASE_BACKWARD], (PartWork){0, 2 * (5 * N * C) + 4 * N});
    }

    // The backout, counted with the final norm: x and x_mid in, out; the backward reads dout and
    // x_mid and writes dmid, which the middle block's backward adds to its stream's gradient.
    if (a->backout) {
        w[PART_NORM][PHASE_FORWARD] = add_work(w[PART_NORM][PHASE_FORWARD], (PartWork){0, 2 * (3 * N * C)});
        w[PART_NORM][PHASE_BACKWARD] = add_work(w[PART_NORM][PHASE_BACKWARD], (PartWork){0, 2 * (6 * N * C)});
    }

    // The residual lambdas: x and x0 in, res out; the backward reads dres, x and x0, writes dx over
    // dres and adds to the fp32 dx0.
    if (a->residual_lambdas) {
        w[PART_RESIDUAL_LAMBDAS][PHASE_FORWARD] = scale_work((PartWork){0, 2 * (3 * N * C)}, L);
        w[PART_RESIDUAL_LAMBDAS][PHASE_BACKWARD] = scale_work((PartWork){0, 2 * (4 * N * C) + 8 * N * C}, L);
    }

    // The value embeddings on (L + 1) / 2 layers: the gate reads G channels of ln1 and writes fp32
    // (N, NH); the values read v, the table's rows and the gate and write v. The backward reads
    // dv, the rows and the gate twice (dgate, then the table's gradient, written per row), and
    // the gate's weight and ln1's gradient read dgate, gate and G channels of ln1 and dln1.
    if (a->value_embeddings) {
        double G = VALUE_GATE_CHANNELS, layers = (double)((c->L + 1) / 2);
        w[PART_VALUE_EMBEDDINGS][PHASE_FORWARD] =
            scale_work((PartWork){0, 2 * N * G + 4 * N * NH + 2 * (3 * N * C) + 4 * N * NH}, layers);
        w[PART_VALUE_EMBEDDINGS][PHASE_BACKWARD] =
            scale_work((PartWork){0, 2 * (2 * N * C) + 4 * N * NH + 2 * (3 * N * C) + 4 * N * NH + 16 * N * NH +
                                         2 * (3 * N * G)},
                       layers);
    }

    w[PART_QKV][PHASE_FORWARD] = scale_work(matmul_forward_work(N, C, 3 * C, bias, 1), L);
    w[PART_QKV][PHASE_BACKWARD] = scale_work(matmul_backward_work(N, C, 3 * C, bias, 0), L);
    w[PART_ATTPROJ][PHASE_FORWARD] = scale_work(matmul_forward_work(N, C, C, bias, 2), L);
    w[PART_ATTPROJ][PHASE_BACKWARD] = scale_work(matmul_backward_work(N, C, C, bias, 0), L);
    w[PART_MLP_UP][PHASE_FORWARD] = scale_work(matmul_forward_work(N, C, 4 * C, bias, a->relu2 ? 3 : 2), L);
    w[PART_MLP_UP][PHASE_BACKWARD] = scale_work(matmul_backward_work(N, C, 4 * C, bias, 0), L);
    w[PART_MLP_DOWN][PHASE_FORWARD] = scale_work(matmul_forward_work(N, 4 * C, C, bias, 2), L);
    w[PART_MLP_DOWN][PHASE_BACKWARD] = scale_work(matmul_backward_work(N, 4 * C, C, bias, a->relu2 ? 3 : 1), L);

    // QK-norm and rotary in place on q and k (layers/rotary.h): q and k (2 N C) read and written,
    // the norm's rstd (N, 2 NH) fp32 written, rotary's positions (N) int32 read; the backward
    // reads dq, dk, q and k (the rotated ones), rstd and the positions, and writes dq and dk.
    if (architecture_transforms_qk(a)) {
        double side = (a->qk_norm ? 4 * 2 * NH * N : 0) + (a->rotary ? 4 * N : 0);
        w[PART_QK_NORM_ROTARY][PHASE_FORWARD] = scale_work((PartWork){0, 2 * (4 * N * C) + side}, L);
        w[PART_QK_NORM_ROTARY][PHASE_BACKWARD] = scale_work((PartWork){0, 2 * (6 * N * C) + side}, L);
    }

    // Causal attention: QK^T and PV over the (query, key) pairs a row sees, 4 HS FLOPs a pair and
    // head forward, 2.5 times that backward. In a sequence of T a layer whose rows see at most k
    // keys (architecture_keys: its window, or T) has T k - k^2 / 2 pairs (the causal half of the
    // square at k = T). With context parallelism a local row is a rank's share, 1/cp of a sequence
    // of cp * cols tokens. Forward: qkv in, O and the fp32 log-sum-exp out; backward: qkv, O, dO
    // and the log-sum-exp in, dqkv out.
    double cp = s->context_parallel, T = cp * s->cols, pairs = 0;
    for (int l = 0; l < c->L; l++) {
        double k = architecture_keys(a, l, (int)T);
        pairs += T * k - k * k / 2;
    }
    double attention_flops = 4.0 * NH * HS * (s->rows / cp) * pairs;
    w[PART_ATTENTION][PHASE_FORWARD] = (PartWork){attention_flops, L * (2 * (4 * N * C) + 4 * N * NH)};
    w[PART_ATTENTION][PHASE_BACKWARD] = (PartWork){2.5 * attention_flops, L * (2 * (8 * N * C) + 4 * N * NH)};

    // Classifier: logits = lnf @ head^T chunk by chunk (the head, wte or lm_head, read per chunk),
    // then one pass over the logits: losses out, dlogits over them (the soft cap's second read of
    // a row comes from L2, layers/classifier.cu); the backward: dlnf = dlogits @ head, dhead +=.
    w[PART_CLASSIFIER][PHASE_FORWARD] = (PartWork){2 * N * C * Vp, 2 * (N * C + chunks * Vp * C + 3 * N * Vp) + 8 * N};
    w[PART_CLASSIFIER][PHASE_BACKWARD] = (PartWork){4 * N * C * Vp, 2 * (N * Vp + 2 * N * C + 3 * chunks * Vp * C)};

    for (int part = 0; part < NUM_PROFILE_PARTS; part++)
        for (int phase = 0; phase < NUM_PROFILE_PHASES; phase++)
            w[part][phase] = scale_work(w[part][phase], s->micro_steps);

    // Once per step: the norm reads every gradient; Muon updates its matrices (muon_work), and
    // AdamW the rest: a gradient and the fp32 master, m and v in, those three and the bf16
    // parameter out.
    PartWork matrices = {0, 0};
    double matrix_params = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        if (!s->muon_matrices[i]) continue;
        int rows, cols;
        param_muon_matrix(&param_table[i], c, s->muon_qkv, &rows, &cols);
        matrices = add_work(matrices, muon_work(s->muon_matrices[i], rows, cols, s->normuon));
        matrix_params += (double)s->muon_matrices[i] * rows * cols;
    }
    w[PART_UPDATE][PHASE_UPDATE] =
        add_work(add_work((PartWork){0, 2.0 * s->params}, (PartWork){0, 28.0 * (s->updated_params - matrix_params)}),
                 matrices);
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
    fprintf(out, "%-24s %9s %9s %9s %7s %9s %8s  %s\n", "part", "fwd ms", "bwd ms", "total ms", "% step",
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
        if (total == 0.0 && compute == 0.0 && memory == 0.0) continue;   // a part the model has not
        fprintf(out, "%-24s", profile_part_names[part]);
        print_ms(out, ms[part][PHASE_FORWARD], work[part][PHASE_FORWARD]);
        print_ms(out, ms[part][PHASE_BACKWARD], work[part][PHASE_BACKWARD]);
        fprintf(out, " %9.3f %7.1f %9.3f %8.2f  %s\n", total, 100.0 * total / step_ms, floor,
                floor > 0 ? total / floor : 0.0, compute >= memory ? "FLOPs" : "bytes");
    }
    fprintf(out, "%-24s %9.3f %9.3f %9.3f %7.1f %9.3f %8.2f\n", "all parts", sum_ms[PHASE_FORWARD],
            sum_ms[PHASE_BACKWARD], sum_total, 100.0 * sum_total / step_ms, sum_floor,
            sum_floor > 0 ? sum_total / sum_floor : 0.0);
    fprintf(out, "%-24s %29.3f %7.1f\n", "step (wall clock)", step_ms, 100.0);
    fprintf(out, "%-24s %29.3f %7.1f  host, syncs, data, other ranks\n", "outside the parts",
            step_ms - sum_total, 100.0 * (step_ms - sum_total) / step_ms);
    if (s->mfu > 0) fprintf(out, "MFU %.1f%% of %.0f TFLOP/s", 100.0 * s->mfu, s->peak_tflops);
    else fprintf(out, "MFU unknown (no peak for this device)");
    fprintf(out, "; the floors add up to %.1f%% of the step\n", 100.0 * sum_floor / step_ms);
    fflush(out);
}
