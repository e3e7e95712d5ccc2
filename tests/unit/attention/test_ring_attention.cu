// tests/unit/attention/test_ring_attention.cu: context parallelism's ring attention (attention/ring.h), simulated
// on one GPU: the N ranks of a group run in this process, the ring's moves are copies in memory
// (ring_transport_in_memory, distributed/ring_transport.h); everything else is the code the NCCL
// ring runs, called as the model calls it (attention.h, a plan with the ring). A full sequence
// of T = 2 N c tokens is split zigzag (rank r: chunks r and 2N-1-r), and the ring's forward
// (O, L) and backward (dQ, dK, dV), put back in sequence order, must equal the flash kernels
// on the whole sequence (themselves checked against float64 in tests/unit/attention/test_attention.cu), with
// the deterministic backward and without it; the deterministic one twice gives the same bits.
// Masked cases (a key window per row, attention/mask.h) take the whole sequence's mask: the
// ring's document bounds (ring_document_bounds, each row's whole sequence from the ranks'
// tokens) must be the whole sequence's (attention_document_bounds), and the ring under them the
// masked kernels on the whole sequence: documents at random with one-token documents at a chunk
// edge and a document across two chunk edges beside a sequence without any, sequences without a
// boundary, windows of 1 key, of a chunk and longer than T, documents and a window at once.
// Outputs are poisoned (NaN) before each call. Tolerances, relative L2 over the tensor:
//   O 1e-2, dQ dK dV 2e-2: the ring rounds each block's partial output (and dqkv) to bf16
//   before the fp32 merge, one rounding (2^-9 relative) more than the whole-sequence kernel;
//   L 1e-4 |L - ref| / (1 + |ref|): the merge of log-sum-exps runs in fp32.
// The ring's blocks at global positions are also checked one by one, in each flash family,
// against float64: a chunk against itself (causal), against an earlier chunk (not causal, rows
// that see no key included), under documents and windows (test_blocks).
// T must be a multiple of 2N (equal chunks): other lengths are refused (checked here too). The
// split of a batch into the ranks' rows (zigzag_split) is checked on the host.
#include <math.h>
#include <string.h>
#include "attention/attention.h"
#include "attention/flash.h"
#include "common/rng.h"
#include "distributed/ring_transport.h"
#include "tests/lib/test.h"

#define EOT 50256   // the id of <|endoftext|> in the masked cases' tokens
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static float rng_symmetric(Rng* rng) { return (float)(2.0 * rng_uniform(rng) - 1.0); }

// The ring of N ranks all held here, its moves by the transport t (filled): copies in memory.
static AttentionRing simulated_ring(int N, RingTransport* t) {
    *t = ring_transport_in_memory(N);
    AttentionRing g = {N, 0, N, ring_transport_pass, t};
    return g;
}

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

static void* host_copy(const void* device, size_t bytes) {
    void* h = malloc(bytes);
    cudaCheck(cudaMemcpy(h, device, bytes, cudaMemcpyDeviceToHost));
    return h;
}

static void poison(void* device, size_t bytes) { cudaCheck(cudaMemset(device, 0xff, bytes)); }

// Where the masked cases' tokens hold <|endoftext|> (a document starts at each).
typedef enum {
    DOCS_NONE,          // no documents
    DOCS_RANDOM,        // even sequences: at random (1 in 23) but for one document from c to 3c + c/2
                        // (across two chunk edges), and one-token documents at c - 2 and c - 1 (at the
                        // edge of chunks 0 and 1); odd sequences: none
    DOCS_NO_BOUNDARY,   // none in any sequence
} Docs;

static const char* DOCS_NAMES[] = {"", ", documents", ", documents without a boundary"};

typedef struct {
    int N, c, B, HS;
    Docs docs;
    int window;   // keys a row sees at most; 0: no bound
} RingCase;

