// gpt/parameters.h: the model's parameters: sixteen tensors in one bf16 allocation, in the
// order of the checkpoint file (llm.c's order), and each layer's slice of them.
#ifndef FLASHGPT_GPT_PARAMETERS_H
#define FLASHGPT_GPT_PARAMETERS_H

#include <stddef.h>
#include <stdint.h>
#include "common/cuda_check.h"
#include "gpt/config.h"

#define NUM_PARAM_TENSORS 16
extern const char* const param_names[NUM_PARAM_TENSORS];
// 1 for the 2-D weights, the tensors that weight decay applies to.
extern const int param_decays[NUM_PARAM_TENSORS];

typedef struct {
    bf16* wte;       // (Vp, C)
    bf16* wpe;       // (maxT, C)
    bf16* ln1w;      // (L, C)
    bf16* ln1b;      // (L, C)
    bf16* qkvw;      // (L, 3C, C)
    bf16* qkvb;      // (L, 3C)
    bf16* attprojw;  // (L, C, C)
    bf16* attprojb;  // (L, C)
    bf16* ln2w;      // (L, C)
    bf16* ln2b;      // (L, C)
    bf16* fcw;       // (L, 4C, C)
    bf16* fcb;       // (L, 4C)
    bf16* fcprojw;   // (L, C, 4C)
    bf16* fcprojb;   // (L, C)
    bf16* lnfw;      // (C)
    bf16* lnfb;      // (C)
} ParameterTensors;

// Elements of each tensor, in checkpoint order.
void param_sizes(const GPTConfig* c, size_t sizes[NUM_PARAM_TENSORS]);
size_t count_params(const GPTConfig* c);
// Points the tensors into base (one allocation of count_params elements).
void point_params(ParameterTensors* p, bf16* base, const GPTConfig* c);

// Layer l's slices of the per-layer tensors (or of their gradients).
typedef struct {
    bf16 *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} LayerParameters;
LayerParameters layer_parameters(const ParameterTensors* p, int l, size_t C);

// The initial values (count_params fp32, checkpoint order), each already a bf16 value: N(0, 0.02)
// weights, residual projections N(0, 0.02/sqrt(2L)), biases 0, layernorm weights 1, wte padding
// rows 0; drawn from seed.
void init_param_values(float* values, const GPTConfig* c, uint64_t seed);

#endif
