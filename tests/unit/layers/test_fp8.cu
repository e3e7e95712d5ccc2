// tests/unit/layers/test_fp8.cu: FP8 (layers/fp8.h) and the FP8 linear layer (layers/matmul.h) against the
// CPU. The CPU's FP8 is an emulation written from the formats' definitions: E4M3 (bias 7, 3
// mantissa bits, largest 448, no infinity) and E5M2 (bias 15, 2 mantissa bits, largest 57344),
// round to nearest with ties to the even mantissa, subnormals, saturation to the largest finite
// value (infinity included), NaN kept.
//  1. fp8_emulation (no GPU): the emulation against cuda_fp8.h's host conversion on every bf16
//     value at four scales, and every code decoded and encoded again.
//  2. fp8_amax: a planted maximum found exactly; a smaller tensor after it leaves it; a NaN wins.
//  3. fp8_quantise_e4m3, _e5m2: 208 x 336 (partial tiles both ways), current scaling, with
//     planted ties, subnormals and the largest value: q and q_t bit for bit, the scale, its
//     inverse and the history; then q_t alone and q alone from the same state.
//  4. fp8_delayed: 20 quantisations with delayed scaling, a spike among them that saturates the
//     next ones and leaves the history after 16 more: each q bit for bit with the scale the
//     history gives, the history, the next scale.
//  5. fp8_matmul_*: the layer's forward and both backward products, N 1024 to 4096, C 768 and 3072
//     (d12's MLP both ways), the head (OC 50304), bias, residual, GELU and ReLU^2, E5M2 and E4M3
//     gradients, with and without fast accumulation; a delayed-scaling forward whose input grows
//     past its history's scale (saturating).
// Outputs are poisoned (NaN) before each call; "+=" outputs start from random values.
//
// The matmuls are checked on sampled elements (the first and last row and column whole, and
// random ones; ~2^27 multiply-adds a product), against two float64 references:
//  (a) from the SAME quantised inputs (the emulation's, with the scales the CPU computes): the
//      GPU's only errors are then the accumulation and the rounding of the output to bf16.
//      Relative L2 error <= 3e-3: the bf16 rounding alone has an rms of at most 2^-7 / sqrt(12) =
//      2.3e-3 of each element (at the bottom of a binade), the fp32 accumulation ~1e-5. With fast
//      accumulation (partial sums kept in the tensor cores' narrower accumulator, ~14 bits:
//      DeepSeek-V3 measures errors to 2% of an element at K 4096) 1e-2. Each element:
//      |out - ref| <= 2^-8 |ref| + 2^-8 S, S = sum |a b|: bf16's rounding (unit roundoff 2^-8)
//      and an allowance for the accumulation; it catches a wrong or unwritten element (off by
//      about the element itself).
//  (b) from the unquantised inputs: each quantised input q of x obeys |q - x| <= u max(|x|, m),
//      u = 2^-4 for E4M3 (3 mantissa bits: half an ulp is 2^-4 of the binade's bottom) and 2^-3
//      for E5M2, m the smallest normal over the scale (below it the spacing is fixed); nothing
//      saturates with current scaling. So |sum a'b' - sum a b| <= sum (|a' - a| |b'| + |a| |b' - b|)
//      = F, and each element: |out - ref_x| <= (a)'s bound + F. Relative L2 error
//      <= sqrt(sa^2 + sb^2 + t^2), sa = u_a / sqrt(3), the rms of a relative rounding error spread
//      evenly over +-u (its worst, at a binade's bottom; the inputs' signs are random, so the
//      errors add in quadrature), t (a)'s tolerance.
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <cuda_fp8.h>
#include "tests/lib/test.h"
#include "tests/unit/layers/layer_test.h"
#include "layers/fp8.h"
#include "layers/matmul.h"

static const char* gpu_case_names[] = {
    "fp8_amax", "fp8_quantise_e4m3", "fp8_quantise_e5m2", "fp8_delayed",
    "fp8_matmul_mlp_up", "fp8_matmul_mlp_up_fast_accum", "fp8_matmul_mlp_down", "fp8_matmul_head",
    "fp8_matmul_gelu", "fp8_matmul_relu2", "fp8_matmul_delayed",
};

// The matmuls of the tests run on the legacy stream, with its workspace.
static MatmulStream legacy;

// ---- FP8 on the CPU
typedef struct {
    int man_bits, bias, infinity;   // infinity: the top exponent holds infinity and NaNs (E5M2)
    double max, min_normal, u;      // u: the unit roundoff, half an ulp at a binade's bottom
    uint8_t max_code;
} Format;
static const Format E4M3 = {3, 7, 0, 448.0, 0x1p-6, 0x1p-4, 0x7e};
static const Format E5M2 = {2, 15, 1, 57344.0, 0x1p-14, 0x1p-3, 0x7b};
static const Format* format_of(Fp8Format f) { return f == FP8_E4M3 ? &E4M3 : &E5M2; }

