// tests/unit/attention/test_attention.cu: attention forward and backward against a float64 CPU reference computed
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
// Masked shapes (causal, a key window per row: attention/mask.h): documents from tokens with
// <|endoftext|> at random places and at tile edges, runs of one-token documents, a sequence
// without any boundary beside one with many, every token its own document, documents of 1024
// tokens; windows of 1, 16, 64, 128, 200, 1024 and T keys; documents and a window at once. The
// document bounds come from the GPU (attention_document_bounds, itself checked against the CPU);
// the reference sees row i's keys [lo(i), i] and covers every row. A mask that hides nothing (no
// boundary in any sequence, or a window of T) must give the unmasked run's bits.
// Every output is poisoned with NaN before each run, so an element left unwritten fails.
// FLASHGPT_ATTN_SMALL=1 runs only T in {1, 7, 65, 129} (for the sanitizers).
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "attention/attention.h"
#include "attention/flash.h"
#include "common/rng.h"
#include "tests/lib/test.h"

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
#define EOT 50256   // the id of <|endoftext|> in the masked shapes' tokens

// Where the masked shapes' tokens hold <|endoftext|> (a document starts at each).
typedef enum {
    DOCS_NONE,          // no document mask
    DOCS_RANDOM,        // even sequences: at position 0, at tile edges (63-65, 127-129, 255, 256), a
                        // run of one-token documents (300-303), at random (1 in 97); odd ones: none
    DOCS_NO_BOUNDARY,   // none in any sequence: the mask hides nothing
    DOCS_EVERY_TOKEN,   // every token: each row sees itself only
    DOCS_1024,          // documents of 1024 tokens
} Docs;

typedef struct {
    Docs docs;
    int window;   // keys a row sees at most; 0: no bound
} MaskCase;

typedef struct {
    AttentionShape s;
    int flash;      // the flash kernels support the head size too
    int rising;     // K scaled by 1, 4, 16 in the thirds of the sequence
    MaskCase mask;  // {DOCS_NONE, 0}: unmasked
} TestShape;

static int masked(TestShape ts) { return ts.mask.docs != DOCS_NONE || ts.mask.window > 0; }
// A mask under which every row still sees every earlier key.
static int hides_nothing(TestShape ts) {
    return masked(ts) && (ts.mask.docs == DOCS_NONE || ts.mask.docs == DOCS_NO_BOUNDARY) &&
           (ts.mask.window == 0 || ts.mask.window >= ts.s.T);
}
// The reference covers every row: up to FULL_REFERENCE_MAX_T, and masked (the windows keep it
// affordable at 4096).
static int full_reference(TestShape ts) { return ts.s.T <= FULL_REFERENCE_MAX_T || masked(ts); }

static const MaskCase MASKS_T1000[] = {
    {DOCS_RANDOM, 0}, {DOCS_NO_BOUNDARY, 0}, {DOCS_EVERY_TOKEN, 0}, {DOCS_NONE, 1}, {DOCS_NONE, 64},
    {DOCS_NONE, 128}, {DOCS_NONE, 200}, {DOCS_NONE, 1000}, {DOCS_RANDOM, 100},
};
static const MaskCase MASKS_SHORT[] = {{DOCS_RANDOM, 0}, {DOCS_RANDOM, 16}};   // T 1, 7, 65, 129
static const MaskCase MASKS_T4096[] = {{DOCS_1024, 0}, {DOCS_NONE, 1024}, {DOCS_1024, 1024}};

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

