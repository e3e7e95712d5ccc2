// tests/unit/layers/test_layers.cu: GPU tests of the layers in layers/ (all but attention). Each forward and
// backward runs on small shapes that are no multiple of any block size and is compared with a
// float64 CPU reference; then the backward passes and the gradient norm run twice and must give
// the same bits. Outputs are poisoned with NaN first, so an unwritten element fails.
// Inputs are exact bf16 values on both sides. Tolerances (relative L2 error ||out-ref||/||ref||):
// a bf16 result carries one rounding, at most 2^-9 ~ 0.002 of each element, so bf16 outputs get
// 5e-3 for a plain rounding and 1e-2 where one more bf16 intermediate or a long fp32
// accumulation comes in; fp32 outputs get 1e-5 (mean, rstd, losses, norm: a few fp32
// roundings, ~1e-7 each) and 1e-6 for the AdamW state, whose formula is short.
// "+=" outputs start from random values of the size of the increment, so a missed "+" fails too.
#include <math.h>
#include <string.h>
#include <stdint.h>
#include "tests/lib/test.h"
#include "tests/unit/layers/layer_test.h"
#include "layers/encoder.h"
#include "layers/layernorm.h"
#include "layers/matmul.h"
#include "layers/classifier.h"
#include "layers/adamw.h"
#include "layers/global_norm.h"

static const char* case_names[] = {
    "layers_encoder", "layers_layernorm", "layers_layernorm_wide", "layers_matmul_bias",
    "layers_matmul_gelu", "layers_matmul_nobias", "layers_matmul_residual", "layers_classifier",
    "layers_classifier_softcap",
    "layers_adamw", "layers_global_norm", "layers_determinism", "layers_matmul_two_streams",
};

// The matmuls of the tests run on the legacy stream, with its workspace.
static MatmulStream legacy;

// ---- encoder
static void test_encoder(void) {
    test_begin("layers_encoder");
    const int B = 5, T = 123, maxT = 128, C = 192, V = 50, Vp = 128, N = B * T;
    int* tokens = (int*)host_alloc(N * sizeof(int));
    for (int i = 0; i < N; i++) tokens[i] = (i % 3 == 0) ? 7 : (int)(uniform() * V);  // 7: a long group
    float* wte = random_values((size_t)Vp * C, 1.0f, 0.0f);
    float* wpe = random_values((size_t)maxT * C, 1.0f, 0.0f);
    int* d_tokens = (int*)device_alloc(N * sizeof(int));
    cudaCheck(cudaMemcpy(d_tokens, tokens, N * sizeof(int), cudaMemcpyHostToDevice));
    bf16* d_out = (bf16*)device_alloc((size_t)N * C * sizeof(bf16));
    encoder_forward(d_out, d_tokens, to_device_bf16(wte, (size_t)Vp * C),
                    to_device_bf16(wpe, (size_t)maxT * C), B, T, C, 0);
    double* ref = ref_alloc((size_t)N * C);
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++)
            ref[(size_t)i * C + c] = (double)wte[tokens[i] * C + c] + wpe[(i % T) * C + c];
    CHECK_ERR("forward out", from_device_bf16(d_out, (size_t)N * C), ref, (size_t)N * C, 5e-3);

    float* dout = random_values((size_t)N * C, 1.0f, 0.0f);
    float* dwte = random_values((size_t)Vp * C, 2.0f, 0.0f);
    float* dwpe = random_values((size_t)maxT * C, 1.0f, 0.0f);
    bf16* d_dwte = to_device_bf16(dwte, (size_t)Vp * C);
    bf16* d_dwpe = to_device_bf16(dwpe, (size_t)maxT * C);
    int* d_groups = (int*)device_alloc(encoder_token_groups_bytes(N));
    int groups = encoder_token_groups(d_groups, tokens, N, 0);
    encoder_backward(d_dwte, d_dwpe, to_device_bf16(dout, (size_t)N * C), d_groups, groups, B, T, C, 0);
    double* ref_dwte = ref_copy(dwte, (size_t)Vp * C);
    double* ref_dwpe = ref_copy(dwpe, (size_t)maxT * C);
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++) {
            ref_dwte[tokens[i] * C + c] += dout[(size_t)i * C + c];
            ref_dwpe[(i % T) * C + c] += dout[(size_t)i * C + c];
        }
    CHECK_ERR("backward dwte", from_device_bf16(d_dwte, (size_t)Vp * C), ref_dwte, (size_t)Vp * C, 1e-2);
    CHECK_ERR("backward dwpe", from_device_bf16(d_dwpe, (size_t)maxT * C), ref_dwpe,
              (size_t)maxT * C, 1e-2);
    test_end();
    free_all();
}

