// tests/unit/layers/test_matmul_rows.cu: layers/matmul_rows.h against a float64 reference computed on the
// host from the same bf16 inputs (taken exactly), with the outputs poisoned (NaN) before each call.
// 1. Plain matmul with bias, N 1, 3, 8, 31, 32, 33 and 70 (one to three blocks of 32 rows),
//    C 768, OC 2304.
// 2. C 136 (a partial last step of 32 channels), OC 40 (a partial block of 16 columns), N 5, bias.
// 3. Layernorm and bias with the KV-cache write (the QKV layer), N 7, C 256, OC 768: columns C..
//    also go to sequence n's row positions[n] of a cache of 9 rows of 2C; those rows equal the
//    output's columns bit for bit and every other cache row stays poisoned.
// 4. Layernorm, bias and GELU (the MLP's first layer), N 4, C 128, OC 512.
// 5. Bias and residual (the projections), N 9, C 512, OC 128.
// 6. Layernorm without bias (the LM head), N 2, C 128, OC 384.
// 7. The same call twice (layernorm, bias, GELU and residual; N 33, C 768) gives the same bits.
// 8. A C whose 16 weight rows need more shared memory than this GPU gives a thread block (its
//    opt-in limit, read from the device: on an A100 less than on Hopper) ends the program with
//    one line naming matmul_rows_forward and the shared memory, before any kernel runs: this
//    test run again as a child (--too-wide), which must exit non-zero with that line.
// 9. RMSNorm without bias (the modern QKV layer and LM head), N 7 and 33, C 256, OC 768.
// 10. RMSNorm and ReLU^2, no bias (the modern MLP's first layer), N 4 and 33, C 128, OC 512: the
//    reference rounds h to bf16 before squaring it, as the kernel (and layers/matmul.h) do.
// The output has one row more than N (where a column past OC of the last row would land) and the
// cache one sequence more than N: both stay poisoned. The norm cases' inputs sit off zero
// (mean 0.5), so a missed mean shows (and RMSNorm's mean square is not a variance); the reference rounds the normalised row to bf16, as the
// kernel does.
// Tolerance: 1e-2 relative L2 over the output, and |out - ref| <= 1e-2 (|ref| + rms(ref)) for
// each element: the output is rounded to bf16 once (2^-9 relative at most) and the sums run in
// fp32 (~1e-6); a normalised input may round to the neighbouring bf16 where fp32 and float64 fall
// on either side of a tie, which the dot products average out.
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include "common/rng.h"
#include "layers/layernorm.h"
#include "layers/matmul_rows.h"
#include "layers/rmsnorm.h"
#include "tests/lib/test.h"

#define CACHE_LENGTH 9   // rows (positions) of each sequence's cache
#define POISON 0xffff    // the bits cudaMemset 0xff leaves: NaN

typedef struct {
    int N, C, OC;
    int layernorm, bias, gelu, residual;
    const int* positions;   // the KV-cache write of columns C.. of row n at positions[n], or NULL
    int twice;              // a second call must give the same bits
    int rms_norm, relu2;    // the modern block's norm and activation
} Shape;

// The inputs of a call, on the host (exact bf16 values) and on the GPU.
enum { INP, WEIGHT, LN_WEIGHT, LN_BIAS, BIAS, RESIDUAL, INPUTS };

static float rng_symmetric(Rng* rng) { return (float)(2.0 * rng_uniform(rng) - 1.0); }

// n values offset + scale * U(-1, 1), rounded to bf16; their exact values, and a device copy.
static float* random_bf16(Rng* rng, size_t n, float scale, float offset, bf16** device) {
    float* h = (float*)malloc(n * sizeof(float));
    bf16* b = (bf16*)malloc(n * sizeof(bf16));
    for (size_t i = 0; i < n; i++) {
        b[i] = __float2bfloat16(offset + scale * rng_symmetric(rng));
        h[i] = __bfloat162float(b[i]);
    }
    cudaCheck(cudaMalloc((void**)device, n * sizeof(bf16)));
    cudaCheck(cudaMemcpy(*device, b, n * sizeof(bf16), cudaMemcpyHostToDevice));
    free(b);
    return h;
}

