// bench/bench_attention.cu: speed and memory of attention, bf16, causal, on random data. Rows per
// shape: flash (attention.h, the family flash.cu picks: wgmma on an sm_90 GPU with an sm_90a build,
// else mma.sync), flash-mma (the mma.sync kernels by name, a row only when flash is wgmma) and
// naive, in that order. Head size 64 with NH = 16 and 128 with NH = 8 (C = 1024);
// B = 16384 / T so each call sees 16K tokens (T > 16K: B = 1, i.e. T tokens).
// FLOPs: forward 4 B NH T^2 HS, halved for causal; backward 2.5x the forward (the convention of
// the FlashAttention papers, also used by scripts/bench_sdpa.py). Naive is credited the same
// FLOPs though it computes the masked half too. Time: cudaEvents around one call, 3 warm-up
// calls, median of 10; the backward and the deterministic backward take turns. Memory: the bytes
// of the buffers one layer's forward + backward needs (qkv, out, dout, dqkv (B, T, 3, NH, HS) and
// the like, plus saved and scratch).
// Usage: bench_attention [HS T [IMPL]]: every shape, or the one given, with every row or only
// IMPL's (flash, flash-mma or naive; for a profiler, say).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "attention/attention.h"
#include "attention/flash.h"

#define TOKENS_PER_CALL 16384
#define WARMUP 3
#define REPS 10

static const int SEQ_LENS[] = {512, 1024, 2048, 4096, 8192, 16384, 32768};

// Uniform in [-1, 1) from a hash of the index: random data without a host copy.
__global__ void fill_uniform_kernel(bf16* x, size_t n, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        x[i] = (bf16)((float)(z >> 40) * (2.0f / (1 << 24)) - 1.0f);
    }
}

static void fill_uniform(bf16* x, size_t n, uint64_t seed) {
    fill_uniform_kernel<<<1024, 256>>>(x, n, seed);
    cudaCheckLaunch();
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
} Buffers;

static size_t buffer_bytes(AttentionKind kind, AttentionShape s) {
    AttentionPlan plan = plan_of(kind, 0);
    size_t act = (size_t)s.B * s.T * s.NH * s.HS * sizeof(bf16);  // one (B, T, NH, HS) tensor
    return 3 * act + act + act + 3 * act + attention_saved_bytes(&plan, s) + attention_scratch_bytes(&plan, s);
}

static void free_buffers(Buffers* b) {
    void* all[] = {b->qkv, b->out, b->dout, b->dqkv, b->saved, b->scratch};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (all[i]) cudaCheck(cudaFree(all[i]));
}

// 0 when the device runs out of memory (the error is cleared), 1 on success.
static int try_malloc(void** p, size_t bytes) {
    cudaError_t e = cudaMalloc(p, bytes > 0 ? bytes : 1);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        *p = NULL;
        return 0;
    }
    cudaCheck(e);
    return 1;
}

static int alloc_buffers(Buffers* b, AttentionKind kind, AttentionShape s) {
    size_t act = (size_t)s.B * s.T * s.NH * s.HS * sizeof(bf16);
    AttentionPlan plan = plan_of(kind, 0);
    Buffers z = {NULL, NULL, NULL, NULL, NULL, NULL};
    *b = z;
    int ok = try_malloc((void**)&b->qkv, 3 * act) && try_malloc((void**)&b->out, act) &&
             try_malloc((void**)&b->dout, act) && try_malloc((void**)&b->dqkv, 3 * act) &&
             try_malloc(&b->saved, attention_saved_bytes(&plan, s)) &&
             try_malloc(&b->scratch, attention_scratch_bytes(&plan, s));
    if (!ok) free_buffers(b);
    return ok;
}

static int compare_floats(const void* a, const void* b) {
    float x = *(const float*)a, y = *(const float*)b;
    return (x > y) - (x < y);
}

// One call: forward (pass 0), backward (1) or deterministic backward (2).
static void run_pass(int pass, const Impl* impl, AttentionShape s, Buffers* b) {
    AttentionPlan plan = plan_of(impl->kind, pass == 2);
    AttentionParams p = attention_fused_params(s, b->qkv, b->out, (float*)b->saved, b->dqkv, b->dout);
    if (pass == 0 && impl->forward) impl->forward(&p, NULL, 0);
    else if (pass == 0) attention_forward(&plan, s, b->out, b->saved, b->qkv, b->scratch, 0);
    else if (impl->backward) impl->backward(&p, NULL, b->scratch, pass == 2 ? FLASH_DQ_SEPARATE : FLASH_DQ_ATOMIC, 0);
    else attention_backward(&plan, s, b->dqkv, b->dout, b->out, b->saved, b->qkv, b->scratch, 0);
}