// ---- layernorm
static void test_layernorm(const char* name, int N, int C) {
    test_begin(name);
    const size_t NC = (size_t)N * C;
    float* inp = random_values(NC, 1.0f, 0.5f);
    float* weight = random_values(C, 0.2f, 1.0f);
    float* bias = random_values(C, 0.2f, 0.0f);
    bf16* d_inp = to_device_bf16(inp, NC);
    bf16* d_weight = to_device_bf16(weight, C);
    bf16* d_out = (bf16*)device_alloc(NC * sizeof(bf16));
    float* d_mean = (float*)device_alloc(N * sizeof(float));
    float* d_rstd = (float*)device_alloc(N * sizeof(float));
    layernorm_forward(d_out, d_mean, d_rstd, d_inp, d_weight, to_device_bf16(bias, C), N, C, 0);
    double* ref_out = ref_alloc(NC);
    double* ref_mean = ref_alloc(N);
    double* ref_rstd = ref_alloc(N);
    for (int i = 0; i < N; i++) {
        const float* x = inp + (size_t)i * C;
        double m = 0.0, var = 0.0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        for (int c = 0; c < C; c++) var += (x[c] - m) * (x[c] - m);
        double s = 1.0 / sqrt(var / C + 1e-5);
        for (int c = 0; c < C; c++) ref_out[(size_t)i * C + c] = (x[c] - m) * s * weight[c] + bias[c];
        ref_mean[i] = m;
        ref_rstd[i] = s;
    }
    float* mean = from_device_f32(d_mean, N);
    float* rstd = from_device_f32(d_rstd, N);
    CHECK_ERR("forward out", from_device_bf16(d_out, NC), ref_out, NC, 5e-3);
    CHECK_ERR("forward mean", mean, ref_mean, N, 1e-5);
    CHECK_ERR("forward rstd", rstd, ref_rstd, N, 1e-5);

    float* dout = random_values(NC, 1.0f, 0.0f);
    float* dinp = random_values(NC, 1.0f, 0.0f);
    float* dweight = random_values(C, 10.0f, 0.0f);
    float* dbias = random_values(C, 10.0f, 0.0f);
    bf16* d_dinp = to_device_bf16(dinp, NC);
    bf16* d_dweight = to_device_bf16(dweight, C);
    bf16* d_dbias = to_device_bf16(dbias, C);
    layernorm_backward(d_dinp, d_dweight, d_dbias, to_device_bf16(dout, NC), d_inp, d_weight, d_mean,
                       d_rstd, N, C, device_alloc(layernorm_backward_scratch_bytes(N, C)), 0);
    double* ref_dinp = ref_copy(dinp, NC);
    double* ref_dweight = ref_copy(dweight, C);
    double* ref_dbias = ref_copy(dbias, C);
    for (int i = 0; i < N; i++) {
        const float* x = inp + (size_t)i * C;
        const float* dy = dout + (size_t)i * C;
        double mean_dnorm = 0.0, mean_dnorm_xhat = 0.0;
        for (int c = 0; c < C; c++) {
            double xhat = (x[c] - (double)mean[i]) * rstd[i];
            mean_dnorm += (double)dy[c] * weight[c] / C;
            mean_dnorm_xhat += (double)dy[c] * weight[c] * xhat / C;
            ref_dweight[c] += dy[c] * xhat;
            ref_dbias[c] += dy[c];
        }
        for (int c = 0; c < C; c++) {
            double xhat = (x[c] - (double)mean[i]) * rstd[i];
            double dnorm = (double)dy[c] * weight[c];
            ref_dinp[(size_t)i * C + c] += (dnorm - mean_dnorm - xhat * mean_dnorm_xhat) * rstd[i];
        }
    }
    CHECK_ERR("backward dinp", from_device_bf16(d_dinp, NC), ref_dinp, NC, 1e-2);
    CHECK_ERR("backward dweight", from_device_bf16(d_dweight, C), ref_dweight, C, 1e-2);
    CHECK_ERR("backward dbias", from_device_bf16(d_dbias, C), ref_dbias, C, 1e-2);
    test_end();
    free_all();
}

