// tests/unit/layers/test_modern_layers.cu: GPU tests of the modern recipe's layers against float64 CPU
// references: RMSNorm (layers/rmsnorm.h), QK-norm + rotary (layers/rotary.h), the ReLU^2 matmul
// (layers/matmul.h), the soft-capped draw (layers/classifier.h; test_layers.cu holds the
// classifier's loss, soft-capped or not, which share a reference). Shapes are no
// multiple of any block size; outputs are poisoned (NaN) first, so an unwritten element fails;
// "+=" outputs start from random values the size of the increment; every backward runs twice
// from the same inputs and must give the same bits. Inputs are exact bf16 values on both sides.
// Tolerances (relative L2 error ||out - ref|| / ||ref|| unless said): a bf16 rounding is within
// 2^-8 of the value (half an ulp of 8 significant bits), ~1.5e-3 RMS, so bf16 outputs get 5e-3
// for one rounding and 1e-2 where one more bf16 intermediate comes in; fp32 outputs get 1e-5 (a
// few fp32 roundings, ~1e-7 each).
// Rotary runs five sequences (QK-norm and rotary together, and each alone): at positions t, as rank 1 of a context-parallel group of 4 (two
// zigzag chunks, attention/ring.h), at 70 000 + t, at 2^24 - T + t (its last row at 2^24 - 1),
// and at 5 + 3t (positions of their own, as a decoding step's rows).
// Its outputs are held element by element too: |out - ref| <= 2^-8 |ref| + 2e-5 |pair|, |pair|
// the length of the element's rotation pair in the reference: the bf16 rounding, plus the fp32
// arithmetic's ~5e-6 |pair| (the norm's sum and rsqrt, __sincosf's 2^-21.4, the angle's fraction
// in fp32). An angle a few thousandths of a radian off, as an fp32 product p f_i gives at
// p ~ 70 000 (a radian at 2^24), fails it. Its backward is checked against the derivative of
// the float64 forward by central differences, not against the backward's own formula.
#include <math.h>
#include <string.h>
#include <stdint.h>
#include "tests/lib/test.h"
#include "tests/unit/layers/layer_test.h"
#include "attention/ring.h"
#include "layers/rmsnorm.h"
#include "layers/rotary.h"
#include "layers/matmul.h"
#include "layers/classifier.h"

static const char* case_names[] = {
    "modern_rmsnorm", "modern_rmsnorm_wide", "modern_rotary_hs64", "modern_rotary_hs128",
    "modern_rotary_hs16", "modern_rotary_hs512", "modern_qk_norm_alone_hs64", "modern_rotary_alone_hs128",
    "modern_matmul_relu2", "modern_matmul_relu2_nobias",
    "modern_sample_softcap",
};

// The matmuls of the tests run on the legacy stream, with its workspace.
static MatmulStream legacy;

