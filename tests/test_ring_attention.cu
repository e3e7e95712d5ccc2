// tests/test_ring_attention.cu: context parallelism's ring attention (attention/ring.h), simulated
// on one GPU: the N ranks of a group run in this process, the ring's moves are copies in memory
// (ring_in_memory, distributed/ring_transport.h); everything else is the code the NCCL ring
// runs, called as the model calls it (attention.h, a plan with the ring). A full sequence
// of T = 2 N c tokens is split zigzag (rank r: chunks r and 2N-1-r), and the ring's forward
// (O, L) and backward (dQ, dK, dV), put back in sequence order, must equal the flash kernels
// on the whole sequence (themselves checked against float64 in tests/test_attention.cu).
// Outputs are poisoned (NaN) before each call. Tolerances, relative L2 over the tensor:
//   O 1e-2, dQ dK dV 2e-2: the ring rounds each block's partial output (and dqkv) to bf16
//   before the fp32 merge, one rounding (2^-9 relative) more than the whole-sequence kernel;
//   L 1e-4 |L - ref| / (1 + |ref|): the merge of log-sum-exps runs in fp32.
// T must be a multiple of 2N (equal chunks): other lengths are refused (checked here too). The
// split of a batch into the ranks' rows (zigzag_split) is checked on the host.
#include <math.h>
#include <string.h>
#include "attention/attention.h"
#include "attention/flash.h"
#include "common/rng.h"
#include "distributed/ring_transport.h"
#include "tests/test.h"

static float rng_symmetric(Rng* rng) { return (float)(2.0 * rng_uniform(rng) - 1.0); }

// Global position of local row t of rank r (local sequences are two chunks of c).
static size_t global_position(int r, int t, int c, int N) { return (size_t)zigzag_chunk(r, t / c, N) * c + t % c; }

static double rel_l2(const bf16* a, const bf16* b, size_t n, size_t stride, size_t offset, size_t width) {
    double diff = 0.0, ref = 0.0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < width; k++) {
            double x = __bfloat162float(a[i * stride + offset + k]), y = __bfloat162float(b[i * stride + offset + k]);
            diff += (x - y) * (x - y);
            ref += y * y;
            if (isnan(x)) diff = INFINITY;
        }
    return sqrt(diff / ref);
}

