// bench/bench_matmul.cu: the linear layers FP8 is for, bf16 (layers/matmul.h) against FP8 (its
// Fp8Linear), on random data: the MLP's up (C -> 4C) and down (4C -> C) projections and the head
// (C -> 50304), at d12 (C 768), d24 (C 1024) and d48 (C 1600), N = 16384 tokens, and 65536 at d12.
// No bias, no activation: those passes are the same in both paths or close (layers/matmul.cu).
// Rows per shape:
//   bf16         matmul_forward; matmul_backward (dinp, and dweight +=)
//   fp8 current  the weight's quantisation (in training once per optimizer step, here once per
//                forward: no gradient accumulation, the dearest case), the input's amax pass and
//                quantisation (with its transpose for the backward), the matmul with fast
//                accumulation; backward: the gradient's amax pass and quantisation (with its
//                transpose), the two matmuls
//   fp8 delayed  the same with delayed scaling of the input and the gradient: no amax pass on
//                them (the weight's stays: a weight always takes current scaling, layers/matmul.h)
// "quant ms": the quantisations of that pass alone (fp8_quantise on the same tensors), the rest
// of the pass being the matmuls. FLOPs: 2 N C OC forward, 4 N C OC backward; TFLOP/s on the whole
// pass. Time: cudaEvents around one call, 3 warm-up calls, median of 10, every pass of a shape
// taking turns so that the clock, which falls under the power cap, weighs on each alike. Then,
// per model, what a step's MLPs (L layers) and head take in each path, and with each layer on
// its fastest of bf16, an FP8 forward with the bf16 backward, and FP8 both ways (delayed
// scaling), against bf16.
// Usage: bench_matmul [C N]: every shape, or the one given (C and N multiples of 16).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "layers/fp8.h"
#include "layers/matmul.h"
#include "bench/bench_common.cuh"

#define VOCAB 50304
// One linear layer's buffers and both FP8 states.
typedef struct {
    int N, C, OC;
    bf16 *inp, *weight, *out, *dout, *dinp, *dweight;
    void* scratch;
    Fp8Linear current, delayed;
} Layer;

// The passes timed, taking turns.
enum { BF16_FWD, BF16_BWD, CUR_FWD, CUR_BWD, DEL_FWD, DEL_BWD, CUR_QUANT_FWD, CUR_QUANT_BWD, DEL_QUANT_FWD,
       DEL_QUANT_BWD, PASSES };

static MatmulStream mm;

// One call of pass on the layer (a Layer), for bench_median_ms.
static void run_pass(int pass, void* layer) {
    Layer* y = (Layer*)layer;
    Fp8Linear* l = pass == CUR_FWD || pass == CUR_BWD || pass == CUR_QUANT_FWD || pass == CUR_QUANT_BWD ? &y->current
                                                                                                        : &y->delayed;
    uint8_t* q = (uint8_t*)y->scratch;
    switch (pass) {
    case BF16_FWD: matmul_forward(y->out, NULL, y->inp, y->weight, NULL, NULL, y->N, y->C, y->OC, &mm); break;
    case BF16_BWD:
        matmul_backward(y->dinp, y->dweight, NULL, y->dout, y->inp, y->weight, NULL, y->N, y->C, y->OC, NULL, &mm);
        break;
    case CUR_FWD: case DEL_FWD:
        fp8_linear_quantise_weight(l, y->weight, mm.stream);
        matmul_forward_fp8(y->out, NULL, y->inp, NULL, NULL, y->N, l, y->scratch, &mm);
        break;
    case CUR_BWD: case DEL_BWD: matmul_backward_fp8(y->dinp, y->dweight, NULL, y->dout, NULL, y->N, l, y->scratch, &mm); break;
    case CUR_QUANT_FWD: case DEL_QUANT_FWD:
        fp8_linear_quantise_weight(l, y->weight, mm.stream);
        fp8_quantise(&l->inp, q, l->inp_t, y->inp, y->N, y->C, mm.stream);
        break;
    case CUR_QUANT_BWD: case DEL_QUANT_BWD:
        fp8_quantise(&l->grad, q, q + (size_t)y->N * y->OC, y->dout, y->N, y->OC, mm.stream);
        break;
    }
}

