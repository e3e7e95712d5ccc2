// gpt/activations.cu: the activation layout, the memory sizes and the layer slices
// (gpt/activations.h).
#include "gpt/activations.h"

#include <math.h>
#include <string.h>
#include "common/bytes.h"
#include "gpt/parameters.h"
#include "layers/encoder.h"
#include "layers/global_norm.h"
#include "layers/layernorm.h"
#include "layers/matmul.h"
#include "layers/backout.h"
#include "layers/residual_lambdas.h"
#include "layers/smear.h"

void recompute_name(int flags, char* out, size_t len) {
    snprintf(out, len, "%s%s%s", flags & RECOMPUTE_GELU ? "gelu" : "",
             flags == (RECOMPUTE_GELU | RECOMPUTE_LAYERNORM) ? "," : "",
             flags & RECOMPUTE_LAYERNORM ? "layernorm" : flags ? "" : "none");
}

int recompute_flags(const char* list) {
    if (!strcmp(list, "none")) return 0;
    int flags = 0;
    for (const char* p = list;; p++) {
        size_t len = strcspn(p, ",");
        if (len == 4 && !strncmp(p, "gelu", 4)) flags |= RECOMPUTE_GELU;
        else if (len == 9 && !strncmp(p, "layernorm", 9)) flags |= RECOMPUTE_LAYERNORM;
        else return -1;
        p += len;
        if (!*p) return flags;
    }
}

void fp8_name(int flags, char* out, size_t len) {
    snprintf(out, len, "%s%s%s", flags & FP8_MLP ? "mlp" : "", flags == (FP8_MLP | FP8_HEAD) ? "," : "",
             flags & FP8_HEAD ? "head" : flags ? "" : "none");
}

int fp8_flags(const char* list) {
    if (!strcmp(list, "none")) return 0;
    int flags = 0;
    for (const char* p = list;; p++) {
        size_t len = strcspn(p, ",");
        int flag = len == 3 && !strncmp(p, "mlp", 3) ? FP8_MLP : len == 4 && !strncmp(p, "head", 4) ? FP8_HEAD : 0;
        if (!flag || (flags & flag)) return -1;
        flags |= flag;
        p += len;
        if (!*p) return flags;
    }
}

#define MEMORY_RESERVE ((size_t)512 << 20)

