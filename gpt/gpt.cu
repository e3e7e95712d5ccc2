// gpt/gpt.cu: the model's memory, forward, loss, backward and update (gpt/gpt.h).
#include "gpt/gpt.h"

#include <string.h>
#include "attention/attention.h"
#include "gpt/block.h"
#include "layers/adamw.h"
#include "layers/backout.h"
#include "layers/classifier.h"
#include "layers/encoder.h"
#include "layers/global_norm.h"
#include "layers/layernorm.h"
#include "layers/loss_mean.h"
#include "layers/matmul.h"
#include "layers/muon.h"
#include "layers/rmsnorm.h"
#include "layers/smear.h"

// The tensors as ZeRO-1 cuts them: under Muon each of Muon's matrices (as its --muon-qkv cuts
// qkvw) is a unit, so that a rank orthogonalises it whole, and holds its NorMuon moments.
static void zero_tensors(const GPTConfig* c, const OptimizerConfig* optimizer, ZeroTensor t[NUM_PARAM_TENSORS]) {
    size_t sizes[NUM_PARAM_TENSORS];
    param_sizes(c, sizes);
    int muon = optimizer && optimizer->kind == OPTIMIZER_MUON;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        t[i].count = sizes[i];
        t[i].unit = param_zero_unit(&param_table[i], c, muon, muon ? optimizer->muon_qkv : MUON_QKV_FUSED);
    }
}

// The optimizer's shard of this rank: everything but with ZeRO-1, by whole matrices under Muon.
static ZeroShard optimizer_shard(const ZeroTensor* tensors, const DataParallel* dp, const OptimizerConfig* optimizer) {
    ZeroShard s;
    char err[ERR_LEN];
    int sharded = dp && dp->zero_stage == 1;
    int by_units = sharded && optimizer && optimizer->kind == OPTIMIZER_MUON;
    if (zero_shard_init(&s, tensors, NUM_PARAM_TENSORS, sharded ? dp->world_size : 1, sharded ? dp->rank : 0,
                        by_units, ZERO_SHARD_ALIGN, err) != 0)
        die("%s", err);
    return s;
}

// Muon's scratch: enough for the largest of this rank's batches of matrices of one kind; 0
// under AdamW.
static size_t muon_scratch(const GPTConfig* c, const ZeroShard* s, const ZeroTensor* tensors,
                           const OptimizerConfig* optimizer) {
    size_t bytes = 0;
    if (!optimizer || optimizer->kind != OPTIMIZER_MUON) return 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        ZeroShardPart part = zero_shard_part(s, tensors, i, s->rank);
        if (param_table[i].group != GROUP_MATRIX || part.count == 0) continue;
        int rows, cols;
        param_muon_matrix(&param_table[i], c, optimizer->muon_qkv, &rows, &cols);
        size_t need = muon_scratch_bytes((int)(part.count / tensors[i].unit), rows, cols);
        bytes = need > bytes ? need : bytes;
    }
    return bytes;
}

const char* gpt_fp8_unfit(const GPTConfig* c, int B, int T, const ModelOptions* opt) {
    if (!opt->fp8) return NULL;
    if (c->C % 16 != 0) return "FP8 matmuls need the channels a multiple of 16";
    if ((long long)B * T % 16 != 0)
        return "FP8 matmuls need the rows of a micro-step (B * T per rank) a multiple of 16";
    if ((opt->fp8 & FP8_HEAD) && opt->classifier_rows % 16 != 0)
        return "the FP8 head needs --classifier-chunk a multiple of 16";
    return NULL;
}

// The scratch of the FP8 layers (gpt/gpt.h's Fp8Layers) on batches of N rows, the head on chunks
// of logits_rows: the largest of the MLP's fc (C -> 4C) and fcproj (4C -> C) and the head's (C ->
// Vp), which never run at once. Their own memory too with layers.
static size_t fp8_bytes(const GPTConfig* c, int N, int logits_rows, const ModelOptions* opt, int layers) {
    size_t bytes = 0, scratch = 0;
    int C = c->C, back = !opt->fp8_grad_bf16;
    if (opt->fp8 & FP8_MLP) {
        if (layers) bytes += (size_t)c->L * (fp8_linear_bytes(C, 4 * C, N, back) + fp8_linear_bytes(4 * C, C, N, back));
        size_t up = matmul_fp8_scratch_bytes(N, C, 4 * C, back), down = matmul_fp8_scratch_bytes(N, 4 * C, C, back);
        scratch = up > down ? up : down;
    }
    if (opt->fp8 & FP8_HEAD) {
        if (layers) bytes += fp8_linear_bytes(C, c->Vp, logits_rows, back);
        size_t head = matmul_fp8_scratch_bytes(logits_rows, C, c->Vp, back);
        scratch = head > scratch ? head : scratch;
    }
    return bytes + scratch;
}

MemorySizes gpt_memory_sizes(const GPTConfig* c, int B, int T, const ModelOptions* opt, const DataParallel* dp,
                           const OptimizerConfig* optimizer) {
    MemorySizes m;
    Activations a;
    ZeroTensor tensors[NUM_PARAM_TENSORS];
    zero_tensors(c, optimizer, tensors);
    ZeroShard s = optimizer_shard(tensors, dp, optimizer);
    layout_activations(&a, NULL, c, B, T, opt, &m);
    m.params = s.padded_count * sizeof(bf16);
    m.grads = s.padded_count * sizeof(bf16);
    m.optimizer = optimizer ? 3 * s.shard_size * sizeof(float) : 0;
    m.optimizer_scratch = muon_scratch(c, &s, tensors, optimizer);
    m.fp8 = fp8_bytes(c, B * T, m.logits_rows, opt, 1);
    return m;
}