// Two device buffers of the same bytes (two runs of a backward from the same inputs).
static void check_same_bits(const char* what, const void* a, const void* b, size_t bytes) {
    unsigned char* ha = (unsigned char*)host_alloc(bytes);
    unsigned char* hb = (unsigned char*)host_alloc(bytes);
    cudaCheck(cudaMemcpy(ha, a, bytes, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(hb, b, bytes, cudaMemcpyDeviceToHost));
    size_t differ = 0;
    for (size_t i = 0; i < bytes; i++) differ += ha[i] != hb[i];
    CHECK(differ == 0, "%s: %zu of %zu bytes differ between two runs from the same inputs", what, differ, bytes);
}

static int* to_device_int(const int* h, size_t n) {
    int* d = (int*)device_alloc(n * sizeof(int));
    cudaCheck(cudaMemcpy(d, h, n * sizeof(int), cudaMemcpyHostToDevice));
    return d;
}

// ---- RMSNorm
static void test_rmsnorm(const char* name, int N, int C) {
    test_begin(name);
    const size_t NC = (size_t)N * C;
    const double eps = RMSNORM_EPS;
    // Row 0 is zeros: eps keeps it finite (rstd = 1 / sqrt(eps), out 0). Its dout is zeros too:
    // its gradient, rstd * dout, would dwarf every other row's.
    float* inp = random_values(NC, 1.0f, 0.5f);
    float* dout = random_values(NC, 1.0f, 0.0f);
    for (int c = 0; c < C; c++) inp[c] = dout[c] = 0.0f;
    bf16* d_inp = to_device_bf16(inp, NC);
    bf16* d_out = (bf16*)device_alloc(NC * sizeof(bf16));
    float* d_rstd = (float*)device_alloc(N * sizeof(float));
    rmsnorm_forward(d_out, d_rstd, d_inp, N, C, 0);

    float* dinp = random_values(NC, 1.0f, 0.0f);
    bf16* d_dout = to_device_bf16(dout, NC);
    bf16* d_dinp[2];
    for (int run = 0; run < 2; run++) {
        d_dinp[run] = to_device_bf16(dinp, NC);
        rmsnorm_backward(d_dinp[run], d_dout, d_inp, d_rstd, N, C, 0);
    }

    double* ref_out = ref_alloc(NC);
    double* ref_rstd = ref_alloc(N);
    double* ref_dinp = ref_copy(dinp, NC);
    for (int i = 0; i < N; i++) {
        const float* x = inp + (size_t)i * C;
        const float* g = dout + (size_t)i * C;
        double ms = 0.0, dot = 0.0;
        for (int c = 0; c < C; c++) ms += (double)x[c] * x[c] / C;
        double r = 1.0 / sqrt(ms + eps);
        for (int c = 0; c < C; c++) {
            ref_out[(size_t)i * C + c] = x[c] * r;
            dot += g[c] * (x[c] * r) / C;
        }
        for (int c = 0; c < C; c++) ref_dinp[(size_t)i * C + c] += r * (g[c] - x[c] * r * dot);
        ref_rstd[i] = r;
    }
    float* rstd = from_device_f32(d_rstd, N);
    CHECK_ERR("forward out", from_device_bf16(d_out, NC), ref_out, NC, 5e-3);
    CHECK(fabs(rstd[0] - ref_rstd[0]) <= 1e-5 * ref_rstd[0], "forward rstd of the zero row: %g, expected %g",
          rstd[0], ref_rstd[0]);
    CHECK_ERR("forward rstd (the other rows)", rstd + 1, ref_rstd + 1, N - 1, 1e-5);
    // dinp + the gradient, rounded once
    CHECK_ERR("backward dinp", from_device_bf16(d_dinp[0], NC), ref_dinp, NC, 5e-3);
    check_same_bits("backward dinp", d_dinp[0], d_dinp[1], NC * sizeof(bf16));
    test_end();
    free_all();
}

// ---- QK-norm + rotary
// cos and sin (HS / 2) of the angles p f_i, f_i = base^(-2i / HS), in float64.
static void rotary_angles_reference(double* c, double* s, int HS, double p, double base) {
    for (int i = 0; i < HS / 2; i++) {
        double angle = p * pow(base, -2.0 * i / HS);
        c[i] = cos(angle);
        s[i] = sin(angle);
    }
}

// out (HS) = the float64 forward of one query or key x (HS), normed (unless norm is 0) and
// rotated by the angles (c, s); returns its rstd (1 without the norm).
static double rotary_reference(double* out, const double* x, int HS, const double* c, const double* s, int norm) {
    double ms = 0.0;
    for (int i = 0; i < HS; i++) ms += x[i] * x[i] / HS;
    double r = norm ? 1.0 / sqrt(ms + (double)RMSNORM_EPS) : 1.0;
    for (int i = 0; i < HS / 2; i++) {
        double y_lo = x[i] * r, y_hi = x[i + HS / 2] * r;
        out[i] = y_lo * c[i] - y_hi * s[i];
        out[i + HS / 2] = y_hi * c[i] + y_lo * s[i];
    }
    return r;
}

// dx (HS) = d/dx of sum(g * forward(x)) by central differences of the float64 forward.
static void rotary_derivative(double* dx, const double* x, const double* g, int HS, const double* c,
                              const double* s, int norm) {
    const double h = 1e-5;   // truncation ~h^2, cancellation ~1e-16 / h: both below 1e-9
    double xp[512], out[512];
    memcpy(xp, x, HS * sizeof(double));
    for (int i = 0; i < HS; i++) {
        double sum[2];
        for (int side = 0; side < 2; side++) {
            xp[i] = x[i] + (side ? -h : h);
            rotary_reference(out, xp, HS, c, s, norm);
            sum[side] = 0.0;
            for (int k = 0; k < HS; k++) sum[side] += g[k] * out[k];
        }
        xp[i] = x[i];
        dx[i] = (sum[0] - sum[1]) / (2.0 * h);
    }
}

#define ROTARY_SEQUENCES 5

// Position of row t of sequence b of T rows (T even), the five sequences the header lists.
static int rotary_position(int b, int t, int T) {
    const int ranks = 4, rank = 1, chunk = T / 2;
    switch (b) {
        case 0: return t;
        case 1: return zigzag_chunk(rank, t / chunk, ranks) * chunk + t % chunk;
        case 2: return 70000 + t;
        case 3: return (1 << 24) - T + t;
        default: return 5 + 3 * t;
    }
}

// norm, rotate: the parts asked for (QK-norm, rotary); a part left out is NULL in the call and
// absent from the reference (the angles of position 0: cos 1, sin 0).
static void test_rotary(const char* name, int T, int NH, int HS, int norm, int rotate) {
    test_begin(name);
    const int B = ROTARY_SEQUENCES, N = B * T, width = 3 * NH * HS;
    const size_t n = (size_t)N * width;
    const float base = 10000.0f;
    int* positions = (int*)host_alloc(N * sizeof(int));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) positions[b * T + t] = rotary_position(b, t, T);
    int* d_positions = to_device_int(positions, N);
    float* qkv = random_values(n, 1.5f, 0.2f);
    float* dqkv = random_values(n, 1.0f, 0.0f);
    bf16* d_qkv = to_device_bf16(qkv, n);
    float* d_rstd = (float*)device_alloc((size_t)N * 2 * NH * sizeof(float));
    float* rstd_arg = norm ? d_rstd : NULL;
    const int* positions_arg = rotate ? d_positions : NULL;
    qk_norm_rotary_forward(d_qkv, rstd_arg, positions_arg, N, NH, HS, base, 0);
    bf16* d_dqkv[2];
    for (int run = 0; run < 2; run++) {
        d_dqkv[run] = to_device_bf16(dqkv, n);
        qk_norm_rotary_backward(d_dqkv[run], d_qkv, rstd_arg, positions_arg, N, NH, HS, base, 0);
    }
    float* out = from_device_bf16(d_qkv, n);
    float* rstd = from_device_f32(d_rstd, (size_t)N * 2 * NH);
    float* dx = from_device_bf16(d_dqkv[0], n);

    // The queries' and keys' columns (N, 2, NH, HS) of the outputs, and their references; V's are
    // compared bit for bit with the inputs.
    const int qk = 2 * NH * HS;
    const size_t n_qk = (size_t)N * qk;
    float* out_qk = (float*)host_alloc(n_qk * sizeof(float));
    float* dx_qk = (float*)host_alloc(n_qk * sizeof(float));
    double* ref_out = ref_alloc(n_qk);
    double* ref_dx = ref_alloc(n_qk);
    double* ref_rstd = ref_alloc((size_t)N * 2 * NH);
    double x[512], g[512], c[256], s[256];
    int outside[ROTARY_SEQUENCES] = {0}, v_changed = 0, dv_changed = 0;
    double worst[ROTARY_SEQUENCES] = {0};   // the largest |out - ref| / |pair| outside the bound
    for (int row = 0; row < N; row++) {
        const size_t at = (size_t)row * width, at_qk = (size_t)row * qk;
        rotary_angles_reference(c, s, HS, rotate ? positions[row] : 0, base);
        for (int v = 0; v < 2 * NH; v++) {
            for (int i = 0; i < HS; i++) {
                x[i] = qkv[at + v * HS + i];
                g[i] = dqkv[at + v * HS + i];
            }
            ref_rstd[(size_t)row * 2 * NH + v] = rotary_reference(ref_out + at_qk + v * HS, x, HS, c, s, norm);
            rotary_derivative(ref_dx + at_qk + v * HS, x, g, HS, c, s, norm);
        }
        for (int i = 0; i < qk; i++) {
            out_qk[at_qk + i] = out[at + i];
            dx_qk[at_qk + i] = dx[at + i];
            const size_t e = at_qk + i, partner = at_qk + i / HS * HS + (i % HS + HS / 2) % HS;
            double pair = sqrt(ref_out[e] * ref_out[e] + ref_out[partner] * ref_out[partner]);
            double err = fabs(out_qk[e] - ref_out[e]);
            if (!(err <= ldexp(fabs(ref_out[e]), -8) + 2e-5 * pair)) {
                outside[row / T]++;
                if (!(err / pair <= worst[row / T])) worst[row / T] = err / pair;
            }
        }
        for (int i = qk; i < width; i++) {
            v_changed += out[at + i] != qkv[at + i];
            dv_changed += dx[at + i] != dqkv[at + i];
        }
    }
    for (int b = 0; b < B; b++)
        CHECK(outside[b] == 0, "forward: %d elements of the sequence from position %d outside the bound, the worst "
              "%.2g of its pair's length", outside[b], positions[b * T], worst[b]);
    CHECK_ERR("forward out", out_qk, ref_out, n_qk, 5e-3);
    if (norm) CHECK_ERR("forward rstd", rstd, ref_rstd, (size_t)N * 2 * NH, 1e-5);
    CHECK(v_changed == 0, "forward: %d values of V changed", v_changed);
    // The backward recovers the normed queries and keys from the rounded output: one more bf16.
    CHECK_ERR("backward dqkv against the float64 forward's derivative", dx_qk, ref_dx, n_qk, 1e-2);
    CHECK(dv_changed == 0, "backward: %d gradients of V changed", dv_changed);
    check_same_bits("backward dqkv", d_dqkv[0], d_dqkv[1], n * sizeof(bf16));
    test_end();
    free_all();
}

