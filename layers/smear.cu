// layers/smear.cu: the smear, forward, a decoding step's and backward (layers/smear.h), fp32 math.
// Threads move 8 channels (a 16-byte pack) at a time, each working out its token's gate from the
// G channels itself; the backward's per-token sums are a warp's each, its parameter sums a block's
// each, the threads striding over the tokens in an order that N alone fixes.
#include "layers/smear.h"
#include "device/bf16.cuh"
#include "device/reduce.cuh"

#define SMEAR_THREADS 256

__device__ inline float sigmoid_of(float z) { return 1.0f / (1.0f + expf(-z)); }

// z of the token whose x row is row: its first G channels . weight, in order.
__device__ inline float gate_input(const bf16* row, const bf16* weight, int G) {
    float z = 0.0f;
    for (int j = 0; j < G; j++) z += (float)row[j] * (float)weight[j];
    return z;
}

// One thread per pack of a token: out = x + gate * x of the token before (none at t = 0).
__global__ void smear_forward_kernel(bf16x8* out, const bf16* x, const bf16* weight, const bf16* lambda, int T, int C,
                                     int G, long long packs) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= packs) return;
    int per_row = C / 8;
    long long n = i / per_row;
    const bf16x8* xs = (const bf16x8*)x;
    bf16x8 a = xs[i];
    if (n % T != 0) {
        float g = (float)*lambda * sigmoid_of(gate_input(x + n * C, weight, G));
        bf16x8 b = xs[i - per_row];
        for (int k = 0; k < 8; k++) a.v[k] = (bf16)((float)a.v[k] + g * (float)b.v[k]);
    }
    out[i] = a;
}

// One thread per pack of a sequence's token: out = x + gate * prev, then prev = x.
__global__ void smear_step_kernel(bf16x8* out, const bf16* x, bf16x8* prev, const bf16* weight, const bf16* lambda,
                                  int C, int G, long long packs) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= packs) return;
    long long n = i / (C / 8);
    float g = (float)*lambda * sigmoid_of(gate_input(x + n * C, weight, G));
    bf16x8 a = ((const bf16x8*)x)[i], b = prev[i], o;
    for (int k = 0; k < 8; k++) o.v[k] = (bf16)((float)a.v[k] + g * (float)b.v[k]);
    out[i] = o;
    prev[i] = a;
}

// A warp per token n: its gate, and from dgate = dout_n . x_{n-1} (0 at t = 0) dz and dlambda's
// term, into gate[n], dz[n], dl[n].
__global__ void smear_token_kernel(float* gate, float* dz, float* dl, const bf16* dout, const bf16* x,
                                   const bf16* weight, const bf16* lambda, int T, int C, int G, int N) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    if (warp >= N) return;
    long long n = warp;
    float s = sigmoid_of(gate_input(x + n * C, weight, G)), scale = (float)*lambda;
    float dgate = 0.0f;
    if (n % T != 0) {
        const bf16x8* d = (const bf16x8*)(dout + n * C);
        const bf16x8* b = (const bf16x8*)(x + (n - 1) * C);
        for (int p = lane; p < C / 8; p += 32) {
            bf16x8 u = d[p], v = b[p];
            for (int k = 0; k < 8; k++) dgate += (float)u.v[k] * (float)v.v[k];
        }
        dgate = warp_reduce_sum(dgate);
    }
    if (lane == 0) {
        gate[n] = n % T != 0 ? scale * s : 0.0f;
        dz[n] = dgate * scale * s * (1.0f - s);
        dl[n] = dgate * s;
    }
}

// One thread per pack: dx = dout + gate of the next token * its dout, and the gate's input.
__global__ void smear_dx_kernel(bf16x8* dx, const bf16x8* dout, const float* gate, const float* dz,
                                const bf16* weight, int T, int C, int G, long long packs) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= packs) return;
    int per_row = C / 8, c = (int)(i % per_row) * 8;
    long long n = i / per_row;
    float acc[8];
    bf16x8 a = dout[i];
    for (int k = 0; k < 8; k++) acc[k] = (float)a.v[k];
    if ((n + 1) % T != 0) {
        float g = gate[n + 1];
        bf16x8 b = dout[i + per_row];
        for (int k = 0; k < 8; k++) acc[k] += g * (float)b.v[k];
    }
    for (int k = 0; k < 8 && c + k < G; k++) acc[k] += dz[n] * (float)weight[c + k];
    bf16x8 o;
    for (int k = 0; k < 8; k++) o.v[k] = (bf16)acc[k];
    dx[i] = o;
}

