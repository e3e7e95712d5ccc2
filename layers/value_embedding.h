// layers/value_embedding.h: value embeddings (nanochat's, after ResFormer's value residual): a
// layer's own token embedding added to its attention's values through a gate of each row and head
// learned from the attention's input,
//   gate (N, NH) = 3 sigmoid(z),  z[n, h] = sum_{j < G} ln1[n, j] * weight[h, j]
//   v[n, h, :] += gate[n, h] * table[tokens[n], h, :]
// on N rows of C = NH * HS channels, ln1 (N, C) the attention's input after its norm, weight
// (NH, G) the gate's (G of ln1's first channels: gpt/config.h's VALUE_GATE_CHANNELS), table (Vp, C)
// the layer's embedding. The gate lies in (0, 3): 1.5 where weight is zero. Backward, from dv:
//   dgate[n, h] = sum_HS dv[n, h, :] * table[tokens[n], h, :]
//   dtable[t] += sum over the rows n of token t, in increasing order, of gate[n, h] * dv[n, h, :]
//   dz = dgate * gate * (1 - gate / 3),  dweight[h, j] += sum_N dz[n, h] * ln1[n, j],
//   dln1[n, j] += sum_h dz[n, h] * weight[h, j]  (j < G)
// Every sum runs in a fixed order (no atomics): the same bits on every run. The rows of a token
// are the groups layers/encoder.h's encoder_token_groups uploads.
#ifndef FLASHGPT_VALUE_EMBEDDING_H
#define FLASHGPT_VALUE_EMBEDDING_H

#include <stddef.h>
#include "common/cuda_check.h"

// gate (N, NH) fp32 from ln1 (N, C) bf16 and weight (NH, G) bf16; G <= C.
void value_gate_forward(float* gate, const bf16* ln1, const bf16* weight, int N, int C, int NH, int G,
                        cudaStream_t stream);

// The values of row n at v + n * v_stride (bf16, 16-byte aligned; qkv's third part: stride 3C)
// += gate * table[tokens[n]]; tokens (N) on the device. With cache (else NULL), row n's sum also
// goes to cache + n * cache_batch + positions[n] * cache_row (a decoding step's V cache row).
// HS % 8 == 0; table (and dtable) 4-byte aligned.
void value_embedding_forward(bf16* v, long long v_stride, const int* tokens, const bf16* table, const float* gate,
                             bf16* cache, long long cache_batch, long long cache_row, const int* positions, int N,
                             int NH, int HS, cudaStream_t stream);

// dgate (N, NH) fp32 (overwritten) and dtable (Vp, C) += from dv (row n at dv + n * dv_stride);
// tokens (N) on the device; groups: encoder_token_groups' upload (positions, then group_start,
// then group_token) of the same tokens, and their count.
void value_embedding_backward(float* dgate, bf16* dtable, const bf16* dv, long long dv_stride, const int* tokens,
                              const int* groups, int group_count, const bf16* table, const float* gate, int N,
                              int NH, int HS, cudaStream_t stream);

// dweight (NH, G) += and dln1 (N, C; its first G channels) += from dgate and gate (N, NH) fp32, ln1
// (N, C) and weight as the forward took them.
void value_gate_backward(bf16* dweight, bf16* dln1, const float* dgate, const float* gate, const bf16* ln1,
                         const bf16* weight, int N, int C, int NH, int G, cudaStream_t stream);

#endif