static double gelu_ref(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

// ref (N, OC) in float64 from the inputs' exact values; the layernormed row is rounded to bf16,
// as the kernel rounds it.
static void reference(double* ref, const Shape* s, float* const host[INPUTS]) {
    const int C = s->C, OC = s->OC;
    double* x = (double*)malloc((size_t)C * sizeof(double));
    for (int n = 0; n < s->N; n++) {
        for (int k = 0; k < C; k++) x[k] = host[INP][(size_t)n * C + k];
        if (s->layernorm) {
            double m = 0.0, var = 0.0;
            for (int k = 0; k < C; k++) m += x[k];
            m /= C;
            for (int k = 0; k < C; k++) var += (x[k] - m) * (x[k] - m);
            double rstd = 1.0 / sqrt(var / C + LAYERNORM_EPS);
            for (int k = 0; k < C; k++)
                x[k] = __bfloat162float(__double2bfloat16((x[k] - m) * rstd * host[LN_WEIGHT][k] + host[LN_BIAS][k]));
        }
        if (s->rms_norm) {
            double ms = 0.0;
            for (int k = 0; k < C; k++) ms += x[k] * x[k];
            double rstd = 1.0 / sqrt(ms / C + RMSNORM_EPS);
            for (int k = 0; k < C; k++) x[k] = __bfloat162float(__double2bfloat16(x[k] * rstd));
        }
        for (int o = 0; o < OC; o++) {
            const float* w = host[WEIGHT] + (size_t)o * C;
            double v = 0.0;
            for (int k = 0; k < C; k++) v += x[k] * w[k];
            if (s->bias) v += host[BIAS][o];
            if (s->gelu) v = gelu_ref(v);
            if (s->relu2) {
                double h = __bfloat162float(__double2bfloat16(v));
                v = h > 0.0 ? h * h : 0.0;
            }
            if (s->residual) v += host[RESIDUAL][(size_t)n * OC + o];
            ref[(size_t)n * OC + o] = v;
        }
    }
    free(x);
}

// One call of matmul_rows_forward on shape s (two when s->twice) against the reference, the
// CHECKs naming the shape; returns the relative L2 error.
static double check_call(const Shape* s) {
    const int N = s->N, C = s->C, OC = s->OC;
    char shape[64];
    snprintf(shape, sizeof shape, "N %d C %d OC %d", N, C, OC);
    Rng rng = {(uint64_t)N * 1000003 + (uint64_t)C * 1009 + OC};
    const size_t sizes[INPUTS] = {(size_t)N * C, (size_t)OC * C, (size_t)C, (size_t)C, (size_t)OC, (size_t)N * OC};
    const int used[INPUTS] = {1, 1, s->layernorm, s->layernorm, s->bias, s->residual};
    // Weights scaled so the outputs are O(1) at every C; layernorm weights around 1.
    const float scales[INPUTS] = {1.0f, 0.1f * sqrtf(768.0f / C), 0.1f, 0.1f, 0.1f, 1.0f};
    const float offsets[INPUTS] = {s->layernorm || s->rms_norm ? 0.5f : 0.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f};
    float* host[INPUTS] = {NULL};
    bf16* dev[INPUTS] = {NULL};
    for (int i = 0; i < INPUTS; i++)
        if (used[i]) host[i] = random_bf16(&rng, sizes[i], scales[i], offsets[i], &dev[i]);
    RowsEpilogue e;
    memset(&e, 0, sizeof e);
    e.ln_weight = dev[LN_WEIGHT];
    e.ln_bias = dev[LN_BIAS];
    e.bias = dev[BIAS];
    e.gelu = s->gelu;
    e.rms_norm = s->rms_norm;
    e.relu2 = s->relu2;
    e.residual = dev[RESIDUAL];

    const size_t out_n = (size_t)N * OC, out_alloc = out_n + OC;   // a row past N: must stay poisoned
    bf16* out;
    cudaCheck(cudaMalloc((void**)&out, out_alloc * sizeof(bf16)));
    // The cache: columns C.. (keys and values) of row n into sequence n's row positions[n]; one
    // sequence past N, which must stay poisoned.
    const int cache_width = OC - C;
    const size_t cache_n = s->positions ? (size_t)(N + 1) * CACHE_LENGTH * cache_width : 0;
    bf16* cache = NULL;
    int* positions = NULL;
    if (s->positions) {
        cudaCheck(cudaMalloc((void**)&cache, cache_n * sizeof(bf16)));
        cudaCheck(cudaMalloc((void**)&positions, N * sizeof(int)));
        cudaCheck(cudaMemcpy(positions, s->positions, N * sizeof(int), cudaMemcpyHostToDevice));
        e.cache = cache;
        e.cache_batch = (long long)CACHE_LENGTH * cache_width;
        e.cache_row = cache_width;
        e.cache_from = C;
        e.positions = positions;
    }

    // The first call's out and cache, then the second's.
    bf16* got = (bf16*)malloc(2 * out_alloc * sizeof(bf16));
    bf16* got_cache = (bf16*)malloc(2 * cache_n * sizeof(bf16) + 1);
    for (int k = 0; k < (s->twice ? 2 : 1); k++) {
        cudaCheck(cudaMemset(out, 0xff, out_alloc * sizeof(bf16)));   // NaN
        if (cache) cudaCheck(cudaMemset(cache, 0xff, cache_n * sizeof(bf16)));
        matmul_rows_forward(out, dev[INP], dev[WEIGHT], &e, N, C, OC, 0);
        cudaCheck(cudaMemcpy(got + k * out_alloc, out, out_alloc * sizeof(bf16), cudaMemcpyDeviceToHost));
        if (cache)
            cudaCheck(cudaMemcpy(got_cache + k * cache_n, cache, cache_n * sizeof(bf16), cudaMemcpyDeviceToHost));
    }
    if (s->twice)
        CHECK(memcmp(got, got + out_alloc, out_alloc * sizeof(bf16)) == 0 &&
                  memcmp(got_cache, got_cache + cache_n, cache_n * sizeof(bf16)) == 0,
              "%s: a second call gives other bits", shape);

    double* ref = (double*)malloc(out_n * sizeof(double));
    reference(ref, s, host);
    double ref_sq = 0.0, diff_sq = 0.0;
    for (size_t i = 0; i < out_n; i++) ref_sq += ref[i] * ref[i];
    const double rms = sqrt(ref_sq / out_n);
    size_t off = 0, first = 0;
    for (size_t i = 0; i < out_n; i++) {
        double d = __bfloat162float(got[i]) - ref[i];
        diff_sq += d * d;
        if (!(fabs(d) <= 1e-2 * (fabs(ref[i]) + rms)) && off++ == 0) first = i;
    }
    double err = sqrt(diff_sq / ref_sq);
    CHECK(err < 1e-2, "%s: relative L2 error %.3g", shape, err);
    CHECK(off == 0, "%s: %zu of %zu elements off by more than 1e-2 (|ref| + rms); the first, (%zu, %zu): %g, reference %g",
          shape, off, out_n, first / OC, first % OC, __bfloat162float(got[first]), ref[first]);
    size_t past = 0;
    for (size_t i = out_n; i < out_alloc; i++) past += __bfloat16_as_ushort(got[i]) != POISON;
    CHECK(past == 0, "%s: %zu elements written in the row past N", shape, past);

    if (cache) {
        size_t differ = 0, stray = 0;
        for (int n = 0; n <= N; n++)
            for (int p = 0; p < CACHE_LENGTH; p++)
                for (int j = 0; j < cache_width; j++) {
                    unsigned short c = __bfloat16_as_ushort(got_cache[((size_t)n * CACHE_LENGTH + p) * cache_width + j]);
                    if (n < N && p == s->positions[n]) differ += c != __bfloat16_as_ushort(got[(size_t)n * OC + C + j]);
                    else stray += c != POISON;
                }
        CHECK(differ == 0, "%s: %zu cache elements differ from their output columns", shape, differ);
        CHECK(stray == 0, "%s: %zu cache elements written outside the rows at the positions", shape, stray);
    }

    for (int i = 0; i < INPUTS; i++) {
        free(host[i]);
        if (dev[i]) cudaCheck(cudaFree(dev[i]));
    }
    cudaCheck(cudaFree(out));
    if (cache) {
        cudaCheck(cudaFree(cache));
        cudaCheck(cudaFree(positions));
    }
    free(got);
    free(got_cache);
    free(ref);
    return err;
}

static const char* const NAMES[] = {
    "matmul_rows: bias, N 1 to 70 (three blocks of rows), C 768, OC 2304",
    "matmul_rows: bias, C 136 (a partial step), OC 40 (a partial column block), N 5",
    "matmul_rows: layernorm, bias and the KV-cache write (QKV), N 7, C 256, OC 768",
    "matmul_rows: layernorm, bias and GELU (MLP), N 4, C 128, OC 512",
    "matmul_rows: bias and residual (projections), N 9, C 512, OC 128",
    "matmul_rows: layernorm without bias (LM head), N 2, C 128, OC 384",
    "matmul_rows: the same call twice gives the same bits",
    "matmul_rows: a C past this GPU's shared memory ends the program in one line",
    "matmul_rows: RMSNorm without bias (modern QKV and LM head), N 7 and 33, C 256, OC 768",
    "matmul_rows: RMSNorm and ReLU^2 without bias (modern MLP), N 4 and 33, C 128, OC 512",
};
#define TESTS (int)(sizeof(NAMES) / sizeof(NAMES[0]))

// The shapes of one test, each checked; prints the worst relative L2 error among them.
static void run_test(const char* name, const Shape* shapes, int n) {
    test_begin(name);
    double worst = 0.0;
    for (int i = 0; i < n; i++) {
        double err = check_call(&shapes[i]);
        if (!(err <= worst)) worst = err;   // NaN too
    }
    printf("    worst relative L2 error %.2e\n", worst);
    test_end();
}

// The child of case 8: a call (N 0, so that nothing would run even if it were let through) whose
// weight tile alone, 16 rows of C + 32 bf16, is more than the device's opt-in limit per block.
static int call_too_wide(void) {
    int device, optin;
    cudaCheck(cudaGetDevice(&device));
    cudaCheck(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    int C = (optin / (16 * 2) / 8 + 1) * 8;
    RowsEpilogue none = {0};
    matmul_rows_forward(NULL, NULL, NULL, &none, 0, C, 16, 0);
    cudaCheck(cudaDeviceSynchronize());
    printf("matmul_rows_forward took C %d (device limit %d bytes)\n", C, optin);
    return 0;
}

static void test_too_wide(const char* self) {
    test_begin(NAMES[7]);
    char command[4096], out[4096] = "";
    snprintf(command, sizeof(command), "'%s' --too-wide 2>&1", self);
    FILE* child = popen(command, "r");
    CHECK(child != NULL, "cannot run %s", command);
    if (!child) { test_end(); return; }
    size_t n = fread(out, 1, sizeof(out) - 1, child);
    out[n] = 0;
    int status = pclose(child);
    int lines = 0;
    for (size_t i = 0; i < n; i++) lines += out[i] == '\n';
    CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) != 0, "the child did not fail: %s", out);
    CHECK(strstr(out, "matmul_rows_forward") && strstr(out, "shared memory") && lines == 1,
          "not one line naming matmul_rows_forward and its shared memory: %s", out);
    test_end();
}

