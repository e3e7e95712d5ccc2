// layers/residual.h: the residual connection, out (n) = a (n) + b (n); out may alias a or b.
#ifndef FLASHGPT_RESIDUAL_H
#define FLASHGPT_RESIDUAL_H

#include <stddef.h>
#include "common/cuda_check.h"

void residual_forward(bf16* out, const bf16* a, const bf16* b, size_t n, cudaStream_t stream);

#endif