// Tokens (B, T), T = 2 N c: ids below EOT, and EOT where `docs` puts documents' starts.
static int* ring_tokens(RingCase rc, uint64_t seed) {
    int T = 2 * rc.N * rc.c, c = rc.c;
    int* tokens = (int*)malloc((size_t)rc.B * T * sizeof(int));
    Rng rng = {seed};
    for (int b = 0; b < rc.B; b++)
        for (int t = 0; t < T; t++) {
            uint64_t r = rng_next(&rng);
            int eot = rc.docs == DOCS_RANDOM && b % 2 == 0 &&
                      (t == c - 2 || t == c - 1 || t == c || ((t < c - 2 || t > 3 * c + c / 2) && (r >> 32) % 23 == 0));
            tokens[(size_t)b * T + t] = eot ? EOT : (int)(r % EOT);
        }
    return tokens;
}

static void case_name(char* name, size_t len, RingCase rc) {
    char window[32] = "";
    if (rc.window) snprintf(window, sizeof(window), ", window %d", rc.window);
    snprintf(name, len, "ring attention simulated N=%d B=%d T=%d (c=%d) HS%d%s%s", rc.N, rc.B, 2 * rc.N * rc.c, rc.c,
             rc.HS, DOCS_NAMES[rc.docs], window);
}

