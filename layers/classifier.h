// layers/classifier.h: fused softmax + cross-entropy + its gradient, one pass over the logits,
// no fp32 probabilities stored; and the next token drawn from the logits on the GPU.
// logits (N, Vp), of which the first V columns are real. The modern recipe soft-caps them first:
// each logit x becomes z = softcap * tanh(x / softcap) (softcap 30) before the softmax, in the
// loss, its gradient and the draw; a softcap of 0 means none (GPT-2's, the same kernels as the
// functions without the cap).
#ifndef FLASHGPT_CLASSIFIER_H
#define FLASHGPT_CLASSIFIER_H

#include <stdint.h>
#include "common/cuda_check.h"

// losses (N) fp32 = logsumexp(logits[i, :V]) - logits[i, targets[i]]; targets (N) device.
// If write_dlogits: logits (N, Vp) are overwritten with (softmax - onehot(target)) * dloss_scale
// in the first V columns and 0 in the padding columns V..Vp-1.
void classifier_forward_backward(bf16* logits, float* losses, const int* targets, int N, int V,
                                 int Vp, float dloss_scale, int write_dlogits, cudaStream_t stream);
// The same with the soft cap: losses from z, and dlogits = (softmax(z) - onehot) * dloss_scale
// * (1 - tanh^2(x / softcap)), dz/dx. softcap >= 0.
void classifier_forward_backward_softcap(bf16* logits, float* losses, const int* targets, int N, int V, int Vp,
                                         float softcap, float dloss_scale, int write_dlogits, cudaStream_t stream);

// tokens (N) device: for each row of logits (N, Vp), the next token drawn from
// softmax(logits[i, :V] / temperature), by the Gumbel-max trick with noise from (*seed, the
// row, positions[i], the column), seed and positions read on the GPU; at temperature 0 the most
// likely token (also below a temperature of 1e-6). Only the ids leave the GPU.
void classifier_sample(int* tokens, const bf16* logits, int N, int V, int Vp, float temperature, const uint64_t* seed,
                       const int* positions, cudaStream_t stream);
// The same draw from softmax(z / temperature), z the soft-capped logits; at temperature 0 the
// largest z (logits that the cap makes equal tie: the lowest column). softcap >= 0.
void classifier_sample_softcap(int* tokens, const bf16* logits, int N, int V, int Vp, float softcap, float temperature,
                               const uint64_t* seed, const int* positions, cudaStream_t stream);

#endif
