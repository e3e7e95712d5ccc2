// bench/bench_fp8_algorithms.cu: every algorithm cuBLASLt's heuristic offers for the MLP's FP8
// forward product, timed, beside bf16's: whether the first candidate, the one layers/matmul.cu
// takes, is the fastest at the shapes where FP8 runs at about 60% of bf16's rate (bench_matmul,
// bench/HISTORY.md FP8 v1). The product is the layer's forward as layers/matmul.cu computes it:
// D (OC, N) = W^T (OC, C) @ X (C, N), column-major, A transposed and B not ("TN", the layout FP8
// needs), E4M3 inputs with their dequantising factors on the GPU, fast accumulation, bf16 output;
// bf16's the same product in bf16 (A transposed, B not). Shapes: the up (C -> 4C) and down
// (4C -> C) projections at d12 (C 768), d24 (C 1024) and d48 (C 1600), N 16384 tokens.
// Each row: the candidate's index in the heuristic's order, its configuration (algorithm id,
// tile, stages, split-k, cluster shape: cublasLt.h's enums, by number), its workspace, its median
// time (bench_common.cuh: 3 warm-up calls, median of 10, the candidates taking turns) and TFLOP/s
// (2 N C OC); a candidate cublasLtMatmul refuses is said so.
// Usage: bench_fp8_algorithms [C N]: every shape, or the two projections of the one given.
#include <cublasLt.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "bench/bench_common.cuh"

#define MAX_ALGOS 16
#define WORKSPACE_BYTES ((size_t)32 << 20)   // layers/matmul.h's MATMUL_WORKSPACE_BYTES

// E4M3 of a bf16 buffer, element by element.
__global__ void to_e4m3_kernel(__nv_fp8_e4m3* out, const bf16* in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __nv_fp8_e4m3((float)in[i]);
}

// One product's descriptors and buffers, and the candidates the heuristic gave for it.
typedef struct {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    const void *a_data, *b_data;
    bf16* out;
    void* workspace;
    cudaStream_t stream;
    cublasLtMatmulHeuristicResult_t algos[MAX_ALGOS];
    int count;
} Product;

// The product (m, n, k) = (OC, N, C) in fp8 (E4M3, fast accumulation, scales at scale) or bf16.
static void product_init(Product* p, int fp8, int m, int n, int k, const void* a, const void* b, bf16* out,
                         const float* scale) {
    cudaDataType_t in_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    cublasCheck(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    if (fp8) {
        int8_t fast = 1;
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale, sizeof(scale)));
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale, sizeof(scale)));
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
    }
    cublasCheck(cublasLtMatrixLayoutCreate(&p->a, in_type, k, m, k));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->b, in_type, k, n, k));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->d, CUDA_R_16BF, m, n, m));
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t bytes = WORKSPACE_BYTES;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
                                                     sizeof(bytes)));
    cublasCheck(cublasLtMatmulAlgoGetHeuristic(p->lt, p->desc, p->a, p->b, p->d, p->d, pref, MAX_ALGOS, p->algos,
                                               &p->count));
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    p->a_data = a;
    p->b_data = b;
    p->out = out;
}

static void product_free(Product* p) {
    cublasCheck(cublasLtMatrixLayoutDestroy(p->a));
    cublasCheck(cublasLtMatrixLayoutDestroy(p->b));
    cublasCheck(cublasLtMatrixLayoutDestroy(p->d));
    cublasCheck(cublasLtMatmulDescDestroy(p->desc));
}

// One call of candidate i (a pass of bench_median_ms); refused[i] set where cuBLASLt refuses it.
static int refused[MAX_ALGOS];
static void run_candidate(int i, void* context) {
    Product* p = (Product*)context;
    if (refused[i]) return;
    float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t s = cublasLtMatmul(p->lt, p->desc, &alpha, p->a_data, p->a, p->b_data, p->b, &beta, p->out, p->d,
                                      p->out, p->d, &p->algos[i].algo, p->workspace, WORKSPACE_BYTES, p->stream);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED) refused[i] = 1;
    else cublasCheck(s);
}

// An attribute of the candidate's configuration: 2 or 4 bytes by attribute (cublasLt.h), asked
// first, read into the low bytes of a zeroed value (little-endian).
static int config_of(const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
    uint32_t value = 0;
    size_t size = 0;
    cublasCheck(cublasLtMatmulAlgoConfigGetAttribute(algo, attr, NULL, 0, &size));
    if (size > sizeof(value)) die("bench_fp8_algorithms: attribute %d has %zu bytes", (int)attr, size);
    cublasCheck(cublasLtMatmulAlgoConfigGetAttribute(algo, attr, &value, size, &size));
    return (int)value;
}

