// train/options.cu: train_gpt's options, their table and their parsers (train/options.h).
#include "train/options.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "common/error.h"
#include "common/options.h"
#include "common/parse.h"

static void parse_recompute(const char* name, const char* value, void* flags) {
    if ((*(int*)flags = recompute_flags(value)) < 0)
        die("%s '%s': expected none or a comma-separated list of gelu and layernorm", name, value);
}

static void parse_fp8(const char* name, const char* value, void* flags) {
    if ((*(int*)flags = fp8_flags(value)) < 0)
        die("%s '%s': expected none or a comma-separated list of mlp and head", name, value);
}

// --window-pattern: a comma-separated list of windows, each a number of keys or "full" (no
// bound), into the pattern fields of an Architecture; windows all full are none (window_count 0),
// which turns a preset's off.
static void parse_window_pattern(const char* name, const char* value, void* arch) {
    Architecture* a = (Architecture*)arch;
    int count = 0, bounded = 0;
    memset(a->windows, 0, sizeof(a->windows));
    for (const char* p = value;; p++) {
        size_t len = strcspn(p, ",");
        char item[32];
        if (len == 0 || len >= sizeof(item))
            die("%s '%s': expected windows (keys, or full) separated by commas", name, value);
        if (count == ARCHITECTURE_MAX_WINDOWS) die("%s '%s': more than %d windows", name, value, ARCHITECTURE_MAX_WINDOWS);
        memcpy(item, p, len);
        item[len] = 0;
        if (strcmp(item, "full") && strspn(item, "0123456789") != len)
            die("%s '%s': '%s' is neither a number of keys nor full", name, value, item);
        int w = strcmp(item, "full") ? parse_int_in(name, item, 1, INT_MAX) : 0;
        a->windows[count++] = w;
        bounded |= w > 0;
        p += len;
        if (!*p) break;
    }
    a->window_count = bounded ? count : 0;
}

// A float that rule (NULL or why not) takes: --rotary-base and --softcap by gpt/config.h's rules,
// which the checkpoint header is checked by too.
static void parse_float_by(const char* name, const char* value, float* target, const char* (*rule)(float)) {
    float v = parse_float(name, value);
    const char* why = rule(v);
    if (why) die("%s %s: %s", name, value, why);
    *target = v;
}

static void parse_rotary_base(const char* name, const char* value, void* base) {
    parse_float_by(name, value, (float*)base, rotary_base_invalid);
}

static void parse_softcap(const char* name, const char* value, void* cap) {
    parse_float_by(name, value, (float*)cap, softcap_invalid);
}

// A QK scale of -0 is 0: none, in the header's bits too.
static void parse_qk_scale(const char* name, const char* value, void* scale) {
    parse_float_by(name, value, (float*)scale, qk_scale_invalid);
    if (*(float*)scale == 0.0f) *(float*)scale = 0.0f;
}

// A setting of the optimizer, within its bounds (gpt/optimizer.h's optimizer_settings, which
// bound the training state's too).
static void parse_optimizer_setting(const char* name, const char* value, void* setting) {
    float v = parse_float(name, value);
    char err[ERR_LEN];
    if (optimizer_setting_refused(optimizer_setting(name), v, err, sizeof(err))) die("%s", err);
    *(float*)setting = v;
}

// --normuon-beta2: NorMuon's beta, in [0, 1) (gpt/optimizer.h's muon_variants_invalid says the same).
static void parse_normuon_beta2(const char* name, const char* value, void* beta) {
    float v = parse_float(name, value);
    if (!(v >= 0.0f && v < 1.0f)) die("%s %g must be in [0, 1)", name, v);
    *(float*)beta = v;
}

// --head-size: 64 or 128, the head sizes the attention kernels run (gpt/block.h).
static void parse_head_size(const char* name, const char* value, void* size) {
    int hs = parse_int_in(name, value, 1, INT_MAX);
    if (hs != 64 && hs != 128) die("%s %s: expected 64 or 128", name, value);
    *(int*)size = hs;
}

