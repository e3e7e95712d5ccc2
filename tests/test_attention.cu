// tests/test_attention.cu: attention forward and backward against a float64 CPU reference computed
// here from the same bf16 inputs: the naive path (attention.h) and both flash kernel families by
// name (flash.h): flash-mma (mma.sync, any GPU from sm_80) and flash-wgmma (Hopper, sm_90a build
// on an sm_90 GPU; SKIPPED elsewhere). The reference is computed once per shape and shared.
//   qkv (B, T, 3, NH, HS): Q, K uniform in [-2, 2] (scores up to about ±6, so the softmax is
//   far from uniform), V uniform in [-1, 1]; dO (B, T, NH, HS) uniform in [-1, 1].
//   Shapes: T in {1, 7, 64, 65, 127, 128, 129, 1000, 4096} (block multiples and not), HS 64 and
//   128, causal and not; B = 2, NH = 3, except T = 4096: B = 1, NH = 2, where the reference covers
//   only the first and last row of every 64 (O, L, dQ) and dK, dV are checked against naive only.
//   The naive path alone also runs head sizes 8, 96 and 256. "Rising keys" shapes (T = 1000, or
//   129 when small, HS 64 and 128, causal and not) scale K by 1, 4 and 16 in the three thirds of
//   the sequence, so that a row's max jumps by far more than the forward's lazy-rescale threshold
//   (2^8) between blocks: both the rescale of O and the stale max between jumps are exercised;
//   only the flash families run them (against the reference), since naive rounds S to bf16.
// Each flash family: O and L against the reference, the backward with each of its dQ paths
// (flash.h's FlashDq) against it, the deterministic paths (fixed point where the family has it,
// separate) twice for identical bits, and everything against naive; and for the family with
// fixed point, that an infinite K makes its head's fixed-point dQ NaN.
// Every output is poisoned with NaN before each run, so an element left unwritten fails.
// FLASHGPT_ATTN_SMALL=1 runs only T in {1, 7, 65, 129} (for the sanitizers).
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "attention/attention.h"
#include "attention/flash.h"
#include "common/rng.h"
#include "tests/test.h"

// bf16 keeps 8 significant bits: rounding one value costs up to 2^-9 relative. Inputs are the
// same bf16 values for the reference, but P (both paths) and S, dS (naive) are rounded to bf16
// on the way, and so are the outputs: a relative L2 error of a few 2^-9 (measured ~6e-3 for the
// naive path on these inputs, less for flash). 2e-2 leaves margin; a real bug is O(1).
#define TOL_REL 2e-2
// L is fp32 computed from fp32 scores of exact bf16 inputs: only summation-order and exp/log
// error (~1e-6), far below this bound on |L - ref| / (1 + |ref|).
#define TOL_LSE 1e-3
// A bf16 row of P sums to 1 within 2^-9 even if every rounding went the same way.
#define TOL_ROW_SUM (1.0 / 256)
// rms floor of the relative error's denominator: the gradient of a one-key softmax is exactly 0.
#define ABS_FLOOR 1e-3

static const int SEQ_LENS[] = {1, 7, 64, 65, 127, 128, 129, 1000, 4096};
static const int SMALL_SEQ_LENS[] = {1, 7, 65, 129};  // FLASHGPT_ATTN_SMALL=1
static const int NAIVE_ONLY_HEAD_SIZES[] = {8, 96, 256};
#define FULL_REFERENCE_MAX_T 1024

typedef struct {
    AttentionShape s;
    int flash;   // the flash kernels support the head size too
    int rising;  // K scaled by 1, 4, 16 in the thirds of the sequence
} TestShape;

static AttentionShape make_shape(int T, int HS, int causal) {
    AttentionShape s;
    s.B = T > FULL_REFERENCE_MAX_T ? 1 : 2;
    s.NH = T > FULL_REFERENCE_MAX_T ? 2 : 3;
    s.T = T;
    s.HS = HS;
    s.causal = causal;
    s.scale = 1.0f / sqrtf((float)HS);
    return s;
}

static int test_shapes(TestShape* shapes, int small) {
    const int* seq_lens = small ? SMALL_SEQ_LENS : SEQ_LENS;
    size_t seq_lens_n = small ? sizeof(SMALL_SEQ_LENS) / sizeof(int) : sizeof(SEQ_LENS) / sizeof(int);
    int n = 0;
    for (int hs = 64; hs <= 128; hs *= 2)
        for (int causal = 0; causal <= 1; causal++)
            for (size_t i = 0; i < seq_lens_n; i++)
                shapes[n++] = (TestShape){make_shape(seq_lens[i], hs, causal), 1, 0};
    for (int hs = 64; hs <= 128; hs *= 2)
        for (int causal = 0; causal <= 1; causal++)
            shapes[n++] = (TestShape){make_shape(small ? 129 : 1000, hs, causal), 1, 1};
    for (size_t i = 0; i < sizeof(NAIVE_ONLY_HEAD_SIZES) / sizeof(NAIVE_ONLY_HEAD_SIZES[0]); i++)
        shapes[n++] = (TestShape){make_shape(65, NAIVE_ONLY_HEAD_SIZES[i], 1), 0, 0};
    return n;
}

