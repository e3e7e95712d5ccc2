// layers/classifier.h: fused softmax + cross-entropy + its gradient, one pass over the logits,
// no fp32 probabilities stored. logits (N, Vp), of which the first V columns are real.
#ifndef FLASHGPT_CLASSIFIER_H
#define FLASHGPT_CLASSIFIER_H

#include "common/cuda_check.h"

// losses (N) fp32 = logsumexp(logits[i, :V]) - logits[i, targets[i]]; targets (N) device.
// If write_dlogits: logits (N, Vp) are overwritten with (softmax - onehot(target)) * dloss_scale
// in the first V columns and 0 in the padding columns V..Vp-1.
void classifier_forward_backward(bf16* logits, float* losses, const int* targets, int N, int V,
                                 int Vp, float dloss_scale, int write_dlogits, cudaStream_t stream);

#endif
