// gpt/parameters.cu: the parameter tensors' order, sizes and slices, and their initial values
// (gpt/parameters.h).
#include "gpt/parameters.h"

#include <math.h>
#include <string.h>
#include "common/rng.h"

const char* const param_names[NUM_PARAM_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb", "lm_head"};
const int param_decays[NUM_PARAM_TENSORS] = {1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1};

// Whether the architecture has tensor i.
static int param_present(int i, const Architecture* a) {
    switch (i) {
    case PARAM_WPE: return !a->rotary;
    case PARAM_LN1W: case PARAM_LN1B: case PARAM_LN2W: case PARAM_LN2B: case PARAM_LNFW: case PARAM_LNFB:
        return !a->rms_norm;
    case PARAM_QKVB: case PARAM_ATTPROJB: case PARAM_FCB: case PARAM_FCPROJB: return a->bias;
    case PARAM_LM_HEAD: return a->untied_head;
    default: return 1;
    }
}

size_t layer_param_size(int i, const GPTConfig* c) {
    size_t C = c->C;
    if (!param_present(i, &c->arch)) return 0;
    switch (i) {
    case PARAM_QKVW: return 3 * C * C;
    case PARAM_QKVB: return 3 * C;
    case PARAM_ATTPROJW: return C * C;
    case PARAM_FCW: case PARAM_FCPROJW: return 4 * C * C;
    case PARAM_FCB: return 4 * C;
    default: return C;   // the layernorms' weights and biases, attprojb, fcprojb
    }
}

void param_sizes(const GPTConfig* c, size_t sizes[NUM_PARAM_TENSORS]) {
    size_t C = c->C;
    const Architecture* a = &c->arch;
    sizes[PARAM_WTE] = (size_t)c->Vp * C;
    sizes[PARAM_WPE] = param_present(PARAM_WPE, a) ? (size_t)c->maxT * C : 0;
    for (int i = PARAM_LN1W; i <= PARAM_FCPROJB; i++) sizes[i] = c->L * layer_param_size(i, c);
    sizes[PARAM_LNFW] = sizes[PARAM_LNFB] = param_present(PARAM_LNFW, a) ? C : 0;
    sizes[PARAM_LM_HEAD] = param_present(PARAM_LM_HEAD, a) ? (size_t)c->Vp * C : 0;
}

size_t count_params(const GPTConfig* c) {
    size_t sizes[NUM_PARAM_TENSORS], n = 0;
    param_sizes(c, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) n += sizes[i];
    return n;
}

void point_params(ParameterTensors* p, bf16* base, const GPTConfig* c) {
    size_t sizes[NUM_PARAM_TENSORS];
    param_sizes(c, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        p->t[i] = sizes[i] ? base : NULL;
        base += sizes[i];
    }
}

LayerParameters layer_parameters(const ParameterTensors* p, int l, const GPTConfig* c) {
    LayerParameters w;
    for (int i = 0; i < NUM_LAYER_PARAMS; i++)
        w.t[i] = p->t[PARAM_LN1W + i] ? p->t[PARAM_LN1W + i] + l * layer_param_size(PARAM_LN1W + i, c) : NULL;
    return w;
}

void init_param_values(float* values, const GPTConfig* c, uint64_t seed) {
    size_t sizes[NUM_PARAM_TENSORS];
    param_sizes(c, sizes);
    Rng rng = {seed};
    float* p = values;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t n = sizes[i];
        if (n == 0) continue;   // not in the architecture
        int residual = i == PARAM_ATTPROJW || i == PARAM_FCPROJW;
        if (i == PARAM_LN1W || i == PARAM_LN2W || i == PARAM_LNFW) {
            for (size_t j = 0; j < n; j++) p[j] = 1.0f;
        } else if (!param_decays[i] || (c->arch.zero_init && (residual || i == PARAM_LM_HEAD))) {
            memset(p, 0, n * sizeof(float));
        } else {
            double std = residual ? 0.02 / sqrt(2.0 * c->L) : 0.02;
            size_t real = i == PARAM_WTE || i == PARAM_LM_HEAD ? (size_t)c->V * c->C : n;
            for (size_t j = 0; j < real; j++) p[j] = (float)(std * rng_normal(&rng));
            for (size_t j = real; j < n; j++) p[j] = 0.0f;
        }
        p += n;
    }
    // The master weights start as the bf16 model itself.
    size_t P = (size_t)(p - values);
    for (size_t i = 0; i < P; i++) values[i] = __bfloat162float(__float2bfloat16(values[i]));
}

void upload_params(bf16* params, const float* values, const GPTConfig* c, cudaStream_t stream) {
    size_t P = count_params(c);
    bf16* rounded = (bf16*)malloc(P * sizeof(bf16));
    if (!rounded) die("out of host memory (%zu parameters)", P);
    for (size_t i = 0; i < P; i++) rounded[i] = __float2bfloat16(values[i]);
    // From pageable memory: the copy has read rounded when it returns.
    cudaCheck(cudaMemcpyAsync(params, rounded, P * sizeof(bf16), cudaMemcpyHostToDevice, stream));
    free(rounded);
}