// Block j < G: dweight[j] += sum_n dz[n] x[n, j]; block G: dlambda += sum_n dl[n].
__global__ void __launch_bounds__(SMEAR_THREADS)
smear_params_kernel(bf16* dweight, bf16* dlambda, const float* dz, const float* dl, const bf16* x, int C, int G,
                    int N) {
    int j = blockIdx.x;
    float sum = 0.0f;
    for (long long n = threadIdx.x; n < N; n += blockDim.x) sum += j < G ? dz[n] * (float)x[n * C + j] : dl[n];
    sum = block_reduce_sum(sum);
    if (threadIdx.x != 0) return;
    bf16* out = j < G ? dweight + j : dlambda;
    *out = (bf16)((float)*out + sum);
}

static void check_call(const char* who, int C, int G, const void* a, const void* b, const void* c) {
    if (C % 8 != 0 || G < 1 || G > C || !aligned16(a) || !aligned16(b) || !aligned16(c))
        die("%s: needs C (%d) a multiple of 8, a gate of 1 to C channels (%d) and 16-byte aligned buffers", who, C, G);
}

size_t smear_scratch_bytes(int N) { return 3 * (size_t)N * sizeof(float); }

void smear_forward(bf16* out, const bf16* x, const bf16* weight, const bf16* lambda, int rows, int T, int C, int G,
                   cudaStream_t stream) {
    check_call("smear_forward", C, G, out, x, x);
    long long packs = (long long)rows * T * C / 8;
    if (packs == 0) return;
    smear_forward_kernel<<<(unsigned)ceil_div(packs, SMEAR_THREADS), SMEAR_THREADS, 0, stream>>>(
        (bf16x8*)out, x, weight, lambda, T, C, G, packs);
    cudaCheckLaunch();
}

void smear_step(bf16* out, const bf16* x, bf16* prev, const bf16* weight, const bf16* lambda, int B, int C, int G,
                cudaStream_t stream) {
    check_call("smear_step", C, G, out, x, prev);
    long long packs = (long long)B * C / 8;
    if (packs == 0) return;
    smear_step_kernel<<<(unsigned)ceil_div(packs, SMEAR_THREADS), SMEAR_THREADS, 0, stream>>>(
        (bf16x8*)out, x, (bf16x8*)prev, weight, lambda, C, G, packs);
    cudaCheckLaunch();
}

void smear_backward(bf16* dx, bf16* dweight, bf16* dlambda, const bf16* dout, const bf16* x, const bf16* weight,
                    const bf16* lambda, int rows, int T, int C, int G, void* scratch, cudaStream_t stream) {
    check_call("smear_backward", C, G, dx, dout, x);
    int N = rows * T;
    if (N == 0) return;
    float* gate = (float*)scratch;
    float *dz = gate + N, *dl = dz + N;
    smear_token_kernel<<<(unsigned)ceil_div((long long)N * 32, SMEAR_THREADS), SMEAR_THREADS, 0, stream>>>(
        gate, dz, dl, dout, x, weight, lambda, T, C, G, N);
    cudaCheckLaunch();
    long long packs = (long long)N * C / 8;
    smear_dx_kernel<<<(unsigned)ceil_div(packs, SMEAR_THREADS), SMEAR_THREADS, 0, stream>>>(
        (bf16x8*)dx, (const bf16x8*)dout, gate, dz, weight, T, C, G, packs);
    cudaCheckLaunch();
    smear_params_kernel<<<G + 1, SMEAR_THREADS, 0, stream>>>(dweight, dlambda, dz, dl, x, C, G, N);
    cudaCheckLaunch();
}