int gpu_memory_unfit(size_t bytes, char* err) {
    size_t free_bytes, total_bytes;
    cudaCheck(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (bytes + MEMORY_RESERVE <= free_bytes) return 0;
    set_err(err, "does not fit in GPU memory: it needs %.2f GiB (+%.2f GiB reserve), %.2f GiB are free", GIB(bytes),
            GIB(MEMORY_RESERVE), GIB(free_bytes));
    return 1;
}

size_t gpu_memory_in_use(void) {
    size_t free_bytes, total_bytes;
    cudaCheck(cudaMemGetInfo(&free_bytes, &total_bytes));
    return total_bytes - free_bytes;
}

size_t memory_sizes_total(const MemorySizes* m) {
    return m->params + m->grads + m->optimizer + m->activations + m->attention_saved +
           m->logits_and_scratch + m->backward + m->optimizer_scratch + m->fp8;
}

void memory_sizes_print(const MemorySizes* m, AttentionKind kind) {
    size_t free_bytes, total_bytes;
    char logits[64], saved[64];
    cudaCheck(cudaMemGetInfo(&free_bytes, &total_bytes));
    snprintf(logits, sizeof(logits), "logits (%d of %d rows)", m->logits_rows, m->rows);
    snprintf(saved, sizeof(saved), "attention saved (%s)", kind == ATTENTION_FLASH ? "flash: L" : "naive: P");
    printf("memory (GiB)\n");
    printf("  parameters (bf16)             %8.3f\n", GIB(m->params));
    printf("  gradients (bf16)              %8.3f\n", GIB(m->grads));
    printf("  optimizer state (fp32)        %8.3f\n", GIB(m->optimizer));
    if (m->optimizer_scratch) printf("  Newton-Schulz scratch (bf16)  %8.3f\n", GIB(m->optimizer_scratch));
    if (m->fp8) printf("  FP8 weights, inputs, scratch  %8.3f\n", GIB(m->fp8));
    printf("  activations                   %8.3f\n", GIB(m->activations));
    printf("  %-29s %8.3f\n", saved, GIB(m->attention_saved));
    printf("  backward buffers              %8.3f\n", GIB(m->backward));
    printf("  %-29s %8.3f\n", logits, GIB(m->logits));
    printf("  scratch (in the logits)       %8.3f\n", GIB(m->scratch));
    printf("  total                         %8.3f  (device: %.1f GiB, %.1f GiB in use)\n",
           GIB(memory_sizes_total(m)), GIB(total_bytes), GIB(total_bytes - free_bytes));
}

AttentionShape attention_shape(const GPTConfig* c, int B, int T) {
    AttentionShape s = {B, T, c->NH, c->C / c->NH, 1, architecture_attention_scale(&c->arch, c->C / c->NH)};
    return s;
}

const char* model_attention_unsupported(const GPTConfig* c, const ModelOptions* opt, int B, int T) {
    // The checks ask whether a plan has documents, never read their bounds: one int stands for
    // the activations that hold them.
    static const int bounds = 0;
    AttentionPlan plans[ARCHITECTURE_MAX_WINDOWS];
    block_attention_plans(&c->arch, &opt->attention, &bounds, &bounds, plans);
    for (int i = 0; i < block_attention_count(&c->arch); i++) {
        const char* why = attention_unsupported(&plans[i], attention_shape(c, B, T));
        if (why) return why;
    }
    return NULL;
}

// Takes bytes from the region at base (NULL: only counts), adding them to *part.
static void* carve(char* base, size_t* offset, size_t bytes, size_t* part) {
    void* p = base ? base + *offset : NULL;
    *offset += carve_round_up(bytes);
    *part += carve_round_up(bytes);
    return p;
}

// Bytes between the saved attention blocks of two layers: each layer's block is rounded up.
static size_t saved_stride(const GPTConfig* c, int B, int T, const ModelOptions* opt) {
    return carve_round_up(attention_saved_bytes(&opt->attention, attention_shape(c, B, T)));
}

// Rows of logits per classifier chunk for N rows: the option, or what fits in
// CLASSIFIER_CHUNK_BYTES (a multiple of 128 rows, for the matmul), at most N.
static int classifier_chunk_rows(const GPTConfig* c, int N, const ModelOptions* opt) {
    size_t rows = opt->classifier_rows;
    if (rows == 0) {
        rows = CLASSIFIER_CHUNK_BYTES / ((size_t)c->Vp * sizeof(bf16));
        rows = rows > 128 ? rows / 128 * 128 : 1;
    }
    return rows < (size_t)N ? (int)rows : N;
}

// carve, or NULL and nothing taken for a buffer the architecture does not have.
static void* carve_if(int present, char* base, size_t* offset, size_t bytes, size_t* part) {
    return present ? carve(base, offset, bytes, part) : NULL;
}

size_t layout_activations(Activations* a, char* base, const GPTConfig* c, int B, int T,
                          const ModelOptions* opt, MemorySizes* m) {
    size_t L = c->L, C = c->C, N = (size_t)B * T, off = 0;
    size_t P = count_params(c);
    size_t ln_layers = opt->recompute & RECOMPUTE_LAYERNORM ? 1 : L;
    size_t gelu_layers = opt->recompute & RECOMPUTE_GELU ? 1 : L;
    const Architecture* arch = &c->arch;
    int layernorm = !arch->rms_norm, gelu = !arch->relu2;
    AttentionShape s = attention_shape(c, B, T);
    m->activations = m->attention_saved = m->logits_and_scratch = m->backward = 0;
    a->embedding = (bf16*)carve_if(arch->embedding_norm, base, &off, N * C * sizeof(bf16), &m->activations);
    a->embedding_rstd = (float*)carve_if(arch->embedding_norm, base, &off, N * sizeof(float), &m->activations);
    a->smear_in = (bf16*)carve_if(arch->smear, base, &off, N * C * sizeof(bf16), &m->activations);
    a->residual = (bf16*)carve(base, &off, (L + 1) * N * C * sizeof(bf16), &m->activations);
    a->residual_in = (bf16*)carve_if(arch->residual_lambdas, base, &off, L * N * C * sizeof(bf16), &m->activations);
    a->ln1 = (bf16*)carve(base, &off, ln_layers * N * C * sizeof(bf16), &m->activations);
    a->ln1_mean = (float*)carve_if(layernorm, base, &off, L * N * sizeof(float), &m->activations);
    a->ln1_rstd = (float*)carve(base, &off, L * N * sizeof(float), &m->activations);
    a->qkv = (bf16*)carve(base, &off, L * N * 3 * C * sizeof(bf16), &m->activations);
    a->qk_rstd = (float*)carve_if(arch->qk_norm, base, &off, L * N * 2 * c->NH * sizeof(float), &m->activations);
    a->value_gate = (float*)carve_if(arch->value_embeddings, base, &off, L * N * c->NH * sizeof(float),
                                     &m->activations);
    a->atty = (bf16*)carve(base, &off, L * N * C * sizeof(bf16), &m->activations);
    a->residual_mid = (bf16*)carve(base, &off, L * N * C * sizeof(bf16), &m->activations);
    a->ln2 = opt->recompute & RECOMPUTE_LAYERNORM
                 ? a->ln1
                 : (bf16*)carve(base, &off, L * N * C * sizeof(bf16), &m->activations);
    a->ln2_mean = (float*)carve_if(layernorm, base, &off, L * N * sizeof(float), &m->activations);
    a->ln2_rstd = (float*)carve(base, &off, L * N * sizeof(float), &m->activations);
    a->fch = (bf16*)carve_if(gelu, base, &off, L * N * 4 * C * sizeof(bf16), &m->activations);
    a->fch_gelu = (bf16*)carve(base, &off, gelu_layers * N * 4 * C * sizeof(bf16), &m->activations);
    a->backout_out = (bf16*)carve_if(arch->backout, base, &off, N * C * sizeof(bf16), &m->activations);
    a->lnf = (bf16*)carve(base, &off, N * C * sizeof(bf16), &m->activations);
    a->lnf_mean = (float*)carve_if(layernorm, base, &off, N * sizeof(float), &m->activations);
    a->lnf_rstd = (float*)carve(base, &off, N * sizeof(float), &m->activations);
    a->losses = (float*)carve(base, &off, N * sizeof(float), &m->activations);
    a->inputs = (int*)carve(base, &off, N * sizeof(int), &m->activations);
    a->targets = (int*)carve(base, &off, N * sizeof(int), &m->activations);
    a->positions = (int*)carve_if(arch->rotary, base, &off, N * sizeof(int), &m->activations);
    size_t doc_positions = N * (opt->attention.ring ? opt->attention.ring->size : 1);   // each row's whole sequence
    a->doc_start = (int*)carve_if(arch->documents, base, &off, doc_positions * sizeof(int), &m->activations);
    a->doc_end = (int*)carve_if(arch->documents, base, &off, doc_positions * sizeof(int), &m->activations);
    a->att_saved = (char*)carve(base, &off, L * saved_stride(c, B, T, opt), &m->attention_saved);
    a->dresidual = (bf16*)carve(base, &off, N * C * sizeof(bf16), &m->backward);
    a->dnarrow = (bf16*)carve(base, &off, N * C * sizeof(bf16), &m->backward);
    a->dwide = (bf16*)carve(base, &off, N * 4 * C * sizeof(bf16), &m->backward);
    a->dx0 = (float*)carve_if(arch->residual_lambdas, base, &off, N * C * sizeof(float), &m->backward);
    a->dbackout = (bf16*)carve_if(arch->backout, base, &off, N * C * sizeof(bf16), &m->backward);
    a->dvalue_gate = (float*)carve_if(arch->value_embeddings, base, &off, N * c->NH * sizeof(float), &m->backward);
    a->token_groups = (int*)carve_if(arch->value_embeddings, base, &off, encoder_token_groups_bytes((int)N),
                                     &m->backward);
    // The classifier's matmul_backward (rows, C, Vp) is left out: with neither bias nor GELU it
    // takes no scratch, which matters, as the scratch is the memory of the dlogits it reads.
    size_t sc = encoder_token_groups_bytes((int)N);
    size_t cand[] = {
        layernorm_backward_scratch_bytes((int)N, (int)C),
        matmul_backward_scratch_bytes((int)N, (int)C, 3 * (int)C),
        matmul_backward_scratch_bytes((int)N, (int)C, (int)C),
        matmul_backward_scratch_bytes((int)N, (int)C, 4 * (int)C),
        matmul_backward_scratch_bytes((int)N, 4 * (int)C, (int)C),
        attention_scratch_bytes(&opt->attention, s),
        global_norm_scratch_bytes(P),
        arch->residual_lambdas ? residual_lambdas_scratch_bytes((int)N, (int)C) : 0,
        arch->smear ? smear_scratch_bytes((int)N) : 0,
        arch->backout ? backout_scratch_bytes((int)N, (int)C) : 0};
    for (size_t i = 0; i < sizeof(cand) / sizeof(cand[0]); i++) sc = cand[i] > sc ? cand[i] : sc;
    // The scratch lives in the logits' memory: the logits are dead from the moment the
    // classifier's matmul_backward has read the last chunk of dlogits until the next forward,
    // and the attention, the one layer that takes scratch in the forward, runs before the
    // classifier writes them.
    m->rows = (int)N;
    m->logits_rows = classifier_chunk_rows(c, (int)N, opt);
    m->logits = (size_t)m->logits_rows * c->Vp * sizeof(bf16);
    m->scratch = sc;
    a->logits = (bf16*)carve(base, &off, m->logits > sc ? m->logits : sc, &m->logits_and_scratch);
    a->scratch = a->logits;
    return off;
}

static inline size_t layer_offset(int l, int B, int T, size_t width) { return (size_t)l * B * T * width; }
// Layer l's slice of a buffer of width per row, or NULL for a buffer the architecture has not.
template <typename Elem>
static Elem* layer_slice(Elem* buffer, int l, int B, int T, size_t width) {
    return buffer ? buffer + layer_offset(l, B, T, width) : NULL;
}
// The layer whose slot of a buffer layer l uses: 0 when the buffer is recomputed (one slot).
static inline int slot(int l, int recomputed) { return recomputed ? 0 : l; }

BlockActivations layer_activations(const Activations* a, const GPTConfig* c, int B, int T,
                                   const ModelOptions* opt, int l) {
    size_t C = c->C;
    int re_ln = opt->recompute & RECOMPUTE_LAYERNORM, re_gelu = opt->recompute & RECOMPUTE_GELU;
    BlockActivations x;
    // With residual lambdas the block takes its own stream (residual_in) made of the one the block
    // before left and x0, the stem's (residual's first layer).
    x.x = a->residual_in ? a->residual + layer_offset(l, B, T, C) : NULL;
    x.x0 = a->residual_in ? a->residual : NULL;
    x.res = (a->residual_in ? a->residual_in : a->residual) + layer_offset(l, B, T, C);
    x.ln1 = a->ln1 + layer_offset(slot(l, re_ln), B, T, C);
    x.ln1_mean = layer_slice(a->ln1_mean, l, B, T, 1);
    x.ln1_rstd = a->ln1_rstd + layer_offset(l, B, T, 1);
    x.qkv = a->qkv + layer_offset(l, B, T, 3 * C);
    x.qk_rstd = layer_slice(a->qk_rstd, l, B, T, 2 * (size_t)c->NH);
    x.value_gate = layer_slice(a->value_gate, l, B, T, (size_t)c->NH);
    x.atty = a->atty + layer_offset(l, B, T, C);
    x.att_saved = a->att_saved + l * saved_stride(c, B, T, opt);
    x.mid = a->residual_mid + layer_offset(l, B, T, C);
    x.ln2 = a->ln2 + layer_offset(slot(l, re_ln), B, T, C);
    x.ln2_mean = layer_slice(a->ln2_mean, l, B, T, 1);
    x.ln2_rstd = a->ln2_rstd + layer_offset(l, B, T, 1);
    x.fch = layer_slice(a->fch, l, B, T, 4 * C);
    x.fch_gelu = a->fch_gelu + layer_offset(slot(l, re_gelu), B, T, 4 * C);
    x.res_next = a->residual + layer_offset(l + 1, B, T, C);
    return x;
}
