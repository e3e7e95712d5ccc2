// bench/bench_attention.cu: speed and memory of attention, bf16, causal, on random data. Rows per
// shape: flash (attention.h, the family flash.cu picks: wgmma on an sm_90 GPU with an sm_90a build,
// else mma.sync), flash-mma (the mma.sync kernels by name, a row only when flash is wgmma) and
// naive, in that order. Head size 64 with NH = 16 and 128 with NH = 8 (C = 1024);
// B = 16384 / T so each call sees 16K tokens (T > 16K: B = 1, i.e. T tokens). Then the masked
// shapes (a key window per row, attention/mask.h), T 16384 and 65536 with documents of 1024 tokens
// and with a window of 1024 keys, the mask named beside the impl ("flash, docs 1024").
// FLOPs: forward 4 B NH HS times the scores computed, T^2 / 2 for causal (the diagonal's half
// ignored) and for a mask the pairs it leaves visible, the sum over the rows of their keys;
// backward 2.5x the forward (the convention of the FlashAttention papers, also used by
// scripts/bench_torch_attention.py). Naive is credited the same FLOPs though it
// computes the masked part too. Time: cudaEvents around one call, 3 warm-up
// calls, median of 10; the backward and the deterministic backward take turns. Memory: the bytes
// of the buffers one layer's forward + backward needs (qkv, out, dout, dqkv (B, T, 3, NH, HS) and
// the like, plus saved and scratch).
// Usage: bench_attention [HS T [IMPL [MASK]]]: every shape, or the one given, with every row or
// only IMPL's (flash, flash-mma or naive; for a profiler, say), unmasked or with MASK: docs=N
// (documents of N tokens), window=N (N keys) or both, docs=N,window=M.
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "attention/attention.h"
#include "attention/flash.h"
#include "attention/mask.h"
#include "bench/bench_common.cuh"

#define TOKENS_PER_CALL 16384

static const int SEQ_LENS[] = {512, 1024, 2048, 4096, 8192, 16384, 32768};
static const int MASKED_SEQ_LENS[] = {16384, 65536};
#define EOT 50256   // the id the masked shapes' documents start with

// A mask to bench: documents of `docs` tokens and a window of `window` keys (0: none).
typedef struct { int docs, window; } MaskSpec;
static const MaskSpec MASKS[] = {{1024, 0}, {0, 1024}};

static int mask_given(MaskSpec m) { return m.docs > 0 || m.window > 0; }

// The (query, key) pairs a causal row sees under the mask, over one sequence: the FLOPs' count.
static double visible_pairs(int T, MaskSpec m) {
    double pairs = 0.0;
    for (int i = 0; i < T; i++) {
        int lo = m.docs ? i / m.docs * m.docs : 0;
        if (m.window && i - m.window + 1 > lo) lo = i - m.window + 1;
        pairs += i - lo + 1;
    }
    return pairs;
}

// One row of the table: attention.h's path for `kind`, or a flash family called by name.
typedef struct {
    const char* name;
    AttentionKind kind;
    void (*forward)(const AttentionParams*, const AttentionMask*, cudaStream_t);  // NULL: attention.h
    void (*backward)(const AttentionParams*, const AttentionMask*, void*, FlashDq,
                     cudaStream_t);   // deterministic: FLASH_DQ_SEPARATE, as flash.cu picks for this family
} Impl;

// attention.h's plan for one GPU.
static AttentionPlan plan_of(AttentionKind kind, int deterministic) {
    AttentionPlan p = {kind, deterministic, NULL};
    return p;
}

static const Impl FLASH = {"flash", ATTENTION_FLASH, NULL, NULL};
static const Impl FLASH_MMA = {"flash-mma", ATTENTION_FLASH, flash_attention_forward_mma, flash_attention_backward_mma};
static const Impl NAIVE = {"naive", ATTENTION_NAIVE, NULL, NULL};

typedef struct {
    bf16 *qkv, *out, *dout, *dqkv;
    void *saved, *scratch;
    int *tokens, *doc_start, *doc_end;   // with documents
    AttentionMask mask;
} Buffers;

static size_t buffer_bytes(AttentionKind kind, AttentionShape s) {
    AttentionPlan plan = plan_of(kind, 0);
    size_t act = (size_t)s.B * s.T * s.NH * s.HS * sizeof(bf16);  // one (B, T, NH, HS) tensor
    return 3 * act + act + act + 3 * act + attention_saved_bytes(&plan, s) + attention_scratch_bytes(&plan, s);
}

static void free_buffers(Buffers* b) {
    void* all[] = {b->qkv, b->out, b->dout, b->dqkv, b->saved, b->scratch, b->tokens, b->doc_start, b->doc_end};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (all[i]) cudaCheck(cudaFree(all[i]));
}