// ---- matmul
static double gelu(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
static double gelu_grad(double x) {
    double s = sqrt(2.0 / M_PI), th = tanh(s * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * s * (1.0 + 3.0 * 0.044715 * x * x);
}

static void test_matmul(const char* name, int OC, int use_bias, int use_gelu, int use_residual) {
    test_begin(name);
    const int N = 615, C = 192;
    // With use_gelu the input is itself a GELU output, inp = gelu(inp_pre), whose derivative
    // the backward applies to dinp (the MLP's hidden layer).
    float* inp = random_values((size_t)N * C, 1.0f, 0.0f);
    float* inp_pre = use_gelu ? random_values((size_t)N * C, 3.0f, 0.0f) : NULL;
    bf16* d_inp_pre = use_gelu ? to_device_bf16(inp_pre, (size_t)N * C) : NULL;
    if (use_gelu) {
        for (size_t i = 0; i < (size_t)N * C; i++) inp[i] = (float)gelu(inp_pre[i]);
        inp = from_device_bf16(to_device_bf16(inp, (size_t)N * C), (size_t)N * C);   // exact bf16 values
    }
    float* weight = random_values((size_t)OC * C, 0.1f, 0.0f);
    float* bias = use_bias ? random_values(OC, 0.5f, 0.0f) : NULL;
    float* residual = use_residual ? random_values((size_t)N * OC, 2.0f, 0.0f) : NULL;
    bf16* d_inp = to_device_bf16(inp, (size_t)N * C);
    bf16* d_weight = to_device_bf16(weight, (size_t)OC * C);
    bf16* d_out = (bf16*)device_alloc((size_t)N * OC * sizeof(bf16));
    bf16* d_pre = use_gelu ? (bf16*)device_alloc((size_t)N * OC * sizeof(bf16)) : NULL;
    matmul_forward(d_out, d_pre, d_inp, d_weight, use_bias ? to_device_bf16(bias, OC) : NULL,
                   use_residual ? to_device_bf16(residual, (size_t)N * OC) : NULL, N, C, OC, &legacy);
    double* ref_pre = ref_alloc((size_t)N * OC);
    double* ref_out = ref_alloc((size_t)N * OC);
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            double acc = (use_bias ? bias[o] : 0.0) + (use_residual ? residual[(size_t)i * OC + o] : 0.0);
            for (int c = 0; c < C; c++)
                acc += (double)inp[(size_t)i * C + c] * weight[(size_t)o * C + c];
            ref_pre[(size_t)i * OC + o] = acc;
            ref_out[(size_t)i * OC + o] = use_gelu ? gelu(acc) : acc;
        }
    CHECK_ERR("forward out", from_device_bf16(d_out, (size_t)N * OC), ref_out, (size_t)N * OC, 5e-3);
    float* pre = use_gelu ? from_device_bf16(d_pre, (size_t)N * OC) : NULL;
    if (use_gelu) CHECK_ERR("forward pre_gelu", pre, ref_pre, (size_t)N * OC, 5e-3);

    float* dout = random_values((size_t)N * OC, 1.0f, 0.0f);
    float* dweight = random_values((size_t)OC * C, 5.0f, 0.0f);
    float* dbias = random_values(OC, 10.0f, 0.0f);
    bf16* d_dinp = (bf16*)device_alloc((size_t)N * C * sizeof(bf16));
    bf16* d_dweight = to_device_bf16(dweight, (size_t)OC * C);
    bf16* d_dbias = use_bias ? to_device_bf16(dbias, OC) : NULL;
    // the promise of matmul.h: without dbias, no scratch
    void* scratch = use_bias ? device_alloc(matmul_backward_scratch_bytes(N, C, OC)) : NULL;
    matmul_backward(d_dinp, d_dweight, d_dbias, to_device_bf16(dout, (size_t)N * OC), d_inp, d_weight,
                    d_inp_pre, N, C, OC, scratch, &legacy);
    double* ref_dinp = ref_alloc((size_t)N * C);
    double* ref_dweight = ref_copy(dweight, (size_t)OC * C);
    double* ref_dbias = ref_copy(dbias, OC);
    double* doutp = ref_alloc(OC);
    for (int i = 0; i < N; i++) {
        for (int o = 0; o < OC; o++) {
            size_t io = (size_t)i * OC + o;
            doutp[o] = dout[io];
            ref_dbias[o] += doutp[o];
        }
        for (int c = 0; c < C; c++) {
            double acc = 0.0;
            for (int o = 0; o < OC; o++) {
                acc += doutp[o] * weight[(size_t)o * C + c];
                ref_dweight[(size_t)o * C + c] += doutp[o] * inp[(size_t)i * C + c];
            }
            ref_dinp[(size_t)i * C + c] = acc * (use_gelu ? gelu_grad(inp_pre[(size_t)i * C + c]) : 1.0);
        }
    }
    CHECK_ERR("backward dinp", from_device_bf16(d_dinp, (size_t)N * C), ref_dinp, (size_t)N * C, 1e-2);
    CHECK_ERR("backward dweight", from_device_bf16(d_dweight, (size_t)OC * C), ref_dweight,
              (size_t)OC * C, 1e-2);
    if (use_bias) CHECK_ERR("backward dbias", from_device_bf16(d_dbias, OC), ref_dbias, OC, 1e-2);
    test_end();
    free_all();
}


// ---- classifier
// capped: the logits soft-capped first (the modern recipe), z = cap tanh(x / cap) in place of x in
// the softmax, and the gradient times dz/dx = 1 - tanh^2(x / cap).
static void test_classifier(const char* name, int capped) {
    test_begin(name);
    // A small vocabulary, and one past the 51 200 columns that a block of the kernel holds in
    // registers: the rest of each row goes through its loop (two packs of 8 for some threads).
    // Row 0's target is the last real column; the padding holds 50, which must not count. Capped,
    // the small vocabulary's logits reach twice its cap of 30, and the large one's cap of 5 is one
    // that most of its logits saturate.
    const struct { int N, V, Vp; float cap, capped_spread; } shapes[] = {{123, 300, 384, 30.0f, 60.0f},
                                                                         {5, 54003, 54016, 5.0f, 20.0f}};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        const int N = shapes[c].N, V = shapes[c].V, Vp = shapes[c].Vp;
        const double cap = capped ? shapes[c].cap : 0.0;
        const size_t NVp = (size_t)N * Vp;
        char what[64];
        float* logits = random_values(NVp, capped ? shapes[c].capped_spread : 4.0f, 0.0f);
        for (int i = 0; i < N; i++)
            for (int j = V; j < Vp; j++) logits[(size_t)i * Vp + j] = 50.0f;
        int* targets = (int*)host_alloc(N * sizeof(int));
        for (int i = 0; i < N; i++) targets[i] = i == 0 ? V - 1 : (int)(uniform() * V);
        int* d_targets = (int*)device_alloc(N * sizeof(int));
        cudaCheck(cudaMemcpy(d_targets, targets, N * sizeof(int), cudaMemcpyHostToDevice));
        const float dloss_scale = 1.0f / N;
        double* ref_loss = ref_alloc(N);
        double* ref_dlogits = ref_alloc(NVp);
        double* z = ref_alloc(V);
        for (int i = 0; i < N; i++) {
            const float* x = logits + (size_t)i * Vp;
            double m = -INFINITY, s = 0.0;
            for (int j = 0; j < V; j++) m = fmax(m, z[j] = capped ? cap * tanh(x[j] / cap) : x[j]);
            for (int j = 0; j < V; j++) s += exp(z[j] - m);
            double lse = m + log(s);
            ref_loss[i] = lse - z[targets[i]];
            for (int j = 0; j < Vp; j++) {
                double t = capped && j < V ? tanh(x[j] / cap) : 0.0;
                ref_dlogits[(size_t)i * Vp + j] =
                    j < V ? (exp(z[j] - lse) - (j == targets[i])) * dloss_scale * (1.0 - t * t) : 0.0;
            }
        }
        // The dlogits of two runs from the same logits: the same bits.
        bf16* d_dlogits[2] = {NULL, NULL};
        for (int write_dlogits = 0; write_dlogits <= 1; write_dlogits++)
            for (int run = 0; run < 1 + write_dlogits; run++) {
                bf16* d_logits = to_device_bf16(logits, NVp);
                float* d_losses = (float*)device_alloc(N * sizeof(float));
                if (capped)
                    classifier_forward_backward_softcap(d_logits, d_losses, d_targets, N, V, Vp, (float)cap,
                                                        dloss_scale, write_dlogits, 0);
                else
                    classifier_forward_backward(d_logits, d_losses, d_targets, N, V, Vp, dloss_scale,
                                                write_dlogits, 0);
                if (write_dlogits) d_dlogits[run] = d_logits;
                if (run == 1) continue;
                // capped: each z within cap 2^-11 of cap tanh(x / cap) (layers/classifier.cu), so
                // each loss within 2 cap 2^-11, of losses whose root mean square is above 10
                snprintf(what, sizeof what, "V %d: losses%s", V, write_dlogits ? " (with dlogits)" : "");
                CHECK_ERR(what, from_device_f32(d_losses, N), ref_loss, N, capped ? 2.0 * cap / 2048.0 / 10.0 : 1e-5);
                float* after = from_device_bf16(d_logits, NVp);
                if (!write_dlogits) {
                    CHECK(memcmp(after, logits, NVp * sizeof(float)) == 0,
                          "V %d: logits changed without write_dlogits", V);
                    continue;
                }
                snprintf(what, sizeof what, "V %d: dlogits", V);
                CHECK_ERR(what, after, ref_dlogits, NVp, 1e-2);
                int padding_nonzero = 0;
                for (int i = 0; i < N; i++)
                    for (int j = V; j < Vp; j++) padding_nonzero += after[(size_t)i * Vp + j] != 0.0f;
                CHECK(padding_nonzero == 0, "V %d: %d padding dlogits are not 0", V, padding_nonzero);
            }
        unsigned char* bits[2];
        for (int run = 0; run < 2; run++) {
            bits[run] = (unsigned char*)host_alloc(NVp * sizeof(bf16));
            cudaCheck(cudaMemcpy(bits[run], d_dlogits[run], NVp * sizeof(bf16), cudaMemcpyDeviceToHost));
        }
        CHECK(memcmp(bits[0], bits[1], NVp * sizeof(bf16)) == 0, "V %d: two runs give different dlogits", V);
    }
    test_end();
    free_all();
}