// The flash kernel families, called by name.
typedef struct {
    const char* name;
    int wgmma;     // needs flash_attention_wgmma_available()
    int fixed_dq;  // has the fixed-point dQ path (FLASH_DQ_FIXED)
    void (*forward)(const AttentionParams*, cudaStream_t);
    void (*backward)(const AttentionParams*, void*, FlashDq,
                     cudaStream_t);
} FlashFamily;

static const FlashFamily FAMILIES[] = {
    {"flash-mma", 0, 0, flash_attention_forward_mma, flash_attention_backward_mma},
    {"flash-wgmma", 1, 1, flash_attention_forward_wgmma, flash_attention_backward_wgmma},
};
#define N_FAMILIES (int)(sizeof(FAMILIES) / sizeof(FAMILIES[0]))
#define WGMMA_UNAVAILABLE "wgmma needs an sm_90 GPU and a build for sm_90a"

static void case_name(char* name, size_t len, const char* impl, TestShape ts) {
    snprintf(name, len, "attention %s HS%d %s T=%d%s", impl, ts.s.HS, ts.s.causal ? "causal" : "noncausal", ts.s.T,
             ts.rising ? " rising keys" : "");
}

// The rows the reference computes: all of them, or at long T the edges of every 64-row block.
static int reference_row(int t, int T) {
    return T <= FULL_REFERENCE_MAX_T || t % 64 == 0 || t % 64 == 63;
}

// ----------------------------------------------------------------------------------------------
// float64 reference

static bf16 rng_bf16(Rng* rng, float bound) {  // uniform in [-bound, bound]
    float u = (float)(rng_next(rng) >> 40) / (float)(1 << 24);
    return __float2bfloat16((2.0f * u - 1.0f) * bound);
}

// One head: q, k, v, dout (T, HS) -> o (T, HS), lse (T), dq (T, HS) on the rows of reference_row,
// and dk, dv (T, HS) when every row is covered. Loops run along contiguous rows (kt, vt are K^T
// and V^T) so they vectorize; p and ds hold one row. Work: ~6 T^2 HS multiply-adds.
static void reference_head(int T, int HS, int causal, double scale, const double* q,
                           const double* k, const double* v, const double* dout, double* o,
                           double* lse, double* dq, double* dk, double* dv, double* kt,
                           double* vt, double* p, double* ds) {
    int all_rows = T <= FULL_REFERENCE_MAX_T;
    for (int j = 0; j < T; j++)
        for (int d = 0; d < HS; d++) {
            kt[(size_t)d * T + j] = k[(size_t)j * HS + d];
            vt[(size_t)d * T + j] = v[(size_t)j * HS + d];
        }
    memset(dk, 0, sizeof(double) * T * HS);
    memset(dv, 0, sizeof(double) * T * HS);
    for (int i = 0; i < T; i++) {
        if (!reference_row(i, T)) continue;
        int n = causal ? i + 1 : T;
        const double* qi = q + (size_t)i * HS;
        const double* doi = dout + (size_t)i * HS;
        double *oi = o + (size_t)i * HS, *dqi = dq + (size_t)i * HS;
        for (int j = 0; j < n; j++) p[j] = ds[j] = 0.0;
        for (int d = 0; d < HS; d++) {
            double qd = qi[d] * scale, dod = doi[d];
            const double *ktd = kt + (size_t)d * T, *vtd = vt + (size_t)d * T;
            for (int j = 0; j < n; j++) {
                p[j] += qd * ktd[j];    // scores
                ds[j] += dod * vtd[j];  // dP
            }
        }
        double m = -INFINITY, sum = 0.0, dot = 0.0;
        for (int j = 0; j < n; j++) m = fmax(m, p[j]);
        for (int j = 0; j < n; j++) sum += (p[j] = exp(p[j] - m));
        for (int j = 0; j < n; j++) dot += (p[j] /= sum) * ds[j];
        lse[i] = m + log(sum);
        for (int d = 0; d < HS; d++) oi[d] = dqi[d] = 0.0;
        for (int j = 0; j < n; j++) {
            double pj = p[j], dsj = p[j] * (ds[j] - dot) * scale;
            const double *kj = k + (size_t)j * HS, *vj = v + (size_t)j * HS;
            for (int d = 0; d < HS; d++) {
                oi[d] += pj * vj[d];
                dqi[d] += dsj * kj[d];
            }
            if (!all_rows) continue;
            double *dkj = dk + (size_t)j * HS, *dvj = dv + (size_t)j * HS;
            for (int d = 0; d < HS; d++) {
                dkj[d] += dsj * qi[d];
                dvj[d] += pj * doi[d];
            }
        }
    }
}

typedef struct {
    double* out;   // (B, T, NH, HS)
    double* lse;   // (B, NH, T)
    double* dqkv;  // (B, T, 3, NH, HS)
} Reference;