static void test_ring(RingCase rc) {
    char name[192];
    int N = rc.N, c = rc.c, B = rc.B, HS = rc.HS, NH = 2, T = 2 * N * c, n = 2 * c;
    size_t C = (size_t)NH * HS, rows = (size_t)B * T;
    case_name(name, sizeof(name), rc);
    test_begin(name);
    float scale = 1.0f / sqrtf((float)HS);
    AttentionShape full = {B, T, NH, HS, 1, scale}, local = {B * N, n, NH, HS, 1, scale};
    RingTransport transport;
    AttentionRing g = simulated_ring(N, &transport);
    AttentionPlan plan = {ATTENTION_FLASH, 1, &g, {NULL, NULL, rc.window}};
    // Inputs in sequence order, and the same rows in the ranks' order.
    bf16* qkv = (bf16*)malloc(rows * 3 * C * sizeof(bf16));
    bf16* dout = (bf16*)malloc(rows * C * sizeof(bf16));
    Rng rng = {(uint64_t)N * 1000 + c * 10 + HS + rc.docs * 7 + rc.window};
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
    void* workspace = device_copy(NULL, attention_scratch_bytes(&plan, local));
    // The documents: the whole sequence's bounds from its tokens, the ring's from the ranks'.
    AttentionMask mask = {NULL, NULL, rc.window};
    int *d_tokens = NULL, *d_start = NULL, *d_end = NULL, *l_tokens = NULL;
    if (rc.docs != DOCS_NONE) {
        int* tokens = ring_tokens(rc, rng.state);
        int* tokens_l = (int*)malloc(rows * sizeof(int));
        zigzag_split(&g, tokens, B, T, tokens_l);
        d_tokens = (int*)device_copy(tokens, rows * sizeof(int));
        l_tokens = (int*)device_copy(tokens_l, rows * sizeof(int));
        d_start = (int*)device_copy(NULL, rows * sizeof(int));
        d_end = (int*)device_copy(NULL, rows * sizeof(int));
        plan.mask.doc_start = (int*)device_copy(NULL, rows * N * sizeof(int));
        plan.mask.doc_end = (int*)device_copy(NULL, rows * N * sizeof(int));
        poison((void*)plan.mask.doc_start, rows * N * sizeof(int));
        poison((void*)plan.mask.doc_end, rows * N * sizeof(int));
        attention_document_bounds(d_tokens, B, T, EOT, d_start, d_end, 0);
        ring_document_bounds(&g, l_tokens, B * N, n, EOT, (int*)plan.mask.doc_start, (int*)plan.mask.doc_end,
                             workspace, 0);
        mask.doc_start = d_start;
        mask.doc_end = d_end;
        int* start = (int*)host_copy(d_start, rows * sizeof(int));
        int* end = (int*)host_copy(d_end, rows * sizeof(int));
        int* got_start = (int*)host_copy(plan.mask.doc_start, rows * N * sizeof(int));
        int* got_end = (int*)host_copy(plan.mask.doc_end, rows * N * sizeof(int));
        size_t wrong = 0;
        for (size_t row = 0; row < (size_t)B * N; row++)   // row b * N + r holds sequence b
            for (int t = 0; t < T; t++) {
                size_t got = row * T + t, want = row / N * T + t;
                wrong += got_start[got] != start[want] || got_end[got] != end[want];
            }
        CHECK(wrong == 0, "ring_document_bounds: %zu of %zu positions unlike the whole sequence's", wrong, rows * N);
        void* host[] = {tokens, tokens_l, start, end, got_start, got_end};
        for (size_t i = 0; i < COUNT(host); i++) free(host[i]);
    }
    const char* why = attention_unsupported(&plan, local);
    CHECK(!why, "refused: %s", why);
    // The whole sequence through the flash kernels.
    bf16 *d_qkv = (bf16*)device_copy(qkv, rows * 3 * C * sizeof(bf16)), *d_dout = (bf16*)device_copy(dout, rows * C * sizeof(bf16));
    bf16 *d_out = (bf16*)device_copy(NULL, rows * C * sizeof(bf16)), *d_dqkv = (bf16*)device_copy(NULL, rows * 3 * C * sizeof(bf16));
    float* d_lse = (float*)device_copy(NULL, rows * NH * sizeof(float));
    void* scratch = device_copy(NULL, flash_attention_scratch_bytes(full));
    AttentionParams p = attention_fused_params(full, d_qkv, d_out, d_lse, d_dqkv, d_dout);
    flash_attention_forward(&p, &mask, 0);
    flash_attention_backward(&p, &mask, scratch, 1, 0);
    bf16* out = (bf16*)host_copy(d_out, rows * C * sizeof(bf16));
    bf16* dqkv = (bf16*)host_copy(d_dqkv, rows * 3 * C * sizeof(bf16));
    float* lse = (float*)host_copy(d_lse, rows * NH * sizeof(float));
    // The ring, on the ranks' rows; the outputs poisoned first. The backward deterministic twice,
    // then with atomics.
    bf16 *l_qkv = (bf16*)device_copy(qkv_l, rows * 3 * C * sizeof(bf16)), *l_dout = (bf16*)device_copy(dout_l, rows * C * sizeof(bf16));
    bf16 *l_out = (bf16*)device_copy(NULL, rows * C * sizeof(bf16)), *l_dqkv = (bf16*)device_copy(NULL, rows * 3 * C * sizeof(bf16));
    float* l_lse = (float*)device_copy(NULL, rows * NH * sizeof(float));
    poison(l_out, rows * C * sizeof(bf16));
    poison(l_lse, rows * NH * sizeof(float));
    attention_forward(&plan, local, l_out, l_lse, l_qkv, workspace, 0);
    bf16* ring_dqkv[3];
    for (int run = 0; run < 3; run++) {
        plan.deterministic = run < 2;
        poison(l_dqkv, rows * 3 * C * sizeof(bf16));
        attention_backward(&plan, local, l_dqkv, l_dout, l_out, l_lse, l_qkv, workspace, 0);
        ring_dqkv[run] = (bf16*)host_copy(l_dqkv, rows * 3 * C * sizeof(bf16));
    }
    CHECK(memcmp(ring_dqkv[0], ring_dqkv[1], rows * 3 * C * sizeof(bf16)) == 0,
          "the deterministic backward gave other bits on its second run");
    bf16* ring_out = (bf16*)host_copy(l_out, rows * C * sizeof(bf16));
    float* ring_lse = (float*)host_copy(l_lse, rows * NH * sizeof(float));
    bf16* got_out = (bf16*)malloc(rows * C * sizeof(bf16));
    bf16* got_dqkv = (bf16*)malloc(rows * 3 * C * sizeof(bf16));
    // Back to sequence order; L is (rows of ranks, NH, n) and (B, NH, T).
    double lse_err = 0.0;
    for (int b = 0; b < B; b++)
        for (int r = 0; r < N; r++)
            for (int t = 0; t < n; t++) {
                size_t lr = ((size_t)b * N + r) * n + t, pos = global_position(r, t, c, N), gr = (size_t)b * T + pos;
                memcpy(got_out + gr * C, ring_out + lr * C, C * sizeof(bf16));
                for (int h = 0; h < NH; h++) {
                    double x = ring_lse[(((size_t)b * N + r) * NH + h) * n + t], y = lse[((size_t)b * NH + h) * T + pos];
                    double e = fabs(x - y) / (1.0 + fabs(y));
                    lse_err = isnan(e) ? INFINITY : fmax(lse_err, e);
                }
            }
    double e_o = rel_l2(got_out, out, rows, C, 0, C);
    printf("    O %.2e  L %.2e\n", e_o, lse_err);
    CHECK(e_o < 1e-2, "O: relative L2 %.3g", e_o);
    CHECK(lse_err < 1e-4, "L: %.3g", lse_err);
    for (int run = 1; run < 3; run++) {
        for (int b = 0; b < B; b++)
            for (int r = 0; r < N; r++)
                for (int t = 0; t < n; t++) {
                    size_t lr = ((size_t)b * N + r) * n + t, gr = (size_t)b * T + global_position(r, t, c, N);
                    memcpy(got_dqkv + gr * 3 * C, ring_dqkv[run] + lr * 3 * C, 3 * C * sizeof(bf16));
                }
        double e_q = rel_l2(got_dqkv, dqkv, rows, 3 * C, 0, C);
        double e_k = rel_l2(got_dqkv, dqkv, rows, 3 * C, C, C), e_v = rel_l2(got_dqkv, dqkv, rows, 3 * C, 2 * C, C);
        const char* kind = run == 1 ? "deterministic" : "atomic";
        printf("    %s backward: dQ %.2e  dK %.2e  dV %.2e\n", kind, e_q, e_k, e_v);
        CHECK(e_q < 2e-2 && e_k < 2e-2 && e_v < 2e-2, "%s: dQ %.3g dK %.3g dV %.3g", kind, e_q, e_k, e_v);
    }
    test_end();
    void* dev[] = {d_qkv, d_dout, d_out, d_dqkv, d_lse, scratch, l_qkv, l_dout, l_out, l_dqkv, l_lse, workspace,
                   d_tokens, l_tokens, d_start, d_end, (void*)plan.mask.doc_start, (void*)plan.mask.doc_end};
    for (size_t i = 0; i < COUNT(dev); i++) cudaCheck(cudaFree(dev[i]));
    void* host[] = {qkv, dout, qkv_l, dout_l, out, dqkv, lse, ring_out, ring_lse, got_out, got_dqkv,
                    ring_dqkv[0], ring_dqkv[1], ring_dqkv[2]};
    for (size_t i = 0; i < COUNT(host); i++) free(host[i]);
}

