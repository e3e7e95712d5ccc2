// gpt/mfu.h: model FLOPs per token and the device's peak, for the model FLOPs utilisation
// (MFU) the trainer prints.
#ifndef FLASHGPT_GPT_MFU_H
#define FLASHGPT_GPT_MFU_H

#include <string.h>
#include "gpt/config.h"
#include "gpt/param_table.h"

// 6 per weight for the matmuls forward and backward (every parameter but the embeddings that are
// only looked up, the embedding group of gpt/param_table.h: wpe, the value embeddings, and wte
// when the head is lm_head; a tied wte counts once, as the classifier), plus attention: QK^T and PV, 2 * 2 * T * C per
// layer forward, times 3 with backward (causal masking ignored); a layer with a window of W < T
// keys counts W in place of T (documents, which the data sets, are not counted).
static inline double flops_per_token(const GPTConfig* c, int T) {
    size_t sizes[NUM_PARAM_TENSORS];
    param_sizes(c, sizes);
    double looked_up = 0.0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        if (param_table[i].group == GROUP_EMBEDDING) looked_up += (double)sizes[i];
    if (!c->arch.untied_head) looked_up -= (double)sizes[PARAM_WTE];
    double weights = (double)count_params(c) - looked_up;
    if (c->arch.window_count == 0) return 6.0 * weights + 12.0 * c->L * c->C * (double)T;
    double keys = 0.0;   // over the layers
    for (int l = 0; l < c->L; l++) keys += architecture_keys(&c->arch, l, T);
    return 6.0 * weights + 12.0 * c->C * keys;
}

// The part of flops_per_token that train_gpt --fp8 runs in FP8: 2 per weight forward, and 4 more
// backward unless the gradients run in bf16 (grad_bf16), of the MLP's two matrices (mlp) and of
// the head (head: lm_head, or the tied wte).
static inline double fp8_flops_per_token(const GPTConfig* c, int mlp, int head, int grad_bf16) {
    size_t sizes[NUM_PARAM_TENSORS];
    param_sizes(c, sizes);
    double weights = (mlp ? (double)sizes[PARAM_FCW] + (double)sizes[PARAM_FCPROJW] : 0.0) +
                     (head ? (double)sizes[c->arch.untied_head ? PARAM_LM_HEAD : PARAM_WTE] : 0.0);
    return (grad_bf16 ? 2.0 : 6.0) * weights;
}

// The MFU's basis of a run whose fp8_flops of flops run in FP8: those counted at half, as FP8 tensor
// cores (Hopper's) run twice the dense bf16 rate, so that model_flops_utilisation on it is the
// share of the peaks the step takes, bf16's against the bf16 peak and FP8's against the FP8 one.
static inline double mfu_flops_per_token(double flops, double fp8_flops) { return flops - 0.5 * fp8_flops; }

// Model FLOPs utilisation: the model FLOPs a second of the whole run (tokens_per_s counts every
// GPU's tokens) over the dense bf16 peak of all its GPUs; 0 when the peak is unknown.
static inline double model_flops_utilisation(double flops_per_token, double tokens_per_s, float peak_tflops,
                                             int gpus) {
    return peak_tflops > 0.0f ? flops_per_token * tokens_per_s / ((double)peak_tflops * 1e12 * gpus) : 0.0;
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
