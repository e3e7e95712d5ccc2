// layers/value_embedding.cu: value embeddings and their gates, forward and backward
// (layers/value_embedding.h), fp32 math. The values move 8 channels (a 16-byte pack) at a time,
// the table's rows in 4-byte pieces: in the flat parameter array the table follows the residual
// lambdas' 2L bf16, so it is 4-byte aligned, not always 16. The gate's weight gradient is a block
// per weight, its threads striding over the rows in an order that N alone fixes.
#include "layers/value_embedding.h"
#include "device/bf16.cuh"
#include "device/reduce.cuh"

#define GATE_THREADS 256
#define VALUE_THREADS 128

// 3 sigmoid(z): the gate's range (0, 3), 1.5 at z = 0.
__device__ inline float gate_of(float z) { return 3.0f / (1.0f + expf(-z)); }

// One thread per (row, head).
__global__ void value_gate_forward_kernel(float* gate, const bf16* ln1, const bf16* weight, int N, int C, int NH,
                                          int G) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)N * NH) return;
    long long n = i / NH;
    int h = (int)(i % NH);
    float z = 0.0f;
    for (int j = 0; j < G; j++) z += (float)ln1[n * C + j] * (float)weight[h * G + j];
    gate[i] = gate_of(z);
}

// One thread per pack of 8 channels of a row: v += gate * table[token], also into the cache row.
__global__ void value_embedding_forward_kernel(bf16* v, long long v_stride, const int* tokens, const bf16* table,
                                               const float* gate, bf16* cache, long long cache_batch,
                                               long long cache_row, const int* positions, int N, int NH, int HS) {
    int C = NH * HS, packs = C / 8;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)N * packs) return;
    long long n = i / packs;
    int c = (int)(i % packs) * 8;
    float g = gate[n * NH + c / HS];
    bf16x8* out = (bf16x8*)(v + n * v_stride + c);
    bf16x8 a = *out, e = load_bf16x8_aligned4(table + (long long)tokens[n] * C + c);
    for (int k = 0; k < 8; k++) a.v[k] = (bf16)((float)a.v[k] + g * (float)e.v[k]);
    *out = a;
    if (cache) *(bf16x8*)(cache + n * cache_batch + (long long)positions[n] * cache_row + c) = a;
}

// One thread per (row, head): dgate = dv . table[token] over the head's channels, in order.
__global__ void value_embedding_dgate_kernel(float* dgate, const bf16* dv, long long dv_stride, const int* tokens,
                                             const bf16* table, int N, int NH, int HS) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)N * NH) return;
    long long n = i / NH;
    int h = (int)(i % NH), C = NH * HS;
    const bf16x8* d = (const bf16x8*)(dv + n * dv_stride + h * HS);
    const bf16* e = table + (long long)tokens[n] * C + h * HS;
    float sum = 0.0f;
    for (int p = 0; p < HS / 8; p++) {
        bf16x8 a = d[p], b = load_bf16x8_aligned4(e + 8 * p);
        for (int k = 0; k < 8; k++) sum += (float)a.v[k] * (float)b.v[k];
    }
    dgate[i] = sum;
}

// Block (group, chunk), one thread per pack of 8 channels: the group's token's row of dtable +=
// its rows' gate * dv in increasing row order (layers/encoder.h's groups).
__global__ void value_embedding_dtable_kernel(bf16* dtable, const bf16* dv, long long dv_stride, const float* gate,
                                              const int* positions, const int* group_start, const int* group_token,
                                              int NH, int HS) {
    int C = NH * HS, c = (blockIdx.y * blockDim.x + threadIdx.x) * 8;
    if (c >= C) return;
    int g = blockIdx.x, h = c / HS;
    float acc[8] = {0.0f};
    for (int i = group_start[g]; i < group_start[g + 1]; i++) {
        long long n = positions[i];
        float w = gate[n * NH + h];
        bf16x8 d = *(const bf16x8*)(dv + n * dv_stride + c);
        for (int k = 0; k < 8; k++) acc[k] += w * (float)d.v[k];
    }
    bf16* out = dtable + (long long)group_token[g] * C + c;
    bf16x8 o = load_bf16x8_aligned4(out);
    for (int k = 0; k < 8; k++) o.v[k] = (bf16)((float)o.v[k] + acc[k]);
    store_bf16x8_aligned4(out, o);
}

// d loss / d z of row n, head h: through the gate's sigmoid, 3 s (1 - s) = gate (1 - gate / 3).
__device__ inline float dz_of(const float* dgate, const float* gate, long long i) {
    return dgate[i] * gate[i] * (1.0f - gate[i] / 3.0f);
}