// ----------------------------------------------------------------------------------------------
// The ring's blocks one by one: a flash call at global positions against float64

// The flash kernel families, called by name.
typedef struct {
    const char* name;
    int wgmma;   // needs flash_attention_wgmma_available()
    void (*forward)(const AttentionParams*, const AttentionMask*, cudaStream_t);
    void (*backward)(const AttentionParams*, const AttentionMask*, void*, FlashDq, cudaStream_t);
    FlashDq dq[3];   // its dQ paths
    int n_dq;
} FlashFamily;

static const FlashFamily FAMILIES[] = {
    {"flash-mma", 0, flash_attention_forward_mma, flash_attention_backward_mma,
     {FLASH_DQ_ATOMIC, FLASH_DQ_SEPARATE}, 2},
    {"flash-wgmma", 1, flash_attention_forward_wgmma, flash_attention_backward_wgmma,
     {FLASH_DQ_ATOMIC, FLASH_DQ_FIXED, FLASH_DQ_SEPARATE}, 3},
};

// A block: the queries of global chunk q_chunk against the keys of k_chunk (<= q_chunk; causal
// when equal), under a window (0: none).
typedef struct { int q_chunk, k_chunk, window; } BlockCase;

// |got - ref| over the tensor against |ref|, with a floor for blocks whose gradients are all 0.
static double block_error(const bf16* got, const double* ref, size_t count) {
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < count; i++) {
        double x = __bfloat162float(got[i]);
        diff += (x - ref[i]) * (x - ref[i]);
        norm += ref[i] * ref[i];
        if (isnan(x)) diff = INFINITY;
    }
    return sqrt(diff) / fmax(sqrt(norm), 1e-3 * sqrt((double)count));
}