static Reference reference(AttentionShape s, const bf16* qkv, const bf16* dout) {
    int T = s.T, HS = s.HS, NH = s.NH, C = NH * HS;
    size_t th = (size_t)T * HS;
    Reference r;
    r.out = (double*)calloc((size_t)s.B * T * C, sizeof(double));
    r.lse = (double*)calloc((size_t)s.B * NH * T, sizeof(double));
    r.dqkv = (double*)calloc((size_t)s.B * T * 3 * C, sizeof(double));
    double* buf = (double*)malloc(sizeof(double) * (12 * th + 2 * T));
    double *q = buf, *k = q + th, *v = k + th, *dO = v + th, *o = dO + th, *dq = o + th;
    double *dk = dq + th, *dv = dk + th, *kt = dv + th, *vt = kt + th, *p = vt + th, *ds = p + T;
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++)
                for (int d = 0; d < HS; d++) {
                    const bf16* x = qkv + ((size_t)b * T + t) * 3 * C + h * HS + d;
                    q[t * HS + d] = __bfloat162float(x[0]);
                    k[t * HS + d] = __bfloat162float(x[C]);
                    v[t * HS + d] = __bfloat162float(x[2 * C]);
                    dO[t * HS + d] = __bfloat162float(dout[((size_t)b * T + t) * C + h * HS + d]);
                }
            reference_head(T, HS, s.causal, s.scale, q, k, v, dO, o, r.lse + ((size_t)b * NH + h) * T,
                           dq, dk, dv, kt, vt, p, ds);
            for (int t = 0; t < T; t++)
                for (int d = 0; d < HS; d++) {
                    r.out[((size_t)b * T + t) * C + h * HS + d] = o[t * HS + d];
                    double* g = r.dqkv + ((size_t)b * T + t) * 3 * C + h * HS + d;
                    g[0] = dq[t * HS + d];
                    g[C] = dk[t * HS + d];
                    g[2 * C] = dv[t * HS + d];
                }
        }
    free(buf);
    return r;
}

// ----------------------------------------------------------------------------------------------
// comparisons

static void keep_worst(double* worst, double x) {  // a NaN sticks
    if (isnan(x) || x > *worst) *worst = x;
}

// Relative L2 error ||got - ref|| / ||ref|| of the columns [first, first + C) of a (B, T, row)
// tensor, over the rows t that `rows_only` allows (all rows when 0). NaN when got holds a NaN.
static double rel_error(const bf16* got, const double* ref, AttentionShape s, int row, int first,
                        int rows_only) {
    int C = s.NH * s.HS;
    double diff2 = 0.0, ref2 = 0.0;
    size_t n = 0;
    for (int b = 0; b < s.B; b++)
        for (int t = 0; t < s.T; t++) {
            if (rows_only && !reference_row(t, s.T)) continue;
            size_t at = ((size_t)b * s.T + t) * row + first;
            for (int e = 0; e < C; e++) {
                double d = (double)__bfloat162float(got[at + e]) - ref[at + e];
                diff2 += d * d;
                ref2 += ref[at + e] * ref[at + e];
            }
            n += C;
        }
    return sqrt(diff2 / fmax(ref2, ABS_FLOOR * ABS_FLOOR * n));
}

static double* to_double(const bf16* x, size_t n) {
    double* y = (double*)malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) y[i] = __bfloat162float(x[i]);
    return y;
}

// O, dQ, dK, dV errors of got against ref; dK, dV only if check_dkv. Returns the worst.
typedef struct { double out, dq, dk, dv; } Errors;
static double errors(Errors* e, const bf16* out, const bf16* dqkv, const double* ref_out,
                     const double* ref_dqkv, AttentionShape s, int rows_only, int check_dkv) {
    int C = s.NH * s.HS;
    e->out = rel_error(out, ref_out, s, C, 0, rows_only);
    e->dq = rel_error(dqkv, ref_dqkv, s, 3 * C, 0, rows_only);
    e->dk = check_dkv ? rel_error(dqkv, ref_dqkv, s, 3 * C, C, 0) : 0.0;
    e->dv = check_dkv ? rel_error(dqkv, ref_dqkv, s, 3 * C, 2 * C, 0) : 0.0;
    double worst = 0.0;
    keep_worst(&worst, e->out);
    keep_worst(&worst, e->dq);
    keep_worst(&worst, e->dk);
    keep_worst(&worst, e->dv);
    return worst;
}

static void check_errors(const char* what, const Errors* e, double worst, int check_dkv) {
    if (check_dkv)
        printf("    %s: rel err O %.2e dQ %.2e dK %.2e dV %.2e\n", what, e->out, e->dq, e->dk, e->dv);
    else
        printf("    %s: rel err O %.2e dQ %.2e (dK, dV not covered)\n", what, e->out, e->dq);
    CHECK(worst <= TOL_REL, "%s: relative error %.3g over %g", what, worst, TOL_REL);
}

// ----------------------------------------------------------------------------------------------
// GPU runs

static const AttentionPlan NAIVE = {ATTENTION_NAIVE, 0, NULL}, FLASH = {ATTENTION_FLASH, 0, NULL};

typedef struct {
    bf16 *qkv, *dout, *out, *dqkv;
    void *saved, *scratch;
    size_t saved_bytes, scratch_bytes;
} DeviceBuffers;

// NaN in every output (bf16 0xFFFF and fp32 0xFFFFFFFF are NaN), so unwritten elements show.
static void poison(void* p, size_t bytes) { cudaCheck(cudaMemset(p, 0xFF, bytes)); }