#define MAX_SHAPES 128
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int test_shapes(TestShape* shapes, int small) {
    const int* seq_lens = small ? SMALL_SEQ_LENS : SEQ_LENS;
    size_t seq_lens_n = small ? COUNT(SMALL_SEQ_LENS) : COUNT(SEQ_LENS);
    const MaskCase none = {DOCS_NONE, 0};
    int n = 0;
    for (int hs = 64; hs <= 128; hs *= 2)
        for (int causal = 0; causal <= 1; causal++)
            for (size_t i = 0; i < seq_lens_n; i++)
                shapes[n++] = (TestShape){make_shape(seq_lens[i], hs, causal), 1, 0, none};
    for (int hs = 64; hs <= 128; hs *= 2)
        for (int causal = 0; causal <= 1; causal++)
            shapes[n++] = (TestShape){make_shape(small ? 129 : 1000, hs, causal), 1, 1, none};
    for (size_t i = 0; i < COUNT(NAIVE_ONLY_HEAD_SIZES); i++)
        shapes[n++] = (TestShape){make_shape(65, NAIVE_ONLY_HEAD_SIZES[i], 1), 0, 0, none};
    for (int hs = 64; hs <= 128; hs *= 2) {
        for (size_t i = 0; i < COUNT(SMALL_SEQ_LENS); i++)
            for (size_t k = 0; k < COUNT(MASKS_SHORT); k++)
                shapes[n++] = (TestShape){make_shape(SMALL_SEQ_LENS[i], hs, 1), 1, 0, MASKS_SHORT[k]};
        shapes[n++] = (TestShape){make_shape(small ? 129 : 1000, hs, 1), 1, 1, {DOCS_RANDOM, 0}};
        if (small) continue;
        for (size_t k = 0; k < COUNT(MASKS_T1000); k++)
            shapes[n++] = (TestShape){make_shape(1000, hs, 1), 1, 0, MASKS_T1000[k]};
        for (size_t k = 0; k < COUNT(MASKS_T4096); k++)
            shapes[n++] = (TestShape){make_shape(4096, hs, 1), 1, 0, MASKS_T4096[k]};
    }
    if (n > MAX_SHAPES) die("test_attention: %d shapes, room for %d", n, MAX_SHAPES);
    return n;
}

// The flash kernel families, called by name.
typedef struct {
    const char* name;
    int wgmma;     // needs flash_attention_wgmma_available()
    int fixed_dq;  // has the fixed-point dQ path (FLASH_DQ_FIXED)
    void (*forward)(const AttentionParams*, const AttentionMask*, cudaStream_t);
    void (*backward)(const AttentionParams*, const AttentionMask*, void*, FlashDq,
                     cudaStream_t);
} FlashFamily;

static const FlashFamily FAMILIES[] = {
    {"flash-mma", 0, 0, flash_attention_forward_mma, flash_attention_backward_mma},
    {"flash-wgmma", 1, 1, flash_attention_forward_wgmma, flash_attention_backward_wgmma},
};
#define N_FAMILIES (int)(sizeof(FAMILIES) / sizeof(FAMILIES[0]))
#define WGMMA_UNAVAILABLE "wgmma needs an sm_90 GPU and a build for sm_90a"

static void case_name(char* name, size_t len, const char* impl, TestShape ts) {
    static const char* DOCS[] = {"", " documents random", " documents without a boundary",
                                 " documents of one token", " documents of 1024"};
    char window[32] = "";
    if (ts.mask.window) snprintf(window, sizeof(window), " window %d", ts.mask.window);
    snprintf(name, len, "attention %s HS%d %s T=%d%s%s%s", impl, ts.s.HS, ts.s.causal ? "causal" : "noncausal", ts.s.T,
             ts.rising ? " rising keys" : "", DOCS[ts.mask.docs], window);
}

// The rows the reference computes when it does not cover all: the edges of every 64-row block.
static int reference_row(int t) { return t % 64 == 0 || t % 64 == 63; }

// ----------------------------------------------------------------------------------------------
// masks

// Tokens (B, T) of a masked shape: ids below EOT, and EOT where `docs` puts documents' starts.
static int* mask_tokens(AttentionShape s, Docs docs, uint64_t seed) {
    static const int EDGES[] = {0, 63, 64, 65, 127, 128, 129, 255, 256, 300, 301, 302, 303};
    int* tokens = (int*)malloc((size_t)s.B * s.T * sizeof(int));
    Rng rng = {seed};
    for (int b = 0; b < s.B; b++) {
        int* row = tokens + (size_t)b * s.T;
        for (int t = 0; t < s.T; t++) {
            uint64_t r = rng_next(&rng);
            int eot = docs == DOCS_EVERY_TOKEN || (docs == DOCS_1024 && t % 1024 == 0) ||
                      (docs == DOCS_RANDOM && b % 2 == 0 && (r >> 32) % 97 == 0);
            row[t] = eot ? EOT : (int)(r % EOT);
        }
        if (docs == DOCS_RANDOM && b % 2 == 0)
            for (size_t i = 0; i < COUNT(EDGES); i++)
                if (EDGES[i] < s.T) row[EDGES[i]] = EOT;
    }
    return tokens;
}