static void free_layer(Layer* y) {
    void* all[] = {y->inp, y->weight, y->out, y->dout, y->dinp, y->dweight, y->scratch};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (all[i]) cudaCheck(cudaFree(all[i]));
}

static int alloc_layer(Layer* y, int N, int C, int OC) {
    memset(y, 0, sizeof(*y));
    y->N = N;
    y->C = C;
    y->OC = OC;
    size_t nc = (size_t)N * C * sizeof(bf16), noc = (size_t)N * OC * sizeof(bf16), occ = (size_t)OC * C * sizeof(bf16);
    int ok = bench_try_malloc((void**)&y->inp, nc) && bench_try_malloc((void**)&y->weight, occ) &&
             bench_try_malloc((void**)&y->out, noc) && bench_try_malloc((void**)&y->dout, noc) &&
             bench_try_malloc((void**)&y->dinp, nc) && bench_try_malloc((void**)&y->dweight, occ) &&
             bench_try_malloc(&y->scratch, matmul_fp8_scratch_bytes(N, C, OC, 1));
    if (!ok) {
        free_layer(y);
        return 0;
    }
    bench_fill_uniform(y->inp, (size_t)N * C, 1, 1.0f);
    bench_fill_uniform(y->weight, (size_t)OC * C, 2, 0.02f);
    bench_fill_uniform(y->dout, (size_t)N * OC, 3, 1e-3f);
    cudaCheck(cudaMemset(y->dweight, 0, occ));
    fp8_linear_init(&y->current, C, OC, N, FP8_SCALING_CURRENT, FP8_E5M2, 1, 1);
    fp8_linear_init(&y->delayed, C, OC, N, FP8_SCALING_DELAYED, FP8_E5M2, 1, 1);
    return 1;
}

// The paths of a layer, the rows of the table.
enum { PATH_BF16, PATH_CURRENT, PATH_DELAYED, PATHS };

// A layer's forward and backward milliseconds in each path (measured 0: out of memory).
typedef struct { int measured; double fwd[PATHS], bwd[PATHS]; } Times;

static Times bench_layer(const char* name, int N, int C, int OC) {
    Times t;
    memset(&t, 0, sizeof(t));
    printf("| %d | %d | %s %d→%d | ", C, N, name, C, OC);
    Layer y;
    if (!alloc_layer(&y, N, C, OC)) {
        printf("OOM | | | | | | | | |\n");
        return t;
    }
    float ms[PASSES];
    bench_median_ms(PASSES, run_pass, &y, mm.stream, ms);
    double flops = 2.0 * N * C * OC;
    const struct { const char* path; int fwd, bwd, qfwd, qbwd; } rows[PATHS] = {
        {"bf16", BF16_FWD, BF16_BWD, -1, -1},
        {"fp8 current", CUR_FWD, CUR_BWD, CUR_QUANT_FWD, CUR_QUANT_BWD},
        {"fp8 delayed", DEL_FWD, DEL_BWD, DEL_QUANT_FWD, DEL_QUANT_BWD},
    };
    for (int r = 0; r < PATHS; r++) {
        float f = ms[rows[r].fwd], b = ms[rows[r].bwd];
        t.fwd[r] = f;
        t.bwd[r] = b;
        if (r > 0) printf("| %d | %d | %s %d→%d | ", C, N, name, C, OC);
        printf("%s | %.3f | ", rows[r].path, f);
        if (rows[r].qfwd >= 0) printf("%.3f", ms[rows[r].qfwd]);
        printf(" | %.0f | %.3f | ", flops / f * 1e-9, b);
        if (rows[r].qbwd >= 0) printf("%.3f", ms[rows[r].qbwd]);
        printf(" | %.0f | %.3f | %.3f |\n", 2.0 * flops / b * 1e-9, f + b, (t.fwd[0] + t.bwd[0]) / (f + b));
    }
    fflush(stdout);
    fp8_linear_free(&y.current);
    fp8_linear_free(&y.delayed);
    free_layer(&y);
    t.measured = 1;
    return t;
}

static double total(const Times* t, int path) { return t->fwd[path] + t->bwd[path]; }

