// gpt/parameters.cu: the parameter tensors in device memory and each layer's slices of them
// (gpt/parameters.h).
#include "gpt/parameters.h"

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
    for (int i = 0; i < NUM_LAYER_PARAMS; i++) {
        const ParamKind* k = &param_table[layer_param_tensors[i]];
        int slice = param_layer_slice(k, l, c);
        w.t[i] = slice >= 0 ? p->t[layer_param_tensors[i]] + slice * param_slice_size(k, c) : NULL;
    }
    return w;
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