// The Fp8Linear of each FP8 matmul and their scratch (fp8_bytes), each with its FP8 backward unless
// the gradients run in bf16. The forward's products accumulate fast (layers/matmul.h: its sums run
// over C or 4C; the backward's never do).
static void fp8_build(GPT* g) {
    const ModelOptions* o = &g->options;
    const GPTConfig* c = &g->config;
    int C = c->C, N = g->B * g->T, back = !o->fp8_grad_bf16;
    if (o->fp8 & FP8_MLP) {
        if (!(g->fp8.mlp = (Fp8Linear*)malloc(2 * (size_t)c->L * sizeof(Fp8Linear)))) die("out of host memory");
        for (int l = 0; l < c->L; l++) {
            fp8_linear_init(&g->fp8.mlp[2 * l], C, 4 * C, N, o->fp8_scaling, FP8_E5M2, 1, back);
            fp8_linear_init(&g->fp8.mlp[2 * l + 1], 4 * C, C, N, o->fp8_scaling, FP8_E5M2, 1, back);
        }
    }
    if (o->fp8 & FP8_HEAD) {
        if (!(g->fp8.head = (Fp8Linear*)malloc(sizeof(Fp8Linear)))) die("out of host memory");
        fp8_linear_init(g->fp8.head, C, c->Vp, g->sizes.logits_rows, o->fp8_scaling, FP8_E5M2, 1, back);
    }
    size_t scratch = fp8_bytes(c, N, g->sizes.logits_rows, o, 0);
    if (scratch) cudaCheck(cudaMalloc(&g->fp8.scratch, scratch));
    g->fp8.weights_at = -1;
}

static void fp8_free(GPT* g) {
    for (int i = 0; g->fp8.mlp && i < 2 * g->config.L; i++) fp8_linear_free(&g->fp8.mlp[i]);
    if (g->fp8.head) fp8_linear_free(g->fp8.head);
    free(g->fp8.mlp);
    free(g->fp8.head);
    cudaCheck(cudaFree(g->fp8.scratch));
    memset(&g->fp8, 0, sizeof(g->fp8));
}

// The FP8 layers' weights quantised, once after each change of the parameters (gpt/gpt.h).
static void quantise_fp8_weights(GPT* g) {
    if (!g->options.fp8 || g->fp8.weights_at == g->adam_t) return;
    const GPTConfig* c = &g->config;
    for (int l = 0; g->fp8.mlp && l < c->L; l++) {
        LayerParameters w = layer_parameters(&g->params, l, c);
        fp8_linear_quantise_weight(&g->fp8.mlp[2 * l], w.fcw, g->stream);
        fp8_linear_quantise_weight(&g->fp8.mlp[2 * l + 1], w.fcprojw, g->stream);
    }
    if (g->fp8.head) fp8_linear_quantise_weight(g->fp8.head, head_weights(&g->params, c), g->stream);
    g->fp8.weights_at = g->adam_t;
}

void gpt_build(GPT* g, GPTConfig c, int B, int T, const ModelOptions* opt, const DataParallel* dp,
               const OptimizerConfig* optimizer) {
    const char* why = architecture_invalid(&c.arch);
    if (!why) why = block_unsupported(&c.arch, c.C / c.NH);
    if (!why && c.arch.relu2 && (opt->recompute & RECOMPUTE_GELU))
        why = "RECOMPUTE_GELU with the relu2 MLP, which keeps no GELU";
    if (!why && c.arch.smear && opt->attention.ring)
        why = "the smear with a ring: a chunk's first token looks back to a token of another chunk";
    char err[ERR_LEN];
    if (!why && optimizer && muon_variants_invalid(optimizer, err, sizeof(err))) why = err;
    if (!why && optimizer && optimizer->kind == OPTIMIZER_MUON) why = muon_qkv_unfit(optimizer->muon_qkv, &c);
    if (why) die("gpt_build: %s", why);
    memset(g, 0, sizeof(*g));
    g->config = c;
    g->B = B;
    g->T = T;
    g->options = *opt;
    g->num_params = count_params(&c);
    param_sizes(&c, g->param_sizes);
    if (dp) g->dp = *dp;
    else g->dp.world_size = 1;
    if (optimizer) g->optimizer = *optimizer;
    zero_tensors(&c, optimizer, g->zero_tensors);
    g->shard = optimizer_shard(g->zero_tensors, dp, optimizer);
    g->sizes = gpt_memory_sizes(&c, B, T, opt, dp, optimizer);
    if (gpu_memory_unfit(memory_sizes_total(&g->sizes), err)) die("gpt_build for batches of %d x %d: %s", B, T, err);
    if ((why = gpt_fp8_unfit(&c, B, T, opt))) die("gpt_build: %s", why);
    size_t padded = g->shard.padded_count, S = g->shard.shard_size;
    cudaCheck(cudaStreamCreate(&g->stream));
    matmul_stream_init(&g->matmul, g->stream);
    cudaCheck(cudaStreamCreate(&g->loss_stream));
    cudaCheck(cudaEventCreateWithFlags(&g->losses_ready, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&g->losses_summed, cudaEventDisableTiming));
    if (g->dp.comm) {
        cudaCheck(cudaStreamCreate(&g->comm_stream));
        cudaCheck(cudaEventCreateWithFlags(&g->grads_ready, cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&g->grads_reduced, cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&g->params_ready, cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&g->scalars_ready, cudaEventDisableTiming));
    }
    cudaCheck(cudaMalloc((void**)&g->scalars, sizeof(StepScalars)));
    cudaCheck(cudaMemset(g->scalars, 0, sizeof(StepScalars)));
    cudaCheck(cudaMalloc((void**)&g->params_memory, padded * sizeof(bf16)));
    cudaCheck(cudaMalloc((void**)&g->grads_memory, padded * sizeof(bf16)));
    if (optimizer) {
        cudaCheck(cudaMalloc((void**)&g->optimizer_memory, 3 * S * sizeof(float)));
        g->master = g->optimizer_memory;
        g->m = g->optimizer_memory + S;
        g->v = g->optimizer_memory + 2 * S;
        cudaCheck(cudaMemset(g->optimizer_memory, 0, 3 * S * sizeof(float)));
    }
    if (g->sizes.optimizer_scratch) cudaCheck(cudaMalloc(&g->optimizer_scratch, g->sizes.optimizer_scratch));
    cudaCheck(cudaMemset(g->params_memory, 0, padded * sizeof(bf16)));
    cudaCheck(cudaMemset(g->grads_memory, 0, padded * sizeof(bf16)));
    point_params(&g->params, g->params_memory, &c);
    point_params(&g->grads, g->grads_memory, &c);
    MemorySizes m;
    size_t acts_bytes = layout_activations(&g->acts, NULL, &c, B, T, opt, &m);
    cudaCheck(cudaMalloc((void**)&g->acts_memory, acts_bytes));
    layout_activations(&g->acts, g->acts_memory, &c, B, T, opt, &m);
    block_attention_plans(&c.arch, &opt->attention, g->acts.doc_start, g->acts.doc_end, g->attention);
    cudaCheck(cudaMallocHost((void**)&g->host_losses, (size_t)B * T * sizeof(float)));
    fp8_build(g);
}

