// gpt/parameters.cu: the parameter tensors' order, sizes and slices, and their initial values
// (gpt/parameters.h).
#include "gpt/parameters.h"

#include <math.h>
#include <string.h>
#include "common/rng.h"

const char* const param_names[NUM_PARAM_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};
const int param_decays[NUM_PARAM_TENSORS] = {1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0};

size_t layer_param_size(int i, size_t C) {
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
    sizes[PARAM_WTE] = (size_t)c->Vp * C;
    sizes[PARAM_WPE] = (size_t)c->maxT * C;
    for (int i = PARAM_LN1W; i <= PARAM_FCPROJB; i++) sizes[i] = c->L * layer_param_size(i, C);
    sizes[PARAM_LNFW] = sizes[PARAM_LNFB] = C;
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
        p->t[i] = base;
        base += sizes[i];
    }
}

LayerParameters layer_parameters(const ParameterTensors* p, int l, size_t C) {
    LayerParameters w;
    for (int i = 0; i < NUM_LAYER_PARAMS; i++)
        w.t[i] = p->t[PARAM_LN1W + i] + l * layer_param_size(PARAM_LN1W + i, C);
    return w;
}

void init_param_values(float* values, const GPTConfig* c, uint64_t seed) {
    size_t sizes[NUM_PARAM_TENSORS];
    param_sizes(c, sizes);
    Rng rng = {seed};
    float* p = values;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t n = sizes[i];
        if (i == PARAM_LN1W || i == PARAM_LN2W || i == PARAM_LNFW) {
            for (size_t j = 0; j < n; j++) p[j] = 1.0f;
        } else if (!param_decays[i]) {
            memset(p, 0, n * sizeof(float));
        } else {
            int residual = i == PARAM_ATTPROJW || i == PARAM_FCPROJW;
            double std = residual ? 0.02 / sqrt(2.0 * c->L) : 0.02;
            size_t real = i == PARAM_WTE ? (size_t)c->V * c->C : n;
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
