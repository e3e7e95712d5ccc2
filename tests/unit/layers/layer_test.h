// tests/unit/layers/layer_test.h: what the GPU tests of the layers share (test_layers.cu):
// host and device buffers freed together at the end of each case, the device ones poisoned (NaN)
// when made; random inputs that are exact bf16 values; copies between host and device; float64
// references and their relative L2 error (CHECK_ERR).
#ifndef FLASHGPT_LAYER_TEST_H
#define FLASHGPT_LAYER_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "common/cuda_check.h"
#include "tests/lib/test.h"

#define LAYER_TEST_BUFFERS 128   // of each kind, per case

// ---- host and device buffers, freed together at the end of each case
static void* host_bufs[LAYER_TEST_BUFFERS];
static void* device_bufs[LAYER_TEST_BUFFERS];
static int n_host, n_device;

static inline void* host_alloc(size_t bytes) {
    void* p = malloc(bytes ? bytes : 1);
    if (!p || n_host == LAYER_TEST_BUFFERS) { fprintf(stderr, "out of host buffers (layer_test.h)\n"); exit(1); }
    return host_bufs[n_host++] = p;
}
static inline void* device_alloc(size_t bytes) {
    void* p;
    if (n_device == LAYER_TEST_BUFFERS) { fprintf(stderr, "out of device buffers (layer_test.h)\n"); exit(1); }
    cudaCheck(cudaMalloc(&p, bytes ? bytes : 1));
    cudaCheck(cudaMemset(p, 0xff, bytes));  // NaN in bf16 and fp32
    return device_bufs[n_device++] = p;
}
static inline void free_all(void) {
    for (int i = 0; i < n_host; i++) free(host_bufs[i]);
    for (int i = 0; i < n_device; i++) cudaCheck(cudaFree(device_bufs[i]));
    n_host = n_device = 0;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static inline float uniform(void) {  // [0, 1)
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) / 16777216.0);
}
static inline float bf16_value(float x) { return __bfloat162float(__float2bfloat16(x)); }

// n values offset + scale * U(-1, 1), each exact in bf16.
static inline float* random_values(size_t n, float scale, float offset) {
    float* h = (float*)host_alloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = bf16_value(offset + scale * (2.0f * uniform() - 1.0f));
    return h;
}
static inline bf16* to_device_bf16(const float* h, size_t n) {
    bf16* tmp = (bf16*)host_alloc(n * sizeof(bf16));
    for (size_t i = 0; i < n; i++) tmp[i] = __float2bfloat16(h[i]);
    bf16* d = (bf16*)device_alloc(n * sizeof(bf16));
    cudaCheck(cudaMemcpy(d, tmp, n * sizeof(bf16), cudaMemcpyHostToDevice));
    return d;
}
static inline float* to_device_f32(const float* h, size_t n) {
    float* d = (float*)device_alloc(n * sizeof(float));
    cudaCheck(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}
static inline float* from_device_bf16(const bf16* d, size_t n) {
    bf16* tmp = (bf16*)host_alloc(n * sizeof(bf16));
    cudaCheck(cudaMemcpy(tmp, d, n * sizeof(bf16), cudaMemcpyDeviceToHost));
    float* h = (float*)host_alloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = __bfloat162float(tmp[i]);
    return h;
}
static inline float* from_device_f32(const float* d, size_t n) {
    float* h = (float*)host_alloc(n * sizeof(float));
    cudaCheck(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}
static inline double* ref_alloc(size_t n) { return (double*)host_alloc(n * sizeof(double)); }
static inline double* ref_copy(const float* h, size_t n) {
    double* r = ref_alloc(n);
    for (size_t i = 0; i < n; i++) r[i] = h[i];
    return r;
}

// ||out - ref|| / ||ref||; NaN when out holds a NaN.
static inline double rel_err(const float* out, const double* ref, size_t n) {
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < n; i++) {
        diff += (out[i] - ref[i]) * (out[i] - ref[i]);
        norm += ref[i] * ref[i];
    }
    return sqrt(diff / (norm > 0.0 ? norm : 1.0));
}
#define CHECK_ERR(what, out, ref, n, tol) do { double e_ = rel_err(out, ref, n); \
    CHECK(e_ < (tol), "%s: relative error %.3g (tolerance %.0e)", what, e_, (double)(tol)); } while (0)

#endif