static void* device_copy(const void* host, size_t bytes) {
    void* d;
    cudaCheck(cudaMalloc(&d, bytes));
    if (host) cudaCheck(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
    return d;
}

static void test_ring(int N, int c, int B, int HS) {
    char name[160];
    int NH = 2, T = 2 * N * c, n = 2 * c;
    size_t C = (size_t)NH * HS, rows = (size_t)B * T;
    snprintf(name, sizeof(name), "ring attention simulated N=%d B=%d T=%d (c=%d) HS%d", N, B, T, c, HS);
    test_begin(name);
    float scale = 1.0f / sqrtf((float)HS);
    AttentionShape full = {B, T, NH, HS, 1, scale}, local = {B * N, n, NH, HS, 1, scale};
    AttentionRing g = ring_in_memory(N);
    AttentionPlan plan = {ATTENTION_FLASH, 1, &g};
    const char* why = attention_unsupported(&plan, local);
    CHECK(!why, "refused: %s", why);
    // Inputs in sequence order, and the same rows in the ranks' order.
    bf16* qkv = (bf16*)malloc(rows * 3 * C * sizeof(bf16));
    bf16* dout = (bf16*)malloc(rows * C * sizeof(bf16));
    Rng rng = {(uint64_t)N * 1000 + c * 10 + HS};
    for (size_t i = 0; i < rows * 3 * C; i++) qkv[i] = __float2bfloat16(2.0f * rng_symmetric(&rng));
    for (size_t i = 0; i < rows * C; i++) dout[i] = __float2bfloat16(rng_symmetric(&rng));
    bf16* qkv_l = (bf16*)malloc(rows * 3 * C * sizeof(bf16));
    bf16* dout_l = (bf16*)malloc(rows * C * sizeof(bf16));
    for (int b = 0; b < B; b++)
        for (int r = 0; r < N; r++)
            for (int t = 0; t < n; t++) {
                size_t lr = ((size_t)b * N + r) * n + t, gr = (size_t)b * T + global_position(r, t, c, N);
                memcpy(qkv_l + lr * 3 * C, qkv + gr * 3 * C, 3 * C * sizeof(bf16));
                memcpy(dout_l + lr * C, dout + gr * C, C * sizeof(bf16));
            }
    // The whole sequence through the flash kernels.
    bf16 *d_qkv = (bf16*)device_copy(qkv, rows * 3 * C * sizeof(bf16)), *d_dout = (bf16*)device_copy(dout, rows * C * sizeof(bf16));
    bf16 *d_out = (bf16*)device_copy(NULL, rows * C * sizeof(bf16)), *d_dqkv = (bf16*)device_copy(NULL, rows * 3 * C * sizeof(bf16));
    float* d_lse = (float*)device_copy(NULL, rows * NH * sizeof(float));
    void* scratch = device_copy(NULL, flash_attention_scratch_bytes(full));
    AttentionParams p = attention_fused_params(full, d_qkv, d_out, d_lse, d_dqkv, d_dout);
    flash_attention_forward(&p, NULL, 0);
    flash_attention_backward(&p, NULL, scratch, 1, 0);
    bf16* out = (bf16*)malloc(rows * C * sizeof(bf16));
    bf16* dqkv = (bf16*)malloc(rows * 3 * C * sizeof(bf16));
    float* lse = (float*)malloc(rows * NH * sizeof(float));
    cudaCheck(cudaMemcpy(out, d_out, rows * C * sizeof(bf16), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(dqkv, d_dqkv, rows * 3 * C * sizeof(bf16), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(lse, d_lse, rows * NH * sizeof(float), cudaMemcpyDeviceToHost));
    // The ring, on the ranks' rows; the outputs poisoned first.
    bf16 *l_qkv = (bf16*)device_copy(qkv_l, rows * 3 * C * sizeof(bf16)), *l_dout = (bf16*)device_copy(dout_l, rows * C * sizeof(bf16));
    bf16 *l_out = (bf16*)device_copy(NULL, rows * C * sizeof(bf16)), *l_dqkv = (bf16*)device_copy(NULL, rows * 3 * C * sizeof(bf16));
    float* l_lse = (float*)device_copy(NULL, rows * NH * sizeof(float));
    void* workspace = device_copy(NULL, attention_scratch_bytes(&plan, local));
    cudaCheck(cudaMemset(l_out, 0xff, rows * C * sizeof(bf16)));
    cudaCheck(cudaMemset(l_lse, 0xff, rows * NH * sizeof(float)));
    cudaCheck(cudaMemset(l_dqkv, 0xff, rows * 3 * C * sizeof(bf16)));
    attention_forward(&plan, local, l_out, l_lse, l_qkv, workspace, 0);
    attention_backward(&plan, local, l_dqkv, l_dout, l_out, l_lse, l_qkv, workspace, 0);
    bf16* ring_out = (bf16*)malloc(rows * C * sizeof(bf16));
    bf16* ring_dqkv = (bf16*)malloc(rows * 3 * C * sizeof(bf16));
    float* ring_lse = (float*)malloc(rows * NH * sizeof(float));
    bf16* got_out = (bf16*)malloc(rows * C * sizeof(bf16));
    bf16* got_dqkv = (bf16*)malloc(rows * 3 * C * sizeof(bf16));
    cudaCheck(cudaMemcpy(ring_out, l_out, rows * C * sizeof(bf16), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(ring_dqkv, l_dqkv, rows * 3 * C * sizeof(bf16), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(ring_lse, l_lse, rows * NH * sizeof(float), cudaMemcpyDeviceToHost));
    // Back to sequence order; L is (rows of ranks, NH, n) and (B, NH, T).
    double lse_err = 0.0;
    for (int b = 0; b < B; b++)
        for (int r = 0; r < N; r++)
            for (int t = 0; t < n; t++) {
                size_t lr = ((size_t)b * N + r) * n + t, p = global_position(r, t, c, N), gr = (size_t)b * T + p;
                memcpy(got_out + gr * C, ring_out + lr * C, C * sizeof(bf16));
                memcpy(got_dqkv + gr * 3 * C, ring_dqkv + lr * 3 * C, 3 * C * sizeof(bf16));
                for (int h = 0; h < NH; h++) {
                    double x = ring_lse[(((size_t)b * N + r) * NH + h) * n + t], y = lse[((size_t)b * NH + h) * T + p];
                    double e = fabs(x - y) / (1.0 + fabs(y));
                    lse_err = isnan(e) ? INFINITY : fmax(lse_err, e);
                }
            }
    double e_o = rel_l2(got_out, out, rows, C, 0, C), e_q = rel_l2(got_dqkv, dqkv, rows, 3 * C, 0, C);
    double e_k = rel_l2(got_dqkv, dqkv, rows, 3 * C, C, C), e_v = rel_l2(got_dqkv, dqkv, rows, 3 * C, 2 * C, C);
    printf("    O %.2e  L %.2e  dQ %.2e  dK %.2e  dV %.2e\n", e_o, lse_err, e_q, e_k, e_v);
    CHECK(e_o < 1e-2, "O: relative L2 %.3g", e_o);
    CHECK(lse_err < 1e-4, "L: %.3g", lse_err);
    CHECK(e_q < 2e-2 && e_k < 2e-2 && e_v < 2e-2, "dQ %.3g dK %.3g dV %.3g", e_q, e_k, e_v);
    test_end();
    void* dev[] = {d_qkv, d_dout, d_out, d_dqkv, d_lse, scratch, l_qkv, l_dout, l_out, l_dqkv, l_lse, workspace};
    for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++) cudaCheck(cudaFree(dev[i]));
    void* host[] = {qkv, dout, qkv_l, dout_l, out, dqkv, lse, ring_out, ring_dqkv, ring_lse, got_out, got_dqkv};
    for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++) free(host[i]);
}

static void test_refused(void) {
    test_begin("ring attention refuses a local sequence of unequal chunks");
    AttentionRing g = ring_in_memory(2);
    AttentionShape odd = {2, 101, 2, 64, 1, 0.125f}, rows = {3, 100, 2, 64, 1, 0.125f};
    CHECK(ring_attention_unsupported(&g, odd) != NULL, "an odd local length was accepted");
    CHECK(ring_attention_unsupported(&g, rows) != NULL, "3 rows for a group of 2 held here were accepted");
    test_end();
}

// A batch split for the ring: each model row holds its rank's two zigzag chunks of its sequence,
// for all N ranks held here (simulated) and for one rank of a group (NCCL), the token at sequence
// position p of sequence b being b * T + p.
static void test_zigzag_split(void) {
    test_begin("zigzag_split puts each rank's chunks of each sequence in its row");
    enum { B = 2, N = 3, T = 2 * N * 5 };
    int batch[B * T], rows[B * T];
    for (int i = 0; i < B * T; i++) batch[i] = i;
    AttentionRing all = ring_in_memory(N), one = {N, 1, 1, NULL, NULL};
    const AttentionRing* rings[2] = {&all, &one};
    for (int k = 0; k < 2; k++) {
        const AttentionRing* g = rings[k];
        int c = T / (2 * N), wrong = 0;
        memset(rows, 0xff, sizeof(rows));
        zigzag_split(g, batch, B, T, rows);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < g->count; i++)
                for (int t = 0; t < 2 * c; t++)
                    wrong += rows[(b * g->count + i) * 2 * c + t] !=
                             b * T + (int)global_position(g->first + i, t, c, N);
        CHECK(wrong == 0, "%s: %d tokens out of place", k ? "one rank" : "simulated", wrong);
    }
    test_end();
}

int main(void) {
    const int cases[][4] = {  // N, c, B, HS
        {2, 64, 1, 64}, {2, 100, 2, 64}, {2, 300, 1, 128}, {4, 64, 1, 64}, {4, 77, 1, 128}, {1, 96, 1, 64}};
    const int n_cases = sizeof(cases) / sizeof(cases[0]);
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        for (int i = 0; i < n_cases; i++) {
            char name[160];
            snprintf(name, sizeof(name), "ring attention simulated N=%d B=%d T=%d (c=%d) HS%d", cases[i][0], cases[i][2],
                     2 * cases[i][0] * cases[i][1], cases[i][1], cases[i][3]);
            test_skip(name, "no CUDA device");
        }
        test_refused();
        test_zigzag_split();
        return test_exit_code();
    }
    for (int i = 0; i < n_cases; i++) test_ring(cases[i][0], cases[i][1], cases[i][2], cases[i][3]);
    test_refused();
    test_zigzag_split();
    return test_exit_code();
}