// ---- AdamW
static void test_adamw(void) {
    test_begin("layers_adamw");
    const size_t n = 1001;
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
    float grad_scale = 0.7f;
    const int t = 3;
    float* master = random_values(n, 1.0f, 0.0f);
    float* grads = random_values(n, 1.0f, 0.0f);
    float* m = random_values(n, 0.1f, 0.0f);
    float* v = random_values(n, 0.01f, 0.011f);
    bf16* d_params = (bf16*)device_alloc(n * sizeof(bf16));
    float* d_master = to_device_f32(master, n);
    float* d_m = to_device_f32(m, n);
    float* d_v = to_device_f32(v, n);
    adamw_update(d_params, d_master, to_device_bf16(grads, n), d_m, d_v, n, lr, b1, b2, t, eps, wd,
                 to_device_f32(&grad_scale, 1), 0);
    double* ref_master = ref_alloc(n);
    double* ref_m = ref_alloc(n);
    double* ref_v = ref_alloc(n);
    for (size_t i = 0; i < n; i++) {
        double g = (double)grads[i] * grad_scale;
        ref_m[i] = b1 * (double)m[i] + (1.0 - b1) * g;
        ref_v[i] = b2 * (double)v[i] + (1.0 - b2) * g * g;
        double m_hat = ref_m[i] / (1.0 - pow(b1, t)), v_hat = ref_v[i] / (1.0 - pow(b2, t));
        ref_master[i] = master[i] - lr * (m_hat / (sqrt(v_hat) + eps) + wd * master[i]);
    }
    float* new_master = from_device_f32(d_master, n);
    CHECK_ERR("master", new_master, ref_master, n, 1e-6);
    CHECK_ERR("m", from_device_f32(d_m, n), ref_m, n, 1e-6);
    CHECK_ERR("v", from_device_f32(d_v, n), ref_v, n, 1e-6);
    float* params = from_device_bf16(d_params, n);
    int wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += params[i] != bf16_value(new_master[i]);
    CHECK(wrong == 0, "%d bf16 params are not the master weights rounded to nearest", wrong);
    test_end();
    free_all();
}