static uint8_t fp8_encode(double x, const Format* f) {
    if (isnan(x)) return 0x7f;
    uint8_t sign = signbit(x) ? 0x80 : 0;
    double a = fabs(x);
    if (a >= f->max) return sign | f->max_code;
    int emin = 1 - f->bias, e;
    frexp(a, &e);   // a = m 2^e, m in [0.5, 1)
    int exponent = a == 0.0 || e - 1 < emin ? emin : e - 1;
    double steps = nearbyint(a / ldexp(1.0, exponent - f->man_bits));   // ties to even
    int implicit = 1 << f->man_bits;
    if (steps == 2 * implicit) {   // rounded up into the next binade
        exponent++;
        steps = implicit;
    }
    if (steps < implicit) return sign | (uint8_t)steps;   // subnormal or zero: exponent field 0
    return sign | (uint8_t)(((exponent + f->bias) << f->man_bits) | ((int)steps - implicit));
}

static double fp8_decode(uint8_t c, const Format* f) {
    double sign = c & 0x80 ? -1.0 : 1.0;
    int field = (c & 0x7f) >> f->man_bits, mantissa = c & ((1 << f->man_bits) - 1);
    int top = (1 << (7 - f->man_bits)) - 1;
    if (f->infinity && field == top) return mantissa ? NAN : sign * INFINITY;
    if (!f->infinity && (c & 0x7f) == 0x7f) return NAN;
    if (field == 0) return sign * ldexp(mantissa, 1 - f->bias - f->man_bits);
    return sign * ldexp((1 << f->man_bits) + mantissa, field - f->bias - f->man_bits);
}

// layers/fp8.h's scale: 2^floor(log2(fp8_max / amax)), at most 2^126; 1 for 0; NaN past finite.
static float expected_scale(float amax, const Format* f) {
    if (!(amax <= FLT_MAX)) return NAN;
    if (amax == 0.0f) return 1.0f;
    float ratio = fminf((float)f->max / amax, 0x1p126f);
    int e;
    frexpf(ratio, &e);
    return ldexpf(1.0f, e - 1);
}

static float amax_of(const float* x, size_t n) {
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

// q (n) = x quantised with scale; xq (n, or NULL) = the values q stands for, q / scale.
static uint8_t* emulate_quantise(const float* x, size_t n, float scale, const Format* f, float* xq) {
    uint8_t* q = (uint8_t*)host_alloc(n);
    for (size_t i = 0; i < n; i++) {
        q[i] = fp8_encode((double)x[i] * scale, f);
        if (xq) xq[i] = (float)(fp8_decode(q[i], f) / scale);
    }
    return q;
}

static uint8_t* from_device_bytes(const uint8_t* d, size_t n) {
    uint8_t* h = (uint8_t*)host_alloc(n);
    cudaCheck(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
    return h;
}

static float* transposed(const float* x, int rows, int cols) {
    float* t = (float*)host_alloc((size_t)rows * cols * sizeof(float));
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) t[(size_t)c * rows + r] = x[(size_t)r * cols + c];
    return t;
}

// ---- 1. the emulation against cuda_fp8.h's host conversion
static void test_emulation(void) {
    test_begin("fp8_emulation");
    const float scales[4] = {1.0f, 0x1p-10f, 0x1p7f, 0x1p20f};
    const Fp8Format formats[2] = {FP8_E4M3, FP8_E5M2};
    for (int k = 0; k < 2; k++) {
        const Format* f = format_of(formats[k]);
        __nv_fp8_interpretation_t kind = formats[k] == FP8_E4M3 ? __NV_E4M3 : __NV_E5M2;
        int wrong = 0;
        for (int s = 0; s < 4; s++)
            for (uint32_t bits = 0; bits < 65536; bits++) {
                __nv_bfloat16_raw raw;
                raw.x = (unsigned short)bits;
                float x = __bfloat162float(__nv_bfloat16(raw)) * scales[s];
                uint8_t ours = fp8_encode(x, f), theirs = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, kind);
                int same = isnan(x) ? isnan(fp8_decode(ours, f)) && isnan(fp8_decode(theirs, f)) : ours == theirs;
                if (!same && wrong++ == 0)
                    CHECK(0, "format %d: %.9g -> 0x%02x, cuda_fp8.h 0x%02x", k, (double)x, ours, theirs);
            }
        CHECK(wrong == 0, "format %d: %d conversions differ", k, wrong);
        for (int c = 0; c < 256; c++) {
            double v = fp8_decode((uint8_t)c, f);
            if (!isnan(v) && !isinf(v)) CHECK(fp8_encode(v, f) == c, "format %d: code 0x%02x decodes to %g, which encodes to 0x%02x", k, c, v, fp8_encode(v, f));
        }
        CHECK(fp8_decode(f->max_code, f) == f->max, "format %d: the largest code is %g", k, fp8_decode(f->max_code, f));
    }
    test_end();
    free_all();
}

