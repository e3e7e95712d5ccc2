// gpt/mfu.h: model FLOPs per token and the device's peak, for the model FLOPs utilisation
// (MFU) the trainer prints.
#ifndef FLASHGPT_GPT_MFU_H
#define FLASHGPT_GPT_MFU_H

#include <string.h>
#include "gpt/config.h"
#include "gpt/parameters.h"

// 6 per weight for the matmuls forward and backward (every parameter but wpe, which is only
// looked up; wte counts once, as the classifier), plus attention: QK^T and PV, 2 * 2 * T * C
// per layer forward, times 3 with backward (causal masking ignored).
static inline double flops_per_token(const GPTConfig* c, int T) {
    double weights = (double)count_params(c) - (double)c->maxT * c->C;
    return 6.0 * weights + 12.0 * c->L * c->C * (double)T;
}

// Dense bf16 peak (TFLOP/s) of the device, by name; 0 when unknown.
static inline float device_peak_tflops(const char* name) {
    static const struct { const char* key; float tflops; } table[] = {
        {"H100", 989.0f}, {"H200", 989.0f}, {"H800", 989.0f}, {"GH200", 989.0f},
        {"B200", 2250.0f}, {"A100", 312.0f}, {"A800", 312.0f}, {"L40S", 362.0f}};
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (strstr(name, table[i].key)) return table[i].tflops;
    return 0.0f;
}

#endif
