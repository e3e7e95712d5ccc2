// tests/test_modern_layers.cu: GPU tests of the modern recipe's layers against float64 CPU
// references: RMSNorm (layers/rmsnorm.h). Shapes are no multiple of any block size; outputs are
// poisoned (NaN) first, so an unwritten element fails; "+=" outputs start from random values the
// size of the increment; every backward runs twice from the same inputs and must give the same
// bits. Inputs are exact bf16 values on both sides.
// Tolerances (relative L2 error ||out - ref|| / ||ref|| unless said): a bf16 rounding is within
// 2^-8 of the value (half an ulp of 8 significant bits), ~1.5e-3 RMS, so bf16 outputs get 5e-3
// for one rounding and 1e-2 where one more bf16 intermediate comes in; fp32 outputs get 1e-5 (a
// few fp32 roundings, ~1e-7 each).
#include <math.h>
#include <string.h>
#include <stdint.h>
#include "tests/test.h"
#include "tests/layer_test.h"
#include "layers/rmsnorm.h"

static const char* case_names[] = {"modern_rmsnorm", "modern_rmsnorm_wide"};

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

int main(void) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        for (size_t i = 0; i < sizeof(case_names) / sizeof(case_names[0]); i++)
            test_skip(case_names[i], "no CUDA device");
        return test_exit_code();
    }
    test_rmsnorm("modern_rmsnorm", 615, 320);
    test_rmsnorm("modern_rmsnorm_wide", 77, 1600);
    return test_exit_code();
}