// The fastest of bf16, the delayed FP8 forward with the bf16 backward, and delayed FP8 both ways;
// *choice names it.
static double fastest(const Times* t, const char** choice) {
    double mixed = t->fwd[PATH_DELAYED] + t->bwd[PATH_BF16], best = total(t, PATH_BF16);
    *choice = "bf16";
    if (mixed < best) {
        best = mixed;
        *choice = "fp8 fwd + bf16 bwd";
    }
    if (total(t, PATH_DELAYED) < best) {
        best = total(t, PATH_DELAYED);
        *choice = "fp8";
    }
    return best;
}

typedef struct { const char* name; int C, L; } Model;
static const Model MODELS[] = {{"d12", 768, 12}, {"d24", 1024, 24}, {"d48", 1600, 48}};

// The lines said after the table: per model and N, the step's MLPs and head in each path.
static char summary[8][512];
static int summaries;

// The three layers at (C, N); with a model, its summary line.
static void bench_shape(const Model* model, int C, int N) {
    Times up = bench_layer("mlp up", N, C, 4 * C);
    Times down = bench_layer("mlp down", N, 4 * C, C);
    Times head = bench_layer("head", N, C, VOCAB);
    if (!model || !up.measured || !down.measured || !head.measured) return;
    double path[PATHS];
    for (int p = 0; p < PATHS; p++) path[p] = model->L * (total(&up, p) + total(&down, p)) + total(&head, p);
    const char *up_choice, *down_choice, *head_choice;
    double best = model->L * (fastest(&up, &up_choice) + fastest(&down, &down_choice)) + fastest(&head, &head_choice);
    snprintf(summary[summaries++], sizeof(summary[0]),
             "%s, N %d, %d MLPs and the head, fwd + bwd: bf16 %.2f ms, fp8 current %.2f ms (%.3f×), fp8 delayed %.2f ms "
             "(%.3f×); each layer its fastest %.2f ms (%.3f×, %.2f ms less a step of N tokens: mlp up %s, mlp down %s, "
             "head %s)",
             model->name, N, model->L, path[PATH_BF16], path[PATH_CURRENT], path[PATH_BF16] / path[PATH_CURRENT],
             path[PATH_DELAYED], path[PATH_BF16] / path[PATH_DELAYED], best, path[PATH_BF16] / best,
             path[PATH_BF16] - best, up_choice, down_choice, head_choice);
}

int main(int argc, char** argv) {
    int only_c = argc > 2 ? atoi(argv[1]) : 0, only_n = argc > 2 ? atoi(argv[2]) : 0;
    if (argc == 2 || argc > 3 || (argc == 3 && (only_c <= 0 || only_c % 16 || only_n <= 0 || only_n % 16))) {
        fprintf(stderr, "usage: bench_matmul [C N] (C and N positive multiples of 16)\n");
        return 2;
    }
    cudaDeviceProp prop;
    if (!bench_device("bench_matmul", 1, &prop)) return 0;
    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    matmul_stream_init(&mm, stream);
    printf("linear layers, %s, bf16 against FP8 (E4M3 forward, E5M2 gradients, fast accumulation in the forward); "
           "no bias, no activation\n\n", prop.name);
    printf("| C | N | layer | path | fwd ms | quant ms | fwd TFLOP/s | bwd ms | quant ms | bwd TFLOP/s | fwd+bwd ms | "
           "× bf16 |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    if (only_c) {
        const Model* model = NULL;
        for (size_t i = 0; i < sizeof(MODELS) / sizeof(MODELS[0]); i++)
            if (MODELS[i].C == only_c) model = &MODELS[i];
        bench_shape(model, only_c, only_n);
    } else {
        for (size_t i = 0; i < sizeof(MODELS) / sizeof(MODELS[0]); i++) {
            bench_shape(&MODELS[i], MODELS[i].C, 16384);
            if (MODELS[i].C == 768) bench_shape(&MODELS[i], 768, 65536);
        }
    }
    printf("\n");
    for (int i = 0; i < summaries; i++) printf("%s\n", summary[i]);
    matmul_stream_free(&mm);
    cudaCheck(cudaStreamDestroy(stream));
    return 0;
}