int main(int argc, char** argv) {
    if (argc == 2 && strcmp(argv[1], "--too-wide") == 0) return call_too_wide();
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        for (int i = 0; i < TESTS; i++) test_skip(NAMES[i], "no CUDA device");
        return test_exit_code();
    }
    static const int plain_rows[] = {1, 3, 8, 31, 32, 33, 70};
    Shape plain[7];
    for (int i = 0; i < 7; i++) plain[i] = (Shape){plain_rows[i], 768, 2304, 0, 1, 0, 0, NULL, 0};
    run_test(NAMES[0], plain, 7);
    const Shape partial = {5, 136, 40, 0, 1, 0, 0, NULL, 0};
    run_test(NAMES[1], &partial, 1);
    static const int positions[7] = {0, 8, 3, 5, 1, 7, 2};
    const Shape qkv = {7, 256, 3 * 256, 1, 1, 0, 0, positions, 0};
    run_test(NAMES[2], &qkv, 1);
    const Shape mlp = {4, 128, 512, 1, 1, 1, 0, NULL, 0};
    run_test(NAMES[3], &mlp, 1);
    const Shape projection = {9, 512, 128, 0, 1, 0, 1, NULL, 0};
    run_test(NAMES[4], &projection, 1);
    const Shape lm_head = {2, 128, 384, 1, 0, 0, 0, NULL, 0};
    run_test(NAMES[5], &lm_head, 1);
    const Shape everything = {33, 768, 768, 1, 1, 1, 1, NULL, 1};
    run_test(NAMES[6], &everything, 1);
    test_too_wide(argv[0]);
    const Shape modern_qkv[2] = {{7, 256, 768, 0, 0, 0, 0, NULL, 0, 1, 0}, {33, 256, 768, 0, 0, 0, 0, NULL, 0, 1, 0}};
    run_test(NAMES[8], modern_qkv, 2);
    const Shape modern_mlp[2] = {{4, 128, 512, 0, 0, 0, 0, NULL, 0, 1, 1}, {33, 128, 512, 0, 0, 0, 0, NULL, 0, 1, 1}};
    run_test(NAMES[9], modern_mlp, 2);
    return test_exit_code();
}
