// layers/encoder.h: the embedding layer. out (B, T, C) = wte[tokens] (Vp, C) + wpe[t] (maxT, C);
// a model without learned positions (rotary) passes wpe and dwpe NULL: out = wte[tokens].
// The backward is deterministic: no floating-point atomics, every sum in a fixed order.
#ifndef FLASHGPT_ENCODER_H
#define FLASHGPT_ENCODER_H

#include <stddef.h>
#include "common/cuda_check.h"

// out (B, T, C); tokens (B, T) device; wte (Vp, C); wpe (maxT, C) with T <= maxT.
void encoder_forward(bf16* out, const int* tokens, const bf16* wte, const bf16* wpe,
                     int B, int T, int C, cudaStream_t stream);
// out (N, C) = wte[tokens[i]] + wpe[positions[i]]: N rows at positions of their own, both
// read on the GPU (a decoding step).
void encoder_forward_at(bf16* out, const int* tokens, const int* positions, const bf16* wte, const bf16* wpe,
                        int N, int C, cudaStream_t stream);

// The rows of each token id among the N host_tokens, uploaded to groups_dev (3 N + 1 ints, device:
// encoder_token_groups_bytes(N)) on stream: the rows grouped by token in increasing order (N), where
// each group starts (groups + 1, the last N), each group's token (groups); returns the groups. The
// sums over a token's rows (the embeddings' backward) run in this order.
int encoder_token_groups(int* groups_dev, const int* host_tokens, int N, cudaStream_t stream);
size_t encoder_token_groups_bytes(int N);

// dwte (Vp, C) +=, dwpe (maxT, C) += (rows 0..T-1); dout (B, T, C); groups (device, group_count of
// them): encoder_token_groups' upload of the same B * T tokens, which orders the sums.
void encoder_backward(bf16* dwte, bf16* dwpe, const bf16* dout, const int* groups, int group_count,
                      int B, int T, int C, cudaStream_t stream);

#endif