// The buffers of shape s with qkv and dout copied in; saved and scratch of the sizes given.
static DeviceBuffers device_buffers(AttentionShape s, const bf16* qkv, const bf16* dout, size_t saved_bytes,
                                    size_t scratch_bytes) {
    size_t out_n = (size_t)s.B * s.T * s.NH * s.HS, qkv_n = 3 * out_n;
    DeviceBuffers d;
    d.saved_bytes = saved_bytes;
    d.scratch_bytes = scratch_bytes;
    cudaCheck(cudaMalloc(&d.qkv, qkv_n * sizeof(bf16)));
    cudaCheck(cudaMalloc(&d.dout, out_n * sizeof(bf16)));
    cudaCheck(cudaMalloc(&d.out, out_n * sizeof(bf16)));
    cudaCheck(cudaMalloc(&d.dqkv, qkv_n * sizeof(bf16)));
    cudaCheck(cudaMalloc(&d.saved, saved_bytes));
    cudaCheck(cudaMalloc(&d.scratch, scratch_bytes > 0 ? scratch_bytes : 1));
    cudaCheck(cudaMemcpy(d.qkv, qkv, qkv_n * sizeof(bf16), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d.dout, dout, out_n * sizeof(bf16), cudaMemcpyHostToDevice));
    return d;
}

static void free_device_buffers(DeviceBuffers* d) {
    void* all[] = {d->qkv, d->dout, d->out, d->dqkv, d->saved, d->scratch};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) cudaCheck(cudaFree(all[i]));
}

// flash: one family's kernels; NULL: the naive path. saved receives L (flash) or P (naive).
static void run_forward(const FlashFamily* flash, AttentionShape s, DeviceBuffers* d, bf16* out, void* saved) {
    size_t out_bytes = (size_t)s.B * s.T * s.NH * s.HS * sizeof(bf16);
    poison(d->out, out_bytes);
    poison(d->saved, d->saved_bytes);
    AttentionParams p = attention_fused_params(s, d->qkv, d->out, (float*)d->saved, NULL, NULL);
    if (flash) flash->forward(&p, 0);
    else attention_forward(&NAIVE, s, d->out, d->saved, d->qkv, d->scratch, 0);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(out, d->out, out_bytes, cudaMemcpyDeviceToHost));
    size_t saved_bytes = attention_saved_bytes(flash ? &FLASH : &NAIVE, s);
    if (saved) cudaCheck(cudaMemcpy(saved, d->saved, saved_bytes, cudaMemcpyDeviceToHost));
}

// flash == NULL: the naive path (dq unused).
static void run_backward(const FlashFamily* flash, AttentionShape s, DeviceBuffers* d, FlashDq dq, bf16* dqkv) {
    size_t dqkv_bytes = (size_t)s.B * s.T * 3 * s.NH * s.HS * sizeof(bf16);
    poison(d->dqkv, dqkv_bytes);
    poison(d->scratch, d->scratch_bytes);
    AttentionParams p = attention_fused_params(s, d->qkv, d->out, (float*)d->saved, d->dqkv, d->dout);
    if (flash) flash->backward(&p, d->scratch, dq, 0);
    else attention_backward(&NAIVE, s, d->dqkv, d->dout, d->out, d->saved, d->qkv, d->scratch, 0);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(dqkv, d->dqkv, dqkv_bytes, cudaMemcpyDeviceToHost));
}

// P (B, NH, T, T) of the naive forward: exact zeros above the diagonal when causal, rows sum to 1.
static void check_probs(AttentionShape s, const bf16* probs) {
    size_t rows = (size_t)s.B * s.NH * s.T, bad_zero = 0, bad_sum = 0;
    double worst_sum = 0.0;
    for (size_t r = 0; r < rows; r++) {
        const bf16* p = probs + r * s.T;
        int n = s.causal ? (int)(r % s.T) + 1 : s.T;
        double sum = 0.0;
        for (int j = 0; j < n; j++) sum += __bfloat162float(p[j]);
        for (int j = n; j < s.T; j++) bad_zero += __bfloat162float(p[j]) != 0.0f;
        keep_worst(&worst_sum, fabs(sum - 1.0));
        bad_sum += !(fabs(sum - 1.0) <= TOL_ROW_SUM);
    }
    CHECK(bad_zero == 0, "%zu masked probabilities are not exactly 0", bad_zero);
    CHECK(bad_sum == 0, "%zu rows of P do not sum to 1 (worst |sum - 1| %.3g)", bad_sum, worst_sum);
}

// The naive path against the reference; leaves its O and dqkv in out, dqkv for the flash cases.
static void test_naive(TestShape ts, DeviceBuffers* d, const Reference* ref, bf16* out,
                       bf16* dqkv) {
    AttentionShape s = ts.s;
    char name[96];
    case_name(name, sizeof(name), "naive", ts);
    test_begin(name);
    const char* why = attention_unsupported(&NAIVE, s);
    CHECK(why == NULL, "refused: %s", why);
    if (!why) {
        int full = s.T <= FULL_REFERENCE_MAX_T;
        bf16* probs = (bf16*)malloc(attention_saved_bytes(&NAIVE, s));
        bf16* again = (bf16*)malloc((size_t)s.B * s.T * 3 * s.NH * s.HS * sizeof(bf16));
        run_forward(NULL, s, d, out, probs);
        check_probs(s, probs);
        run_backward(NULL, s, d, FLASH_DQ_SEPARATE, dqkv);
        Errors e;
        double worst = errors(&e, out, dqkv, ref->out, ref->dqkv, s, 1, full);
        check_errors("naive vs reference", &e, worst, full);
        run_backward(NULL, s, d, FLASH_DQ_SEPARATE, again);
        CHECK(memcmp(again, dqkv, (size_t)s.B * s.T * 3 * s.NH * s.HS * sizeof(bf16)) == 0,
              "two backward runs differ");
        free(probs);
        free(again);
    }
    test_end();
}