// ---- 2. amax
static float device_amax(const bf16* d_x, size_t n) {
    float* d_amax = (float*)device_alloc(sizeof(float));
    cudaCheck(cudaMemset(d_amax, 0, sizeof(float)));
    fp8_amax(d_amax, d_x, n, 0);
    return *from_device_f32(d_amax, 1);
}

static void test_amax(void) {
    test_begin("fp8_amax");
    const size_t n = 8 * 100003;
    float* x = random_values(n, 3.0f, 0.0f);
    size_t at = n / 3 + 5;
    x[at] = -5.25f;
    bf16* d_x = to_device_bf16(x, n);
    float* d_amax = (float*)device_alloc(sizeof(float));
    cudaCheck(cudaMemset(d_amax, 0, sizeof(float)));
    fp8_amax(d_amax, d_x, n, 0);
    float amax = *from_device_f32(d_amax, 1);
    CHECK(amax == 5.25f, "amax %.9g, expected 5.25", amax);
    float* small = random_values(n, 1.0f, 0.0f);
    bf16* d_small = to_device_bf16(small, n);
    fp8_amax(d_amax, d_small, n, 0);   // a maximum: the smaller tensor leaves it
    amax = *from_device_f32(d_amax, 1);
    CHECK(amax == 5.25f, "after a smaller tensor amax %.9g, expected 5.25", amax);
    float small_amax = device_amax(d_small, n);
    CHECK(small_amax == amax_of(small, n), "amax %.9g, expected %.9g", small_amax, amax_of(small, n));
    small[n - 1] = NAN;
    float nan_amax = device_amax(to_device_bf16(small, n), n);
    CHECK(isnan(nan_amax), "a NaN in the tensor gives amax %.9g, expected NaN", nan_amax);
    test_end();
    free_all();
}

// ---- 3. quantise, current scaling
static Fp8Scale read_state(const Fp8Tensor* t) {
    Fp8Scale s;
    cudaCheck(cudaMemcpy(&s, t->state, sizeof(s), cudaMemcpyDeviceToHost));
    return s;
}

// Whether q (rows, cols) and q_t (cols, rows) (either NULL) equal expected (rows, cols) bit for bit.
static void check_codes(const char* what, const uint8_t* q, const uint8_t* q_t, const uint8_t* expected,
                        const float* x, int rows, int cols) {
    size_t wrong = 0, wrong_t = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            size_t i = (size_t)r * cols + c;
            if (q && q[i] != expected[i] && wrong++ == 0)
                CHECK(0, "%s: q[%d][%d] = 0x%02x, expected 0x%02x (x %.9g)", what, r, c, q[i], expected[i], x[i]);
            if (q_t && q_t[(size_t)c * rows + r] != expected[i] && wrong_t++ == 0)
                CHECK(0, "%s: q_t[%d][%d] = 0x%02x, expected 0x%02x (x %.9g)", what, c, r, q_t[(size_t)c * rows + r],
                      expected[i], x[i]);
        }
    CHECK(wrong == 0 && wrong_t == 0, "%s: %zu codes of q and %zu of q_t differ", what, wrong, wrong_t);
}

static void check_state(const char* what, const Fp8Tensor* t, float scale_used, const float* amaxes, int uses) {
    Fp8Scale s = read_state(t);
    float largest = 0.0f;
    for (int i = 0; i < FP8_HISTORY; i++) {
        float expected = i < uses ? amaxes[uses - 1 - i] : 0.0f;
        largest = fmaxf(largest, expected);
        CHECK(s.history[i] == expected, "%s: history[%d] = %.9g, expected %.9g", what, i, s.history[i], expected);
    }
    float next = expected_scale(largest, format_of(t->format));
    CHECK(s.scale == next, "%s: next scale %.9g, expected %.9g", what, s.scale, next);
    CHECK(s.scale_inv == 1.0f / scale_used, "%s: scale_inv %.9g, expected 1 / %.9g", what, s.scale_inv, scale_used);
    CHECK(s.amax == 0.0f && s.blocks_done == 0, "%s: amax %.9g and blocks_done %u left, expected 0", what, s.amax,
          s.blocks_done);
}

// Plants values whose scaled images are ties, subnormals, boundaries: x = target / scale, exact
// in bf16 (the scale a power of two).
static void plant(float* x, size_t at, double target, float scale) {
    float v = (float)(target / scale);
    if (bf16_value(v) != v) {
        fprintf(stderr, "test_fp8: planted %g is no bf16 value\n", target);
        exit(1);
    }
    x[at] = v;
}