// The buffers, and with a mask given, its document bounds found on the GPU from tokens that
// start a document every m.docs positions.
static int alloc_buffers(Buffers* b, AttentionKind kind, AttentionShape s, MaskSpec m) {
    size_t act = (size_t)s.B * s.T * s.NH * s.HS * sizeof(bf16), rows = (size_t)s.B * s.T;
    AttentionPlan plan = plan_of(kind, 0);
    memset(b, 0, sizeof(*b));
    int ok = bench_try_malloc((void**)&b->qkv, 3 * act) && bench_try_malloc((void**)&b->out, act) &&
             bench_try_malloc((void**)&b->dout, act) && bench_try_malloc((void**)&b->dqkv, 3 * act) &&
             bench_try_malloc(&b->saved, attention_saved_bytes(&plan, s)) &&
             bench_try_malloc(&b->scratch, attention_scratch_bytes(&plan, s));
    if (ok && m.docs) {
        ok = bench_try_malloc((void**)&b->tokens, rows * sizeof(int)) &&
             bench_try_malloc((void**)&b->doc_start, rows * sizeof(int)) &&
             bench_try_malloc((void**)&b->doc_end, rows * sizeof(int));
        if (ok) {
            int* tokens = (int*)malloc(rows * sizeof(int));
            for (size_t i = 0; i < rows; i++) tokens[i] = i % s.T % m.docs == 0 ? EOT : (int)(i % EOT);
            cudaCheck(cudaMemcpy(b->tokens, tokens, rows * sizeof(int), cudaMemcpyHostToDevice));
            free(tokens);
            attention_document_bounds(b->tokens, s.B, s.T, EOT, b->doc_start, b->doc_end, 0);
            b->mask.doc_start = b->doc_start;
            b->mask.doc_end = b->doc_end;
        }
    }
    b->mask.window = m.window;
    if (!ok) free_buffers(b);
    return ok;
}

// One call: forward (pass 0), backward (1) or deterministic backward (2).
static void run_pass(int pass, const Impl* impl, AttentionShape s, Buffers* b) {
    AttentionPlan plan = plan_of(impl->kind, pass == 2);
    plan.mask = b->mask;
    AttentionParams p = attention_fused_params(s, b->qkv, b->out, (float*)b->saved, b->dqkv, b->dout);
    if (pass == 0 && impl->forward) impl->forward(&p, &b->mask, 0);
    else if (pass == 0) attention_forward(&plan, s, b->out, b->saved, b->qkv, b->scratch, 0);
    else if (impl->backward) impl->backward(&p, &b->mask, b->scratch, pass == 2 ? FLASH_DQ_SEPARATE : FLASH_DQ_ATOMIC, 0);
    else attention_backward(&plan, s, b->dqkv, b->dout, b->out, b->saved, b->qkv, b->scratch, 0);
}

// A call of passes[pass] (run_pass's numbering) on one shape, for bench_median_ms.
typedef struct {
    const int* passes;
    const Impl* impl;
    AttentionShape s;
    Buffers* b;
} Timed;

static void run_timed(int pass, void* context) {
    const Timed* t = (const Timed*)context;
    run_pass(t->passes[pass], t->impl, t->s, t->b);
}

// median[i]: the median milliseconds of one call of passes[i], the passes taking turns.
static void median_ms(int n, const int* passes, const Impl* impl, AttentionShape s, Buffers* b, float* median) {
    Timed t = {passes, impl, s, b};
    bench_median_ms(n, run_timed, &t, 0, median);
}

static void bench(const Impl* impl, AttentionShape s, MaskSpec m) {
    AttentionKind kind = impl->kind;
    double gib = buffer_bytes(kind, s) / (1024.0 * 1024.0 * 1024.0);
    char mask[64] = "";
    if (m.docs && m.window) snprintf(mask, sizeof(mask), ", docs %d window %d", m.docs, m.window);
    else if (m.docs) snprintf(mask, sizeof(mask), ", docs %d", m.docs);
    else if (m.window) snprintf(mask, sizeof(mask), ", window %d", m.window);
    printf("| %d | %d | %d×%d | %s%s | ", s.HS, s.T, s.B, s.NH, impl->name, mask);
    AttentionPlan plan = plan_of(kind, 0);
    const char* why = attention_unsupported(&plan, s);
    Buffers b;
    if (why) {
        printf("unsupported: %s | | | | | | %.2f |\n", why, gib);
        return;
    }
    if (!alloc_buffers(&b, kind, s, m)) {
        printf("OOM | | | | | | %.2f |\n", gib);
        return;
    }
    bench_fill_uniform(b.qkv, (size_t)s.B * s.T * 3 * s.NH * s.HS, 1, 1.0f);
    bench_fill_uniform(b.dout, (size_t)s.B * s.T * s.NH * s.HS, 2, 1.0f);
    double pairs = mask_given(m) ? visible_pairs(s.T, m) : (double)s.T * s.T * (s.causal ? 0.5 : 1.0);
    double fwd_flops = 4.0 * s.B * s.NH * pairs * s.HS;
    double bwd_flops = 2.5 * fwd_flops;
    const int forward[1] = {0}, backward[2] = {1, 2};
    float fwd, bwd[2];
    median_ms(1, forward, impl, s, &b, &fwd);
    median_ms(kind == ATTENTION_FLASH ? 2 : 1, backward, impl, s, &b, bwd);
    printf("%.3f | %.1f | %.3f | %.1f | ", fwd, fwd_flops / fwd * 1e-9, bwd[0], bwd_flops / bwd[0] * 1e-9);
    if (kind == ATTENTION_FLASH) {
        printf("%.3f | %.1f | ", bwd[1], bwd_flops / bwd[1] * 1e-9);
    } else {
        printf("(same) | | ");  // deterministic by construction
    }
    printf("%.2f |\n", gib);
    fflush(stdout);
    free_buffers(&b);
}