static void parse_peak(const char* name, const char* value, void* peak) {
    *(float*)peak = parse_float(name, value);
    if (*(float*)peak <= 0.0f) die("%s %s: a peak must be positive", name, value);
}

// Where the option of the Architecture member field marks it given: its slot of components_given,
// which follows Architecture's slots.
#define GIVEN(field) &o->components_given[offsetof(Architecture, field) / sizeof(int32_t)]

void train_options_parse(int argc, char** argv, TrainOptions* o) {
    *o = (TrainOptions){.model = "d12", .context = 1024, .arch = 0, .components = ARCHITECTURE_GPT2,
                        .train_data = "datasets/tinyshakespeare/train_*.bin", .B = 4, .T = 1024,
                        .optimizer = {.kind = OPTIMIZER_ADAMW, .lr = NAN, .momentum = NAN, .embedding_lr = NAN,
                                      .head_lr = NAN, .vector_lr = NAN, .b1 = NAN, .b2 = NAN, .embedding_b1 = NAN,
                                      .embedding_b2 = NAN, .head_b1 = NAN, .head_b2 = NAN, .weight_decay = NAN,
                                      .grad_clip = NAN, .muon_qkv = -1, .muon_ns = -1, .cautious_weight_decay = -1,
                                      .normuon = -1, .normuon_beta2 = NAN},
                        .val_every = 100, .val_batches = 20, .sample_tokens = 128, .temperature = 1.0f, .seed = 1337,
                        .model_options = {.attention = {.kind = ATTENTION_FLASH}}, .context_parallel = 1};
    if (!(o->gpus_args = (unsigned char*)calloc((size_t)argc, 1))) die("out of host memory");
    ModelOptions* mo = &o->model_options;
    Architecture* a = &o->components;
    const Option options[] = {
        {OPTION_GROUP, "model"},
        {OPTION_TEXT, "--model", "NAME", &o->model, "d2, d6, d12 (124M), d24 (350M), d36 (774M), d48 (1.5B) [d12]", 0, 0,
         NULL, &o->model_given},
        {OPTION_INT, "--context", "N", &o->context, "context length of the model [1024]", 1, INT_MAX, NULL,
         &o->context_given},
        {OPTION_CALL, "--head-size", "64|128", &o->head_size,
         "the heads' size HS, the channels unchanged: NH = C / HS heads\n(nanochat's 128) [the preset's: 64]", 0, 0,
         parse_head_size},
        {OPTION_PATH, "--init-from", "FILE", &o->init_from,
         "start from a model checkpoint (version 3 or 5: GPT-2, fp32 or\nbf16; 6 or 7: another architecture; 8 or 9: "
         "with a part\nof the 2026 recipe)"},
        {OPTION_CHOICE, "--init", "default|nanochat", &o->init_scheme,
         "how the initial model is drawn: each tensor as the table\nabove says, or nanochat's: wte N(0, 0.8), the head N(0, "
         "0.001),\nqkvw and fcw uniform of std 1/sqrt(C) and 0.4/sqrt(C), the\nprojections zero, the residual and x0 "
         "lambdas from 1.15 and\n0.2 at the first layer to 1.05 and 0.05 at the last [default;\nwith --resume: the run's]",
         0, 0, NULL, &o->init_given},
        {OPTION_PATH, "--save-init", "FILE", &o->save_init,
         "write the initial model (drawn from --seed) to FILE, an fp32\ncheckpoint, and stop before the GPU"},
        {OPTION_PATH, "--resume", "DIR", &o->resume_dir, "continue the run whose checkpoints are in DIR, exactly"},
        {OPTION_GROUP, "architecture (--arch, then each component on its own; a checkpoint's must match)"},
        {OPTION_CHOICE, "--arch", "gpt2|modern|2026", &o->arch,
         "gpt2: GPT-2 of 2019 (llm.c and Hugging Face compatible);\n"
         "modern: --rotary 1, --norm rms, --qk-norm 1, --mlp relu2,\n--bias 0, --head untied, --zero-init 1, --softcap 30, and its\n"
         "own defaults: adamw --lr 2e-3, muon --embedding-lr 0.05;\n"
         "2026: modern's, with --embedding-norm 1, --qk-scale 1.2,\n--residual-lambdas 1, --value-embeddings 1, --smear 1,\n"
         "--backout 1, and key windows of a quarter of the context\n(rounded down) in three layers of four, the last layer full\n"
         "(at --context 1024: --window-pattern 256,256,256,full);\nits own defaults: --optimizer muon, --muon-qkv head-pairs,\n"
         "--normuon, --weight-decay 0.1, --lr-schedule wsd\n--warmdown-frac 0.65 --min-lr-frac 0.05, --momentum-warmup-steps\n"
         "300 --momentum-start 0.85, and modern's rates\n"
         "(without --arch: the defaults of the preset nearest the\narchitecture) [gpt2; with --resume or --init-from: the\n"
         "checkpoint's]",
         0, 0, NULL, &o->arch_given},
        {OPTION_INT, "--rotary", "0|1", &a->rotary, "rotary position embeddings on q and k, no learned ones", 0, 1,
         NULL, GIVEN(rotary)},
        {OPTION_CALL, "--rotary-base", "X", &a->rotary_base, "with --rotary 1: its frequencies base^(-2i/HS), base > 1\n[10000]",
         0, 0, parse_rotary_base, GIVEN(rotary_base)},
        {OPTION_CHOICE, "--norm", "layer|rms", &a->rms_norm, "LayerNorm or RMSNorm (without weights)", 0, 0, NULL,
         GIVEN(rms_norm)},
        {OPTION_INT, "--qk-norm", "0|1", &a->qk_norm, "RMSNorm of each head's queries and keys", 0, 1, NULL,
         GIVEN(qk_norm)},
        {OPTION_CHOICE, "--mlp", "gelu|relu2", &a->relu2, "the MLP's activation: GELU (tanh form) or ReLU^2", 0, 0,
         NULL, GIVEN(relu2)},
        {OPTION_INT, "--bias", "0|1", &a->bias, "biases in the linear layers", 0, 1, NULL, GIVEN(bias)},
        {OPTION_CHOICE, "--head", "tied|untied", &a->untied_head, "the output head: wte, or one of its own", 0, 0,
         NULL, GIVEN(untied_head)},
        {OPTION_INT, "--zero-init", "0|1", &a->zero_init, "the output projections and head start at zero", 0, 1,
         NULL, GIVEN(zero_init)},
        {OPTION_CALL, "--softcap", "X", &a->softcap, "logits z -> X tanh(z / X), X >= 1; 0 for none", 0, 0,
         parse_softcap, GIVEN(softcap)},
        {OPTION_INT, "--embedding-norm", "0|1", &a->embedding_norm,
         "an RMSNorm of the embedding: x = norm(wte[token] (+ wpe)) [0]", 0, 1, NULL, GIVEN(embedding_norm)},
        {OPTION_CALL, "--qk-scale", "X", &a->qk_scale,
         "with --qk-norm 1: q and k times X after their norm, the\nattention's logits X^2 times 1/sqrt(HS)'s, X from "
         "0.125 to 8\n(nanochat 1.2); 0 for none [0]", 0, 0, parse_qk_scale, GIVEN(qk_scale)},
        {OPTION_INT, "--residual-lambdas", "0|1", &a->residual_lambdas,
         "before each block x = resid_lambda x + x0_lambda x0 (x0 the\nembedding's stream), learned scalars "
         "of each layer from 1\nand 0 [0]", 0, 1, NULL, GIVEN(residual_lambdas)},
        {OPTION_INT, "--value-embeddings", "0|1", &a->value_embeddings,
         "the layers L-1, L-3, ... add a token embedding of their own\nto the attention's values, gated per head by "
         "3 sigmoid of\n12 channels of its input [0]", 0, 1, NULL, GIVEN(value_embeddings)},
        {OPTION_INT, "--smear", "0|1", &a->smear,
         "each token's embedding takes in the one before it in its\nrow, x_t += lambda sigmoid(x_t[:24] . w) x_{t-1}, "
         "lambda\nand w learned from 0 [0]", 0, 1, NULL, GIVEN(smear)},
        {OPTION_INT, "--backout", "0|1", &a->backout,
         "before the final norm x -= lambda x_mid, x_mid the stream\nleaving block L/2, lambda learned from 0 [0]", 0, 1,
         NULL, GIVEN(backout)},
        {OPTION_FLAG, "--document-mask", NULL, &o->document_mask,
         "attention sees the row's own document alone (documents\nstart at <|endoftext|>, whose id --tokenizer "
         "gives)"},
        {OPTION_INT, "--window", "W", &o->window,
         "a sliding window: attention sees the last W keys at most\n(the row's own included), in every layer; W below the context", 1,
         INT_MAX},
        {OPTION_CALL, "--window-pattern", "LIST", &o->window_pattern,
         "a window per layer: comma-separated windows, each a number\nof keys or full (no bound), layer l taking "
         "item l mod\ntheir count (one per layer at most); e.g. full,1024: long\nand short layers alternating; full "
         "alone: none (2026's off)\n[--arch 2026's, else none]",
         0, 0, parse_window_pattern, &o->window_pattern_given},
        {OPTION_GROUP, "data"},
        {OPTION_TEXT, "--train-data", "GLOB", &o->train_data, "training shards [datasets/tinyshakespeare/train_*.bin]"},
        {OPTION_TEXT, "--val-data", "GLOB", &o->val_data,
         "validation shards, \"\" for none [the train glob with val_ for train_,\nwhen such shards exist]"},
        {OPTION_PATH, "--tokenizer", "FILE", &o->tokenizer,
         "tokenizer: sets the vocabulary and decodes samples\n(without it the vocabulary comes from the shards' header)"},
        {OPTION_FLAG, "--align-documents", NULL, &o->align_documents,
         "each training row starts at a document's <|endoftext|> (whose\nid --tokenizer gives) and runs on into the "
         "next documents;\nthe rest of the document a row ends in starts no row"},
        {OPTION_GROUP, "batch and schedule"},
        {OPTION_INT, "-B, --batch-size", "N", &o->B, "sequences per micro-step [4]", 1, INT_MAX},
        {OPTION_INT, "-T, --seq-len", "N", &o->T, "tokens per sequence [1024]", 1, INT_MAX},
        {OPTION_INT64, "--total-batch-size", "N", &o->total_batch, "tokens per optimizer step, a multiple of B*T [B*T]"},
        {OPTION_INT, "--steps", "N", &o->steps, "optimizer steps [one epoch]", 0, INT_MAX},
        {OPTION_INT, "--warmup-steps", "N", &o->schedule.warmup_steps, "linear warmup of every learning rate [0]", 0,
         INT_MAX},
        {OPTION_CHOICE, "--lr-schedule", "cosine|wsd", &o->schedule.lr_shape,
         "then cosine: a cosine down to the end (--min-lr-frac); wsd:\nconstant, then linearly down to it over the last\n"
         "--warmdown-frac of the steps (nanochat's) [cosine; 2026 wsd]", 0, 0, NULL, &o->lr_schedule_given},
        {OPTION_FLOAT, "--min-lr-frac", "X", &o->schedule.min_lr_frac,
         "every learning rate ends at X * its peak, at the last step\n[0; 2026 0.05]", 0, 1, NULL, &o->min_lr_frac_given},
        {OPTION_FLOAT, "--warmdown-frac", "X", &o->schedule.warmdown_frac,
         "wsd: the fraction of the steps in the warm-down, in (0, 1]\n[0.65]", 0, 0, NULL, &o->warmdown_given},
        {OPTION_CALL, "--grad-clip", "X", &o->optimizer.grad_clip, "global gradient norm clip, 0 for none [1.0]", 0, 0,
         parse_optimizer_setting},
        {OPTION_SEED, "--seed", "N", &o->seed, "init, data order and sampling, 0 to 2^64-1 [1337]"},
        {OPTION_GROUP, "optimizer (settings not given: a resumed run's own, else the defaults of --arch or of the "
                       "preset nearest the architecture, the schedule's above too)"},
        {OPTION_CHOICE, "--optimizer", "adamw|muon", &o->optimizer.kind,
         "adamw: AdamW on every tensor; muon: Muon on the blocks' 2-D\nmatrices (momentum orthogonalised by "
         "Newton-Schulz), Adam on\nthe embeddings and vectors; reaches AdamW's loss in fewer steps\n[adamw; 2026 muon]",
         0, 0, NULL, &o->optimizer_given},
        {OPTION_CALL, "--lr", "X", &o->optimizer.lr,
         "peak learning rate (> 0): AdamW's, or Muon's for the matrices\n[adamw 3e-4 (modern and 2026 2e-3), muon 0.02]",
         0, 0, parse_optimizer_setting},
        {OPTION_CALL, "--weight-decay", "X", &o->optimizer.weight_decay,
         "decoupled weight decay of the 2-D weights, times each group's\nlr (below 1 with it) [adamw 0.1, muon 0 "
         "(2026 0.1)]", 0, 0, parse_optimizer_setting},
        {OPTION_CHOICE, "--weight-decay-schedule", "constant|linear", &o->schedule.decay_shape,
         "constant (the decay a step takes, lr * weight decay,\nfollows the lr), or linear down to 0 at the last step\n"
         "[constant]"},
        {OPTION_CALL, "--muon-momentum", "X", &o->optimizer.momentum,
         "muon: Nesterov momentum of the matrices, in [0, 1) [0.95]", 0, 0, parse_optimizer_setting},
        {OPTION_INT, "--momentum-warmup-steps", "N", &o->schedule.momentum_warmup_steps,
         "muon: the momentum rises linearly from --momentum-start to\n--muon-momentum over the first N steps [0; 2026 300]", 0,
         INT_MAX, NULL, &o->momentum_warmup_given},
        {OPTION_FLOAT, "--momentum-start", "X", &o->schedule.momentum_start, "[0.85]", 0, 0, NULL,
         &o->momentum_start_given},
        {OPTION_INT, "--momentum-cooldown-steps", "N", &o->schedule.momentum_cooldown_steps,
         "muon: then falls linearly to --momentum-end over the last N\nsteps [0]", 0, INT_MAX, NULL,
         &o->momentum_cooldown_given},
        {OPTION_FLOAT, "--momentum-end", "X", &o->schedule.momentum_end, "[0.85]", 0, 0, NULL, &o->momentum_end_given},
        {OPTION_CALL, "--embedding-lr", "X", &o->optimizer.embedding_lr,
         "muon: Adam's peak learning rate (> 0) for wte (the head when\ntied), wpe and the value embeddings (x0.5) "
         "[0.001; modern\nand 2026 0.05]", 0, 0,
         parse_optimizer_setting},
        {OPTION_CALL, "--head-lr", "X", &o->optimizer.head_lr, "muon: Adam's for an untied head [0.002]", 0, 0,
         parse_optimizer_setting},
        {OPTION_CALL, "--vector-lr", "X", &o->optimizer.vector_lr,
         "muon: Adam's for the vectors: norms' weights, biases, and\nthe 2026 recipe's scalars and gates [0.002]", 0, 0,
         parse_optimizer_setting},
        {OPTION_CALL, "--adam-beta1", "X", &o->optimizer.b1, "muon: Adam's betas for those, in [0, 1) [0.8]", 0, 0,
         parse_optimizer_setting},
        {OPTION_CALL, "--adam-beta2", "X", &o->optimizer.b2, "[0.95]", 0, 0, parse_optimizer_setting},
        {OPTION_CALL, "--embedding-beta1", "X", &o->optimizer.embedding_b1,
         "muon: Adam's betas for the embeddings alone (nanochat's 0.8,\n0.995) [--adam-beta1]", 0, 0,
         parse_optimizer_setting},
        {OPTION_CALL, "--embedding-beta2", "X", &o->optimizer.embedding_b2, "[--adam-beta2]", 0, 0,
         parse_optimizer_setting},
        {OPTION_CALL, "--head-beta1", "X", &o->optimizer.head_b1,
         "muon: Adam's betas for an untied head alone (nanochat's 0.8,\n0.96) [--adam-beta1]", 0, 0,
         parse_optimizer_setting},
        {OPTION_CALL, "--head-beta2", "X", &o->optimizer.head_b2, "[--adam-beta2]", 0, 0, parse_optimizer_setting},
        {OPTION_CHOICE, "--muon-qkv", "fused|split|head-pairs", &o->optimizer.muon_qkv,
         "muon: the attention's q, k, v weight as matrices, each\northogonalised on its own: fused, one (3C, C) a layer;\n"
         "split, q, k and v (C, C); head-pairs, each pair of heads\nof each (2HS, C), as modded-nanogpt [fused; 2026 "
         "head-pairs]"},
        {OPTION_CHOICE, "--muon-ns", "quintic|polar", &o->optimizer.muon_ns,
         "muon: the Newton-Schulz iterations' coefficients: the\nquintic's, or Polar Express's (one polynomial per\n"
         "iteration, as nanochat and modded-nanogpt) [quintic]"},
        {OPTION_FLAG, "--cautious-weight-decay", NULL, &o->optimizer.cautious_weight_decay,
         "muon: decay each matrix weight only where its update has its\nsign (nanochat's; Adam's groups decay as "
         "before)"},
        {OPTION_INT, "--normuon", "[0|1]", &o->optimizer.normuon,
         "muon: NorMuon: each orthogonalised update's rows (a wide\nmatrix's columns) evened out by a second moment "
         "of each;\n--normuon alone is 1 [0; 2026 1]", 0, 1, NULL, &o->normuon_given},
        {OPTION_CALL, "--normuon-beta2", "X", &o->optimizer.normuon_beta2, "its beta, in [0, 1) [0.95]", 0, 0,
         parse_normuon_beta2},
        {OPTION_GROUP, "evaluation and output"},
        {OPTION_INT, "--val-every", "N", &o->val_every, "validation loss every N steps, 0 for never [100]", 0, INT_MAX},
        {OPTION_INT, "--val-batches", "N", &o->val_batches, "batches per validation [20]", 1, INT_MAX},
        {OPTION_INT, "--sample-every", "N", &o->sample_every, "print a sample every N steps, 0 for never [0]", 0,
         INT_MAX},
        {OPTION_INT, "--sample-tokens", "N", &o->sample_tokens, "tokens per sample [128]", 1, INT_MAX},
        OPTION_TEMPERATURE(o->temperature),
        OPTION_TOP_K(o->top_k),
        {OPTION_INT, "--checkpoint-every", "N", &o->checkpoint_every,
         "checkpoint every N steps (and always at the end) [0: end only]", 0, INT_MAX},
        {OPTION_PATH, "--out-dir", "DIR", &o->out_dir,
         "where checkpoints go, made if missing; none without it (--resume: DIR)"},
        {OPTION_PATH, "--log", "FILE", &o->log_path, "a CSV line per step (its folder made if missing)"},
        {OPTION_GROUP, "attention, memory and speed"},
        {OPTION_CHOICE, "--attention", "flash|naive", &mo->attention.kind, "[flash]"},
        {OPTION_FLAG, "--deterministic", NULL, &mo->attention.deterministic,
         "the flash backward with the same bits every run (naive always is)"},
        {OPTION_CALL, "--recompute", "LIST", &mo->recompute,
         "recompute in the backward instead of keeping per layer:\ngelu, layernorm, both (gelu,layernorm) or none [none]",
         0, 0, parse_recompute},
        {OPTION_INT, "--classifier-chunk", "N", &mo->classifier_rows,
         "rows of logits per classifier chunk, 0 for as many as\nfit in 1 GiB [0]", 0, 2147483647},
        {OPTION_CALL, "--fp8", "LIST", &mo->fp8,
         "the matmuls whose forward runs in FP8 (E4M3, per-tensor\n"
         "scales; compute capability 8.9 or later): mlp (both\n"
         "projections), head (the logits', wte's when tied), both\n(mlp,head) or none [none]",
         0, 0, parse_fp8, &o->fp8_given},
        {OPTION_CHOICE, "--fp8-scaling", "current|delayed", &mo->fp8_scaling,
         "their inputs' and gradients' scales: current, from the\n"
         "tensor itself (a pass more), or delayed, from the largest\n"
         "of its last 16 amaxes (kept in the checkpoint; one rank)\n[current]",
         0, 0, NULL, &o->fp8_scaling_given},
        {OPTION_CHOICE, "--fp8-grad", "e5m2|bf16", &mo->fp8_grad_bf16,
"their gradients' two matmuls: the output's gradient in\nE5M2, or both products in bf16 [e5m2]", 0, 0, NULL,
         &o->fp8_grad_given},
        {OPTION_CALL, "--peak-tflops", "X", &o->peak_tflops,
         "the GPU's dense bf16 peak for MFU [from the device name]; also\nthe FLOP rate of --profile's floors [790, an "
         "H200's measured]", 0, 0, parse_peak},
        {OPTION_INT, "--profile", "[N]", &o->profile_step,
         "after step N, a table of where its time went: each layer kind\nforward and backward (the model's own: norms, "
         "qk-norm + rotary,\nthe MLP's activation), and the update (AdamW, or Muon and Adam),\nagainst its floor [N: "
         "the run's second step, past the warm-up]", 1, 2147483647, NULL, &o->profile},
        {OPTION_GROUP, "several GPUs (one process each; torchrun, srun and mpirun start them too)"},
        {OPTION_INT, "--gpus", "N", &o->gpus, "start N ranks on this node's GPUs [1]", 1, 1 << 16, NULL, NULL,
         o->gpus_args},
        {OPTION_INT, "--zero", "N", &o->zero_stage,
         "1: shard the fp32 master weights and optimizer state over the\nranks (ZeRO-1; under muon by whole matrices, each "
         "rank\northogonalising its share); 0: every rank keeps them whole [0]",
         0, 1},
        {OPTION_INT, "--context-parallel", "N", &o->context_parallel,
         "N ranks share each sequence (-T a multiple of 2N), attention\nas a ring; with one process the N ranks run on "
         "its GPU [1]", 1, 1 << 16},
    };
    char usage[256 + PARAM_TABLE_TEXT];
    int head = snprintf(usage, sizeof(usage), "usage: train_gpt [options]\nTrains a GPT (GPT-2's architecture, the modern "
                        "one or the 2026 recipe's) on token\nshards, on one GPU or several.\n\n");
    param_table_describe(usage + head, sizeof(usage) - head);
    const CommandLine line = {"train_gpt", usage, 26, NULL, options, sizeof(options) / sizeof(options[0])};
    int first = options_parse(&line, argc, argv);
    if (first < argc) die("unexpected argument '%s' (train_gpt --help lists the options)", argv[first]);
    if (o->resume_dir && o->init_from) die("--resume and --init-from exclude each other");
    if (o->init_given && o->init_from)
        die("--init draws the initial model, which --init-from reads from its checkpoint: it has no effect");
    if (o->normuon_given && o->optimizer.normuon < 0) o->optimizer.normuon = 1;   // --normuon without a value
    if (o->window && o->window_pattern_given) die("--window and --window-pattern exclude each other");
    if (o->align_documents && !o->tokenizer)
        die("--align-documents: a row starts at <|endoftext|>, whose id comes from --tokenizer: give it");
    if (o->save_init && (o->resume_dir || o->init_from))
        die("--save-init writes the model drawn from --seed, not one of --resume or --init-from");
    if (o->context_parallel > 1) {
        if (o->T % (2 * o->context_parallel) != 0)
            die("-T %d: --context-parallel %d cuts each sequence into %d equal chunks, so -T must be a multiple of %d",
                o->T, o->context_parallel, 2 * o->context_parallel, 2 * o->context_parallel);
        if (o->model_options.attention.kind != ATTENTION_FLASH)
            die("--context-parallel runs the flash attention as a ring");
        if (o->sample_every > 0) die("--sample-every: sampling does not run with --context-parallel");
    }
}