void gpt_free(GPT* g) {
    cudaCheck(cudaStreamSynchronize(g->stream));
    cudaCheck(cudaStreamSynchronize(g->loss_stream));
    cudaCheck(cudaFree(g->params_memory));
    cudaCheck(cudaFree(g->grads_memory));
    cudaCheck(cudaFree(g->optimizer_memory));
    cudaCheck(cudaFree(g->optimizer_scratch));
    cudaCheck(cudaFree(g->acts_memory));
    cudaCheck(cudaFreeHost(g->host_losses));
    cudaCheck(cudaFree(g->scalars));
    fp8_free(g);
    matmul_stream_free(&g->matmul);
    cudaCheck(cudaStreamDestroy(g->stream));
    cudaCheck(cudaStreamDestroy(g->loss_stream));
    cudaCheck(cudaEventDestroy(g->losses_ready));
    cudaCheck(cudaEventDestroy(g->losses_summed));
    if (g->dp.comm) {
        cudaCheck(cudaStreamSynchronize(g->comm_stream));
        cudaCheck(cudaStreamDestroy(g->comm_stream));
        cudaCheck(cudaEventDestroy(g->grads_ready));
        cudaCheck(cudaEventDestroy(g->grads_reduced));
        cudaCheck(cudaEventDestroy(g->params_ready));
        cudaCheck(cudaEventDestroy(g->scalars_ready));
    }
}

void gpt_set_params(GPT* g, const float* values) {
    // On the legacy stream, which the model's streams are ordered after, as the copies below are.
    upload_params(g->params_memory, values, &g->config, 0);
    g->adam_t = 0;
    g->fp8.weights_at = -1;
    if (!g->optimizer_memory) return;
    // This rank's master weights: its parts' values, zeros elsewhere.
    const ZeroShard* s = &g->shard;
    cudaCheck(cudaMemset(g->optimizer_memory, 0, 3 * s->shard_size * sizeof(float)));
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        ZeroShardPart part = zero_shard_part(s, g->zero_tensors, i, s->rank);
        cudaCheck(cudaMemcpy(g->master + part.shard_offset, values + part.param_index, part.count * sizeof(float),
                             cudaMemcpyHostToDevice));
    }
}

void gpt_init_random(GPT* g, uint64_t seed, int scheme) {
    float* values = (float*)malloc(g->num_params * sizeof(float));
    if (!values) die("out of host memory (%zu parameters)", g->num_params);
    init_param_values(values, &g->config, seed, scheme);
    gpt_set_params(g, values);
    free(values);
}

// Layer l's activation slices in the buffers laid out for the model's largest batch.
static BlockActivations layer_acts(const GPT* g, int l) {
    return layer_activations(&g->acts, &g->config, g->B, g->T, &g->options, l);
}

// The stream the head's final norm takes: the last block's output, less the backout's share
// where the model has one.
static const bf16* final_stream(const GPT* g) {
    return g->acts.backout_out ? g->acts.backout_out : layer_acts(g, g->config.L - 1).res_next;
}

// The blocks' pass over a batch of B x T.
static BlockPass block_pass(const GPT* g, int B, int T) {
    BlockPass pass = {&g->config.arch,    g->config.L,         g->attention, attention_shape(&g->config, B, T),
                      g->acts.positions, g->options.recompute, g->acts.scratch, g->profile,
                      &g->matmul,        g->fp8.mlp,           g->fp8.scratch, g->options.fp8_grad_bf16,
                      g->acts.inputs,    g->acts.token_groups};
    return pass;
}