// What attention_document_bounds computes, on the CPU: the first and last position of each row's
// document, a document starting at each EOT.
static void cpu_document_bounds(const int* tokens, int B, int T, int* start, int* end) {
    for (int b = 0; b < B; b++) {
        const int* row = tokens + (size_t)b * T;
        int first = 0, last = T - 1;
        for (int t = 0; t < T; t++) {
            if (row[t] == EOT) first = t;
            start[(size_t)b * T + t] = first;
        }
        for (int t = T - 1; t >= 0; t--) {
            end[(size_t)b * T + t] = last;
            if (row[t] == EOT) last = t - 1;
        }
    }
}

// lo (B, T) of a masked shape: the first key of each row's window.
static int* window_starts(TestShape ts, const int* tokens) {
    AttentionShape s = ts.s;
    size_t n = (size_t)s.B * s.T;
    int* lo = (int*)malloc(n * sizeof(int));
    int* end = (int*)malloc(n * sizeof(int));
    cpu_document_bounds(tokens, s.B, s.T, lo, end);
    for (size_t r = 0; r < n; r++) {
        int t = (int)(r % s.T);
        if (ts.mask.docs == DOCS_NONE) lo[r] = 0;
        if (ts.mask.window && t - ts.mask.window + 1 > lo[r]) lo[r] = t - ts.mask.window + 1;
    }
    free(end);
    return lo;
}

// ----------------------------------------------------------------------------------------------
// float64 reference

static bf16 rng_bf16(Rng* rng, float bound) {  // uniform in [-bound, bound]
    float u = (float)(rng_next(rng) >> 40) / (float)(1 << 24);
    return __float2bfloat16((2.0f * u - 1.0f) * bound);
}

