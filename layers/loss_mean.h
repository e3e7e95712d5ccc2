// layers/loss_mean.h: the mean loss of batches on the GPU, in the arithmetic a host loop would
// do: a batch's n losses (fp32) added one after another in double, their mean rounded to float;
// the batches' means added in double, their mean rounded to float. One thread walks the losses
// so that the sum has the same bits on every GPU and every run, and the same as on the host.
#ifndef FLASHGPT_LOSS_MEAN_H
#define FLASHGPT_LOSS_MEAN_H

#include "common/cuda_check.h"

// *sum (one double of device memory) += float(the mean of losses (n), device memory).
void loss_mean_add(double* sum, const float* losses, int n, cudaStream_t stream);
// *mean (one float of device memory) = float(*sum / batches); *sum = 0.
void loss_mean_finish(float* mean, double* sum, int batches, cudaStream_t stream);

#endif