// Every candidate of the product (fp8 or bf16) at (m, n, k), timed, one row each.
static void time_product(const char* name, Product* p, int m, int n, int k) {
    float ms[MAX_ALGOS];
    for (int i = 0; i < MAX_ALGOS; i++) refused[i] = 0;
    bench_median_ms(p->count, run_candidate, p, p->stream, ms);
    double flop = 2.0 * m * n * k;
    for (int i = 0; i < p->count; i++) {
        const cublasLtMatmulAlgo_t* a = &p->algos[i].algo;
        printf("| %s | %d | %d | %d | %d | %d | %d | %d | %.1f MB |", name, i, config_of(a, CUBLASLT_ALGO_CONFIG_ID),
               config_of(a, CUBLASLT_ALGO_CONFIG_TILE_ID), config_of(a, CUBLASLT_ALGO_CONFIG_STAGES_ID),
               config_of(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM), config_of(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID),
               config_of(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING), p->algos[i].workspaceSize / 1e6);
        if (refused[i]) printf(" refused | |\n");
        else printf(" %.3f | %.0f |\n", ms[i], flop / (ms[i] * 1e-3) / 1e12);
    }
}

// Both products, fp8 and bf16, of the projection (C -> OC) at N tokens.
static void time_projection(cublasLtHandle_t lt, cudaStream_t stream, void* workspace, const float* scale, int C,
                            int OC, int N) {
    size_t nw = (size_t)OC * C, nx = (size_t)C * N;
    bf16 *w, *x, *out;
    __nv_fp8_e4m3 *wq, *xq;
    if (!bench_try_malloc((void**)&w, nw * sizeof(bf16)) || !bench_try_malloc((void**)&x, nx * sizeof(bf16)) ||
        !bench_try_malloc((void**)&out, (size_t)OC * N * sizeof(bf16)) || !bench_try_malloc((void**)&wq, nw) ||
        !bench_try_malloc((void**)&xq, nx))
        die("bench_fp8_algorithms: out of device memory at C %d, OC %d, N %d", C, OC, N);
    bench_fill_uniform(w, nw, 1, 0.05f);
    bench_fill_uniform(x, nx, 2, 1.0f);
    to_e4m3_kernel<<<1024, 256>>>(wq, w, nw);
    cudaCheckLaunch();
    to_e4m3_kernel<<<1024, 256>>>(xq, x, nx);
    cudaCheckLaunch();
    cudaCheck(cudaDeviceSynchronize());
    char name[64];
    for (int fp8 = 1; fp8 >= 0; fp8--) {
        Product p = {.lt = lt, .workspace = workspace, .stream = stream};
        product_init(&p, fp8, OC, N, C, fp8 ? (const void*)wq : w, fp8 ? (const void*)xq : x, out, scale);
        snprintf(name, sizeof(name), "%s %d -> %d, N %d", fp8 ? "fp8" : "bf16", C, OC, N);
        time_product(name, &p, OC, N, C);
        product_free(&p);
    }
    cudaCheck(cudaFree(w));
    cudaCheck(cudaFree(x));
    cudaCheck(cudaFree(out));
    cudaCheck(cudaFree(wq));
    cudaCheck(cudaFree(xq));
}

int main(int argc, char** argv) {
    int only_c = argc > 2 ? atoi(argv[1]) : 0, N = argc > 2 ? atoi(argv[2]) : 16384;
    if (argc == 2 || argc > 3 || (argc == 3 && (only_c <= 0 || only_c % 16 || N <= 0 || N % 16))) {
        fprintf(stderr, "usage: bench_fp8_algorithms [C N] (C and N positive multiples of 16)\n");
        return 2;
    }
    int shapes[3] = {768, 1024, 1600}, count = 3;
    if (only_c) {
        shapes[0] = only_c;
        count = 1;
    }
    cudaDeviceProp prop;
    if (!bench_device("bench_fp8_algorithms", 1, &prop)) return 0;
    cublasLtHandle_t lt;
    cublasCheck(cublasLtCreate(&lt));
    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    void* workspace;
    float* scale;
    const float one = 1.0f;
    cudaCheck(cudaMalloc(&workspace, WORKSPACE_BYTES));
    cudaCheck(cudaMalloc((void**)&scale, sizeof(float)));   // 256-byte aligned: the scale pointers need 16
    cudaCheck(cudaMemcpy(scale, &one, sizeof(float), cudaMemcpyHostToDevice));
    printf("%s: the heuristic's candidates for the MLP's forward product (candidate 0 is the one taken)\n\n",
           prop.name);
    printf("| product | candidate | algo | tile | stages | split-k | cluster | swizzle | workspace | ms | TFLOP/s |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int s = 0; s < count; s++) {
        time_projection(lt, stream, workspace, scale, shapes[s], 4 * shapes[s], N);
        time_projection(lt, stream, workspace, scale, 4 * shapes[s], shapes[s], N);
    }
    cudaCheck(cudaFree(workspace));
    cudaCheck(cudaFree(scale));
    cudaCheck(cudaStreamDestroy(stream));
    cublasCheck(cublasLtDestroy(lt));
    return 0;
}