// median[i]: the median milliseconds of one call of passes[i] (at most 2). The passes take
// turns, so that the clock, which falls under the power cap as a run goes on, weighs on each
// alike.
static void median_ms(int n, const int* passes, const Impl* impl, AttentionShape s, Buffers* b, float* median) {
    cudaEvent_t start, stop;
    cudaCheck(cudaEventCreate(&start));
    cudaCheck(cudaEventCreate(&stop));
    float ms[2][REPS];
    for (int r = -WARMUP; r < REPS; r++)
        for (int i = 0; i < n; i++) {
            cudaCheck(cudaEventRecord(start, 0));
            run_pass(passes[i], impl, s, b);
            cudaCheck(cudaEventRecord(stop, 0));
            cudaCheck(cudaEventSynchronize(stop));
            if (r >= 0) cudaCheck(cudaEventElapsedTime(&ms[i][r], start, stop));
        }
    cudaCheck(cudaEventDestroy(start));
    cudaCheck(cudaEventDestroy(stop));
    for (int i = 0; i < n; i++) {
        qsort(ms[i], REPS, sizeof(float), compare_floats);
        median[i] = ms[i][REPS / 2];
    }
}

static void bench(const Impl* impl, AttentionShape s) {
    AttentionKind kind = impl->kind;
    double gib = buffer_bytes(kind, s) / (1024.0 * 1024.0 * 1024.0);
    printf("| %d | %d | %d×%d | %s | ", s.HS, s.T, s.B, s.NH, impl->name);
    AttentionPlan plan = plan_of(kind, 0);
    const char* why = attention_unsupported(&plan, s);
    Buffers b;
    if (why) {
        printf("unsupported: %s | | | | | | %.2f |\n", why, gib);
        return;
    }
    if (!alloc_buffers(&b, kind, s)) {
        printf("OOM | | | | | | %.2f |\n", gib);
        return;
    }
    fill_uniform(b.qkv, (size_t)s.B * s.T * 3 * s.NH * s.HS, 1);
    fill_uniform(b.dout, (size_t)s.B * s.T * s.NH * s.HS, 2);
    double fwd_flops = 4.0 * s.B * s.NH * (double)s.T * s.T * s.HS * (s.causal ? 0.5 : 1.0);
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

int main(int argc, char** argv) {
    int only_hs = argc > 2 ? atoi(argv[1]) : 0, only_t = argc > 2 ? atoi(argv[2]) : 0;
    const char* only_impl = argc > 3 ? argv[3] : NULL;
    const Impl* impls[] = {&FLASH, &FLASH_MMA, &NAIVE};
    int known_impl = !only_impl;
    for (int i = 0; i < 3; i++) known_impl |= only_impl && !strcmp(only_impl, impls[i]->name);
    if (argc == 2 || argc > 4 || (argc > 2 && ((only_hs != 64 && only_hs != 128) || only_t < 1)) || !known_impl) {
        fprintf(stderr, "usage: bench_attention [HS T [IMPL]] (HS 64 or 128, T >= 1, IMPL flash, flash-mma or naive)\n");
        return 2;
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("bench_attention: skipped (no CUDA device)\n");
        return 0;
    }
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    int wgmma = flash_attention_wgmma_available();
    printf("attention, %s, bf16, causal, %d tokens per call (B = 1 when T > %d); flash: %s kernels\n\n",
           prop.name, TOKENS_PER_CALL, TOKENS_PER_CALL, wgmma ? "wgmma" : "mma.sync");
    printf("| HS | T | B×NH | impl | fwd ms | fwd TFLOP/s | bwd ms | bwd TFLOP/s | bwd det ms | bwd det TFLOP/s | memory GiB |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    int n_lens = only_t ? 1 : (int)(sizeof(SEQ_LENS) / sizeof(SEQ_LENS[0]));
    for (int hs = 64; hs <= 128; hs *= 2)
        for (int i = 0; i < n_lens; i++) {
            if (only_hs && hs != only_hs) continue;
            AttentionShape s;
            s.T = only_t ? only_t : SEQ_LENS[i];
            s.HS = hs;
            s.NH = 1024 / hs;
            s.B = s.T >= TOKENS_PER_CALL ? 1 : TOKENS_PER_CALL / s.T;
            s.causal = 1;
            s.scale = 1.0f / sqrtf((float)hs);
            // naive last: scripts/gpu_attention.sh reads any row not named flash as naive
            for (int k = 0; k < 3; k++)
                if ((impls[k] != &FLASH_MMA || wgmma) && (!only_impl || !strcmp(only_impl, impls[k]->name)))
                    bench(impls[k], s);
        }
    return 0;
}