static void block_test_name(char* name, size_t len, const FlashFamily* fam, int HS) {
    snprintf(name, len, "ring blocks at global positions, %s HS%d, against float64", fam->name, HS);
}

// The ring's blocks in family fam against float64: c queries against c keys, NH heads of HS, at
// their chunks' positions in one sequence (B = 1) of 8 chunks whose documents come from tokens as
// DOCS_RANDOM's; every tensor its own (c, NH, HS) buffer. The backward takes the reference's O
// and L, a row that sees no key getting L = 0 (finite, as the ring's merged L always is).
static void test_blocks(const FlashFamily* fam, int HS) {
    enum { NH = 2, CHUNKS = 8 };
    const int c = 100, T = CHUNKS * c;
    const size_t C = (size_t)NH * HS, elems = (size_t)c * C;
    char name[160];
    block_test_name(name, sizeof(name), fam, HS);
    test_begin(name);
    // On the diagonal; off it, rows that see all, some or none of the keys: by the document
    // across chunks 1 to 3 and the short ones after it, by windows of 50, 101 and 250 keys, and a
    // window of 1 (no key of another chunk).
    const BlockCase cases[] = {{3, 3, 0}, {3, 3, 50}, {2, 1, 0}, {3, 1, 0}, {5, 2, 0}, {7, 0, 0}, {5, 2, 50},
                               {5, 4, 50}, {2, 1, 101}, {5, 3, 250}, {1, 0, 1}};
    const float scale = 1.0f / sqrtf((float)HS);
    RingCase rc = {CHUNKS / 2, c, 1, HS, DOCS_RANDOM, 0};
    int* tokens = ring_tokens(rc, 7);
    int *d_tokens = (int*)device_copy(tokens, T * sizeof(int)), *d_start = (int*)device_copy(NULL, T * sizeof(int));
    int* d_end = (int*)device_copy(NULL, T * sizeof(int));
    attention_document_bounds(d_tokens, 1, T, EOT, d_start, d_end, 0);
    int* start = (int*)host_copy(d_start, T * sizeof(int));
    Rng rng = {(uint64_t)HS};
    bf16* host[6];   // q, k, v, dout, then O (the reference's, for the backward) and a kernel's
    for (int i = 0; i < 6; i++) host[i] = (bf16*)malloc(elems * sizeof(bf16));
    bf16 *q = host[0], *k = host[1], *v = host[2], *dout = host[3], *o_in = host[4], *got = host[5];
    bf16* grads[2][3];   // dQ, dK, dV of a backward, and of its second run
    for (int i = 0; i < 6; i++) grads[i / 3][i % 3] = (bf16*)malloc(elems * sizeof(bf16));
    bf16* dev[8];   // q, k, v, dout, o, dq, dk, dv
    for (int i = 0; i < 8; i++) dev[i] = (bf16*)device_copy(NULL, elems * sizeof(bf16));
    float* d_lse = (float*)device_copy(NULL, NH * c * sizeof(float));
    AttentionShape shape = {1, c, NH, HS, 0, scale};
    void* scratch = device_copy(NULL, flash_attention_scratch_bytes(shape));
    double *o_ref = (double*)malloc(elems * sizeof(double)), *lse_ref = (double*)malloc(NH * c * sizeof(double));
    double* grad_ref[3];   // dq, dk, dv
    for (int i = 0; i < 3; i++) grad_ref[i] = (double*)malloc(elems * sizeof(double));
    float* lse_in = (float*)malloc(NH * c * sizeof(float));
    double* p_row = (double*)malloc(c * sizeof(double));
    for (size_t ci = 0; ci < COUNT(cases); ci++) {
        BlockCase bc = cases[ci];
        int q0 = bc.q_chunk * c, k0 = bc.k_chunk * c, causal = bc.q_chunk == bc.k_chunk;
        for (int i = 0; i < 4; i++)
            for (size_t e = 0; e < elems; e++) host[i][e] = __float2bfloat16((i < 2 ? 2.0f : 1.0f) * rng_symmetric(&rng));
        for (int i = 0; i < 4; i++) cudaCheck(cudaMemcpy(dev[i], host[i], elems * sizeof(bf16), cudaMemcpyHostToDevice));
        // float64: row t (position q0 + t) sees key s (k0 + s) from lo of the global rule on, up
        // to itself (causal).
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < c; t++) {
                int pos = q0 + t, lo = start[pos];
                if (bc.window > 0 && pos - bc.window + 1 > lo) lo = pos - bc.window + 1;
                double m = -INFINITY, sum = 0.0;
                for (int s = 0; s < c; s++) {
                    int seen = k0 + s >= lo && (!causal || s <= t);
                    double dot = 0.0;
                    for (int d = 0; d < HS; d++)
                        dot += (double)__bfloat162float(q[t * C + h * HS + d]) * __bfloat162float(k[s * C + h * HS + d]);
                    p_row[s] = seen ? dot * scale : -INFINITY;
                    m = fmax(m, p_row[s]);
                }
                for (int s = 0; s < c; s++) sum += p_row[s] == -INFINITY ? 0.0 : exp(p_row[s] - m);
                lse_ref[h * c + t] = sum > 0.0 ? m + log(sum) : -INFINITY;
                lse_in[h * c + t] = sum > 0.0 ? (float)lse_ref[h * c + t] : 0.0f;   // the backward's L: finite
                for (int d = 0; d < HS; d++) {
                    double acc = 0.0;
                    for (int s = 0; s < c; s++)
                        if (p_row[s] != -INFINITY) acc += exp(p_row[s] - m) * __bfloat162float(v[s * C + h * HS + d]);
                    o_ref[t * C + h * HS + d] = sum > 0.0 ? acc / sum : 0.0;
                }
            }
        // The backward's reference from O (the reference's, as bf16) and L: P = exp(scale S - L),
        // dS = P (dP - D), D = rowsum(dO O).
        for (size_t e = 0; e < elems; e++) o_in[e] = __float2bfloat16((float)o_ref[e]);
        for (int i = 0; i < 3; i++) memset(grad_ref[i], 0, elems * sizeof(double));
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < c; t++) {
                int pos = q0 + t, lo = start[pos];
                if (bc.window > 0 && pos - bc.window + 1 > lo) lo = pos - bc.window + 1;
                double D = 0.0;
                for (int d = 0; d < HS; d++)
                    D += (double)__bfloat162float(dout[t * C + h * HS + d]) * __bfloat162float(o_in[t * C + h * HS + d]);
                for (int s = 0; s < c; s++) {
                    if (!(k0 + s >= lo && (!causal || s <= t))) continue;
                    double dot = 0.0, dp = 0.0;
                    for (int d = 0; d < HS; d++) {
                        dot += (double)__bfloat162float(q[t * C + h * HS + d]) * __bfloat162float(k[s * C + h * HS + d]);
                        dp += (double)__bfloat162float(dout[t * C + h * HS + d]) * __bfloat162float(v[s * C + h * HS + d]);
                    }
                    double P = exp(dot * scale - lse_in[h * c + t]), dS = P * (dp - D);
                    for (int d = 0; d < HS; d++) {
                        grad_ref[0][t * C + h * HS + d] += scale * dS * __bfloat162float(k[s * C + h * HS + d]);
                        grad_ref[1][s * C + h * HS + d] += scale * dS * __bfloat162float(q[t * C + h * HS + d]);
                        grad_ref[2][s * C + h * HS + d] += P * __bfloat162float(dout[t * C + h * HS + d]);
                    }
                }
            }
        AttentionMask mask = {d_start, d_end, bc.window, q0, k0};
        AttentionParams p = {{1, c, NH, HS, causal, scale}};
        AttentionTensor* views[8] = {&p.q, &p.k, &p.v, &p.dout, &p.o, &p.dq, &p.dk, &p.dv};
        for (int i = 0; i < 8; i++) *views[i] = (AttentionTensor){dev[i], (long long)elems, (long long)C, HS};
        p.lse = (AttentionLse){d_lse, NH * c, c};
        const char* why = flash_attention_params_unsupported(&p, &mask);
        CHECK(!why, "block %d against %d: refused: %s", bc.q_chunk, bc.k_chunk, why);
        // The forward: O and L.
        poison(dev[4], elems * sizeof(bf16));
        poison(d_lse, NH * c * sizeof(float));
        fam->forward(&p, &mask, 0);
        cudaCheck(cudaMemcpy(got, dev[4], elems * sizeof(bf16), cudaMemcpyDeviceToHost));
        float* lse = (float*)host_copy(d_lse, NH * c * sizeof(float));
        double e_l = 0.0;
        for (int i = 0; i < NH * c; i++) {
            double e = lse_ref[i] == -INFINITY ? (lse[i] == -INFINITY ? 0.0 : INFINITY)
                                               : fabs(lse[i] - lse_ref[i]) / (1.0 + fabs(lse_ref[i]));
            e_l = isnan(e) ? INFINITY : fmax(e_l, e);
        }
        free(lse);
        double e_o = block_error(got, o_ref, elems);
        CHECK(e_o < 2e-2 && e_l < 1e-3, "block %d against %d, window %d: O %.3g, L %.3g", bc.q_chunk, bc.k_chunk,
              bc.window, e_o, e_l);
        // The backward, each dQ path, from the reference's O and a finite L; the deterministic
        // paths twice for the same bits.
        cudaCheck(cudaMemcpy(dev[4], o_in, elems * sizeof(bf16), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(d_lse, lse_in, NH * c * sizeof(float), cudaMemcpyHostToDevice));
        for (int di = 0; di < fam->n_dq; di++) {
            FlashDq dq = fam->dq[di];
            for (int run = 0; run < (dq == FLASH_DQ_ATOMIC ? 1 : 2); run++) {
                for (int j = 5; j < 8; j++) poison(dev[j], elems * sizeof(bf16));
                fam->backward(&p, &mask, scratch, dq, 0);
                for (int i = 0; i < 3; i++)
                    cudaCheck(cudaMemcpy(grads[run][i], dev[5 + i], elems * sizeof(bf16), cudaMemcpyDeviceToHost));
            }
            for (int i = 0; i < 3; i++) {
                double e = block_error(grads[0][i], grad_ref[i], elems);
                CHECK(e < 2e-2, "block %d against %d, window %d, dQ path %d: d%c %.3g", bc.q_chunk, bc.k_chunk,
                      bc.window, (int)dq, "qkv"[i], e);
                CHECK(dq == FLASH_DQ_ATOMIC || memcmp(grads[0][i], grads[1][i], elems * sizeof(bf16)) == 0,
                      "block %d against %d, window %d, dQ path %d: d%c other bits on a second run", bc.q_chunk,
                      bc.k_chunk, bc.window, (int)dq, "qkv"[i]);
            }
        }
    }
    test_end();
    for (int i = 0; i < 6; i++) free(host[i]);
    for (int i = 0; i < 6; i++) free(grads[i / 3][i % 3]);
    for (int i = 0; i < 8; i++) cudaCheck(cudaFree(dev[i]));
    for (int i = 0; i < 3; i++) free(grad_ref[i]);
    void* hosts[] = {tokens, start, o_ref, lse_ref, lse_in, p_row};
    for (size_t i = 0; i < COUNT(hosts); i++) free(hosts[i]);
    void* devs[] = {d_tokens, d_start, d_end, d_lse, scratch};
    for (size_t i = 0; i < COUNT(devs); i++) cudaCheck(cudaFree(devs[i]));
}