// Rotary's positions (acts.positions) of the rows of batches of T tokens, set when T changes:
// row b's token t is at t, or context parallel, where its zigzag chunk lies in the sequence
// (attention/ring.h; row b holds rank first + b % count's chunks). The same for every batch of
// that T: no host work per step. A forward of fewer rows reads the first of them.
static void set_positions(GPT* g, int T) {
    if (!g->config.arch.rotary || g->positions_T == T) return;
    const AttentionRing* ring = g->options.attention.ring;
    size_t n = (size_t)g->B * T;
    int* host = (int*)malloc(n * sizeof(int));
    if (!host) die("out of host memory for %zu positions", n);
    int chunk = T / 2;
    for (int b = 0; b < g->B; b++)
        for (int t = 0; t < T; t++)
            host[(size_t)b * T + t] =
                ring ? zigzag_chunk(ring->first + b % ring->count, t / chunk, ring->size) * chunk + t % chunk : t;
    // From pageable memory: the copy has read host when it returns.
    cudaCheck(cudaMemcpyAsync(g->acts.positions, host, n * sizeof(int), cudaMemcpyHostToDevice, g->stream));
    free(host);
    g->positions_T = T;
}

// The blocks of the forward, from the residual stream entering layer 0 to the one leaving the
// last, on the B * T rows of the batch.
static void forward_layers(GPT* g, int B, int T) {
    BlockPass pass = block_pass(g, B, T);
    for (int l = 0; l < g->config.L; l++) {
        BlockActivations x = layer_acts(g, l);
        LayerParameters w = layer_parameters(&g->params, l, &g->config);
        block_forward(&pass, l, &x, &w);
    }
}

// Data parallel with ZeRO-1: the model's stream waits (on the GPU) for the parameters the last
// update all-gathered. The event is recorded only with ZeRO-1, and waiting on an event never
// recorded returns at once.
static void wait_for_params(GPT* g) {
    if (g->dp.comm) cudaCheck(cudaStreamWaitEvent(g->stream, g->params_ready, 0));
}

// The embedding layer, forward (x (B, T, C) from the tokens) or backward (wte and wpe gradients
// from dx (B, T, C)). Context parallel, each half of a row is a chunk of the sequence and takes
// that chunk's positions: one call per chunk. With rotary there is no wpe: one call. The backward
// sums wte's gradient over the rows of each token in the order of their groups: one call for the
// batch takes the batch's, token_group_count of them in acts.token_groups, where the model has
// them (gpt_backward's, for the value embeddings); else each call groups its own rows.
static void embedding(GPT* g, const int* host_inputs, int B, int T, bf16* x, int backward, int token_group_count) {
    Activations* a = &g->acts;
    int C = g->config.C;
    cudaStream_t st = g->stream;
    const AttentionRing* ring = g->config.arch.rotary ? NULL : g->options.attention.ring;
    int pieces = ring ? 2 * B : 1, rows = ring ? 1 : B, len = ring ? T / 2 : T;
    for (int k = 0; k < pieces; k++) {
        int row = k / 2, half = k % 2;
        size_t at = ring ? (size_t)row * T + (size_t)half * len : 0;
        size_t pos = ring ? (size_t)zigzag_chunk(ring->first + row % ring->count, half, ring->size) * len : 0;
        // wpe's rows from pos on (NULL without wpe).
        bf16* dwpe = g->grads.wpe ? g->grads.wpe + pos * C : NULL;
        const bf16* wpe = g->params.wpe ? g->params.wpe + pos * C : NULL;
        if (!backward) {
            encoder_forward(x + at * C, a->inputs + at, g->params.wte, wpe, rows, len, C, st);
            continue;
        }
        int batch = a->token_groups && pieces == 1;   // the batch's groups, gpt_backward's
        int* groups = batch ? a->token_groups : (int*)a->scratch;
        int count = batch ? token_group_count : encoder_token_groups(groups, host_inputs + at, rows * len, st);
        encoder_backward(g->grads.wte, dwpe, x + at * C, groups, count, rows, len, C, st);
    }
}

// Marks of a forward: the start, the stem's operations, the layers', lnf.
static int forward_marks(const GPT* g) {
    return 2 + stem_ops(&g->config.arch).count + block_forward_marks(&g->config.arch, g->config.L);
}

void gpt_forward(GPT* g, const int* host_inputs, int B, int T) {
    const GPTConfig* c = &g->config;
    Activations* a = &g->acts;
    ParameterTensors* p = &g->params;
    cudaStream_t st = g->stream;
    int C = c->C, N = B * T;
    if (B < 1 || T < 1 || B > g->B || T > g->T)
        die("gpt_forward: a batch of %d x %d, the model holds up to %d x %d", B, T, g->B, g->T);
    g->forward_B = B;
    g->forward_T = T;
    wait_for_params(g);
    quantise_fp8_weights(g);
    profile_start(g->profile, forward_marks(g), st);
    cudaCheck(cudaMemcpyAsync(a->inputs, host_inputs, (size_t)N * sizeof(int),
                              cudaMemcpyHostToDevice, st));
    set_positions(g, T);
    // Under the ring each row's documents are those of its whole sequence, at global positions.
    const AttentionRing* ring = g->options.attention.ring;
    if (c->arch.documents && ring)
        ring_document_bounds(ring, a->inputs, B, T, c->arch.document_token, a->doc_start, a->doc_end, a->scratch, st);
    else if (c->arch.documents)
        attention_document_bounds(a->inputs, B, T, c->arch.document_token, a->doc_start, a->doc_end, st);
    // The operations of the stem, the blocks and the head (gpt/model_ops.h). The stem's output is
    // the stream entering layer 0; with an embedding norm the embedding is kept before it, with
    // the smear the output before it.
    const StemOps stem = stem_ops(&c->arch);
    bf16* unsmeared = a->smear_in ? a->smear_in : a->residual;
    bf16* embedded = a->embedding ? a->embedding : unsmeared;
    for (int i = 0; i < stem.count; i++) {
        switch (stem.op[i]) {
        case STEM_EMBEDDING:
            embedding(g, host_inputs, B, T, embedded, 0, 0);
            profile_mark(g->profile, PART_EMBEDDING, PHASE_FORWARD, st);
            break;
        case STEM_EMBEDDING_NORM:
            rmsnorm_forward(unsmeared, a->embedding_rstd, a->embedding, N, C, st);
            profile_mark(g->profile, PART_NORM, PHASE_FORWARD, st);
            break;
        case STEM_SMEAR:
            smear_forward(a->residual, a->smear_in, p->smear_gate, p->smear_lambda, B, T, C, SMEAR_GATE_CHANNELS, st);
            profile_mark(g->profile, PART_EMBEDDING, PHASE_FORWARD, st);
            break;
        }
    }
    forward_layers(g, B, T);
    // The head's operations; the backout's time counts with the final norm's.
    const HeadOps head = head_ops(&c->arch);
    for (int i = 0; i < head.count; i++) {
        switch (head.op[i]) {
        case HEAD_BACKOUT:
            backout_forward(a->backout_out, layer_acts(g, c->L - 1).res_next,
                            layer_acts(g, architecture_backout_layer(c->L)).res_next, p->backout_lambda, N, C, st);
            break;
        case HEAD_NORM:
            norm_forward(head.norm, a->lnf, a->lnf_mean, a->lnf_rstd, final_stream(g), p->lnfw, p->lnfb, N, C, st);
            profile_mark(g->profile, PART_NORM, PHASE_FORWARD, st);
            break;
        case HEAD_LOGITS: break;   // gpt_classifier's and gpt_logits', a chunk of rows at a time
        }
    }
}