static void test_flash(const FlashFamily* f, TestShape ts, DeviceBuffers* d, const Reference* ref,
                       const bf16* naive_out, const bf16* naive_dqkv) {
    AttentionShape s = ts.s;
    char name[96];
    case_name(name, sizeof(name), f->name, ts);
    if (f->wgmma && !flash_attention_wgmma_available()) {
        test_skip(name, WGMMA_UNAVAILABLE);
        return;
    }
    test_begin(name);
    const char* why = flash_attention_unsupported(s);
    CHECK(why == NULL, "refused: %s", why);
    if (!why) {
        int full = s.T <= FULL_REFERENCE_MAX_T, C = s.NH * s.HS;
        size_t out_n = (size_t)s.B * s.T * C, dqkv_n = 3 * out_n, rows = (size_t)s.B * s.NH * s.T;
        bf16* out = (bf16*)malloc(out_n * sizeof(bf16));
        float* lse = (float*)malloc(rows * sizeof(float));
        bf16* dqkv = (bf16*)malloc(dqkv_n * sizeof(bf16));
        bf16* det1 = (bf16*)malloc(dqkv_n * sizeof(bf16));
        bf16* det2 = (bf16*)malloc(dqkv_n * sizeof(bf16));
        run_forward(f, s, d, out, lse);
        double worst_lse = 0.0;
        for (size_t r = 0; r < rows; r++)
            if (reference_row((int)(r % s.T), s.T))
                keep_worst(&worst_lse, fabs(lse[r] - ref->lse[r]) / (1.0 + fabs(ref->lse[r])));
        printf("    %s L: worst |L - ref| / (1 + |ref|) %.2e\n", f->name, worst_lse);
        CHECK(worst_lse <= TOL_LSE, "L: error %.3g over %g", worst_lse, TOL_LSE);

        Errors e;
        char what[64];
        run_backward(f, s, d, FLASH_DQ_ATOMIC, dqkv);
        snprintf(what, sizeof(what), "%s vs reference", f->name);
        check_errors(what, &e, errors(&e, out, dqkv, ref->out, ref->dqkv, s, 1, full), full);
        const FlashDq deterministic[2] = {FLASH_DQ_FIXED, FLASH_DQ_SEPARATE};
        const char* path[2] = {"fixed-point dQ", "separate dQ"};
        for (int p = f->fixed_dq ? 0 : 1; p < 2; p++) {
            run_backward(f, s, d, deterministic[p], det1);
            snprintf(what, sizeof(what), "%s %s vs reference", f->name, path[p]);
            check_errors(what, &e, errors(&e, out, det1, ref->out, ref->dqkv, s, 1, full), full);
            run_backward(f, s, d, deterministic[p], det2);
            CHECK(memcmp(det1, det2, dqkv_n * sizeof(bf16)) == 0, "%s: two backward runs differ", path[p]);
        }

        // Against naive on every element, dK and dV included, at every T (where naive ran).
        if (naive_out) {
            double* n_out = to_double(naive_out, out_n);
            double* n_dqkv = to_double(naive_dqkv, dqkv_n);
            snprintf(what, sizeof(what), "%s vs naive", f->name);
            check_errors(what, &e, errors(&e, out, dqkv, n_out, n_dqkv, s, 0, 1), 1);
            free(n_out);
            free(n_dqkv);
        }
        free(out);
        free(lse);
        free(dqkv);
        free(det1);
        free(det2);
    }
    test_end();
}