// Host only: every head size that is a multiple of 8 is taken or refused with the reason.
static void test_rotary_unsupported(void) {
    test_begin("modern_rotary_unsupported");
    for (int HS = 8; HS <= 1024; HS += 8) {
        int taken = HS == 16 || HS == 32 || HS == 64 || HS == 128 || HS == 256 || HS == 512;
        const char* why = rotary_unsupported(HS, 10000.0f);
        CHECK(taken ? why == NULL : why != NULL, "head size %d: %s", HS, why ? why : "taken");
    }
    const float bases[] = {1.0f, 0.5f, 0.0f, -10000.0f, INFINITY, NAN};
    for (int i = 0; i < 6; i++)
        CHECK(rotary_unsupported(64, bases[i]) != NULL, "base %g was taken", bases[i]);
    CHECK(rotary_unsupported(64, 500000.0f) == NULL, "base 500000 was refused");
    test_end();
}

// ---- the ReLU^2 matmul: forward (N, C) -> (N, OC) = relu(h)^2; backward of the layer that reads
// it, whose input u = relu(h)^2 is (N, H) and whose dinp is the gradient with respect to h.
static void test_matmul_relu2(const char* name, int use_bias) {
    test_begin(name);
    const int N = 615, C = 192, OC = 768, H = 768, OUT = 200;
    float* inp = random_values((size_t)N * C, 1.0f, 0.0f);
    float* weight = random_values((size_t)OC * C, 0.1f, 0.0f);
    float* bias = use_bias ? random_values(OC, 0.5f, 0.0f) : NULL;
    bf16* d_out = (bf16*)device_alloc((size_t)N * OC * sizeof(bf16));
    matmul_forward_relu2(d_out, to_device_bf16(inp, (size_t)N * C), to_device_bf16(weight, (size_t)OC * C),
                         use_bias ? to_device_bf16(bias, OC) : NULL, N, C, OC, &legacy);
    double* ref_out = ref_alloc((size_t)N * OC);
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            double h = use_bias ? bias[o] : 0.0;
            for (int c = 0; c < C; c++) h += (double)inp[(size_t)i * C + c] * weight[(size_t)o * C + c];
            ref_out[(size_t)i * OC + o] = h > 0.0 ? h * h : 0.0;
        }
    // h is rounded to bf16 before it is squared: one more rounding.
    CHECK_ERR("forward out", from_device_bf16(d_out, (size_t)N * OC), ref_out, (size_t)N * OC, 1e-2);

    // The backward's input: u = bf16(relu(h)^2) from h in [-3, 3], half of them negative.
    float* h = random_values((size_t)N * H, 3.0f, 0.0f);
    float* u = (float*)host_alloc((size_t)N * H * sizeof(float));
    for (size_t i = 0; i < (size_t)N * H; i++) u[i] = bf16_value(h[i] > 0.0f ? h[i] * h[i] : 0.0f);
    float* w2 = random_values((size_t)OUT * H, 0.1f, 0.0f);
    float* dout = random_values((size_t)N * OUT, 1.0f, 0.0f);
    float* dweight = random_values((size_t)OUT * H, 5.0f, 0.0f);
    float* dbias = random_values(OUT, 10.0f, 0.0f);
    bf16* d_u = to_device_bf16(u, (size_t)N * H);
    bf16* d_w2 = to_device_bf16(w2, (size_t)OUT * H);
    bf16* d_dout = to_device_bf16(dout, (size_t)N * OUT);
    bf16 *d_dinp[2], *d_dweight[2], *d_dbias[2] = {NULL, NULL};
    for (int run = 0; run < 2; run++) {
        d_dinp[run] = (bf16*)device_alloc((size_t)N * H * sizeof(bf16));
        d_dweight[run] = to_device_bf16(dweight, (size_t)OUT * H);
        if (use_bias) d_dbias[run] = to_device_bf16(dbias, OUT);
        void* scratch = use_bias ? device_alloc(matmul_backward_scratch_bytes(N, H, OUT)) : NULL;
        matmul_backward_relu2(d_dinp[run], d_dweight[run], d_dbias[run], d_dout, d_u, d_w2, N, H, OUT, scratch,
                              &legacy);
    }
    double* ref_dinp = ref_alloc((size_t)N * H);
    double* ref_dweight = ref_copy(dweight, (size_t)OUT * H);
    double* ref_dbias = ref_copy(dbias, OUT);
    for (int i = 0; i < N; i++) {
        const float* g = dout + (size_t)i * OUT;
        for (int o = 0; o < OUT; o++) ref_dbias[o] += g[o];
        for (int c = 0; c < H; c++) {
            double acc = 0.0, hc = h[(size_t)i * H + c], uc = u[(size_t)i * H + c];
            for (int o = 0; o < OUT; o++) {
                acc += (double)g[o] * w2[(size_t)o * H + c];
                ref_dweight[(size_t)o * H + c] += (double)g[o] * uc;
            }
            ref_dinp[(size_t)i * H + c] = acc * 2.0 * (hc > 0.0 ? hc : 0.0);
        }
    }
    // dout @ W rounded to bf16, then times 2 sqrt(u), u itself rounded: 1e-2.
    CHECK_ERR("backward dinp", from_device_bf16(d_dinp[0], (size_t)N * H), ref_dinp, (size_t)N * H, 1e-2);
    CHECK_ERR("backward dweight", from_device_bf16(d_dweight[0], (size_t)OUT * H), ref_dweight, (size_t)OUT * H,
              1e-2);
    if (use_bias) CHECK_ERR("backward dbias", from_device_bf16(d_dbias[0], OUT), ref_dbias, OUT, 1e-2);
    check_same_bits("backward dinp", d_dinp[0], d_dinp[1], (size_t)N * H * sizeof(bf16));
    check_same_bits("backward dweight", d_dweight[0], d_dweight[1], (size_t)OUT * H * sizeof(bf16));
    if (use_bias) check_same_bits("backward dbias", d_dbias[0], d_dbias[1], OUT * sizeof(bf16));
    test_end();
    free_all();
}