bf16* gpt_logits(GPT* g, int row, int rows) {
    if (rows > g->sizes.logits_rows) die("gpt_logits: %d rows, the buffer holds %d", rows, g->sizes.logits_rows);
    const GPTConfig* c = &g->config;
    const bf16* lnf = g->acts.lnf + (size_t)row * c->C;
    if (g->fp8.head)
        matmul_forward_fp8(g->acts.logits, NULL, lnf, NULL, NULL, rows, g->fp8.head, g->fp8.scratch, &g->matmul);
    else matmul_forward(g->acts.logits, NULL, lnf, head_weights(&g->params, c), NULL, NULL, rows, c->C, c->Vp,
                        &g->matmul);
    return g->acts.logits;
}

// Marks of a classifier on N rows: the start, two per chunk, the losses' copy.
static int classifier_marks(const GPT* g, int N) { return 2 + 2 * (int)ceil_div(N, g->sizes.logits_rows); }

void gpt_classifier(GPT* g, const int* host_targets, int B, int T, float dloss_scale, int write_dlogits) {
    const GPTConfig* c = &g->config;
    Activations* a = &g->acts;
    int N = B * T, C = c->C;
    float softcap = head_ops(&c->arch).softcap;
    if (B != g->forward_B || T != g->forward_T)
        die("gpt_classifier: a batch of %d x %d, the last gpt_forward's is %d x %d", B, T, g->forward_B, g->forward_T);
    profile_start(g->profile, classifier_marks(g, N), g->stream);
    // The losses are overwritten once the last batch's are summed (waiting on an event never
    // recorded returns at once).
    cudaCheck(cudaStreamWaitEvent(g->stream, g->losses_summed, 0));
    cudaCheck(cudaMemcpyAsync(a->targets, host_targets, (size_t)N * sizeof(int),
                              cudaMemcpyHostToDevice, g->stream));
    for (int row = 0; row < N; row += g->sizes.logits_rows) {
        int rows = N - row < g->sizes.logits_rows ? N - row : g->sizes.logits_rows;
        bf16* logits = gpt_logits(g, row, rows);
        // The one pass that gives the losses also writes dlogits: counted as the forward.
        if (softcap > 0.0f)
            classifier_forward_backward_softcap(logits, a->losses + row, a->targets + row, rows, c->V, c->Vp,
                                                softcap, dloss_scale, write_dlogits, g->stream);
        else classifier_forward_backward(logits, a->losses + row, a->targets + row, rows, c->V, c->Vp, dloss_scale,
                                         write_dlogits, g->stream);
        profile_mark(g->profile, PART_CLASSIFIER, PHASE_FORWARD, g->stream);
        // logits = lnf @ head^T; with neither bias nor GELU this takes no scratch.
        if (write_dlogits && g->fp8.head && !g->options.fp8_grad_bf16) {
            matmul_backward_fp8(a->dnarrow + (size_t)row * C, head_weights(&g->grads, c), NULL, logits, NULL, rows,
                                g->fp8.head, g->fp8.scratch, &g->matmul);
            profile_mark(g->profile, PART_CLASSIFIER, PHASE_BACKWARD, g->stream);
        } else if (write_dlogits) {
            matmul_backward(a->dnarrow + (size_t)row * C, head_weights(&g->grads, c), NULL, logits,
                            a->lnf + (size_t)row * C, head_weights(&g->params, c), NULL, rows, C, c->Vp, NULL,
                            &g->matmul);
            profile_mark(g->profile, PART_CLASSIFIER, PHASE_BACKWARD, g->stream);
        }
    }
    // One thread sums them in order beside the backward, off the model's stream.
    cudaCheck(cudaEventRecord(g->losses_ready, g->stream));
    cudaCheck(cudaStreamWaitEvent(g->loss_stream, g->losses_ready, 0));
    loss_mean_add(&g->scalars->loss_sum, a->losses, N, g->loss_stream);
    cudaCheck(cudaEventRecord(g->losses_summed, g->loss_stream));
    g->loss_batches++;
    cudaCheck(cudaMemcpyAsync(g->host_losses, a->losses, (size_t)N * sizeof(float),
                              cudaMemcpyDeviceToHost, g->stream));
    profile_mark(g->profile, PART_CLASSIFIER, PHASE_FORWARD, g->stream);
}

