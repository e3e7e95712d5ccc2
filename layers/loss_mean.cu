// layers/loss_mean.cu: the batches' mean loss, summed in order by one thread (layers/loss_mean.h).
// The intrinsics round to nearest whatever the compiler's flags: the host's double arithmetic.
#include "layers/loss_mean.h"

__global__ void loss_mean_add_kernel(double* sum, const float* losses, int n) {
    double s = 0.0;
    #pragma unroll 16
    for (int i = 0; i < n; i++) s = __dadd_rn(s, (double)losses[i]);
    *sum = __dadd_rn(*sum, (double)__double2float_rn(__ddiv_rn(s, (double)n)));
}

__global__ void loss_mean_finish_kernel(float* mean, double* sum, int batches) {
    *mean = __double2float_rn(__ddiv_rn(*sum, (double)batches));
    *sum = 0.0;
}

void loss_mean_add(double* sum, const float* losses, int n, cudaStream_t stream) {
    loss_mean_add_kernel<<<1, 1, 0, stream>>>(sum, losses, n);
    cudaCheckLaunch();
}

void loss_mean_finish(float* mean, double* sum, int batches, cudaStream_t stream) {
    loss_mean_finish_kernel<<<1, 1, 0, stream>>>(mean, sum, batches);
    cudaCheckLaunch();
}