static void test_refused(void) {
    test_begin("ring attention refuses a local sequence of unequal chunks");
    RingTransport transport;
    AttentionRing g = simulated_ring(2, &transport);
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
    RingTransport transport;
    AttentionRing all = simulated_ring(N, &transport), one = {N, 1, 1, NULL, NULL};
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
    const RingCase cases[] = {   // N, c, B, HS, documents, window
        {2, 64, 1, 64, DOCS_NONE, 0}, {2, 100, 2, 64, DOCS_NONE, 0}, {2, 300, 1, 128, DOCS_NONE, 0},
        {4, 64, 1, 64, DOCS_NONE, 0}, {4, 77, 1, 128, DOCS_NONE, 0}, {1, 96, 1, 64, DOCS_NONE, 0},
        {2, 64, 2, 64, DOCS_RANDOM, 0}, {2, 100, 2, 128, DOCS_RANDOM, 0}, {2, 64, 1, 64, DOCS_NO_BOUNDARY, 0},
        {2, 100, 1, 64, DOCS_NONE, 1}, {2, 100, 1, 128, DOCS_NONE, 100}, {2, 64, 1, 64, DOCS_NONE, 300},
        {2, 1100, 1, 64, DOCS_RANDOM, 700},
        {4, 64, 2, 64, DOCS_RANDOM, 0}, {4, 77, 2, 128, DOCS_RANDOM, 40}, {4, 64, 1, 128, DOCS_NO_BOUNDARY, 0},
        {4, 64, 1, 64, DOCS_NONE, 1}, {4, 77, 1, 64, DOCS_NONE, 77}, {4, 64, 1, 128, DOCS_NONE, 1000},
        {1, 96, 2, 64, DOCS_RANDOM, 50}};
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        for (size_t i = 0; i < COUNT(cases); i++) {
            char name[192];
            case_name(name, sizeof(name), cases[i]);
            test_skip(name, "no CUDA device");
        }
        for (size_t f = 0; f < COUNT(FAMILIES); f++)
            for (int hs = 64; hs <= 128; hs *= 2) {
                char name[160];
                block_test_name(name, sizeof(name), &FAMILIES[f], hs);
                test_skip(name, "no CUDA device");
            }
        test_refused();
        test_zigzag_split();
        return test_exit_code();
    }
    for (size_t i = 0; i < COUNT(cases); i++) test_ring(cases[i]);
    for (size_t f = 0; f < COUNT(FAMILIES); f++)
        for (int hs = 64; hs <= 128; hs *= 2) {
            if (FAMILIES[f].wgmma && !flash_attention_wgmma_available()) {
                char name[160];
                block_test_name(name, sizeof(name), &FAMILIES[f], hs);
                test_skip(name, "no sm_90a wgmma code for this GPU");
                continue;
            }
            test_blocks(&FAMILIES[f], hs);
        }
    test_refused();
    test_zigzag_split();
    return test_exit_code();
}