// MASK of the command line: docs=N, window=N or docs=N,window=M, each N > 0; 0 when it is not.
static int parse_mask(const char* arg, MaskSpec* m) {
    m->docs = m->window = 0;
    char* end;
    const char* at = arg;
    if (!strncmp(at, "docs=", 5)) {
        long n = strtol(at + 5, &end, 10);
        if (end == at + 5 || n < 1 || n > INT_MAX) return 0;
        m->docs = (int)n;
        at = *end == ',' ? end + 1 : end;
        if (*end == ',' && strncmp(at, "window=", 7)) return 0;
    }
    if (!strncmp(at, "window=", 7)) {
        long n = strtol(at + 7, &end, 10);
        if (end == at + 7 || n < 1 || n > INT_MAX) return 0;
        m->window = (int)n;
        at = end;
    }
    return *at == '\0' && at != arg;
}

static AttentionShape bench_shape(int HS, int T) {
    AttentionShape s;
    s.T = T;
    s.HS = HS;
    s.NH = 1024 / HS;
    s.B = T >= TOKENS_PER_CALL ? 1 : TOKENS_PER_CALL / T;
    s.causal = 1;
    s.scale = 1.0f / sqrtf((float)HS);
    return s;
}

int main(int argc, char** argv) {
    int only_hs = argc > 2 ? atoi(argv[1]) : 0, only_t = argc > 2 ? atoi(argv[2]) : 0;
    const char* only_impl = argc > 3 ? argv[3] : NULL;
    const Impl* impls[] = {&FLASH, &FLASH_MMA, &NAIVE};
    int known_impl = !only_impl;
    for (int i = 0; i < 3; i++) known_impl |= only_impl && !strcmp(only_impl, impls[i]->name);
    MaskSpec only_mask = {0, 0};
    int good_mask = argc <= 4 || parse_mask(argv[4], &only_mask);
    if (argc == 2 || argc > 5 || (argc > 2 && ((only_hs != 64 && only_hs != 128) || only_t < 1)) || !known_impl ||
        !good_mask) {
        fprintf(stderr, "usage: bench_attention [HS T [IMPL [MASK]]] (HS 64 or 128, T >= 1, IMPL flash, flash-mma or "
                        "naive, MASK docs=N, window=N or docs=N,window=M)\n");
        return 2;
    }
    cudaDeviceProp prop;
    if (!bench_device("bench_attention", 0, &prop)) return 0;
    int wgmma = flash_attention_wgmma_available();
    printf("attention, %s, bf16, causal, %d tokens per call (B = 1 when T > %d); flash: %s kernels\n\n",
           prop.name, TOKENS_PER_CALL, TOKENS_PER_CALL, wgmma ? "wgmma" : "mma.sync");
    printf("| HS | T | B×NH | impl | fwd ms | fwd TFLOP/s | bwd ms | bwd TFLOP/s | bwd det ms | bwd det TFLOP/s | memory GiB |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    // The unmasked shapes, then the masked ones; or the one given.
    const int n_dense = only_t ? 1 : (int)(sizeof(SEQ_LENS) / sizeof(SEQ_LENS[0]));
    const int n_masked = only_t ? 0 : (int)(sizeof(MASKED_SEQ_LENS) / sizeof(MASKED_SEQ_LENS[0]) * (sizeof(MASKS) / sizeof(MASKS[0])));
    for (int hs = 64; hs <= 128; hs *= 2)
        for (int i = 0; i < n_dense + n_masked; i++) {
            if (only_hs && hs != only_hs) continue;
            int dense = i < n_dense, k = i - n_dense, n_masks = (int)(sizeof(MASKS) / sizeof(MASKS[0]));
            AttentionShape s = bench_shape(hs, only_t ? only_t : dense ? SEQ_LENS[i] : MASKED_SEQ_LENS[k / n_masks]);
            MaskSpec m = only_t ? only_mask : dense ? (MaskSpec){0, 0} : MASKS[k % n_masks];
            // naive last: scripts/gpu/attention.sh reads any row not named flash as naive
            for (int j = 0; j < 3; j++)
                if ((impls[j] != &FLASH_MMA || wgmma) && (!only_impl || !strcmp(only_impl, impls[j]->name)))
                    bench(impls[j], s, m);
        }
    return 0;
}