// Data parallel: values (n floats of device memory, written on the model's stream) summed or
// averaged over the ranks on the side stream, after the collectives queued there before; the
// model's stream waits for them on the GPU.
static void reduce_scalars(GPT* g, float* values, size_t n, int average) {
    cudaCheck(cudaEventRecord(g->grads_ready, g->stream));
    cudaCheck(cudaStreamWaitEvent(g->comm_stream, g->grads_ready, 0));
    if (average) nccl_all_reduce_avg_f32(g->dp.comm, values, n, g->comm_stream);
    else nccl_all_reduce_sum_f32(g->dp.comm, values, n, g->comm_stream);
    cudaCheck(cudaEventRecord(g->scalars_ready, g->comm_stream));
    cudaCheck(cudaStreamWaitEvent(g->stream, g->scalars_ready, 0));
}

void gpt_finish_loss(GPT* g) {
    if (g->loss_batches == 0) die("gpt_finish_loss: no gpt_classifier since the last");
    cudaCheck(cudaStreamWaitEvent(g->stream, g->losses_summed, 0));
    loss_mean_finish(&g->scalars->values.loss, &g->scalars->loss_sum, g->loss_batches, g->stream);
    g->loss_batches = 0;
    if (g->dp.comm) reduce_scalars(g, &g->scalars->values.loss, 1, 1);
}

// One float of the scalars, once the GPU is done.
static float read_scalar(GPT* g, const float* value) {
    float host;
    cudaCheck(cudaMemcpyAsync(&host, value, sizeof(float), cudaMemcpyDeviceToHost, g->stream));
    cudaCheck(cudaStreamSynchronize(g->stream));
    return host;
}

float gpt_mean_loss(GPT* g) {
    gpt_finish_loss(g);
    return read_scalar(g, &g->scalars->values.loss);
}

// ZeRO-1 through a communicator: the gradients are reduce-scattered (each rank averages its
// share alone), and the norm adds the ranks' norms of their shares.
static int grads_scattered(const GPT* g) { return g->dp.comm && g->dp.zero_stage == 1; }

// Averages gradients over the data-parallel ranks on the side stream, once the model's stream
// has computed them (grads_ready): ptrs[k] holds sizes[k] gradients of tensor tensors[k] (0: a
// tensor the architecture does not have). All-reduced; with ZeRO-1 each rank's piece of them is
// reduced to that rank alone (NCCL's reduce to a root: for 2 ranks the same sum as the
// all-reduce's, a + b, halved exactly), so each rank receives its share, as a reduce-scatter.
static void reduce_grads(GPT* g, bf16* const* ptrs, const size_t* sizes, const ParamTensor* tensors, int n) {
    cudaCheck(cudaEventRecord(g->grads_ready, g->stream));
    cudaCheck(cudaStreamWaitEvent(g->comm_stream, g->grads_ready, 0));
    nccl_group_begin();
    for (int k = 0; k < n; k++) {
        if (!sizes[k]) continue;
        if (!grads_scattered(g)) {
            nccl_all_reduce_avg_bf16(g->dp.comm, ptrs[k], sizes[k], g->comm_stream);
            continue;
        }
        size_t lo = (size_t)(ptrs[k] - g->grads_memory);
        for (int r = 0; r < g->dp.world_size; r++) {
            ZeroShardPart piece = zero_shard_piece(&g->shard, g->zero_tensors, tensors[k], r, lo, lo + sizes[k]);
            if (piece.count)
                nccl_reduce_avg_bf16(g->dp.comm, g->grads_memory + piece.param_index, piece.count, r, g->comm_stream);
        }
    }
    nccl_group_end();
}

// Layer l's gradient slices, each of its own tensor, averaged over the ranks.
static void reduce_layer_grads(GPT* g, int l) {
    size_t sizes[NUM_LAYER_PARAMS];
    LayerParameters d = layer_parameters(&g->grads, l, &g->config);
    for (int i = 0; i < NUM_LAYER_PARAMS; i++)
        sizes[i] = d.t[i] ? param_slice_size(&param_table[layer_param_tensors[i]], &g->config) : 0;
    reduce_grads(g, d.t, sizes, layer_param_tensors, NUM_LAYER_PARAMS);
}

// Marks of a backward: the start, the token groups (value embeddings only), lnf, the layers', the
// stem's operations.
static int backward_marks(const GPT* g) {
    return 2 + (g->acts.token_groups ? 1 : 0) + block_backward_marks(&g->config.arch, g->config.L) +
           stem_ops(&g->config.arch).count;
}