static void test_shape(TestShape ts) {
    AttentionShape s = ts.s;
    size_t out_n = (size_t)s.B * s.T * s.NH * s.HS, qkv_n = 3 * out_n;
    Rng seed = {(uint64_t)s.T * 1000003u + (uint64_t)s.HS * 17u + (uint64_t)s.causal};
    bf16* qkv = (bf16*)malloc(qkv_n * sizeof(bf16));
    bf16* dout = (bf16*)malloc(out_n * sizeof(bf16));
    for (size_t i = 0; i < qkv_n; i++) {
        int part = (int)(i / (s.NH * s.HS) % 3);  // 0 Q, 1 K, 2 V
        int t = (int)(i / (3 * s.NH * s.HS) % s.T);
        float k_scale = ts.rising ? (float)(1 << (2 * (3 * t / s.T))) : 1.0f;
        qkv[i] = rng_bf16(&seed, part == 0 ? 2.0f : part == 1 ? 2.0f * k_scale : 1.0f);
    }
    for (size_t i = 0; i < out_n; i++) dout[i] = rng_bf16(&seed, 1.0f);
    Reference ref = reference(s, qkv, dout);

    size_t saved_bytes = attention_saved_bytes(&NAIVE, s);
    size_t scratch_bytes = attention_scratch_bytes(&NAIVE, s);
    if (ts.flash && !flash_attention_unsupported(s)) {
        size_t fs = attention_saved_bytes(&FLASH, s), fx = flash_attention_scratch_bytes(s);
        if (fs > saved_bytes) saved_bytes = fs;
        if (fx > scratch_bytes) scratch_bytes = fx;
    }
    DeviceBuffers d = device_buffers(s, qkv, dout, saved_bytes, scratch_bytes);

    // Naive rounds S to bf16, which scores of the rising-keys size (tens) do not survive.
    bf16* naive_out = ts.rising ? NULL : (bf16*)malloc(out_n * sizeof(bf16));
    bf16* naive_dqkv = ts.rising ? NULL : (bf16*)malloc(qkv_n * sizeof(bf16));
    if (!ts.rising) test_naive(ts, &d, &ref, naive_out, naive_dqkv);
    for (int f = 0; f < N_FAMILIES && ts.flash; f++) test_flash(&FAMILIES[f], ts, &d, &ref, naive_out, naive_dqkv);

    free_device_buffers(&d);
    free(naive_out);
    free(naive_dqkv);
    free(ref.out);
    free(ref.lse);
    free(ref.dqkv);
    free(qkv);
    free(dout);
}

// Fixed-point dQ takes its units from a bound over each head's K and V: an infinite K makes that
// bound infinite, and the head's dQ must come out NaN (as floating-point sums would make it),
// never finite numbers in a meaningless unit; the other head is untouched.
static void fixed_point_name(char* name, size_t len, const FlashFamily* f) {
    snprintf(name, len, "attention %s fixed-point dQ with an infinite K", f->name);
}

static void test_fixed_point_nonfinite(const FlashFamily* f) {
    char name[96];
    fixed_point_name(name, sizeof(name), f);
    if (f->wgmma && !flash_attention_wgmma_available()) {
        test_skip(name, WGMMA_UNAVAILABLE);
        return;
    }
    test_begin(name);
    AttentionShape s = make_shape(65, 64, 1);
    s.B = 1;
    s.NH = 2;
    size_t out_n = (size_t)s.T * s.NH * s.HS, qkv_n = 3 * out_n;
    bf16* qkv = (bf16*)malloc(qkv_n * sizeof(bf16));
    bf16* dout = (bf16*)malloc(out_n * sizeof(bf16));
    Rng seed = {12345};
    for (size_t i = 0; i < qkv_n; i++) qkv[i] = rng_bf16(&seed, 1.0f);
    for (size_t i = 0; i < out_n; i++) dout[i] = rng_bf16(&seed, 1.0f);
    qkv[((size_t)10 * 3 + 1) * s.NH * s.HS + 3] = __float2bfloat16(INFINITY);   // K[t 10, head 0, d 3]
    DeviceBuffers d = device_buffers(s, qkv, dout, attention_saved_bytes(&FLASH, s),
                                     flash_attention_scratch_bytes(s));
    bf16* out = (bf16*)malloc(out_n * sizeof(bf16));
    bf16* dqkv = (bf16*)malloc(qkv_n * sizeof(bf16));
    run_forward(f, s, &d, out, NULL);
    run_backward(f, s, &d, FLASH_DQ_FIXED, dqkv);
    int finite_in_head0 = 0, nonfinite_in_head1 = 0;
    for (int t = 0; t < s.T; t++)
        for (int part = 0; part < 3; part++)
            for (int h = 0; h < s.NH; h++)
                for (int c = 0; c < s.HS; c++) {
                    float x = __bfloat162float(dqkv[(((size_t)t * 3 + part) * s.NH + h) * s.HS + c]);
                    if (h == 0 && part == 0 && !isnan(x)) finite_in_head0++;
                    if (h == 1 && !isfinite(x)) nonfinite_in_head1++;
                }
    CHECK(finite_in_head0 == 0, "%d dQ values of the head with the infinite K are not NaN", finite_in_head0);
    CHECK(nonfinite_in_head1 == 0, "%d dQ, dK, dV values of the other head are not finite", nonfinite_in_head1);
    free_device_buffers(&d);
    free(qkv);
    free(dout);
    free(out);
    free(dqkv);
    test_end();
}

// The kernels read and write by the views' strides (attention/params.h): a family run on Q, K,
// V, dO in separate per-head buffers (B, NH, T, HS) with padded strides, O, dQ, dK, dV written
// the same way and L with padded rows, gives the bits of its run on the fused activations
// (deterministic dQ paths), and leaves the padding alone.
static const int STRIDED_T[] = {129, 1000};

static void strided_name(char* name, size_t len, const FlashFamily* f, int T, int HS) {
    snprintf(name, len, "attention %s strided views T=%d HS%d", f->name, T, HS);
}

typedef struct {
    AttentionTensor view;
    size_t n;   // elements of the buffer
} HeadMajor;

// A buffer (B, NH, T, HS) with 8 elements of padding after each row and 64 after each head.
static HeadMajor head_major(AttentionShape s) {
    long long row = s.HS + 8, head = (long long)s.T * row + 64;
    HeadMajor h = {{NULL, head * s.NH, row, (int)head}, (size_t)head * s.NH * s.B};
    cudaCheck(cudaMalloc(&h.view.ptr, h.n * sizeof(bf16)));
    poison(h.view.ptr, h.n * sizeof(bf16));
    return h;
}

