// layers/classifier.cu: softmax + cross-entropy + its gradient, one block per row of the logits
// (N, Vp), Vp % 8 == 0. One pass keeps a running max and sum of exponentials (fp32) over the V
// real columns; a second pass writes the gradient over the same bf16 row. No probabilities are
// stored.
#include <math.h>
#include "layers/classifier.h"
#include "layers/kernel_common.cuh"

#define CLASSIFIER_THREADS 512

// (m, s) += (m2, s2), where s is a sum of exp(logit - m).
__device__ inline void combine_max_sum(float& m, float& s, float m2, float s2) {
    float m_new = fmaxf(m, m2);
    if (m_new == -INFINITY) return;  // both empty
    s = s * expf(m - m_new) + s2 * expf(m2 - m_new);
    m = m_new;
}

// One block per row; each thread moves 8 logits (a pack) at a time.
__global__ void classifier_kernel(bf16x8* logits, float* losses, const int* targets, int V, int Vp,
                                  float dloss_scale, int write_dlogits) {
    __shared__ float warp_max[CLASSIFIER_THREADS / 32], warp_sum[CLASSIFIER_THREADS / 32];
    __shared__ float row_lse;
    bf16x8* x = logits + (size_t)blockIdx.x * (Vp / 8);
    int target = targets[blockIdx.x];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

    float m = -INFINITY, s = 0.0f;
    for (int p = threadIdx.x; p < ceil_div(V, 8); p += blockDim.x) {
        bf16x8 v8 = x[p];
        for (int k = 0; k < 8 && 8 * p + k < V; k++) {
            float v = (float)v8.v[k];
            if (v > m) {
                s = s * expf(m - v) + 1.0f;
                m = v;
            } else {
                s += expf(v - m);
            }
        }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, offset), s2 = __shfl_xor_sync(0xffffffffu, s, offset);
        combine_max_sum(m, s, m2, s2);
    }
    if (lane == 0) {
        warp_max[warp] = m;
        warp_sum[warp] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < blockDim.x / 32; w++) combine_max_sum(m, s, warp_max[w], warp_sum[w]);
        float lse = m + logf(s);
        row_lse = lse;
        // A target outside the vocabulary gives a NaN loss, which the trainer reports.
        losses[blockIdx.x] = (target >= 0 && target < V) ? lse - (float)x[target / 8].v[target % 8] : NAN;
    }
    __syncthreads();  // the row is read above before it is overwritten below
    if (!write_dlogits) return;
    float lse = row_lse;
    for (int p = threadIdx.x; p < Vp / 8; p += blockDim.x) {
        bf16x8 v8 = x[p];
        for (int k = 0; k < 8; k++) {
            int i = 8 * p + k;
            float d = 0.0f;
            if (i < V) d = (expf((float)v8.v[k] - lse) - (i == target ? 1.0f : 0.0f)) * dloss_scale;
            v8.v[k] = (bf16)d;
        }
        x[p] = v8;
    }
}

void classifier_forward_backward(bf16* logits, float* losses, const int* targets, int N, int V,
                                 int Vp, float dloss_scale, int write_dlogits, cudaStream_t stream) {
    if (Vp % 8 != 0 || V > Vp || !aligned16(logits))
        die("classifier: needs Vp (%d) a multiple of 8, V (%d) <= Vp and 16-byte aligned logits", Vp, V);
    if (N == 0) return;
    classifier_kernel<<<N, CLASSIFIER_THREADS, 0, stream>>>((bf16x8*)logits, losses, targets, V, Vp,
                                                            dloss_scale, write_dlogits);
    cudaCheckLaunch();
}