void gpt_backward(GPT* g, const int* host_inputs, int last_micro_step) {
    const GPTConfig* c = &g->config;
    Activations* a = &g->acts;
    ParameterTensors* d = &g->grads;
    cudaStream_t st = g->stream;
    // The batch of the last forward, whose activations the layers read: it may be smaller than
    // the model's largest (evaluation runs such forwards).
    int B = g->forward_B, T = g->forward_T, C = c->C, N = B * T;
    if (N == 0) die("gpt_backward: no gpt_forward before it");
    BlockPass pass = block_pass(g, B, T);
    BlockGradients grads = {a->dresidual, a->dnarrow, a->dwide, a->dx0, a->dvalue_gate};
    int reduce = g->dp.comm && last_micro_step;
    profile_start(g->profile, backward_marks(g), st);
    // The value embeddings' gradients, and wte's, sum over the rows of each token in the order of
    // these groups: grouped once, before the blocks' backward, the first to need them. Their time
    // counts as the embedding's, as where the embedding's backward groups the rows itself.
    if (a->token_groups) {
        pass.token_group_count = encoder_token_groups(a->token_groups, host_inputs, N, st);
        profile_mark(g->profile, PART_EMBEDDING, PHASE_BACKWARD, st);
    }
    cudaCheck(cudaMemsetAsync(a->dresidual, 0, (size_t)N * C * sizeof(bf16), st));
    if (a->dx0) cudaCheck(cudaMemsetAsync(a->dx0, 0, (size_t)N * C * sizeof(float), st));
    // The operations of the head, the blocks and the stem in reverse (gpt/model_ops.h).
    const HeadOps head = head_ops(&c->arch);
    for (int i = head.count - 1; i >= 0; i--) {
        switch (head.op[i]) {
        case HEAD_LOGITS: break;   // gpt_classifier's: dlnf in dnarrow
        case HEAD_NORM:
            norm_backward(head.norm, a->dresidual, d->lnfw, d->lnfb, a->dnarrow, final_stream(g), g->params.lnfw,
                          a->lnf_mean, a->lnf_rstd, N, C, a->scratch, st);
            profile_mark(g->profile, PART_NORM, PHASE_BACKWARD, st);
            break;
        case HEAD_BACKOUT:   // the last block's gradient passes; the middle one's waits in dbackout
            backout_backward(a->dbackout, d->backout_lambda, a->dresidual,
                             layer_acts(g, architecture_backout_layer(c->L)).res_next, g->params.backout_lambda, N,
                             C, a->scratch, st);
            break;
        }
    }
    for (int l = c->L - 1; l >= 0; l--) {
        BlockActivations x = layer_acts(g, l);
        LayerParameters w = layer_parameters(&g->params, l, c), dw = layer_parameters(d, l, c);
        // The backout's gradient of the middle block's output joins the stream's before its backward.
        if (a->dbackout && l == architecture_backout_layer(c->L)) backout_add(a->dresidual, a->dbackout, N, C, st);
        block_backward(&pass, l, &x, &w, &dw, &grads);
        if (reduce) reduce_layer_grads(g, l);
    }
    // d loss / d (the stem's output) in dresidual; each operation's backward before the embedding's
    // writes its input's gradient into the other of dresidual and dnarrow (both free once the
    // blocks are done).
    const StemOps stem = stem_ops(&c->arch);
    bf16* dembedded = a->dresidual;
    for (int i = stem.count - 1; i >= 0; i--) {
        bf16* dother = dembedded == a->dresidual ? a->dnarrow : a->dresidual;
        switch (stem.op[i]) {
        case STEM_SMEAR:
            smear_backward(dother, d->smear_gate, d->smear_lambda, dembedded, a->smear_in, g->params.smear_gate,
                           g->params.smear_lambda, B, T, C, SMEAR_GATE_CHANNELS, a->scratch, st);
            dembedded = dother;
            profile_mark(g->profile, PART_EMBEDDING, PHASE_BACKWARD, st);
            break;
        case STEM_EMBEDDING_NORM:
            cudaCheck(cudaMemsetAsync(dother, 0, (size_t)N * C * sizeof(bf16), st));
            rmsnorm_backward(dother, dembedded, a->embedding, a->embedding_rstd, N, C, st);
            dembedded = dother;
            profile_mark(g->profile, PART_NORM, PHASE_BACKWARD, st);
            break;
        case STEM_EMBEDDING:
            embedding(g, host_inputs, B, T, dembedded, 1, pass.token_group_count);
            profile_mark(g->profile, PART_EMBEDDING, PHASE_BACKWARD, st);
            break;
        }
    }
    if (reduce) {
        // The tensors of the model, not of a layer: wte has the classifier's (when tied) and the
        // encoder's parts only now.
        bf16* ptrs[NUM_PARAM_TENSORS];
        size_t sizes[NUM_PARAM_TENSORS];
        ParamTensor tensors[NUM_PARAM_TENSORS];
        int n = 0;
        for (int i = 0; i < NUM_PARAM_TENSORS; i++)
            if (!param_table[i].layers) {
                ptrs[n] = d->t[i];
                tensors[n] = (ParamTensor)i;
                sizes[n++] = g->param_sizes[i];
            }
        reduce_grads(g, ptrs, sizes, tensors, n);
        cudaCheck(cudaEventRecord(g->grads_reduced, g->comm_stream));
    }
}

void gpt_zero_grads(GPT* g) {
    cudaCheck(cudaMemsetAsync(g->grads_memory, 0, g->num_params * sizeof(bf16), g->stream));
}

// Marks of gpt_grad_norm and of the rest of gpt_update: a start and one part each.
#define GRAD_NORM_MARKS 2
#define UPDATE_MARKS 2

// The squared norm of the gradients [lo, hi), when not empty, into the next of the scalars' parts.
static void norm_part(GPT* g, int* parts, size_t lo, size_t hi) {
    if (hi > lo)
        global_norm_squared(&g->scalars->norm_parts[(*parts)++], g->grads_memory + lo, hi - lo, g->acts.scratch,
                            g->stream);
}