// One head: q, k, v, dout (T, HS) -> o (T, HS), lse (T), dq (T, HS) on every row (all_rows) or
// those of reference_row, and dk, dv (T, HS) when every row is covered. Row i sees the keys from
// lo[i] (lo NULL: 0) to i (causal) or T - 1. Loops run along contiguous rows (kt, vt are K^T and
// V^T) so they vectorize; p and ds hold one row. Work: ~6 T^2 HS multiply-adds, less by the mask.
static void reference_head(int T, int HS, int causal, const int* lo, int all_rows, double scale, const double* q,
                           const double* k, const double* v, const double* dout, double* o,
                           double* lse, double* dq, double* dk, double* dv, double* kt,
                           double* vt, double* p, double* ds) {
    for (int j = 0; j < T; j++)
        for (int d = 0; d < HS; d++) {
            kt[(size_t)d * T + j] = k[(size_t)j * HS + d];
            vt[(size_t)d * T + j] = v[(size_t)j * HS + d];
        }
    memset(dk, 0, sizeof(double) * T * HS);
    memset(dv, 0, sizeof(double) * T * HS);
    for (int i = 0; i < T; i++) {
        if (!all_rows && !reference_row(i)) continue;
        int j0 = lo ? lo[i] : 0, n = causal ? i + 1 : T;
        const double* qi = q + (size_t)i * HS;
        const double* doi = dout + (size_t)i * HS;
        double *oi = o + (size_t)i * HS, *dqi = dq + (size_t)i * HS;
        for (int j = j0; j < n; j++) p[j] = ds[j] = 0.0;
        for (int d = 0; d < HS; d++) {
            double qd = qi[d] * scale, dod = doi[d];
            const double *ktd = kt + (size_t)d * T, *vtd = vt + (size_t)d * T;
            for (int j = j0; j < n; j++) {
                p[j] += qd * ktd[j];    // scores
                ds[j] += dod * vtd[j];  // dP
            }
        }
        double m = -INFINITY, sum = 0.0, dot = 0.0;
        for (int j = j0; j < n; j++) m = fmax(m, p[j]);
        for (int j = j0; j < n; j++) sum += (p[j] = exp(p[j] - m));
        for (int j = j0; j < n; j++) dot += (p[j] /= sum) * ds[j];
        lse[i] = m + log(sum);
        for (int d = 0; d < HS; d++) oi[d] = dqi[d] = 0.0;
        for (int j = j0; j < n; j++) {
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
    const int* lo; // (B, T) each row's first key, masked shapes; else NULL
} Reference;

// lo (B, T): each row's first key (NULL: 0); all_rows: every row, else those of reference_row.
static Reference reference(AttentionShape s, const bf16* qkv, const bf16* dout, const int* lo, int all_rows) {
    int T = s.T, HS = s.HS, NH = s.NH, C = NH * HS;
    size_t th = (size_t)T * HS;
    Reference r;
    r.out = (double*)calloc((size_t)s.B * T * C, sizeof(double));
    r.lse = (double*)calloc((size_t)s.B * NH * T, sizeof(double));
    r.dqkv = (double*)calloc((size_t)s.B * T * 3 * C, sizeof(double));
    r.lo = lo;
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
            reference_head(T, HS, s.causal, lo ? lo + (size_t)b * T : NULL, all_rows, s.scale, q, k, v, dO, o,
                           r.lse + ((size_t)b * NH + h) * T,
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
            if (rows_only && !reference_row(t)) continue;
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
    int *tokens, *doc_start, *doc_end;   // masked shapes with documents, else NULL
    AttentionMask mask;
    int masked;                          // the runs take the mask
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
    d.tokens = d.doc_start = d.doc_end = NULL;
    memset(&d.mask, 0, sizeof(d.mask));
    d.masked = 0;
    return d;
}

// The mask of a masked shape: its window, and with documents their bounds, found on the GPU
// from the tokens (B, T).
static void device_mask(DeviceBuffers* d, TestShape ts, const int* tokens) {
    size_t n = (size_t)ts.s.B * ts.s.T;
    d->masked = 1;
    d->mask.window = ts.mask.window;
    if (ts.mask.docs == DOCS_NONE) return;
    cudaCheck(cudaMalloc(&d->tokens, n * sizeof(int)));
    cudaCheck(cudaMalloc(&d->doc_start, n * sizeof(int)));
    cudaCheck(cudaMalloc(&d->doc_end, n * sizeof(int)));
    cudaCheck(cudaMemcpy(d->tokens, tokens, n * sizeof(int), cudaMemcpyHostToDevice));
    attention_document_bounds(d->tokens, ts.s.B, ts.s.T, EOT, d->doc_start, d->doc_end, 0);
    d->mask.doc_start = d->doc_start;
    d->mask.doc_end = d->doc_end;
}

static void free_device_buffers(DeviceBuffers* d) {
    void* all[] = {d->qkv, d->dout, d->out, d->dqkv, d->saved, d->scratch, d->tokens, d->doc_start, d->doc_end};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (all[i]) cudaCheck(cudaFree(all[i]));
}

static const AttentionMask* run_mask(const DeviceBuffers* d) { return d->masked ? &d->mask : NULL; }

// The naive plan, with the runs' mask.
static AttentionPlan naive_plan(const DeviceBuffers* d) {
    AttentionPlan plan = NAIVE;
    if (d->masked) plan.mask = d->mask;
    return plan;
}

// flash: one family's kernels; NULL: the naive path. saved receives L (flash) or P (naive).
static void run_forward(const FlashFamily* flash, AttentionShape s, DeviceBuffers* d, bf16* out, void* saved) {
    size_t out_bytes = (size_t)s.B * s.T * s.NH * s.HS * sizeof(bf16);
    poison(d->out, out_bytes);
    poison(d->saved, d->saved_bytes);
    AttentionParams p = attention_fused_params(s, d->qkv, d->out, (float*)d->saved, NULL, NULL);
    AttentionPlan naive = naive_plan(d);
    if (flash) flash->forward(&p, run_mask(d), 0);
    else attention_forward(&naive, s, d->out, d->saved, d->qkv, d->scratch, 0);
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
    AttentionPlan naive = naive_plan(d);
    if (flash) flash->backward(&p, run_mask(d), d->scratch, dq, 0);
    else attention_backward(&naive, s, d->dqkv, d->dout, d->out, d->saved, d->qkv, d->scratch, 0);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(dqkv, d->dqkv, dqkv_bytes, cudaMemcpyDeviceToHost));
}

// P (B, NH, T, T) of the naive forward: exact zeros above the diagonal when causal and before
// each row's first key lo (B, T) when masked (lo NULL: 0), rows sum to 1.
static void check_probs(AttentionShape s, const bf16* probs, const int* lo) {
    size_t rows = (size_t)s.B * s.NH * s.T, bad_zero = 0, bad_sum = 0;
    double worst_sum = 0.0;
    for (size_t r = 0; r < rows; r++) {
        const bf16* p = probs + r * s.T;
        int t = (int)(r % s.T), b = (int)(r / ((size_t)s.NH * s.T));
        int j0 = lo ? lo[(size_t)b * s.T + t] : 0, n = s.causal ? t + 1 : s.T;
        double sum = 0.0;
        for (int j = j0; j < n; j++) sum += __bfloat162float(p[j]);
        for (int j = 0; j < j0; j++) bad_zero += __bfloat162float(p[j]) != 0.0f;
        for (int j = n; j < s.T; j++) bad_zero += __bfloat162float(p[j]) != 0.0f;
        keep_worst(&worst_sum, fabs(sum - 1.0));
        bad_sum += !(fabs(sum - 1.0) <= TOL_ROW_SUM);
    }
    CHECK(bad_zero == 0, "%zu masked probabilities are not exactly 0", bad_zero);
    CHECK(bad_sum == 0, "%zu rows of P do not sum to 1 (worst |sum - 1| %.3g)", bad_sum, worst_sum);
}

// A mask that hides nothing: the unmasked run (flash: the family's kernels; NULL: naive) on the
// same inputs gives the masked run's bits: of O, and of L when lse is given (flash).
static void check_unmasked_forward(const FlashFamily* flash, AttentionShape s, DeviceBuffers* d, const bf16* out,
                                   const float* lse) {
    size_t out_n = (size_t)s.B * s.T * s.NH * s.HS, rows = (size_t)s.B * s.NH * s.T;
    bf16* dense_out = (bf16*)malloc(out_n * sizeof(bf16));
    float* dense_lse = lse ? (float*)malloc(rows * sizeof(float)) : NULL;
    d->masked = 0;
    run_forward(flash, s, d, dense_out, dense_lse);
    d->masked = 1;
    CHECK(memcmp(dense_out, out, out_n * sizeof(bf16)) == 0 && (!lse || memcmp(dense_lse, lse, rows * sizeof(float)) == 0),
          "a mask that hides nothing changes the bits of O or L");
    free(dense_out);
    free(dense_lse);
}

// The same for a backward (dQ path dq), from the O and L (or P) in the buffers: dqkv's bits.
static void check_unmasked_backward(const FlashFamily* flash, AttentionShape s, DeviceBuffers* d, FlashDq dq,
                                    const bf16* dqkv) {
    size_t dqkv_n = (size_t)s.B * s.T * 3 * s.NH * s.HS;
    bf16* dense = (bf16*)malloc(dqkv_n * sizeof(bf16));
    d->masked = 0;
    run_backward(flash, s, d, dq, dense);
    d->masked = 1;
    CHECK(memcmp(dense, dqkv, dqkv_n * sizeof(bf16)) == 0, "a mask that hides nothing changes the bits of dQ, dK or dV%s",
          dq == FLASH_DQ_FIXED ? " (fixed-point dQ)" : "");
    free(dense);
}

// The naive path against the reference; leaves its O and dqkv in out, dqkv for the flash cases.
static void test_naive(TestShape ts, DeviceBuffers* d, const Reference* ref, bf16* out,
                       bf16* dqkv) {
    AttentionShape s = ts.s;
    char name[160];
    case_name(name, sizeof(name), "naive", ts);
    test_begin(name);
    AttentionPlan plan = naive_plan(d);
    const char* why = attention_unsupported(&plan, s);
    CHECK(why == NULL, "refused: %s", why);
    if (!why) {
        int full = full_reference(ts);
        size_t out_n = (size_t)s.B * s.T * s.NH * s.HS, dqkv_n = 3 * out_n;
        bf16* probs = (bf16*)malloc(attention_saved_bytes(&NAIVE, s));
        bf16* again = (bf16*)malloc(dqkv_n * sizeof(bf16));
        run_forward(NULL, s, d, out, probs);
        check_probs(s, probs, ref->lo);
        run_backward(NULL, s, d, FLASH_DQ_SEPARATE, dqkv);
        Errors e;
        double worst = errors(&e, out, dqkv, ref->out, ref->dqkv, s, !full, full);
        check_errors("naive vs reference", &e, worst, full);
        run_backward(NULL, s, d, FLASH_DQ_SEPARATE, again);
        CHECK(memcmp(again, dqkv, dqkv_n * sizeof(bf16)) == 0, "two backward runs differ");
        if (hides_nothing(ts)) {
            check_unmasked_forward(NULL, s, d, out, NULL);
            check_unmasked_backward(NULL, s, d, FLASH_DQ_SEPARATE, dqkv);
        }
        free(probs);
        free(again);
    }
    test_end();
}

static void test_flash(const FlashFamily* f, TestShape ts, DeviceBuffers* d, const Reference* ref,
                       const bf16* naive_out, const bf16* naive_dqkv) {
    AttentionShape s = ts.s;
    char name[160];
    case_name(name, sizeof(name), f->name, ts);
    if (f->wgmma && !flash_attention_wgmma_available()) {
        test_skip(name, WGMMA_UNAVAILABLE);
        return;
    }
    test_begin(name);
    AttentionParams call = attention_fused_params(s, d->qkv, d->out, (float*)d->saved, d->dqkv, d->dout);
    const char* why = flash_attention_params_unsupported(&call, run_mask(d));
    CHECK(why == NULL, "refused: %s", why);
    if (!why) {
        int full = full_reference(ts), C = s.NH * s.HS;
        size_t out_n = (size_t)s.B * s.T * C, dqkv_n = 3 * out_n, rows = (size_t)s.B * s.NH * s.T;
        bf16* out = (bf16*)malloc(out_n * sizeof(bf16));
        float* lse = (float*)malloc(rows * sizeof(float));
        bf16* dqkv = (bf16*)malloc(dqkv_n * sizeof(bf16));
        bf16* det1 = (bf16*)malloc(dqkv_n * sizeof(bf16));
        bf16* det2 = (bf16*)malloc(dqkv_n * sizeof(bf16));
        run_forward(f, s, d, out, lse);
        double worst_lse = 0.0;
        for (size_t r = 0; r < rows; r++)
            if (full || reference_row((int)(r % s.T)))
                keep_worst(&worst_lse, fabs(lse[r] - ref->lse[r]) / (1.0 + fabs(ref->lse[r])));
        printf("    %s L: worst |L - ref| / (1 + |ref|) %.2e\n", f->name, worst_lse);
        CHECK(worst_lse <= TOL_LSE, "L: error %.3g over %g", worst_lse, TOL_LSE);

        Errors e;
        char what[64];
        run_backward(f, s, d, FLASH_DQ_ATOMIC, dqkv);
        snprintf(what, sizeof(what), "%s vs reference", f->name);
        check_errors(what, &e, errors(&e, out, dqkv, ref->out, ref->dqkv, s, !full, full), full);
        const FlashDq deterministic[2] = {FLASH_DQ_FIXED, FLASH_DQ_SEPARATE};
        const char* path[2] = {"fixed-point dQ", "separate dQ"};
        for (int p = f->fixed_dq ? 0 : 1; p < 2; p++) {
            run_backward(f, s, d, deterministic[p], det1);
            snprintf(what, sizeof(what), "%s %s vs reference", f->name, path[p]);
            check_errors(what, &e, errors(&e, out, det1, ref->out, ref->dqkv, s, !full, full), full);
            run_backward(f, s, d, deterministic[p], det2);
            CHECK(memcmp(det1, det2, dqkv_n * sizeof(bf16)) == 0, "%s: two backward runs differ", path[p]);
            if (hides_nothing(ts)) check_unmasked_backward(f, s, d, deterministic[p], det1);
        }
        if (hides_nothing(ts)) check_unmasked_forward(f, s, d, out, lse);

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
    int* tokens = masked(ts) ? mask_tokens(s, ts.mask.docs, seed.state) : NULL;
    int* lo = tokens ? window_starts(ts, tokens) : NULL;
    Reference ref = reference(s, qkv, dout, lo, full_reference(ts));

    size_t saved_bytes = attention_saved_bytes(&NAIVE, s);
    size_t scratch_bytes = attention_scratch_bytes(&NAIVE, s);
    if (ts.flash && !flash_attention_unsupported(s)) {
        size_t fs = attention_saved_bytes(&FLASH, s), fx = flash_attention_scratch_bytes(s);
        if (fs > saved_bytes) saved_bytes = fs;
        if (fx > scratch_bytes) scratch_bytes = fx;
    }
    DeviceBuffers d = device_buffers(s, qkv, dout, saved_bytes, scratch_bytes);
    if (masked(ts)) device_mask(&d, ts, tokens);

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
    free(lo);
    free(tokens);
    free(qkv);
    free(dout);
}

// The masked reference, on the CPU: with documents, each document's rows are those of the
// unmasked causal reference run on the document alone; with a window of 1, O = V, dV = dO and dQ,
// dK are 0; with a window of T, the unmasked reference exactly.
static double max_abs_diff(const double* x, const double* y, size_t n) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) keep_worst(&worst, fabs(x[i] - y[i]));
    return worst;
}

static void test_masked_reference(void) {
    test_begin("attention masked reference (CPU)");
    TestShape ts = {make_shape(300, 64, 1), 1, 0, {DOCS_RANDOM, 0}};
    AttentionShape s = ts.s;
    int C = s.NH * s.HS;
    size_t out_n = (size_t)s.B * s.T * C, qkv_n = 3 * out_n;
    bf16* qkv = (bf16*)malloc(qkv_n * sizeof(bf16));
    bf16* dout = (bf16*)malloc(out_n * sizeof(bf16));
    Rng rng = {4242};
    for (size_t i = 0; i < qkv_n; i++) qkv[i] = rng_bf16(&rng, 2.0f);
    for (size_t i = 0; i < out_n; i++) dout[i] = rng_bf16(&rng, 1.0f);
    int* tokens = mask_tokens(s, DOCS_RANDOM, 7);
    int* lo = window_starts(ts, tokens);
    Reference masked = reference(s, qkv, dout, lo, 1);
    // Each document of sequence 0 as a sequence of its own (B = 1).
    double worst = 0.0;
    int documents = 0;
    for (int a = 0; a < s.T; documents++) {
        int e = a + 1;
        while (e < s.T && lo[e] != e) e++;   // [a, e): one document
        AttentionShape one = s;
        one.B = 1;
        one.T = e - a;
        Reference alone = reference(one, qkv + (size_t)a * 3 * C, dout + (size_t)a * C, NULL, 1);
        keep_worst(&worst, max_abs_diff(alone.out, masked.out + (size_t)a * C, (size_t)one.T * C));
        keep_worst(&worst, max_abs_diff(alone.dqkv, masked.dqkv + (size_t)a * 3 * C, (size_t)one.T * 3 * C));
        for (int h = 0; h < s.NH; h++)
            keep_worst(&worst, max_abs_diff(alone.lse + (size_t)h * one.T, masked.lse + (size_t)h * s.T + a, one.T));
        free(alone.out);
        free(alone.lse);
        free(alone.dqkv);
        a = e;
    }
    CHECK(documents > 10, "only %d documents in sequence 0", documents);
    CHECK(worst <= 1e-12, "documents: the masked reference differs from the documents alone by %.3g", worst);

    // Windows of 1 and of T.
    ts.mask = (MaskCase){DOCS_NONE, 1};
    int* lo1 = window_starts(ts, tokens);
    Reference w1 = reference(s, qkv, dout, lo1, 1);
    double err1 = 0.0;
    for (size_t i = 0; i < out_n; i++) {
        size_t b_t = i / C, c = i % C;
        keep_worst(&err1, fabs(w1.out[i] - __bfloat162float(qkv[b_t * 3 * C + 2 * C + c])));
        keep_worst(&err1, fabs(w1.dqkv[b_t * 3 * C + c]));
        keep_worst(&err1, fabs(w1.dqkv[b_t * 3 * C + C + c]));
        keep_worst(&err1, fabs(w1.dqkv[b_t * 3 * C + 2 * C + c] - __bfloat162float(dout[i])));
    }
    CHECK(err1 <= 1e-12, "window 1: O = V, dV = dO, dQ = dK = 0 off by %.3g", err1);
    ts.mask = (MaskCase){DOCS_NONE, s.T};
    int* loT = window_starts(ts, tokens);
    Reference wT = reference(s, qkv, dout, loT, 1), dense = reference(s, qkv, dout, NULL, 1);
    CHECK(memcmp(wT.out, dense.out, out_n * sizeof(double)) == 0 && memcmp(wT.dqkv, dense.dqkv, qkv_n * sizeof(double)) == 0,
          "window T: not the unmasked reference");
    Reference all[] = {masked, w1, wT, dense};
    for (size_t i = 0; i < COUNT(all); i++) {
        free(all[i].out);
        free(all[i].lse);
        free(all[i].dqkv);
    }
    free(lo);
    free(lo1);
    free(loT);
    free(tokens);
    free(qkv);
    free(dout);
    test_end();
}

// attention_document_bounds against the CPU: sequences with <|endoftext|> at the first and last
// positions, in runs, at random, nowhere, everywhere; T from 1 to past 64 per thread of its block.
static void test_document_bounds(void) {
    test_begin("attention document bounds from tokens");
    static const int LENGTHS[] = {1, 2, 7, 1000, 1025, 70001};
    for (size_t k = 0; k < COUNT(LENGTHS); k++) {
        int T = LENGTHS[k], B = 5;
        size_t n = (size_t)B * T;
        int* tokens = (int*)malloc(n * sizeof(int));
        Rng rng = {99u + (uint64_t)T};
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                uint64_t r = rng_next(&rng);
                int eot = b == 0 ? (t == 0 || t == T - 1 || (r >> 40) % 53 == 0)   // ends and random
                        : b == 1 ? 0                                               // none
                        : b == 2 ? 1                                               // every token
                        : b == 3 ? (t / 3) % 2 == 0                                // runs of three
                        : t == T / 2;                                              // one, mid-sequence
                tokens[(size_t)b * T + t] = eot ? EOT : (int)(r % EOT);
            }
        int *start = (int*)malloc(n * sizeof(int)), *end = (int*)malloc(n * sizeof(int));
        int *got_start = (int*)malloc(n * sizeof(int)), *got_end = (int*)malloc(n * sizeof(int));
        cpu_document_bounds(tokens, B, T, start, end);
        int *d_tokens, *d_start, *d_end;
        cudaCheck(cudaMalloc(&d_tokens, n * sizeof(int)));
        cudaCheck(cudaMalloc(&d_start, n * sizeof(int)));
        cudaCheck(cudaMalloc(&d_end, n * sizeof(int)));
        cudaCheck(cudaMemcpy(d_tokens, tokens, n * sizeof(int), cudaMemcpyHostToDevice));
        poison(d_start, n * sizeof(int));
        poison(d_end, n * sizeof(int));
        attention_document_bounds(d_tokens, B, T, EOT, d_start, d_end, 0);
        cudaCheck(cudaMemcpy(got_start, d_start, n * sizeof(int), cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(got_end, d_end, n * sizeof(int), cudaMemcpyDeviceToHost));
        size_t wrong = 0, first = n;
        for (size_t i = 0; i < n; i++)
            if (got_start[i] != start[i] || got_end[i] != end[i]) {
                wrong++;
                if (first == n) first = i;
            }
        CHECK(wrong == 0, "T=%d: %zu positions wrong, the first (b %zu, t %zu): [%d, %d] for [%d, %d]", T, wrong,
              first / T, first % T, got_start[first], got_end[first], start[first], end[first]);
        cudaCheck(cudaFree(d_tokens));
        cudaCheck(cudaFree(d_start));
        cudaCheck(cudaFree(d_end));
        free(tokens);
        free(start);
        free(end);
        free(got_start);
        free(got_end);
    }
    test_end();
}

// Fixed-point dQ takes its units from a bound over each head's K and V: an infinite K makes that
// bound infinite, and the head's dQ must come out NaN (as floating-point sums would make it),
// never finite numbers in a meaningless unit; the other head is untouched.
static void fixed_point_name(char* name, size_t len, const FlashFamily* f) {
    snprintf(name, len, "attention %s fixed-point dQ with an infinite K", f->name);
}

static void test_fixed_point_nonfinite(const FlashFamily* f) {
    char name[160];
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
    char name[160];
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
    f->forward(&p, NULL, 0);
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
        f->backward(&p, NULL, d.scratch, paths[k], 0);
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
    TestShape shapes[MAX_SHAPES];
    int n = test_shapes(shapes, small);

    test_masked_reference();
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        char name[160];
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
        test_skip("attention document bounds from tokens", "no CUDA device");
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
    test_document_bounds();
    for (int f = 0; f < N_FAMILIES; f++)
        if (FAMILIES[f].fixed_dq) test_fixed_point_nonfinite(&FAMILIES[f]);
    for (int f = 0; f < N_FAMILIES; f++)
        for (int T : STRIDED_T)
            for (int HS = 64; HS <= 128; HS += 64) test_strided_views(&FAMILIES[f], T, HS);
    for (int i = 0; i < n; i++) test_shape(shapes[i]);
    return test_exit_code();
}