// Block h * G + j: dweight[h, j] += sum over the rows of dz[n, h] * ln1[n, j].
__global__ void __launch_bounds__(GATE_THREADS)
value_gate_dweight_kernel(bf16* dweight, const float* dgate, const float* gate, const bf16* ln1, int N, int C, int NH,
                          int G) {
    int h = blockIdx.x / G, j = blockIdx.x % G;
    float sum = 0.0f;
    for (long long n = threadIdx.x; n < N; n += blockDim.x)
        sum += dz_of(dgate, gate, n * NH + h) * (float)ln1[n * C + j];
    sum = block_reduce_sum(sum);
    if (threadIdx.x == 0) dweight[blockIdx.x] = (bf16)((float)dweight[blockIdx.x] + sum);
}

// One thread per (row, j < G): dln1[n, j] += sum over the heads of dz[n, h] * weight[h, j].
__global__ void value_gate_dln1_kernel(bf16* dln1, const float* dgate, const float* gate, const bf16* weight, int N,
                                       int C, int NH, int G) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)N * G) return;
    long long n = i / G;
    int j = (int)(i % G);
    float sum = 0.0f;
    for (int h = 0; h < NH; h++) sum += dz_of(dgate, gate, n * NH + h) * (float)weight[h * G + j];
    dln1[n * C + j] = (bf16)((float)dln1[n * C + j] + sum);
}

static void check_gate(const char* who, int C, int G) {
    if (G < 1 || G > C) die("%s: the gate reads %d channels of %d", who, G, C);
}

static void check_values(const char* who, int HS, const void* v, long long stride, const void* table) {
    if (HS % 8 != 0 || stride % 8 != 0 || !aligned16(v) || !aligned4(table))
        die("%s: needs HS (%d) and the row stride multiples of 8, 16-byte aligned values and a 4-byte aligned "
            "table", who, HS);
}

void value_gate_forward(float* gate, const bf16* ln1, const bf16* weight, int N, int C, int NH, int G,
                        cudaStream_t stream) {
    check_gate("value_gate_forward", C, G);
    long long threads = (long long)N * NH;
    if (threads == 0) return;
    value_gate_forward_kernel<<<(unsigned)ceil_div(threads, GATE_THREADS), GATE_THREADS, 0, stream>>>(
        gate, ln1, weight, N, C, NH, G);
    cudaCheckLaunch();
}

void value_embedding_forward(bf16* v, long long v_stride, const int* tokens, const bf16* table, const float* gate,
                             bf16* cache, long long cache_batch, long long cache_row, const int* positions, int N,
                             int NH, int HS, cudaStream_t stream) {
    check_values("value_embedding_forward", HS, v, v_stride, table);
    if (cache && (!aligned16(cache) || cache_batch % 8 != 0 || cache_row % 8 != 0))
        die("value_embedding_forward: needs a 16-byte aligned cache with strides multiples of 8");
    long long threads = (long long)N * NH * HS / 8;
    if (threads == 0) return;
    value_embedding_forward_kernel<<<(unsigned)ceil_div(threads, VALUE_THREADS), VALUE_THREADS, 0, stream>>>(
        v, v_stride, tokens, table, gate, cache, cache_batch, cache_row, positions, N, NH, HS);
    cudaCheckLaunch();
}

void value_embedding_backward(float* dgate, bf16* dtable, const bf16* dv, long long dv_stride, const int* tokens,
                              const int* groups, int group_count, const bf16* table, const float* gate, int N,
                              int NH, int HS, cudaStream_t stream) {
    check_values("value_embedding_backward", HS, dv, dv_stride, table);
    if (!aligned4(dtable)) die("value_embedding_backward: needs a 4-byte aligned dtable");
    long long threads = (long long)N * NH;
    if (threads == 0) return;
    value_embedding_dgate_kernel<<<(unsigned)ceil_div(threads, GATE_THREADS), GATE_THREADS, 0, stream>>>(
        dgate, dv, dv_stride, tokens, table, N, NH, HS);
    cudaCheckLaunch();
    int C = NH * HS;
    dim3 grid((unsigned)group_count, (unsigned)ceil_div(C / 8, VALUE_THREADS));
    value_embedding_dtable_kernel<<<grid, VALUE_THREADS, 0, stream>>>(dtable, dv, dv_stride, gate, groups,
                                                                      groups + N, groups + N + group_count + 1, NH,
                                                                      HS);
    cudaCheckLaunch();
}

void value_gate_backward(bf16* dweight, bf16* dln1, const float* dgate, const float* gate, const bf16* ln1,
                         const bf16* weight, int N, int C, int NH, int G, cudaStream_t stream) {
    check_gate("value_gate_backward", C, G);
    if (N == 0) return;
    value_gate_dweight_kernel<<<NH * G, GATE_THREADS, 0, stream>>>(dweight, dgate, gate, ln1, N, C, NH, G);
    cudaCheckLaunch();
    long long threads = (long long)N * G;
    value_gate_dln1_kernel<<<(unsigned)ceil_div(threads, GATE_THREADS), GATE_THREADS, 0, stream>>>(
        dln1, dgate, gate, weight, N, C, NH, G);
    cudaCheckLaunch();
}