static void test_quantise(const char* name, Fp8Format format) {
    test_begin(name);
    const int rows = 208, cols = 336;
    const size_t n = (size_t)rows * cols;
    const Format* f = format_of(format);
    float* x = random_values(n, 1.0f, 0.0f);
    // amax 1.75 makes the scale 2^8 (E4M3) or 2^15 (E5M2) and the largest value exactly fp8_max.
    float scale = expected_scale(1.75f, f);
    x[n - 1] = -1.75f;
    // Ties at binade 1 (spacing 1/8 or 1/4) and at the top; subnormals (spacing 2^-9 or 2^-16),
    // ties among them, one rounding up to the smallest normal; signed zeros.
    const double e4m3[] = {1.0625, 1.1875, -1.0625, 232.0, 0x1p-8, 3 * 0x1p-10, 0x1p-10, 5 * 0x1p-10, 7 * 0x1p-10,
                           15 * 0x1p-10, 0x1p-6, -0x1p-10, 0.0, -0.0};
    const double e5m2[] = {1.125, 1.375, -1.125, 40960.0 + 4096.0, 0x1p-15, 3 * 0x1p-17, 0x1p-17, 5 * 0x1p-17,
                           7 * 0x1p-17, 7 * 0x1p-16, 0x1p-14, -0x1p-17, 0.0, -0.0};
    const double* targets = format == FP8_E4M3 ? e4m3 : e5m2;
    for (int i = 0; i < 14; i++) plant(x, (size_t)i * 7 + (i % 2) * (size_t)(rows - 1) * cols, targets[i], scale);
    uint8_t* expected = emulate_quantise(x, n, scale, f, NULL);
    bf16* d_x = to_device_bf16(x, n);
    uint8_t* d_q = (uint8_t*)device_alloc(n);
    uint8_t* d_q_t = (uint8_t*)device_alloc(n);
    Fp8Tensor t;
    fp8_tensor_init(&t, format, FP8_SCALING_CURRENT);
    float amaxes[3] = {1.75f, 1.75f, 1.75f};
    fp8_quantise(&t, d_q, d_q_t, d_x, rows, cols, 0);
    check_codes("q and q_t", from_device_bytes(d_q, n), from_device_bytes(d_q_t, n), expected, x, rows, cols);
    check_state("after q and q_t", &t, scale, amaxes, 1);
    cudaCheck(cudaMemset(d_q_t, 0xff, n));
    fp8_quantise(&t, NULL, d_q_t, d_x, rows, cols, 0);
    check_codes("q_t alone", NULL, from_device_bytes(d_q_t, n), expected, x, rows, cols);
    check_state("after q_t alone", &t, scale, amaxes, 2);
    cudaCheck(cudaMemset(d_q, 0xff, n));
    fp8_quantise(&t, d_q, NULL, d_x, rows, cols, 0);
    check_codes("q alone", from_device_bytes(d_q, n), NULL, expected, x, rows, cols);
    check_state("after q alone", &t, scale, amaxes, 3);
    fp8_tensor_free(&t);
    test_end();
    free_all();
}

// ---- 4. delayed scaling
static void test_delayed(void) {
    test_begin("fp8_delayed");
    const int rows = 64, cols = 128, uses = 20;
    const size_t n = (size_t)rows * cols;
    const Format* f = &E4M3;
    // The amaxes, exact in bf16. Use k takes the scale of the largest of uses k - 16 .. k - 1 (use
    // 0 its own): use 1 (2x use 0) and use 2 (the spike, 96) saturate; the spike sets the scale of
    // uses 3 to 18, use 19 is the first without it.
    const float amax_of_use[20] = {1.0f, 2.0f, 96.0f, 0.75f, 1.5f, 3.0f, 0.5f, 2.5f, 1.25f, 0.875f,
                                   1.0f, 2.0f, 3.5f, 0.625f, 1.75f, 2.25f, 1.125f, 0.5f, 1.5f, 3.0f};
    Fp8Tensor t;
    fp8_tensor_init(&t, FP8_E4M3, FP8_SCALING_DELAYED);
    bf16* d_x = (bf16*)device_alloc(n * sizeof(bf16));
    uint8_t* d_q = (uint8_t*)device_alloc(n);
    int saturated = 0;
    for (int k = 0; k < uses; k++) {
        float* x = random_values(n, amax_of_use[k], 0.0f);
        x[(size_t)(k * 977) % n] = k % 2 ? -amax_of_use[k] : amax_of_use[k];
        float largest = 0.0f;
        for (int i = k - FP8_HISTORY; i < k; i++)
            if (i >= 0) largest = fmaxf(largest, amax_of_use[i]);
        float scale = expected_scale(k == 0 ? amax_of_use[0] : largest, f);
        uint8_t* expected = emulate_quantise(x, n, scale, f, NULL);
        for (size_t i = 0; i < n; i++) saturated += (expected[i] & 0x7f) == f->max_code && fabs(x[i] * scale) > f->max;
        cudaCheck(cudaMemcpy(d_x, to_device_bf16(x, n), n * sizeof(bf16), cudaMemcpyDeviceToDevice));
        cudaCheck(cudaMemset(d_q, 0xff, n));
        fp8_quantise(&t, d_q, NULL, d_x, rows, cols, 0);
        char what[64];
        snprintf(what, sizeof(what), "use %d (scale %g)", k, scale);
        check_codes(what, from_device_bytes(d_q, n), NULL, expected, x, rows, cols);
        check_state(what, &t, scale, amax_of_use, k + 1);
    }
    CHECK(saturated > 0, "no use saturated: the test misses the saturating path");
    fp8_tensor_free(&t);
    test_end();
    free_all();
}