// ---- the soft-capped draw
static void test_sample_softcap(void) {
    test_begin("modern_sample_softcap");
    uint64_t seed = 20240520;
    uint64_t* d_seed = (uint64_t*)device_alloc(sizeof(uint64_t));
    cudaCheck(cudaMemcpy(d_seed, &seed, sizeof seed, cudaMemcpyHostToDevice));
    int* d_token = (int*)device_alloc(sizeof(int));
    int token;

    // Temperature 0: logits 100 (column 3) and 120 (column 7) both cap to 2 exactly in fp32, a tie
    // that the lowest column wins; without the cap 120 does.
    {
        const int V = 13, Vp = 16, position = 0;
        float* logits = random_values(Vp, 1.0f, 0.0f);
        logits[3] = 100.0f;
        logits[7] = 120.0f;
        bf16* d_logits = to_device_bf16(logits, Vp);
        int* d_position = to_device_int(&position, 1);
        classifier_sample_softcap(d_token, d_logits, 1, V, Vp, 2.0f, 0.0f, d_seed, d_position, 0);
        cudaCheck(cudaMemcpy(&token, d_token, sizeof token, cudaMemcpyDeviceToHost));
        CHECK(token == 3, "temperature 0, cap 2: drew %d, expected 3 (the capped tie's lowest column)", token);
        classifier_sample(d_token, d_logits, 1, V, Vp, 0.0f, d_seed, d_position, 0);
        cudaCheck(cudaMemcpy(&token, d_token, sizeof token, cudaMemcpyDeviceToHost));
        CHECK(token == 7, "temperature 0, no cap: drew %d, expected 7", token);
    }

    // Temperature 1: ROWS rows of the logits 0, 2, 4, 6 with a cap of 2 (z = 0, 1.52, 1.93, 1.99).
    // Each column's count is within 5 standard deviations of its probability softmax(z); without
    // the cap the probabilities are 0.002, 0.016, 0.117, 0.865, far outside those bounds.
    {
        enum { ROWS = 20000, V = 4, Vp = 8 };
        float* logits = (float*)host_alloc((size_t)ROWS * Vp * sizeof(float));
        int* positions = (int*)host_alloc(ROWS * sizeof(int));
        for (int i = 0; i < ROWS; i++) {
            for (int j = 0; j < Vp; j++) logits[(size_t)i * Vp + j] = j < V ? 2.0f * j : 0.0f;
            positions[i] = i;
        }
        int* d_tokens = (int*)device_alloc(ROWS * sizeof(int));
        classifier_sample_softcap(d_tokens, to_device_bf16(logits, (size_t)ROWS * Vp), ROWS, V, Vp, 2.0f, 1.0f,
                                  d_seed, to_device_int(positions, ROWS), 0);
        int* tokens = (int*)host_alloc(ROWS * sizeof(int));
        cudaCheck(cudaMemcpy(tokens, d_tokens, ROWS * sizeof(int), cudaMemcpyDeviceToHost));
        int counts[V] = {0}, others = 0;
        for (int i = 0; i < ROWS; i++) {
            if (tokens[i] >= 0 && tokens[i] < V) counts[tokens[i]]++;
            else others++;
        }
        CHECK(others == 0, "temperature 1: %d draws outside the %d real columns", others, V);
        double p[V], sum = 0.0;
        for (int j = 0; j < V; j++) sum += p[j] = exp(2.0 * tanh(j));
        for (int j = 0; j < V; j++) {
            p[j] /= sum;
            double freq = (double)counts[j] / ROWS, sigma = sqrt(p[j] * (1.0 - p[j]) / ROWS);
            CHECK(fabs(freq - p[j]) <= 5.0 * sigma, "temperature 1, cap 2: column %d drawn %.4f of the time, "
                  "expected %.4f (+- %.4f)", j, freq, p[j], 5.0 * sigma);
        }
    }
    test_end();
    free_all();
}

