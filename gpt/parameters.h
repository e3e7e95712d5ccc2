// gpt/parameters.h: the model's parameters: GPT-2's sixteen tensors in the order of the checkpoint
// file (llm.c's order), then the untied output head, in one bf16 allocation, named by index and by
// field, and each layer's slice of them. A tensor the architecture does not have (gpt/config.h:
// wpe with rotary, the norms' weights and biases with RMSNorm, the biases without bias, lm_head
// with a tied head) has size 0, so GPT-2's layout is llm.c's and any other model's flat array is
// its present tensors in the same order.
#ifndef FLASHGPT_GPT_PARAMETERS_H
#define FLASHGPT_GPT_PARAMETERS_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include "common/cuda_check.h"
#include "gpt/config.h"

// The tensors in checkpoint order; PARAM_LN1W to PARAM_FCPROJB hold a slice per layer.
typedef enum {
    PARAM_WTE, PARAM_WPE,
    PARAM_LN1W, PARAM_LN1B, PARAM_QKVW, PARAM_QKVB, PARAM_ATTPROJW, PARAM_ATTPROJB,
    PARAM_LN2W, PARAM_LN2B, PARAM_FCW, PARAM_FCB, PARAM_FCPROJW, PARAM_FCPROJB,
    PARAM_LNFW, PARAM_LNFB,
    PARAM_LM_HEAD,
    NUM_PARAM_TENSORS
} ParamTensor;
#define NUM_LAYER_PARAMS (PARAM_FCPROJB + 1 - PARAM_LN1W)

// By ParamTensor.
extern const char* const param_names[NUM_PARAM_TENSORS];
// 1 for the 2-D weights, the tensors that weight decay applies to.
extern const int param_decays[NUM_PARAM_TENSORS];

// The fields in ParamTensor order, so t[i] is tensor i.
typedef union {
    struct {
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
        bf16* lm_head;   // (Vp, C)
    };
    bf16* t[NUM_PARAM_TENSORS];
} ParameterTensors;
static_assert(sizeof(ParameterTensors) == NUM_PARAM_TENSORS * sizeof(bf16*), "a field per tensor");

// Elements of each tensor, in checkpoint order (0: not in the architecture).
void param_sizes(const GPTConfig* c, size_t sizes[NUM_PARAM_TENSORS]);
// Elements of one layer's slice of tensor i (PARAM_LN1W <= i <= PARAM_FCPROJB), 0 when absent.
size_t layer_param_size(int i, const GPTConfig* c);
size_t count_params(const GPTConfig* c);
// params (count_params elements, device) = values (fp32, host) rounded to bf16, on stream; the
// values may be freed when it returns.
void upload_params(bf16* params, const float* values, const GPTConfig* c, cudaStream_t stream);
// Points the tensors into base (one allocation of count_params elements).
void point_params(ParameterTensors* p, bf16* base, const GPTConfig* c);

// Layer l's slices of the per-layer tensors (or of their gradients); t[i] is of tensor
// PARAM_LN1W + i, NULL when the architecture has none.
typedef union {
    struct {
        bf16 *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
    };
    bf16* t[NUM_LAYER_PARAMS];
} LayerParameters;
static_assert(sizeof(LayerParameters) == NUM_LAYER_PARAMS * sizeof(bf16*), "a field per layer tensor");
LayerParameters layer_parameters(const ParameterTensors* p, int l, const GPTConfig* c);

// The head: lm_head when untied, else wte.
static inline bf16* head_weights(const ParameterTensors* p, const GPTConfig* c) {
    return c->arch.untied_head ? p->lm_head : p->wte;
}

// The initial values (count_params fp32, checkpoint order), each already a bf16 value: N(0, 0.02)
// weights, residual projections N(0, 0.02/sqrt(2L)), biases 0, layernorm weights 1, wte and
// lm_head padding rows 0; with zero_init attprojw, fcprojw and lm_head 0. The normal draws come
// from seed, tensor after tensor, so GPT-2's values are those of every earlier version.
void init_param_values(float* values, const GPTConfig* c, uint64_t seed);

#endif