// Element (b, t, h, :) of the fused view x copied into the strided one y, on the host.
static void copy_view(bf16* y_host, const AttentionTensor* y, const bf16* x_host, const AttentionTensor* x,
                      const bf16* x_base, AttentionShape s) {
    for (int b = 0; b < s.B; b++)
        for (int t = 0; t < s.T; t++)
            for (int h = 0; h < s.NH; h++)
                memcpy(y_host + b * y->batch + t * y->row + (long long)h * y->head,
                       x_host + (x->ptr - x_base) + b * x->batch + t * x->row + (long long)h * x->head,
                       s.HS * sizeof(bf16));
}

// The number of elements of the strided view y that differ from the fused x (bits), and of
// the padding of y that was written (no longer the poison 0xFFFF).
static void compare_view(const bf16* y_host, const AttentionTensor* y, size_t y_n, const bf16* x_host,
                         const AttentionTensor* x, const bf16* x_base, AttentionShape s, int* differ, int* padding) {
    char* touched = (char*)calloc(y_n, 1);
    for (int b = 0; b < s.B; b++)
        for (int t = 0; t < s.T; t++)
            for (int h = 0; h < s.NH; h++) {
                size_t at = b * y->batch + t * y->row + (long long)h * y->head;
                if (memcmp(y_host + at, x_host + (x->ptr - x_base) + b * x->batch + t * x->row + (long long)h * x->head,
                           s.HS * sizeof(bf16)) != 0)
                    (*differ)++;
                memset(touched + at, 1, s.HS);
            }
    for (size_t i = 0; i < y_n; i++) {
        uint16_t bits;
        memcpy(&bits, &y_host[i], 2);
        if (!touched[i] && bits != 0xFFFF) (*padding)++;
    }
    free(touched);
}

static void test_strided_views(const FlashFamily* f, int T, int HS) {
    char name[96];
    strided_name(name, sizeof(name), f, T, HS);
    if (f->wgmma && !flash_attention_wgmma_available()) {
        test_skip(name, WGMMA_UNAVAILABLE);
        return;
    }
    test_begin(name);
    AttentionShape s = make_shape(T, HS, 1);
    size_t out_n = (size_t)s.B * s.T * s.NH * s.HS, qkv_n = 3 * out_n, rows = (size_t)s.B * s.NH * s.T;
    bf16* qkv = (bf16*)malloc(qkv_n * sizeof(bf16));
    bf16* dout = (bf16*)malloc(out_n * sizeof(bf16));
    Rng seed = {777u + (uint64_t)T};
    for (size_t i = 0; i < qkv_n; i++) qkv[i] = rng_bf16(&seed, 2.0f);
    for (size_t i = 0; i < out_n; i++) dout[i] = rng_bf16(&seed, 1.0f);
    DeviceBuffers d = device_buffers(s, qkv, dout, attention_saved_bytes(&FLASH, s), flash_attention_scratch_bytes(s));
    bf16* fused_out = (bf16*)malloc(out_n * sizeof(bf16));
    float* fused_lse = (float*)malloc(rows * sizeof(float));
    bf16* fused_dqkv = (bf16*)malloc(qkv_n * sizeof(bf16));
    run_forward(f, s, &d, fused_out, fused_lse);
    AttentionParams fused = attention_fused_params(s, qkv, fused_out, NULL, fused_dqkv, dout);

    // The strided copies: inputs filled from the fused ones, outputs poisoned.
    enum { Q, K, V, O, DO, DQ, DK, DV, N_VIEWS };
    const AttentionTensor* fused_views[N_VIEWS] = {&fused.q, &fused.k, &fused.v, &fused.o, &fused.dout,
                                                   &fused.dq, &fused.dk, &fused.dv};
    HeadMajor x[N_VIEWS];
    bf16* host[N_VIEWS];
    for (int i = 0; i < N_VIEWS; i++) {
        x[i] = head_major(s);
        host[i] = (bf16*)malloc(x[i].n * sizeof(bf16));
        memset((void*)host[i], 0xFF, x[i].n * sizeof(bf16));
    }
    for (int i = Q; i <= V; i++) copy_view(host[i], &x[i].view, qkv, fused_views[i], qkv, s);
    copy_view(host[DO], &x[DO].view, dout, fused_views[DO], dout, s);
    for (int i : {Q, K, V, DO}) cudaCheck(cudaMemcpy(x[i].view.ptr, host[i], x[i].n * sizeof(bf16), cudaMemcpyHostToDevice));
    // L (B, NH, T) with 5 floats after each head's row and 3 after each sequence.
    AttentionLse lse = {NULL, (long long)s.NH * (s.T + 5) + 3, s.T + 5};
    size_t lse_n = (size_t)lse.batch * s.B;
    cudaCheck(cudaMalloc(&lse.ptr, lse_n * sizeof(float)));
    poison(lse.ptr, lse_n * sizeof(float));
    AttentionParams p = {s, x[Q].view, x[K].view, x[V].view, x[O].view, lse, x[DO].view, x[DQ].view, x[DK].view,
                         x[DV].view};
    f->forward(&p, 0);
    float* lse_host = (float*)malloc(lse_n * sizeof(float));
    cudaCheck(cudaMemcpy(lse_host, lse.ptr, lse_n * sizeof(float), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(host[O], x[O].view.ptr, x[O].n * sizeof(bf16), cudaMemcpyDeviceToHost));
    int differ = 0, padding = 0, lse_differ = 0;
    compare_view(host[O], &x[O].view, x[O].n, fused_out, fused_views[O], fused_out, s, &differ, &padding);
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.NH; h++)
            for (int t = 0; t < s.T; t++)
                if (memcmp(&lse_host[b * lse.batch + (long long)h * lse.head + t],
                           &fused_lse[((size_t)b * s.NH + h) * s.T + t], sizeof(float)) != 0)
                    lse_differ++;
    CHECK(differ == 0 && lse_differ == 0, "forward: %d rows of O and %d of L differ from the fused run", differ,
          lse_differ);
    CHECK(padding == 0, "forward: %d padding elements of O written", padding);

    const FlashDq paths[2] = {FLASH_DQ_FIXED, FLASH_DQ_SEPARATE};
    for (int k = f->fixed_dq ? 0 : 1; k < 2; k++) {
        run_backward(f, s, &d, paths[k], fused_dqkv);
        // The backward reads L where the fused run wrote it: the same values, in the strided rows.
        for (int i = DQ; i <= DV; i++) poison(x[i].view.ptr, x[i].n * sizeof(bf16));
        f->backward(&p, d.scratch, paths[k], 0);
        differ = padding = 0;
        for (int i = DQ; i <= DV; i++) {
            cudaCheck(cudaMemcpy(host[i], x[i].view.ptr, x[i].n * sizeof(bf16), cudaMemcpyDeviceToHost));
            compare_view(host[i], &x[i].view, x[i].n, fused_dqkv, fused_views[i], fused_dqkv, s, &differ, &padding);
        }
        CHECK(differ == 0, "backward (%s dQ): %d rows of dQ, dK, dV differ from the fused run",
              k == 0 ? "fixed-point" : "separate", differ);
        CHECK(padding == 0, "backward: %d padding elements written", padding);
    }
    for (int i = 0; i < N_VIEWS; i++) {
        cudaCheck(cudaFree(x[i].view.ptr));
        free(host[i]);
    }
    cudaCheck(cudaFree(lse.ptr));
    free_device_buffers(&d);
    free(lse_host);
    free(fused_out);
    free(fused_lse);
    free(fused_dqkv);
    free(qkv);
    free(dout);
    test_end();
}