int main(void) {
    test_rotary_unsupported();   // host only
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        for (size_t i = 0; i < sizeof(case_names) / sizeof(case_names[0]); i++)
            test_skip(case_names[i], "no CUDA device");
        return test_exit_code();
    }
    matmul_stream_init(&legacy, 0);
    test_rmsnorm("modern_rmsnorm", 615, 320);
    test_rmsnorm("modern_rmsnorm_wide", 77, 1600);
    // T even (two zigzag chunks); N = 5T rows, no multiple of the 8 rows of a block. 2 NH vectors
    // per row: the last round of groups part empty at HS 64 (8 a round), 128 (4) and 16 (32).
    test_rotary("modern_rotary_hs64", 38, 3, 64, 1, 1);
    test_rotary("modern_rotary_hs128", 22, 3, 128, 1, 1);
    test_rotary("modern_rotary_hs16", 10, 17, 16, 1, 1);
    test_rotary("modern_rotary_hs512", 6, 1, 512, 1, 1);
    // Each part alone (the architecture's --qk-norm and --rotary switched on their own).
    test_rotary("modern_qk_norm_alone_hs64", 38, 3, 64, 1, 0);
    test_rotary("modern_rotary_alone_hs128", 22, 3, 128, 0, 1);
    test_matmul_relu2("modern_matmul_relu2", 1);
    test_matmul_relu2("modern_matmul_relu2_nobias", 0);
    test_sample_softcap();
    matmul_stream_free(&legacy);
    return test_exit_code();
}
