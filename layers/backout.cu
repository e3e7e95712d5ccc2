// layers/backout.cu: the backout, forward and backward (layers/backout.h), on packs of 8 bf16 (a
// 16-byte load) of the N * C values, fp32 math. The backward's sum: a grid-stride walk of a grid
// that N and C alone fix, each block's partial sum into scratch, then one block adds them in order.
#include "layers/backout.h"
#include "device/bf16.cuh"
#include "device/reduce.cuh"

#define BACKOUT_THREADS 256
#define BACKOUT_MAX_BLOCKS 1024

// out = x - lambda mid, a pack of 8 per thread.
__global__ void backout_forward_kernel(bf16x8* out, const bf16x8* x, const bf16x8* mid, const bf16* lambda,
                                       size_t packs) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= packs) return;
    float l = (float)*lambda;
    bf16x8 a = x[i], b = mid[i], o;
    for (int k = 0; k < 8; k++) o.v[k] = (bf16)((float)a.v[k] - l * (float)b.v[k]);
    out[i] = o;
}

// dmid = -lambda dout, and the block's sum of -dout mid into partials[block].
__global__ void __launch_bounds__(BACKOUT_THREADS)
backout_backward_kernel(float* partials, bf16x8* dmid, const bf16x8* dout, const bf16x8* mid, const bf16* lambda,
                        size_t packs) {
    float l = (float)*lambda, sum = 0.0f;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < packs; i += stride) {
        bf16x8 d = dout[i], m = mid[i], o;
        for (int k = 0; k < 8; k++) {
            float g = (float)d.v[k];
            sum -= g * (float)m.v[k];
            o.v[k] = (bf16)(-l * g);
        }
        dmid[i] = o;
    }
    sum = block_reduce_sum(sum);
    if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// One block: the partial sums (count) added in a fixed order into lambda's gradient.
__global__ void __launch_bounds__(BACKOUT_THREADS) backout_sum_kernel(bf16* dlambda, const float* partials, int count) {
    float sum = 0.0f;
    for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
    sum = block_reduce_sum(sum);
    if (threadIdx.x == 0) *dlambda = (bf16)((float)*dlambda + sum);
}

// dres += dmid, a pack of 8 per thread.
__global__ void backout_add_kernel(bf16x8* dres, const bf16x8* dmid, size_t packs) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= packs) return;
    bf16x8 a = dres[i], b = dmid[i];
    for (int k = 0; k < 8; k++) a.v[k] = (bf16)((float)a.v[k] + (float)b.v[k]);
    dres[i] = a;
}

static size_t packs_of(int N, int C) { return (size_t)N * C / 8; }

static int backward_blocks(int N, int C) {
    long long blocks = ceil_div((long long)packs_of(N, C), BACKOUT_THREADS);
    return blocks < BACKOUT_MAX_BLOCKS ? (int)blocks : BACKOUT_MAX_BLOCKS;
}

static void check_call(const char* who, int N, int C, const void* a, const void* b, const void* c) {
    if (N < 0 || C % 8 != 0 || !aligned16(a) || !aligned16(b) || !aligned16(c))
        die("%s: needs N >= 0, C (%d) a multiple of 8 and 16-byte aligned buffers", who, C);
}

size_t backout_scratch_bytes(int N, int C) { return BACKOUT_MAX_BLOCKS * sizeof(float); }

void backout_forward(bf16* out, const bf16* x, const bf16* mid, const bf16* lambda, int N, int C,
                     cudaStream_t stream) {
    check_call("backout_forward", N, C, out, x, mid);
    size_t packs = packs_of(N, C);
    if (packs == 0) return;
    backout_forward_kernel<<<(unsigned)ceil_div((long long)packs, BACKOUT_THREADS), BACKOUT_THREADS, 0, stream>>>(
        (bf16x8*)out, (const bf16x8*)x, (const bf16x8*)mid, lambda, packs);
    cudaCheckLaunch();
}

void backout_backward(bf16* dmid, bf16* dlambda, const bf16* dout, const bf16* mid, const bf16* lambda, int N, int C,
                      void* scratch, cudaStream_t stream) {
    check_call("backout_backward", N, C, dmid, dout, mid);
    size_t packs = packs_of(N, C);
    if (packs == 0) return;
    int blocks = backward_blocks(N, C);
    backout_backward_kernel<<<blocks, BACKOUT_THREADS, 0, stream>>>((float*)scratch, (bf16x8*)dmid,
                                                                    (const bf16x8*)dout, (const bf16x8*)mid, lambda,
                                                                    packs);
    cudaCheckLaunch();
    backout_sum_kernel<<<1, BACKOUT_THREADS, 0, stream>>>(dlambda, (const float*)scratch, blocks);
    cudaCheckLaunch();
}

void backout_add(bf16* dres, const bf16* dmid, int N, int C, cudaStream_t stream) {
    check_call("backout_add", N, C, dres, dmid, dmid);
    size_t packs = packs_of(N, C);
    if (packs == 0) return;
    backout_add_kernel<<<(unsigned)ceil_div((long long)packs, BACKOUT_THREADS), BACKOUT_THREADS, 0, stream>>>(
        (bf16x8*)dres, (const bf16x8*)dmid, packs);
    cudaCheckLaunch();
}