// ---- global norm
static void test_global_norm(void) {
    test_begin("layers_global_norm");
    const size_t sizes[] = {3, 100003, 3000017};
    for (int k = 0; k < 3; k++) {
        size_t n = sizes[k];
        float* grads = random_values(n, 1.0f, 0.0f);
        float* d_out = (float*)device_alloc(sizeof(float));
        global_norm_squared(d_out, to_device_bf16(grads, n), n,
                            device_alloc(global_norm_scratch_bytes(n)), 0);
        double ref = 0.0;
        for (size_t i = 0; i < n; i++) ref += (double)grads[i] * grads[i];
        float out = *from_device_f32(d_out, 1);
        CHECK(fabs(out - ref) <= 1e-5 * ref, "n=%zu: %.8g, expected %.8g", n, out, ref);
    }
    test_end();
    free_all();
}

// ---- determinism: the backward passes and the norm, twice from the same state, same bits
// Returns the bytes of every output of one run (host, freed by free_all).
static unsigned char* backward_run(size_t* bytes) {
    const int B = 8, T = 512, C = 256, OC = 1024, V = 1000, N = B * T;
    const size_t NC = (size_t)N * C;
    rng_state = 12345;  // the same inputs on every call
    int* tokens = (int*)host_alloc(N * sizeof(int));
    for (int i = 0; i < N; i++) tokens[i] = (int)(uniform() * uniform() * V);  // skewed: long groups
    bf16* dout_c = to_device_bf16(random_values(NC, 1.0f, 0.0f), NC);
    bf16* dout_oc = to_device_bf16(random_values((size_t)N * OC, 1.0f, 0.0f), (size_t)N * OC);
    bf16* inp = to_device_bf16(random_values(NC, 1.0f, 0.5f), NC);
    bf16* inp_pre_gelu = to_device_bf16(random_values(NC, 3.0f, 0.0f), NC);
    bf16* weight_ln = to_device_bf16(random_values(C, 0.2f, 1.0f), C);
    bf16* weight_mm = to_device_bf16(random_values((size_t)OC * C, 0.1f, 0.0f), (size_t)OC * C);
    float* mean = to_device_f32(random_values(N, 0.1f, 0.5f), N);
    float* rstd = to_device_f32(random_values(N, 0.1f, 1.7f), N);
    // the gradients, contiguous so that the norm covers them all
    size_t sizes[] = {(size_t)V * C, (size_t)T * C, NC, C, C, NC, (size_t)OC * C, (size_t)OC};
    size_t total = 0;
    for (int i = 0; i < 8; i++) total += sizes[i];
    bf16* grads = to_device_bf16(random_values(total, 1.0f, 0.0f), total);
    bf16* g[8];
    g[0] = grads;
    for (int i = 1; i < 8; i++) g[i] = g[i - 1] + sizes[i - 1];
    matmul_backward(g[5], g[6], g[7], dout_oc, inp, weight_mm, inp_pre_gelu, N, C, OC,
                    device_alloc(matmul_backward_scratch_bytes(N, C, OC)), &legacy);
    layernorm_backward(g[2], g[3], g[4], dout_c, inp, weight_ln, mean, rstd, N, C,
                       device_alloc(layernorm_backward_scratch_bytes(N, C)), 0);
    int* d_groups = (int*)device_alloc(encoder_token_groups_bytes(N));
    int groups = encoder_token_groups(d_groups, tokens, N, 0);
    encoder_backward(g[0], g[1], dout_c, d_groups, groups, B, T, C, 0);
    float* norm = (float*)device_alloc(sizeof(float));
    global_norm_squared(norm, grads, total, device_alloc(global_norm_scratch_bytes(total)), 0);
    *bytes = total * sizeof(bf16) + sizeof(float);
    unsigned char* out = (unsigned char*)host_alloc(*bytes);
    cudaCheck(cudaMemcpy(out, grads, total * sizeof(bf16), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(out + total * sizeof(bf16), norm, sizeof(float), cudaMemcpyDeviceToHost));
    return out;
}

static void test_determinism(void) {
    test_begin("layers_determinism");
    size_t bytes1, bytes2;
    unsigned char* run1 = backward_run(&bytes1);
    unsigned char* run2 = backward_run(&bytes2);
    size_t differ = 0;
    for (size_t i = 0; i < bytes1; i++) differ += run1[i] != run2[i];
    CHECK(bytes1 == bytes2 && differ == 0, "%zu of %zu bytes differ between two identical runs",
          differ, bytes1);
    float norm;
    memcpy(&norm, run1 + bytes1 - sizeof(float), sizeof(float));
    CHECK(isfinite(norm) && norm > 0.0f, "gradient norm squared is %g", norm);
    test_end();
    free_all();
}

// Matmuls on two streams at once, each stream with its workspace (layers/matmul.h): every
// output equals its float64 reference (1e-2: a long fp32 accumulation, then bf16). A 64 x 64
// output of 32768 products each is one tile of the output, so cuBLASLt's algorithms split the
// products over blocks that meet in the workspace: a workspace both streams used at once would
// mix their partial sums. Each stream runs MATMULS_PER_STREAM products of its own inputs, the
// launches alternating between the streams.
#define MATMULS_PER_STREAM 6

static void test_matmul_two_streams(void) {
    test_begin("layers_matmul_two_streams");
    const int N = 64, C = 32768, OC = 64;
    MatmulStream streams[2];
    float *inp[2], *weight[2];
    bf16 *d_inp[2], *d_weight[2], *d_out[2][MATMULS_PER_STREAM];
    for (int k = 0; k < 2; k++) {
        cudaStream_t stream;
        cudaCheck(cudaStreamCreate(&stream));
        matmul_stream_init(&streams[k], stream);
        inp[k] = random_values((size_t)N * C, 1.0f, 0.0f);
        weight[k] = random_values((size_t)OC * C, 0.1f, 0.0f);
        d_inp[k] = to_device_bf16(inp[k], (size_t)N * C);
        d_weight[k] = to_device_bf16(weight[k], (size_t)OC * C);
        for (int i = 0; i < MATMULS_PER_STREAM; i++) d_out[k][i] = (bf16*)device_alloc((size_t)N * OC * sizeof(bf16));
    }
    cudaCheck(cudaDeviceSynchronize());   // the inputs are in place before either stream starts
    for (int i = 0; i < MATMULS_PER_STREAM; i++)
        for (int k = 0; k < 2; k++)
            matmul_forward(d_out[k][i], NULL, d_inp[k], d_weight[k], NULL, NULL, N, C, OC, &streams[k]);
    cudaCheck(cudaDeviceSynchronize());
    for (int k = 0; k < 2; k++) {
        double* ref = ref_alloc((size_t)N * OC);
        for (int n = 0; n < N; n++)
            for (int o = 0; o < OC; o++) {
                double acc = 0.0;
                for (int c = 0; c < C; c++) acc += (double)inp[k][(size_t)n * C + c] * weight[k][(size_t)o * C + c];
                ref[(size_t)n * OC + o] = acc;
            }
        for (int i = 0; i < MATMULS_PER_STREAM; i++) {
            char what[64];
            snprintf(what, sizeof(what), "stream %d, matmul %d", k, i);
            CHECK_ERR(what, from_device_bf16(d_out[k][i], (size_t)N * OC), ref, (size_t)N * OC, 1e-2);
        }
    }
    for (int k = 0; k < 2; k++) {
        cudaStream_t stream = streams[k].stream;
        matmul_stream_free(&streams[k]);
        cudaCheck(cudaStreamDestroy(stream));
    }
    test_end();
    free_all();
}

int main(void) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        for (size_t i = 0; i < sizeof(case_names) / sizeof(case_names[0]); i++)
            test_skip(case_names[i], "no CUDA device");
        return 0;
    }
    matmul_stream_init(&legacy, 0);
    test_encoder();
    test_layernorm("layers_layernorm", 615, 320);
    test_layernorm("layers_layernorm_wide", 77, 1600);  // over 48 KiB of shared memory
    test_matmul("layers_matmul_bias", 576, 1, 0, 0);
    test_matmul("layers_matmul_gelu", 768, 1, 1, 0);
    test_matmul("layers_matmul_nobias", 200, 0, 0, 0);
    test_matmul("layers_matmul_residual", 576, 1, 0, 1);   // the residual stream added in the epilogue
    test_classifier("layers_classifier", 0);
    test_classifier("layers_classifier_softcap", 1);
    test_adamw();
    test_global_norm();
    test_determinism();
    test_matmul_two_streams();
    matmul_stream_free(&legacy);
    return test_exit_code();
}