// The norm before clipping and the clip's factor into the scalars, on the GPU. The squared norm
// of each run of adjacent parts this rank adds up goes to a part of its own, the parts then added
// in order: all the gradients in one run; with ZeRO-1 through a communicator, the runs of this
// rank's share (the other elements are not averaged here), then the parts summed over the ranks.
// One rank's share is the whole array, so its norm is the one of a run without ZeRO-1.
static void grad_norm(GPT* g) {
    StepScalars* sc = g->scalars;
    // Data parallel: without ZeRO-1 every rank holds the averaged gradients, so its norm is the
    // global one.
    if (g->dp.comm) cudaCheck(cudaStreamWaitEvent(g->stream, g->grads_reduced, 0));
    // Started after the wait: a wait for the other ranks is no part of the update.
    profile_start(g->profile, GRAD_NORM_MARKS, g->stream);
    cudaCheck(cudaMemsetAsync(sc->norm_parts, 0, sizeof(sc->norm_parts), g->stream));
    int parts = 0;
    if (grads_scattered(g)) {
        size_t lo = 0, hi = 0;
        for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
            ZeroShardPart part = zero_shard_part(&g->shard, g->zero_tensors, i, g->shard.rank);
            if (part.count == 0) continue;
            if (part.param_index != hi) {   // a gap: the run so far is whole
                norm_part(g, &parts, lo, hi);
                lo = part.param_index;
            }
            hi = part.param_index + part.count;
        }
        norm_part(g, &parts, lo, hi);
        reduce_scalars(g, sc->norm_parts, NUM_PARAM_TENSORS, 0);
    } else {
        norm_part(g, &parts, 0, g->num_params);
    }
    grad_clip_scale(&sc->values.norm, &sc->grad_scale, sc->norm_parts, NUM_PARAM_TENSORS, g->optimizer.grad_clip,
                    g->stream);
    profile_mark(g->profile, PART_UPDATE, PHASE_UPDATE, g->stream);
}

float gpt_grad_norm(GPT* g) {
    grad_norm(g);
    return read_scalar(g, &g->scalars->values.norm);
}

// With ZeRO-1, every rank's updated parameters to every rank, on the side stream; the next
// forward waits for them on the GPU. Flat shards are equal chunks of the padded array, one
// all-gather; Muon's parts of whole matrices go out one broadcast each.
static void gather_params(GPT* g) {
    const ZeroShard* s = &g->shard;
    cudaCheck(cudaEventRecord(g->grads_ready, g->stream));
    cudaCheck(cudaStreamWaitEvent(g->comm_stream, g->grads_ready, 0));
    if (s->by_units) {
        nccl_group_begin();
        for (int i = 0; i < NUM_PARAM_TENSORS; i++)
            for (int r = 0; r < s->world_size; r++) {
                ZeroShardPart part = zero_shard_part(s, g->zero_tensors, i, r);
                bf16* at = g->params_memory + part.param_index;
                if (part.count) nccl_broadcast(g->dp.comm, at, at, part.count * sizeof(bf16), r, g->comm_stream);
            }
        nccl_group_end();
    } else {
        nccl_all_gather_bf16(g->dp.comm, g->params_memory + (size_t)g->dp.rank * s->shard_size, g->params_memory,
                             s->shard_size, g->comm_stream);
    }
    cudaCheck(cudaEventRecord(g->params_ready, g->comm_stream));
}

int gpt_muon_matrices(const GPT* g, int i) {
    if (g->optimizer.kind != OPTIMIZER_MUON || param_table[i].group != GROUP_MATRIX) return 0;
    return (int)(zero_shard_part(&g->shard, g->zero_tensors, i, g->shard.rank).count / g->zero_tensors[i].unit);
}

void gpt_update(GPT* g, const StepRates* rates) {
    if (!g->optimizer_memory) die("gpt_update: the model was built without an optimizer");
    const OptimizerConfig* o = &g->optimizer;
    grad_norm(g);
    const float* grad_scale = &g->scalars->grad_scale;
    int muon = o->kind == OPTIMIZER_MUON;
    g->adam_t++;
    MuonStep muon_step = {.momentum = rates->momentum, .grad_scale = grad_scale,
                          .ns = &newton_schulz_coefficients[o->muon_ns], .cautious = o->cautious_weight_decay,
                          .normuon_beta2 = o->normuon_beta2};
    profile_start(g->profile, UPDATE_MARKS, g->stream);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        // The part of tensor i this rank updates (all of it without ZeRO-1).
        ZeroShardPart part = zero_shard_part(&g->shard, g->zero_tensors, i, g->shard.rank);
        size_t p = part.param_index, s = part.shard_offset;
        if (part.count == 0) continue;
        const ParamKind* k = &param_table[i];
        float decay = k->decay_scale * rates->weight_decay;
        float lr = k->lr_scale * rates->lr[k->group];
        if (muon && k->group == GROUP_MATRIX) {
            int rows, cols;
            param_muon_matrix(k, &g->config, o->muon_qkv, &rows, &cols);
            muon_step.lr = lr;
            muon_step.weight_decay = decay;
            // NorMuon's moments: in v, each at the start of its matrix's place (layers/muon.h).
            muon_update(g->params_memory + p, g->master + s, g->grads_memory + p, g->m + s, o->normuon ? g->v + s : NULL,
                        gpt_muon_matrices(g, i), rows, cols, &muon_step, g->optimizer_scratch, &g->matmul);
        } else {
            float b1, b2;
            adam_betas(o, k->group, &b1, &b2);
            adamw_update(g->params_memory + p, g->master + s, g->grads_memory + p, g->m + s, g->v + s, part.count,
                         lr, b1, b2, g->adam_t, o->eps, decay, grad_scale, g->stream);
        }
    }
    profile_mark(g->profile, PART_UPDATE, PHASE_UPDATE, g->stream);
    if (g->dp.comm && g->dp.zero_stage == 1) gather_params(g);
}

int gpt_profile_marks(const GPT* g, int micro_steps) {
    return micro_steps * (forward_marks(g) + classifier_marks(g, g->sizes.rows) + backward_marks(g)) + GRAD_NORM_MARKS +
           UPDATE_MARKS;
}
