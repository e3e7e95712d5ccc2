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

void param_sizes(const GPTConfig* c, size_t sizes[NUM_PARAM_TENSORS]) {
    size_t L = c->L, C = c->C;
    size_t s[NUM_PARAM_TENSORS] = {
        (size_t)c->Vp * C, (size_t)c->maxT * C, L * C, L * C, L * 3 * C * C, L * 3 * C,
        L * C * C, L * C, L * C, L * C, L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C, C, C};
    memcpy(sizes, s, sizeof(s));
}

size_t count_params(const GPTConfig* c) {
    size_t sizes[NUM_PARAM_TENSORS], n = 0;
    param_sizes(c, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) n += sizes[i];
    return n;
}

void point_params(ParameterTensors* p, bf16* base, const GPTConfig* c) {
    bf16** ptrs[NUM_PARAM_TENSORS] = {
        &p->wte, &p->wpe, &p->ln1w, &p->ln1b, &p->qkvw, &p->qkvb, &p->attprojw, &p->attprojb,
        &p->ln2w, &p->ln2b, &p->fcw, &p->fcb, &p->fcprojw, &p->fcprojb, &p->lnfw, &p->lnfb};
    size_t sizes[NUM_PARAM_TENSORS];
    param_sizes(c, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        *ptrs[i] = base;
        base += sizes[i];
    }
}

LayerParameters layer_parameters(const ParameterTensors* p, int l, size_t C) {
    LayerParameters w;
    w.ln1w = p->ln1w + l * C;
    w.ln1b = p->ln1b + l * C;
    w.qkvw = p->qkvw + l * 3 * C * C;
    w.qkvb = p->qkvb + l * 3 * C;
    w.attprojw = p->attprojw + l * C * C;
    w.attprojb = p->attprojb + l * C;
    w.ln2w = p->ln2w + l * C;
    w.ln2b = p->ln2b + l * C;
    w.fcw = p->fcw + l * 4 * C * C;
    w.fcb = p->fcb + l * 4 * C;
    w.fcprojw = p->fcprojw + l * C * 4 * C;
    w.fcprojb = p->fcprojb + l * C;
    return w;
}

void init_param_values(float* values, const GPTConfig* c, uint64_t seed) {
    size_t sizes[NUM_PARAM_TENSORS];
    param_sizes(c, sizes);
    Rng rng = {seed};
    float* p = values;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        const char* name = param_names[i];
        size_t n = sizes[i];
        if (!strcmp(name, "ln1w") || !strcmp(name, "ln2w") || !strcmp(name, "lnfw")) {
            for (size_t j = 0; j < n; j++) p[j] = 1.0f;
        } else if (!param_decays[i]) {
            memset(p, 0, n * sizeof(float));
        } else {
            int residual = !strcmp(name, "attprojw") || !strcmp(name, "fcprojw");
            double std = residual ? 0.02 / sqrt(2.0 * c->L) : 0.02;
            size_t real = !strcmp(name, "wte") ? (size_t)c->V * c->C : n;
            for (size_t j = 0; j < real; j++) p[j] = (float)(std * rng_normal(&rng));
            for (size_t j = real; j < n; j++) p[j] = 0.0f;
        }
        p += n;
    }
    // The master weights start as the bf16 model itself.
    size_t P = (size_t)(p - values);
    for (size_t i = 0; i < P; i++) values[i] = __bfloat162float(__float2bfloat16(values[i]));
}