// ---- 5. the FP8 linear layer
// A product P (M, Nc) = A (M, K) @ B (Nc, K)^T (+ add (M, Nc)) (+ add_col (Nc)), both operands
// along K, as quantised values and as the unquantised ones with their rounding bounds.
typedef struct {
    const float *aq, *bq, *ax, *bx;
    double ua, na, ub, nb;   // |aq - ax| <= ua max(|ax|, na); likewise b
    const float *add, *add_col;
    int M, Nc, K;
} Product;

typedef struct { double ref_q, S, ref_x, F; } Element;

static Element element(const Product* p, int i, int j) {
    const float *aq = p->aq + (size_t)i * p->K, *bq = p->bq + (size_t)j * p->K;
    const float *ax = p->ax + (size_t)i * p->K, *bx = p->bx + (size_t)j * p->K;
    Element e = {0.0, 0.0, 0.0, 0.0};
    for (int k = 0; k < p->K; k++) {
        double prod = (double)aq[k] * bq[k];
        e.ref_q += prod;
        e.S += fabs(prod);
        e.ref_x += (double)ax[k] * bx[k];
        e.F += p->ua * fmax(fabs(ax[k]), p->na) * fabs(bq[k]) + fabs(ax[k]) * p->ub * fmax(fabs(bx[k]), p->nb);
    }
    double add = (p->add ? p->add[(size_t)i * p->Nc + j] : 0.0) + (p->add_col ? p->add_col[j] : 0.0);
    e.ref_q += add;
    e.ref_x += add;
    return e;
}

// The sampled elements of (M, Nc): rows 0 and M - 1 and columns 0 and Nc - 1 whole, then random
// ones, ~2^27 multiply-adds in all.
static int sample(int M, int Nc, int K, long s, int* i, int* j) {
    long edges = 2L * Nc + 2L * M, random = (1L << 27) / K;
    if (random > 65536) random = 65536;
    if (s >= edges + random) return 0;
    if (s < 2L * Nc) { *i = s < Nc ? 0 : M - 1; *j = (int)(s % Nc); }
    else if (s < edges) { *j = s - 2L * Nc < M ? 0 : Nc - 1; *i = (int)((s - 2L * Nc) % M); }
    else { *i = (int)(uniform() * M); *j = (int)(uniform() * Nc); }
    return 1;
}

// out (M, Nc) against P, or with factor (M, Nc) against P times it (an activation's backward):
// each element within its bounds, (a) and (b) of the header; for P alone the L2 errors against
// tight and against the formats' bound.
static void check_product(const char* what, const float* out, const Product* p, const float* factor, double tight) {
    double err_q = 0.0, norm_q = 0.0, err_x = 0.0, norm_x = 0.0;
    long bad = 0, count = 0;
    int i, j;
    for (long s = 0; sample(p->M, p->Nc, p->K, s, &i, &j); s++, count++) {
        Element e = element(p, i, j);
        double o = out[(size_t)i * p->Nc + j], bound_q = ldexp(fabs(e.ref_q) + e.S, -8), ref_q = e.ref_q, ref_x = e.ref_x;
        double bound_x = bound_q + e.F;
        if (factor) {
            // out = bf16(bf16(P) g'), g' the GPU's fp32 g: P's bound times |g|, one more rounding
            // (2^-8, doubled for g's own fp32 error) and 2^-20 absolute for that error where g
            // is near 0 (GELU's derivative crosses 0; its fp32 terms are <= 1.2).
            double g = factor[(size_t)i * p->Nc + j];
            bound_q = fabs(g) * bound_q + (fabs(ref_q) + bound_q) * (ldexp(fabs(g), -7) + 0x1p-20);
            bound_x = fabs(g) * bound_x + (fabs(ref_q) + bound_x) * (ldexp(fabs(g), -7) + 0x1p-20);
            ref_q *= g;
            ref_x *= g;
        }
        if (!(fabs(o - ref_q) <= bound_q && fabs(o - ref_x) <= bound_x) && bad++ == 0)
            CHECK(0, "%s [%d][%d]: %.6g, reference %.6g (same quantised inputs, bound %.3g), %.6g (unquantised, bound %.3g)",
                  what, i, j, o, ref_q, bound_q, ref_x, bound_x);
        err_q += (o - ref_q) * (o - ref_q);
        norm_q += ref_q * ref_q;
        err_x += (o - ref_x) * (o - ref_x);
        norm_x += ref_x * ref_x;
    }
    CHECK(bad == 0, "%s: %ld of %ld sampled elements outside their bounds", what, bad, count);
    double l2_q = sqrt(err_q / norm_q), l2_x = sqrt(err_x / norm_x);
    double formats = sqrt(p->ua * p->ua / 3 + p->ub * p->ub / 3 + tight * tight);
    if (!factor) {
        CHECK(l2_q <= tight, "%s: relative L2 error %.3g against the same quantised inputs (tolerance %.3g)", what, l2_q,
              tight);
        CHECK(l2_x <= formats, "%s: relative L2 error %.3g against the unquantised inputs (tolerance %.3g)", what, l2_x,
              formats);
    }
    printf("    %s: relative L2 error %.2e (same quantised inputs), %.2e (unquantised; bound %.2e), %ld samples\n",
           what, l2_q, l2_x, formats, count);
}

