// tests/lib/device_vectors.h: host vectors of floats to and from device arrays, for the GPU tests:
// bf16 (each value rounded to nearest) and fp32.
#ifndef FLASHGPT_TESTS_DEVICE_VECTORS_H
#define FLASHGPT_TESTS_DEVICE_VECTORS_H

#include <vector>
#include "common/cuda_check.h"

// d (h.size()) = h rounded to bf16.
static inline void to_device(bf16* d, const std::vector<float>& h) {
    std::vector<bf16> b(h.size());
    for (size_t i = 0; i < h.size(); i++) b[i] = __float2bfloat16(h[i]);
    cudaCheck(cudaMemcpy(d, b.data(), b.size() * sizeof(bf16), cudaMemcpyHostToDevice));
}

static inline std::vector<float> from_device(const bf16* d, size_t n) {
    std::vector<bf16> b(n);
    cudaCheck(cudaMemcpy(b.data(), d, n * sizeof(bf16), cudaMemcpyDeviceToHost));
    std::vector<float> h(n);
    for (size_t i = 0; i < n; i++) h[i] = __bfloat162float(b[i]);
    return h;
}

static inline std::vector<float> from_device(const float* d, size_t n) {
    std::vector<float> h(n);
    cudaCheck(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

#endif