// Head sizes outside what an implementation handles get a message instead of a computation.
static void test_refusals(void) {
    test_begin("attention refuses unsupported head sizes");
    const struct { const AttentionPlan* plan; const char* impl; int HS; } refused[] = {
        {&FLASH, "flash", 96}, {&FLASH, "flash", 32}, {&NAIVE, "naive", 100}, {&NAIVE, "naive", 264},
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        const char* why = attention_unsupported(refused[i].plan, make_shape(64, refused[i].HS, 1));
        CHECK(why != NULL && why[0] != '\0', "%s accepts head size %d", refused[i].impl, refused[i].HS);
        if (why) printf("    %s HS%d: %s\n", refused[i].impl, refused[i].HS, why);
    }
    test_end();
}

int main(void) {
    const char* small_env = getenv("FLASHGPT_ATTN_SMALL");
    int small = small_env && atoi(small_env) != 0;
    TestShape shapes[64];
    int n = test_shapes(shapes, small);

    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        char name[96];
        for (int i = 0; i < n; i++) {
            if (!shapes[i].rising) {
                case_name(name, sizeof(name), "naive", shapes[i]);
                test_skip(name, "no CUDA device");
            }
            for (int f = 0; f < N_FAMILIES && shapes[i].flash; f++) {
                case_name(name, sizeof(name), FAMILIES[f].name, shapes[i]);
                test_skip(name, "no CUDA device");
            }
        }
        test_skip("attention refuses unsupported head sizes", "no CUDA device");
        for (int f = 0; f < N_FAMILIES; f++)
            for (int T : STRIDED_T)
                for (int HS = 64; HS <= 128; HS += 64) {
                    strided_name(name, sizeof(name), &FAMILIES[f], T, HS);
                    test_skip(name, "no CUDA device");
                }
        for (int f = 0; f < N_FAMILIES; f++) {
            if (!FAMILIES[f].fixed_dq) continue;
            fixed_point_name(name, sizeof(name), &FAMILIES[f]);
            test_skip(name, "no CUDA device");
        }
        return 0;
    }
    test_refusals();
    for (int f = 0; f < N_FAMILIES; f++)
        if (FAMILIES[f].fixed_dq) test_fixed_point_nonfinite(&FAMILIES[f]);
    for (int f = 0; f < N_FAMILIES; f++)
        for (int T : STRIDED_T)
            for (int HS = 64; HS <= 128; HS += 64) test_strided_views(&FAMILIES[f], T, HS);
    for (int i = 0; i < n; i++) test_shape(shapes[i]);
    return test_exit_code();
}