typedef enum { PLAIN, GELU, RELU2 } Activation;

typedef struct {
    const char* name;
    int N, C, OC;
    int bias, residual;
    Fp8Format grad;
    int fast_accum;
    Activation act;
} MatmulCase;

static double gelu_ref(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
static double gelu_grad_ref(double x) {
    double s = sqrt(2.0 / M_PI), th = tanh(s * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * s * (1.0 + 3.0 * 0.044715 * x * x);
}

// The quantised values of x (n) with current scaling in format f, and their rounding bounds.
typedef struct { float* q; double u, normal; } Quantised;
static Quantised quantised(const float* x, size_t n, const Format* f) {
    Quantised r;
    float scale = expected_scale(amax_of(x, n), f);
    r.q = (float*)host_alloc(n * sizeof(float));
    emulate_quantise(x, n, scale, f, r.q);
    r.u = f->u;
    r.normal = f->min_normal / scale;
    return r;
}

static void test_matmul(const MatmulCase* mc) {
    test_begin(mc->name);
    const int N = mc->N, C = mc->C, OC = mc->OC;
    const size_t NC = (size_t)N * C, NOC = (size_t)N * OC, OCC = (size_t)OC * C;
    // ReLU^2's backward reads its input as relu(h)^2: values >= 0.
    float* inp = random_values(NC, mc->act == RELU2 ? 0.5f : 1.0f, mc->act == RELU2 ? 0.5f : 0.0f);
    float* weight = random_values(OCC, 0.1f, 0.0f);
    float* bias = mc->bias ? random_values(OC, 0.5f, 0.0f) : NULL;
    float* residual = mc->residual ? random_values(NOC, 2.0f, 0.0f) : NULL;
    float* dout = random_values(NOC, 1.0f, 0.0f);
    float* dweight = random_values(OCC, 2.0f, 0.0f);
    float* dbias = random_values(OC, 10.0f, 0.0f);
    float* pre_in = mc->act == GELU ? random_values(NC, 3.0f, 0.0f) : NULL;   // the GELU input of inp
    bf16 *d_inp = to_device_bf16(inp, NC), *d_weight = to_device_bf16(weight, OCC);
    bf16* d_out = (bf16*)device_alloc(NOC * sizeof(bf16));
    bf16* d_pre = mc->act == GELU ? (bf16*)device_alloc(NOC * sizeof(bf16)) : NULL;
    bf16* d_dinp = (bf16*)device_alloc(NC * sizeof(bf16));
    bf16 *d_dweight = to_device_bf16(dweight, OCC), *d_dbias = mc->bias ? to_device_bf16(dbias, OC) : NULL;
    void* scratch = device_alloc(matmul_fp8_scratch_bytes(N, C, OC, 1));
    Fp8Linear l;
    fp8_linear_init(&l, C, OC, N, FP8_SCALING_CURRENT, mc->grad, mc->fast_accum, 1);
    fp8_linear_quantise_weight(&l, d_weight, 0);
    const bf16 *d_bias = mc->bias ? to_device_bf16(bias, OC) : NULL, *d_res = mc->residual ? to_device_bf16(residual, NOC) : NULL;
    if (mc->act == RELU2) matmul_forward_relu2_fp8(d_out, d_inp, d_bias, N, &l, scratch, &legacy);
    else matmul_forward_fp8(d_out, d_pre, d_inp, d_bias, d_res, N, &l, scratch, &legacy);
    bf16* d_dout = to_device_bf16(dout, NOC);
    if (mc->act == RELU2) matmul_backward_relu2_fp8(d_dinp, d_dweight, d_dbias, d_dout, d_inp, N, &l, scratch, &legacy);
    else matmul_backward_fp8(d_dinp, d_dweight, d_dbias, d_dout, mc->act == GELU ? to_device_bf16(pre_in, NC) : NULL, N,
                             &l, scratch, &legacy);
    cudaCheck(cudaDeviceSynchronize());
    float *out = from_device_bf16(d_out, NOC), *dinp = from_device_bf16(d_dinp, NC);
    float* dweight_out = from_device_bf16(d_dweight, OCC);

    const Format* g = format_of(mc->grad);
    Quantised xq = quantised(inp, NC, &E4M3), wq = quantised(weight, OCC, &E4M3), gq = quantised(dout, NOC, g);
    // forward: out (N, OC) = inp (N, C) @ weight (OC, C)^T
    Product fwd = {xq.q, wq.q, inp, weight, xq.u, xq.normal, wq.u, wq.normal, residual, bias, N, OC, C};
    double tight_forward = mc->fast_accum ? 1e-2 : 3e-3;
    if (mc->act == PLAIN) check_product("forward", out, &fwd, NULL, tight_forward);
    if (mc->act == GELU) {
        float* pre = from_device_bf16(d_pre, NOC);
        check_product("forward pre_gelu", pre, &fwd, NULL, tight_forward);
        size_t bad = 0;   // out = gelu(pre), one rounding of an fp32 GELU (tests/unit/layers/test_gelu.cu)
        for (size_t i = 0; i < NOC; i++) {
            double ref = gelu_ref(pre[i]);
            if (!(fabs(out[i] - ref) <= ldexp(fabs(ref), -8) + 1e-6) && bad++ == 0)
                CHECK(0, "forward out[%zu] = %g, gelu(pre_gelu %g) = %g", i, out[i], pre[i], ref);
        }
        CHECK(bad == 0, "forward out: %zu of %zu elements are not gelu(pre_gelu)", bad, NOC);
    }
    if (mc->act == RELU2) {   // out = bf16(relu(h)^2), h = bf16(P): |relu(h) - relu(P)| <= |h - P| <= E
        size_t bad = 0;
        int i, j;
        long count = 0;
        for (long s = 0; sample(N, OC, C, s, &i, &j); s++, count++) {
            Element e = element(&fwd, i, j);
            double r = fmax(e.ref_q, 0.0), E = ldexp(fabs(e.ref_q) + e.S, -8), o = out[(size_t)i * OC + j];
            double bound = (2 * r + E) * E + ldexp((r + E) * (r + E), -8);
            if (!(fabs(o - r * r) <= bound) && bad++ == 0)
                CHECK(0, "forward [%d][%d] = %g, relu(%g)^2 = %g (bound %.3g)", i, j, o, e.ref_q, r * r, bound);
        }
        CHECK(bad == 0, "forward: %zu of %ld sampled elements outside their bounds", bad, count);
    }
    // dinp (N, C) = dout (N, OC) @ weight (OC, C): B = weight^T (C, OC)
    Product dx = {gq.q, transposed(wq.q, OC, C), dout, transposed(weight, OC, C), gq.u, gq.normal, wq.u, wq.normal,
                  NULL, NULL, N, C, OC};
    float* factor = NULL;   // the activation's derivative, by which the backward multiplies dinp
    if (mc->act != PLAIN) {
        factor = (float*)host_alloc(NC * sizeof(float));
        for (size_t i = 0; i < NC; i++) factor[i] = mc->act == GELU ? gelu_grad_ref(pre_in[i]) : 2.0 * sqrt(inp[i]);
    }
    check_product("dinp", dinp, &dx, factor, 3e-3);
    // dweight (OC, C) += dout^T (OC, N) @ inp (N, C): A = dout^T, B = inp^T (C, N)
    Product dw = {transposed(gq.q, N, OC), transposed(xq.q, N, C), transposed(dout, N, OC), transposed(inp, N, C),
                  gq.u, gq.normal, xq.u, xq.normal, dweight, NULL, OC, C, N};
    check_product("dweight", dweight_out, &dw, NULL, 3e-3);
    if (mc->bias) {   // the column sums of the bf16 dout: fp32 sums, one bf16 rounding
        float* dbias_out = from_device_bf16(d_dbias, OC);
        for (int o = 0; o < OC; o++) {
            double ref = dbias[o], S = fabs(dbias[o]);
            for (int n = 0; n < N; n++) {
                ref += dout[(size_t)n * OC + o];
                S += fabs(dout[(size_t)n * OC + o]);
            }
            double bound = ldexp(fabs(ref), -8) + N * 0x1p-24 * S;
            if (!(fabs(dbias_out[o] - ref) <= bound)) {
                CHECK(0, "dbias[%d] = %g, reference %g (bound %.3g)", o, dbias_out[o], ref, bound);
                break;
            }
        }
    }
    fp8_linear_free(&l);
    test_end();
    free_all();
}

// A delayed-scaling forward, three uses, the input 2x and then 4x the first: use 1 takes use 0's
// scale and use 2 the scale of use 1's amax, so the largest inputs of both saturate (those past
// 7/8 of the amax); each use's output against the float64 product of the inputs quantised with
// the scale the history gives (the same quantised inputs).
static void test_matmul_delayed(void) {
    test_begin("fp8_matmul_delayed");
    const int N = 1024, C = 768, OC = 768;
    const size_t NC = (size_t)N * C, NOC = (size_t)N * OC, OCC = (size_t)OC * C;
    float* inp = random_values(NC, 1.0f, 0.0f);
    float* weight = random_values(OCC, 0.1f, 0.0f);
    bf16* d_inp = (bf16*)device_alloc(NC * sizeof(bf16));
    bf16* d_out = (bf16*)device_alloc(NOC * sizeof(bf16));
    void* scratch = device_alloc(matmul_fp8_scratch_bytes(N, C, OC, 1));
    Fp8Linear l;
    fp8_linear_init(&l, C, OC, N, FP8_SCALING_DELAYED, FP8_E5M2, 0, 1);
    fp8_linear_quantise_weight(&l, to_device_bf16(weight, OCC), 0);
    float* wq = (float*)host_alloc(OCC * sizeof(float));
    float w_scale = expected_scale(amax_of(weight, OCC), &E4M3);
    emulate_quantise(weight, OCC, w_scale, &E4M3, wq);
    float amaxes[3];
    for (int use = 0; use < 3; use++) {
        float* x = (float*)host_alloc(NC * sizeof(float));
        for (size_t i = 0; i < NC; i++) x[i] = inp[i] * (float)(1 << use);
        amaxes[use] = amax_of(x, NC);
        float scale = expected_scale(amaxes[use == 0 ? 0 : use - 1], &E4M3);   // the history's largest
        cudaCheck(cudaMemcpy(d_inp, to_device_bf16(x, NC), NC * sizeof(bf16), cudaMemcpyDeviceToDevice));
        cudaCheck(cudaMemset(d_out, 0xff, NOC * sizeof(bf16)));
        matmul_forward_fp8(d_out, NULL, d_inp, NULL, NULL, N, &l, scratch, &legacy);
        float* xq = (float*)host_alloc(NC * sizeof(float));
        uint8_t* codes = emulate_quantise(x, NC, scale, &E4M3, xq);
        size_t saturated = 0;
        for (size_t i = 0; i < NC; i++) saturated += (codes[i] & 0x7f) == E4M3.max_code;
        if (use > 0) CHECK(saturated > NC / 100, "use %d: %zu saturated inputs, expected many", use, saturated);
        // Only (a) applies: saturation is no rounding; (b)'s bound is left out with u = 0, the
        // quantised inputs standing in for the unquantised ones.
        Product fwd = {xq, wq, xq, wq, 0.0, 0.0, 0.0, 0.0, NULL, NULL, N, OC, C};
        char what[32];
        snprintf(what, sizeof(what), "use %d", use);
        check_product(what, from_device_bf16(d_out, NOC), &fwd, NULL, 3e-3);
    }
    fp8_linear_free(&l);
    test_end();
    free_all();
}

int main(void) {
    test_emulation();
    int devices = 0, major = 0, minor = 0;
    const char* why = "no CUDA device";
    if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
        cudaCheck(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
        cudaCheck(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
        why = major * 10 + minor >= 89 ? NULL : "no FP8 tensor cores (compute capability below 8.9)";
    }
    if (why) {
        for (size_t i = 0; i < sizeof(gpu_case_names) / sizeof(gpu_case_names[0]); i++) test_skip(gpu_case_names[i], why);
        return test_exit_code();
    }
    matmul_stream_init(&legacy, 0);
    test_amax();
    test_quantise("fp8_quantise_e4m3", FP8_E4M3);
    test_quantise("fp8_quantise_e5m2", FP8_E5M2);
    test_delayed();
    const MatmulCase cases[] = {
        {"fp8_matmul_mlp_up", 1024, 768, 3072, 1, 0, FP8_E5M2, 0, PLAIN},
        {"fp8_matmul_mlp_up_fast_accum", 1024, 768, 3072, 1, 0, FP8_E5M2, 1, PLAIN},
        {"fp8_matmul_mlp_down", 4096, 3072, 768, 1, 1, FP8_E4M3, 1, PLAIN},
        {"fp8_matmul_head", 1024, 768, 50304, 0, 0, FP8_E5M2, 1, PLAIN},
        {"fp8_matmul_gelu", 1024, 768, 3072, 1, 0, FP8_E5M2, 1, GELU},
        {"fp8_matmul_relu2", 1024, 768, 3072, 0, 0, FP8_E5M2, 1, RELU2},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) test_matmul(&cases[i]);
    test_matmul_delayed();
    matmul_stream_free(&legacy);
    return test_exit_code();
}
