// gpt/parameters.h: the model's parameters on the GPU: the tensors of the parameter table
// (gpt/param_table.h) in its order, in one bf16 allocation, named by index and by field, and each
// layer's slices of them. A tensor the architecture does not have is NULL (size 0).
#ifndef FLASHGPT_GPT_PARAMETERS_H
#define FLASHGPT_GPT_PARAMETERS_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include "common/cuda_check.h"
#include "gpt/config.h"
#include "gpt/param_table.h"

#define PARAM_FIELD(NAME, field) bf16* field;

// A field per kind, in ParamTensor order, so t[i] is tensor i.
typedef union {
    struct {
        PARAM_TENSORS(PARAM_FIELD, PARAM_FIELD)
    };
    bf16* t[NUM_PARAM_TENSORS];
} ParameterTensors;
static_assert(sizeof(ParameterTensors) == NUM_PARAM_TENSORS * sizeof(bf16*), "a field per tensor");

// params (count_params elements, device) = values (fp32, host) rounded to bf16, on stream; the
// values may be freed when it returns.
void upload_params(bf16* params, const float* values, const GPTConfig* c, cudaStream_t stream);
// Points the tensors into base (one allocation of count_params elements).
void point_params(ParameterTensors* p, bf16* base, const GPTConfig* c);

// Layer l's slices of the per-layer tensors (or of their gradients): a field per LAYER of
// PARAM_TENSORS; t[i] is of tensor layer_param_tensors[i], NULL where layer l has none.
typedef union {
    struct {
        PARAM_TENSORS(PARAM_NO_ITEM, PARAM_FIELD)
    };
    bf16* t[NUM_LAYER_PARAMS];
} LayerParameters;
static_assert(sizeof(LayerParameters) == NUM_LAYER_PARAMS * sizeof(bf16*), "a field per layer tensor");
LayerParameters layer_parameters(const ParameterTensors* p, int l, const GPTConfig* c);

// The head: lm_head when untied, else wte.
static inline bf16* head_weights(const ParameterTensors* p, const GPTConfig* c) {
    return c->arch.untied_head ? p->lm_head : p->wte;
}

#endif
