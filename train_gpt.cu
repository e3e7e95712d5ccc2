// train_gpt.cu: the training program: the command line, the set-up of a run (model shape, data,
// model, resume), and the loop: one step, validation, the report line, samples, checkpoints.
// The model is the library in gpt/ (gpt/gpt.h); this file only decides when each part runs.
// Everything that needs no GPU is checked before the GPU is touched, so a command line can be
// checked anywhere.
// Data parallel: one process per GPU, started by torchrun, srun or mpirun (distributed/launcher.h)
// or by --gpus N here; each rank reads its own part of every epoch, the model library averages
// the gradients (gpt/gpt.h). Rank 0 alone prints, samples and writes files.
// Context parallel (--context-parallel N): each group of N consecutive ranks shares every
// sequence, rank r of a group holding its zigzag chunks r and 2N-1-r; attention is the ring of
// attention/ring.h, its moves by the group's transport (distributed/ring_transport.h). With one
// process the N ranks of the group run on its GPU (simulated: the same code but for the ring's
// moves, copies in memory, for testing).
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "common/atomic_file.h"
#include "common/bytes.h"
#include "common/clock.h"
#include "common/cuda_check.h"
#include "common/error.h"
#include "common/options.h"
#include "common/output_path.h"
#include "common/parse.h"
#include "common/rng.h"
#include "data/dataloader.h"
#include "distributed/launcher.h"
#include "distributed/nccl_comm.h"
#include "distributed/ranks.h"
#include "gpt/checkpoint.h"
#include "gpt/generation.h"
#include "gpt/gpt.h"
#include "gpt/inference.h"
#include "gpt/mfu.h"
#include "gpt/profile.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint_folder.h"
#include "train/state.h"

// ----------------------------------------------------------------------------------------------
// Options

typedef struct {
    const char* model;           // preset name
    int context;                 // maxT
    int model_given, context_given;   // set on the command line (they must match a checkpoint)
    int arch;                    // architecture preset (gpt/config.h's architecture_presets)
    int arch_given;
    Architecture components;     // the architecture's fields given on their own (components_given,
    int components_given[ARCHITECTURE_SLOTS];    // in Architecture's slot order)
    int document_mask;           // --document-mask: each row sees its own document alone
    int window;                  // --window W, or 0
    Architecture window_pattern; // --window-pattern's windows (window_count 0: not given)
    const char* init_from;       // model checkpoint, or NULL
    const char* save_init;       // where to write the initial model and stop, or NULL
    const char* resume_dir;      // or NULL
    const char* train_data;      // shard glob
    const char* val_data;        // shard glob, "" for none, NULL: beside the train shards
    const char* tokenizer;       // or NULL
    int B, T;
    long long total_batch;       // tokens per step; 0: B * T
    int steps;                   // 0: one epoch
    StepSchedule schedule;       // the rates of each step (gpt/schedule.h)
    OptimizerConfig optimizer;   // --optimizer and its settings: NAN until given, then the
                                 // run's defaults fill in the rest (resolve_optimizer)
    int optimizer_given;         // --optimizer given (a resumed run's own otherwise)
    int val_every, val_batches;
    int sample_every, sample_tokens, top_k;
    float temperature;
    int checkpoint_every;
    const char* out_dir;         // or NULL: no checkpoints
    uint64_t seed;
    ModelOptions model_options;  // attention, recomputation, classifier chunks
    const char* log_path;        // CSV, or NULL
    float peak_tflops;           // 0: from the device name
    int gpus;                    // > 0: start this many ranks on this node (--gpus)
    unsigned char* gpus_args;    // per element of argv: 1 where --gpus or its value stands, or NULL
    int zero_stage;              // 1: shard the optimizer state over the ranks
    int context_parallel;        // ranks that share each sequence [1]
    int profile;                 // print the step profile (--profile)
    int profile_step;            // of this step; 0: the run's second
} TrainOptions;

static void parse_recompute(const char* name, const char* value, void* flags) {
    if ((*(int*)flags = recompute_flags(value)) < 0)
        die("%s '%s': expected none or a comma-separated list of gelu and layernorm", name, value);
}

// --window-pattern: a comma-separated list of windows, each a number of keys or "full" (no
// bound), into the pattern fields of an Architecture.
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
    if (!bounded) die("%s '%s': every window is full, which is no window (leave the option out)", name, value);
    a->window_count = count;
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

// A setting of the optimizer, within its bounds (gpt/optimizer.h's optimizer_settings, which
// bound the training state's too).
static void parse_optimizer_setting(const char* name, const char* value, void* setting) {
    float v = parse_float(name, value);
    char err[ERR_LEN];
    if (optimizer_setting_refused(optimizer_setting(name), v, err, sizeof(err))) die("%s", err);
    *(float*)setting = v;
}

static void parse_peak(const char* name, const char* value, void* peak) {
    *(float*)peak = parse_float(name, value);
    if (*(float*)peak <= 0.0f) die("%s %s: a peak must be positive", name, value);
}

static void parse_args(int argc, char** argv, TrainOptions* o) {
    *o = (TrainOptions){.model = "d12", .context = 1024, .arch = 0, .components = ARCHITECTURE_GPT2,
                        .train_data = "datasets/tinyshakespeare/train_*.bin", .B = 4,
                        .T = 1024,
                        .optimizer = {.kind = OPTIMIZER_ADAMW, .lr = NAN, .momentum = NAN, .embedding_lr = NAN,
                                      .head_lr = NAN, .vector_lr = NAN, .b1 = NAN, .b2 = NAN, .weight_decay = NAN,
                                      .grad_clip = NAN},
                        .val_every = 100, .val_batches = 20, .sample_tokens = 128, .temperature = 1.0f, .seed = 1337,
                        .model_options = {.attention = {.kind = ATTENTION_FLASH}}, .context_parallel = 1};
    if (!(o->gpus_args = (unsigned char*)calloc((size_t)argc, 1))) die("out of host memory");
    ModelOptions* mo = &o->model_options;
    Architecture* a = &o->components;
    int* given = o->components_given;
    const Option options[] = {
        {OPTION_GROUP, "model"},
        {OPTION_TEXT, "--model", "NAME", &o->model, "d2, d6, d12 (124M), d24 (350M), d36 (774M), d48 (1.5B) [d12]", 0, 0,
         NULL, &o->model_given},
        {OPTION_INT, "--context", "N", &o->context, "context length of the model [1024]", 1, INT_MAX, NULL,
         &o->context_given},
        {OPTION_TEXT, "--init-from", "FILE", &o->init_from,
         "start from a model checkpoint (version 3 or 5: GPT-2, fp32 or\nbf16; 6 or 7: another architecture)"},
        {OPTION_TEXT, "--save-init", "FILE", &o->save_init,
         "write the initial model (drawn from --seed) to FILE, an fp32\ncheckpoint, and stop before the GPU"},
        {OPTION_TEXT, "--resume", "DIR", &o->resume_dir, "continue the run whose checkpoints are in DIR, exactly"},
        {OPTION_GROUP, "architecture (--arch, then each component on its own; a checkpoint's must match)"},
        {OPTION_CHOICE, "--arch", "gpt2|modern", &o->arch,
         "gpt2: GPT-2 of 2019 (llm.c and Hugging Face compatible);\nmodern: --rotary 1, --norm rms, --qk-norm 1, --mlp relu2, --bias 0,\n--head untied, --zero-init 1, --softcap 30, and its own\ndefaults: adamw --lr 2e-3, muon --embedding-lr 0.05 (without\n--arch: the defaults of the preset nearest the architecture)\n[gpt2; with --resume or --init-from: the checkpoint's]",
         0, 0, NULL, &o->arch_given},
        {OPTION_INT, "--rotary", "0|1", &a->rotary, "rotary position embeddings on q and k, no learned ones", 0, 1,
         NULL, &given[0]},
        {OPTION_CALL, "--rotary-base", "X", &a->rotary_base, "with --rotary 1: its frequencies base^(-2i/HS), base > 1\n[10000]",
         0, 0, parse_rotary_base, &given[1]},
        {OPTION_CHOICE, "--norm", "layer|rms", &a->rms_norm, "LayerNorm or RMSNorm (without weights)", 0, 0, NULL,
         &given[2]},
        {OPTION_INT, "--qk-norm", "0|1", &a->qk_norm, "RMSNorm of each head's queries and keys", 0, 1, NULL,
         &given[3]},
        {OPTION_CHOICE, "--mlp", "gelu|relu2", &a->relu2, "the MLP's activation: GELU (tanh form) or ReLU^2", 0, 0,
         NULL, &given[4]},
        {OPTION_INT, "--bias", "0|1", &a->bias, "biases in the linear layers", 0, 1, NULL, &given[5]},
        {OPTION_CHOICE, "--head", "tied|untied", &a->untied_head, "the output head: wte, or one of its own", 0, 0,
         NULL, &given[6]},
        {OPTION_INT, "--zero-init", "0|1", &a->zero_init, "the output projections and head start at zero", 0, 1,
         NULL, &given[7]},
        {OPTION_CALL, "--softcap", "X", &a->softcap, "logits z -> X tanh(z / X), X >= 1; 0 for none", 0, 0,
         parse_softcap, &given[8]},
        {OPTION_FLAG, "--document-mask", NULL, &o->document_mask,
         "attention sees the row's own document alone (documents\nstart at <|endoftext|>, whose id --tokenizer "
         "gives)"},
        {OPTION_INT, "--window", "W", &o->window,
         "a sliding window: attention sees the last W keys at most\n(the row's own included), in every layer; W below the context", 1,
         INT_MAX},
        {OPTION_CALL, "--window-pattern", "LIST", &o->window_pattern,
         "a window per layer: comma-separated windows, each a number\nof keys or full (no bound), layer l taking "
         "item l mod\ntheir count (one per layer at most); e.g. full,1024: long\nand short layers alternating",
         0, 0, parse_window_pattern},
        {OPTION_GROUP, "data"},
        {OPTION_TEXT, "--train-data", "GLOB", &o->train_data, "training shards [datasets/tinyshakespeare/train_*.bin]"},
        {OPTION_TEXT, "--val-data", "GLOB", &o->val_data,
         "validation shards, \"\" for none [the train glob with val_ for train_,\nwhen such shards exist]"},
        {OPTION_TEXT, "--tokenizer", "FILE", &o->tokenizer,
         "tokenizer: sets the vocabulary and decodes samples\n(without it the vocabulary comes from the shards' header)"},
        {OPTION_GROUP, "batch and schedule"},
        {OPTION_INT, "-B, --batch-size", "N", &o->B, "sequences per micro-step [4]", 1, INT_MAX},
        {OPTION_INT, "-T, --seq-len", "N", &o->T, "tokens per sequence [1024]", 1, INT_MAX},
        {OPTION_INT64, "--total-batch-size", "N", &o->total_batch, "tokens per optimizer step, a multiple of B*T [B*T]"},
        {OPTION_INT, "--steps", "N", &o->steps, "optimizer steps [one epoch]", 0, INT_MAX},
        {OPTION_INT, "--warmup-steps", "N", &o->schedule.warmup_steps, "linear warmup of every learning rate [0]", 0,
         INT_MAX},
        {OPTION_FLOAT, "--min-lr-frac", "X", &o->schedule.min_lr_frac, "the cosine ends at X * each peak [0]", 0, 1},
        {OPTION_CALL, "--grad-clip", "X", &o->optimizer.grad_clip, "global gradient norm clip, 0 for none [1.0]", 0, 0,
         parse_optimizer_setting},
        {OPTION_SEED, "--seed", "N", &o->seed, "init, data order and sampling, 0 to 2^64-1 [1337]"},
        {OPTION_GROUP, "optimizer (settings not given: a resumed run's own, else the defaults of --arch or of the "
                       "preset nearest the architecture)"},
        {OPTION_CHOICE, "--optimizer", "adamw|muon", &o->optimizer.kind,
         "adamw: AdamW on every tensor; muon: Muon on the blocks' 2-D\nmatrices (momentum orthogonalised by "
         "Newton-Schulz), Adam on\nthe embeddings and vectors; reaches AdamW's loss in fewer steps\n[adamw]",
         0, 0, NULL, &o->optimizer_given},
        {OPTION_CALL, "--lr", "X", &o->optimizer.lr,
         "peak learning rate (> 0): AdamW's, or Muon's for the matrices\n[adamw 3e-4 (modern 2e-3), muon 0.02]", 0, 0,
         parse_optimizer_setting},
        {OPTION_CALL, "--weight-decay", "X", &o->optimizer.weight_decay,
         "decoupled weight decay of the 2-D weights, times each group's\nlr (below 1 with it) [adamw 0.1, muon 0]", 0, 0,
         parse_optimizer_setting},
        {OPTION_CALL, "--muon-momentum", "X", &o->optimizer.momentum,
         "muon: Nesterov momentum of the matrices, in [0, 1) [0.95]", 0, 0, parse_optimizer_setting},
        {OPTION_CALL, "--embedding-lr", "X", &o->optimizer.embedding_lr,
         "muon: Adam's peak learning rate (> 0) for wte (the head when\ntied) and wpe [0.001; modern 0.05]", 0, 0,
         parse_optimizer_setting},
        {OPTION_CALL, "--head-lr", "X", &o->optimizer.head_lr, "muon: Adam's for an untied head [0.002]", 0, 0,
         parse_optimizer_setting},
        {OPTION_CALL, "--vector-lr", "X", &o->optimizer.vector_lr,
         "muon: Adam's for the layernorms and biases [0.002]", 0, 0, parse_optimizer_setting},
        {OPTION_CALL, "--adam-beta1", "X", &o->optimizer.b1, "muon: Adam's betas for those, in [0, 1) [0.8]", 0, 0,
         parse_optimizer_setting},
        {OPTION_CALL, "--adam-beta2", "X", &o->optimizer.b2, "[0.95]", 0, 0, parse_optimizer_setting},
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
        {OPTION_TEXT, "--out-dir", "DIR", &o->out_dir,
         "where checkpoints go, made if missing; none without it (--resume: DIR)"},
        {OPTION_TEXT, "--log", "FILE", &o->log_path, "a CSV line per step (its folder made if missing)"},
        {OPTION_GROUP, "attention, memory and speed"},
        {OPTION_CHOICE, "--attention", "flash|naive", &mo->attention.kind, "[flash]"},
        {OPTION_FLAG, "--deterministic", NULL, &mo->attention.deterministic,
         "the flash backward with the same bits every run (naive always is)"},
        {OPTION_CALL, "--recompute", "LIST", &mo->recompute,
         "recompute in the backward instead of keeping per layer:\ngelu, layernorm, both (gelu,layernorm) or none [none]",
         0, 0, parse_recompute},
        {OPTION_INT, "--classifier-chunk", "N", &mo->classifier_rows,
         "rows of logits per classifier chunk, 0 for as many as\nfit in 1 GiB [0]", 0, 2147483647},
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
    int head = snprintf(usage, sizeof(usage), "usage: train_gpt [options]\nTrains a GPT (GPT-2's architecture or the "
                        "modern one) on token shards, on one GPU\nor several.\n\n");
    param_table_describe(usage + head, sizeof(usage) - head);
    const CommandLine line = {"train_gpt", usage, 26, NULL, options, sizeof(options) / sizeof(options[0])};
    int first = options_parse(&line, argc, argv);
    if (first < argc) die("unexpected argument '%s' (train_gpt --help lists the options)", argv[first]);
    if (o->resume_dir && o->init_from) die("--resume and --init-from exclude each other");
    if (o->window && o->window_pattern.window_count) die("--window and --window-pattern exclude each other");
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

// ----------------------------------------------------------------------------------------------
// Set-up: everything a run holds

typedef struct {
    TrainOptions o;              // as resolved: steps, total batch, val data, out dir filled in
    Ranks ranks;                 // this process among the ranks, its context-parallel group
    AttentionRing ring;          // the group's ring attention, moving its buffers by ranks.ring
    DataParallel dp;             // comm NULL without a launcher
    int rows, cols;              // the model's batch: rows of local sequences of cols tokens
    int* full_tokens;            // (B, T) a batch as the loader gives it, when the model's
    int* full_targets;           // rows are zigzag chunks of it (context parallel); else NULL
    GPTConfig config;
    int grad_accum;              // micro-steps per step (per rank)
    Tokenizer* tok;              // or NULL
    DataLoader* train;
    DataLoader* val;             // or NULL
    int resuming;
    TrainingState resume;        // the interrupted run, when resuming
    char resume_model[4096], resume_state[4096];
    char optimizer_defaults[4200];   // where the settings not given came from (resolve_optimizer)
    float* checkpoint_values;    // the parameters of --init-from or the interrupted run, read
                                 // and checked on the host before the GPU; NULL: random init
    MemorySizes sizes;
    GPT model;
    Rng sample_rng;              // a seed per sample
    InferenceModel sampler;      // rank 0 with --sample-every: the model samples are drawn on
    int sampling;
    int start_step;              // steps already done
    FILE* log;                   // or NULL
    double flops_per_token;
    float peak_tflops;           // 0: unknown
    int profile_step;            // the step --profile times; 0: none
    Profile profile;
} Run;

// The architecture: a checkpoint's (from_file), or --arch's preset; each component given on its
// own replaces its field, the key windows (--document-mask, --window, --window-pattern) theirs,
// and with a checkpoint the result must be the checkpoint's. A value without effect is refused
// (gpt/config.h's architecture_invalid says why).
static void resolve_architecture(Run* r, int from_file) {
    TrainOptions* o = &r->o;
    Architecture* arch = &r->config.arch;
    const Architecture file = *arch;
    if (!from_file || o->arch_given) *arch = architecture_presets[o->arch].arch;
    int32_t slots[ARCHITECTURE_SLOTS], given[ARCHITECTURE_SLOTS];
    memcpy(slots, arch, sizeof(slots));
    memcpy(given, &o->components, sizeof(given));
    for (int i = 0; i < ARCHITECTURE_SLOTS; i++)
        if (o->components_given[i]) slots[i] = given[i];
    memcpy(arch, slots, sizeof(slots));
    // The key windows: the documents take the tokenizer's <|endoftext|>, which the shards start
    // each document with (prepare_data).
    if (o->document_mask) {
        if (!r->tok) die("--document-mask: a document starts at <|endoftext|>, whose id comes from --tokenizer: give it");
        arch->documents = 1;
        arch->document_token = tokenizer_eot(r->tok);
    }
    if (o->window || o->window_pattern.window_count) {
        arch->window_count = o->window ? 1 : o->window_pattern.window_count;
        memcpy(arch->windows, o->window_pattern.windows, sizeof(arch->windows));
        if (o->window) arch->windows[0] = o->window;
    }
    char asked[ARCHITECTURE_TEXT], have[ARCHITECTURE_TEXT];
    architecture_describe(arch, asked, sizeof(asked));
    if (from_file && !architecture_equal(arch, &file)) {
        architecture_describe(&file, have, sizeof(have));
        die("the architecture asked for (%s) is not that of %s (%s)", asked, o->resume_dir ? o->resume_dir : o->init_from,
            have);
    }
    const char* why = architecture_invalid(arch);
    if (!why) why = block_unsupported(arch, r->config.C / r->config.NH);
    if (why) die("the architecture (%s): %s", asked, why);
    if ((why = gpt_config_invalid(&r->config))) {   // the key windows against the context and layers
        char model[ARCHITECTURE_TEXT + 128];
        gpt_config_describe(&r->config, model, sizeof(model));
        die("the model (%s): %s", model, why);
    }
    char err[ERR_LEN];
    if (r->tok && architecture_document_token_differs(arch, tokenizer_eot(r->tok),
                                                      o->resume_dir ? o->resume_dir : o->init_from, err, sizeof(err)))
        die("--tokenizer %s: %s", o->tokenizer, err);
}

// The optimizer: --optimizer, a resumed run's own when not given, and each setting given or its
// default: a resumed run's own (its training state records every setting it ran with), else the
// defaults of the preset the run is trained as (gpt/optimizer.h's preset_optimizer_defaults:
// --arch's, or the preset nearest the architecture). Muon's own settings are refused under
// AdamW, whose betas are fixed, and --head-lr with a tied head; the whole is bounded by
// gpt/optimizer.h's optimizer_invalid.
static void resolve_optimizer(Run* r) {
    TrainOptions* o = &r->o;
    OptimizerConfig* opt = &o->optimizer;
    const Architecture* arch = &r->config.arch;
    if (r->resuming && !o->optimizer_given) opt->kind = (OptimizerKind)r->resume.optimizer;
    const ArchitecturePreset* preset = o->arch_given ? &architecture_presets[o->arch] : architecture_nearest_preset(arch);
    OptimizerConfig defaults = preset_optimizer_defaults(opt->kind, preset);
    if (r->resuming && (int)opt->kind == r->resume.optimizer) {
        // The state records an untied head's rate alone (and the files of earlier versions not
        // even that): a rate it has no record of takes the preset's.
        OptimizerConfig run = training_state_optimizer(&r->resume);
        if (run.head_lr == 0.0f) run.head_lr = defaults.head_lr;
        defaults = run;
        snprintf(r->optimizer_defaults, sizeof(r->optimizer_defaults), "the run's own (%s)", r->resume_state);
    } else {
        snprintf(r->optimizer_defaults, sizeof(r->optimizer_defaults), "%s's defaults (%s%s)", preset->name,
                 o->arch_given ? "--arch " : "the preset nearest the architecture", o->arch_given ? preset->name : "");
    }
    for (int i = 0; i < NUM_OPTIMIZER_SETTINGS; i++) {
        const OptimizerSetting* s = &optimizer_settings[i];
        float* value = (float*)((char*)opt + s->offset);
        if (isnan(*value)) *value = optimizer_setting_value(&defaults, s);
        else if (s->use != SETTING_EVERY_RUN && opt->kind != OPTIMIZER_MUON)
            die("%s is a setting of --optimizer muon", s->flag);
        else if (s->use == SETTING_MUON_UNTIED_HEAD && !arch->untied_head)
            die("%s: the model's head is wte (--head tied), at --embedding-lr", s->flag);
    }
    opt->eps = defaults.eps;
    char err[ERR_LEN];
    if (optimizer_invalid(opt, arch->untied_head, err, sizeof(err)) != 0) die("%s", err);
}

// The model shape: the interrupted run's, a checkpoint's, or a preset's; the vocabulary from the
// tokenizer or the shards when no file states it; the architecture (resolve_architecture).
// Headers only: the values are read later.
static void resolve_model_shape(Run* r) {
    TrainOptions* o = &r->o;
    GPTConfig* config = &r->config;
    char err[ERR_LEN];
    memset(config, 0, sizeof(*config));
    if (o->resume_dir) {
        if (find_resume_checkpoint(o->resume_dir, r->resume_model, r->resume_state, sizeof(r->resume_model),
                                   &r->resume, err) != 0)
            die("--resume %s", err);
        r->resuming = 1;
        *config = r->resume.config;
        if (!o->out_dir) o->out_dir = o->resume_dir;
    } else if (o->init_from && read_model_shape(o->init_from, config, err) != 0) {
        die("--init-from: %s", err);
    }
    const ModelPreset* preset = find_model_preset(o->model);
    if (!preset) die("--model %s: unknown (d2, d6, d12, d24, d36, d48)", o->model);
    if (config->L) {
        const char* source = o->resume_dir ? o->resume_dir : o->init_from;
        if (o->model_given && (preset->L != config->L || preset->C != config->C || preset->NH != config->NH))
            die("--model %s (L %d C %d NH %d) does not match %s (L %d C %d NH %d)", o->model, preset->L,
                preset->C, preset->NH, source, config->L, config->C, config->NH);
        if (o->context_given && o->context != config->maxT)
            die("--context %d does not match %s (context %d)", o->context, source, config->maxT);
    } else {
        config->L = preset->L;
        config->C = preset->C;
        config->NH = preset->NH;
        config->maxT = o->context;
    }
    if (o->tokenizer) {
        r->tok = tokenizer_load(o->tokenizer, err);
        if (!r->tok) die("%s", err);
    }
    if (!config->V) {
        config->V = r->tok ? tokenizer_vocab_size(r->tok) : dataloader_vocab_size(o->train_data, err);
        if (config->V < 0) die("--train-data: %s", err);
        if (!config->V) die("%s: the shards do not state their vocabulary; give --tokenizer", o->train_data);
        config->Vp = padded_vocab(config->V);
    }
    if (r->tok && tokenizer_vocab_size(r->tok) != config->V)
        die("--tokenizer %s has %d tokens, the model %d", o->tokenizer, tokenizer_vocab_size(r->tok), config->V);
    const char* why = gpt_config_invalid(config);
    if (why) {
        char shape[ARCHITECTURE_TEXT + 128];
        gpt_config_describe(config, shape, sizeof(shape));
        die("the model (%s) cannot be built: %s", shape, why);
    }
    resolve_architecture(r, o->resume_dir || o->init_from);
}

// The batch: B * T tokens per micro-step, grad_accum micro-steps per step.
static void resolve_batch(Run* r) {
    TrainOptions* o = &r->o;
    if (o->T > r->config.maxT) die("-T %d is longer than the model's context %d (--context)", o->T, r->config.maxT);
    if ((long long)o->B * o->T > INT_MAX) die("-B %d -T %d: B * T must stay below 2^31 tokens", o->B, o->T);
    // One micro-step of every context-parallel group.
    long long tokens_per_micro = (long long)o->B * o->T * r->ranks.data_ranks;
    if (o->total_batch == 0) o->total_batch = tokens_per_micro;
    if (o->total_batch < 0 || o->total_batch % tokens_per_micro != 0)
        die("--total-batch-size %lld is not a positive multiple of B * T * data-parallel ranks = %d * %d * %d",
            o->total_batch, o->B, o->T, r->ranks.data_ranks);
    if (o->total_batch / tokens_per_micro > INT_MAX) die("--total-batch-size %lld: too many micro-steps", o->total_batch);
    r->grad_accum = (int)(o->total_batch / tokens_per_micro);
    const ModelOptions* mo = &o->model_options;
    if ((mo->recompute & RECOMPUTE_GELU) && r->config.arch.relu2)
        die("--recompute gelu: the relu2 MLP keeps relu(h)^2 alone (its backward takes relu(h) = sqrt), no GELU");
    const char* why = model_attention_unsupported(&r->config, mo, r->rows, r->cols);
    if (why) die("--attention %s: %s", attention_kind_name(mo->attention.kind), why);
    if (r->tok && o->sample_every > 0) {
        if (o->T < 2) die("--sample-every: -T %d leaves no room for a sample", o->T);
        if ((why = sampler_unsupported(&r->config, o->T, o->sample_tokens)))
            die("--sample-every: samples are drawn with flash attention: %s", why);
    }
    r->dp = (DataParallel){.comm = NULL, .rank = r->ranks.launch.rank, .world_size = r->ranks.launch.world_size,
                           .zero_stage = o->zero_stage};
    r->sizes = gpt_memory_sizes(&r->config, r->rows, r->cols, mo, &r->dp, &o->optimizer);
}

// The val loader, when there is validation: --val-data, or by default the val shards beside
// the train shards (dataloader_val_pattern) when there are any. Says which shards it reads, or
// plainly that validation is off and why.
static void open_val_data(Run* r) {
    TrainOptions* o = &r->o;
    char err[ERR_LEN], off[ERR_LEN + 4096] = "", shards[2 * 4096 + 64];
    static char val_glob[4096];
    if (o->val_every == 0) snprintf(off, sizeof(off), "--val-every 0");
    else if (o->val_data && !*o->val_data) snprintf(off, sizeof(off), "--val-data ''");
    else if (!o->val_data) {
        glob_t matches = {};
        if (dataloader_val_pattern(o->train_data, val_glob, sizeof(val_glob), err) != 0)
            snprintf(off, sizeof(off), "%s; give --val-data", err);
        else if (glob(val_glob, 0, NULL, &matches) != 0) snprintf(off, sizeof(off), "no file matches %s", val_glob);
        else o->val_data = val_glob;
        globfree(&matches);
    }
    if (*off) {
        printf("val data: none (%s), so validation is off\n", off);
        return;
    }
    // Every rank validates on the same first val_batches batches of the val shards (the ring
    // needs its whole group), and the losses are averaged.
    r->val = dataloader_open(o->val_data, o->B, o->T, 0, 1, 0, o->seed, r->config.V, err);
    if (!r->val) die("--val-data: %s", err);
    if (dataloader_check_fingerprint(r->val, dataloader_fingerprint(r->train), err) != 0)
        die("--val-data and --train-data: %s", err);
    if (o->val_batches > dataloader_batches_per_epoch(r->val)) o->val_batches = (int)dataloader_batches_per_epoch(r->val);
    dataloader_describe(r->val, shards, sizeof(shards));
    printf("val data: %s: %s, %d batches every %d steps\n", o->val_data, shards, o->val_batches, o->val_every);
}

// The train loader and the val loader (open_val_data), and the steps: one epoch by default.
static void open_data(Run* r) {
    TrainOptions* o = &r->o;
    char err[ERR_LEN], shards[2 * 4096 + 64];
    r->train = dataloader_open(o->train_data, o->B, o->T, r->ranks.data_rank, r->ranks.data_ranks, 1, o->seed, r->config.V, err);
    if (!r->train) die("--train-data: %s", err);
    if (r->tok && dataloader_check_fingerprint(r->train, tokenizer_fingerprint(r->tok), err) != 0)
        die("--train-data and --tokenizer %s: %s", o->tokenizer, err);
    dataloader_describe(r->train, shards, sizeof(shards));
    printf("train data: %s: %s, %lld batches per epoch\n", o->train_data, shards,
           (long long)dataloader_batches_per_epoch(r->train));
    open_val_data(r);
    if (o->steps <= 0) o->steps = (int)(dataloader_batches_per_epoch(r->train) / r->grad_accum);
    if (o->steps <= 0) die("--train-data %s: less than one step of data", o->train_data);
}

// The run as its training state file says it after step: its settings, and where it stands.
static TrainingState training_state(const Run* r, int step) {
    const TrainOptions* o = &r->o;
    const ModelOptions* mo = &o->model_options;
    TrainingState s = {.step = step, .world_size = r->ranks.data_ranks, .config = r->config, .B = o->B, .T = o->T,
                       .grad_accum = r->grad_accum, .warmup_steps = o->schedule.warmup_steps, .steps = o->steps,
                       .min_lr_frac = o->schedule.min_lr_frac, .seed = o->seed,
                       .train_loader = dataloader_state(r->train), .sample_rng = r->sample_rng.state,
                       .adam_t = r->model.adam_t, .attention = (int)mo->attention.kind,
                       .deterministic = mo->attention.deterministic, .recompute = mo->recompute,
                       .classifier_rows = r->sizes.logits_rows};
    training_state_set_optimizer(&s, &o->optimizer);
    return s;
}

// Prints what the run is: device, model, batch, attention, memory, MFU basis (the data and the
// optimizer were said before the GPU was taken).
static void print_run(const Run* r, const char* device_name) {
    const TrainOptions* o = &r->o;
    const GPTConfig* c = &r->config;
    const ModelOptions* mo = &o->model_options;
    const MemorySizes* m = &r->model.sizes;
    char recompute[64];
    recompute_name(mo->recompute, recompute, sizeof(recompute));
    printf("device: %s\n", device_name);
    char arch[ARCHITECTURE_TEXT];
    architecture_describe(&c->arch, arch, sizeof(arch));
    printf("model: L %d, C %d, NH %d, HS %d, vocab %d (padded %d), context %d, %zu parameters; architecture %s\n",
           c->L, c->C, c->NH, c->C / c->NH, c->V, c->Vp, c->maxT, r->model.num_params, arch);
    printf("batch: B %d x T %d x %d micro-steps x %d data-parallel rank%s = %lld tokens per step, %d steps "
           "(from step %d)\n", o->B, o->T, r->grad_accum, r->ranks.data_ranks, r->ranks.data_ranks > 1 ? "s" : "", o->total_batch,
           o->steps, r->start_step + 1);
    if (o->context_parallel > 1)
        printf("context parallel: %d ranks share each sequence (%s), each %d tokens of it in two chunks of %d\n",
               o->context_parallel, r->ranks.ring.comm ? "an NCCL ring" : "simulated on this GPU", r->cols, r->cols / 2);
    if (r->dp.comm) {
        const ZeroShard* z = &r->model.shard;
        printf("ranks: %d (%s), each with the whole model, its gradients averaged by NCCL; ", r->ranks.launch.world_size,
               r->ranks.launch.launcher);
        if (o->zero_stage) printf("ZeRO-1: rank 0 keeps the optimizer state of %zu of %zu parameters\n",
                                  z->owned, r->model.num_params);
        else printf("every rank keeps the whole optimizer state\n");
    }
    printf("attention: %s%s; recompute in the backward: %s; classifier: %d chunk%s of %d rows\n",
           attention_kind_name(mo->attention.kind),
           mo->attention.kind == ATTENTION_FLASH && !mo->attention.deterministic ? "" : " (deterministic)", recompute,
           (int)ceil_div(m->rows, m->logits_rows), m->logits_rows < m->rows ? "s" : "", m->logits_rows);
    memory_sizes_print(m, mo->attention.kind);
    if (r->peak_tflops > 0.0f)
        printf("MFU: %.3g GFLOP per token, peak %.0f TFLOP/s\n", r->flops_per_token * 1e-9, r->peak_tflops);
    else printf("MFU: unknown peak for this device (give --peak-tflops), shown as 0\n");
    if (o->sample_every > 0 && !r->tok) printf("note: no --tokenizer, so no samples\n");
}

// The optimizer's settings, and where those not given came from (resolve_optimizer).
static void print_optimizer(const Run* r) {
    const TrainOptions* o = &r->o;
    const OptimizerConfig* opt = &o->optimizer;
    if (opt->kind == OPTIMIZER_MUON) {
        printf("optimizer: Muon lr %g, momentum %g (Nesterov) for the blocks' matrices; Adam (%g, %g) lr %g for the "
               "embeddings, ", opt->lr, opt->momentum, opt->b1, opt->b2, opt->embedding_lr);
        if (r->config.arch.untied_head) printf("%g for the head, ", opt->head_lr);
        printf("%g for the vectors; ", opt->vector_lr);
    } else {
        printf("optimizer: AdamW lr %g; ", opt->lr);
    }
    printf("warmup %d, cosine to %g x lr, weight decay %g, grad clip %g; settings not given: %s\n",
           o->schedule.warmup_steps, o->schedule.min_lr_frac, opt->weight_decay, opt->grad_clip, r->optimizer_defaults);
}

// Where the interrupted run stood: its data loader position (counted in this run's batches per
// rank), its sampler and its step.
static void restore_position(Run* r) {
    char err[ERR_LEN];
    int seen_again;
    if (dataloader_restore_ranks(r->train, r->resume.train_loader, r->resume.world_size, &seen_again, err) != 0)
        die("%s: %s", r->resume_state, err);
    if (seen_again)
        printf("note: %d data-parallel ranks resume a run of %d: the last samples of the epoch in progress "
               "are seen again\n", r->ranks.data_ranks, r->resume.world_size);
    r->sample_rng.state = r->resume.sample_rng;
    r->start_step = r->resume.step;
}

// The log and the checkpoint folder dir (flag: the option that named it), before either is made:
// the log neither the folder nor a folder above it (a file where a folder must be), nor a name the
// checkpoints take in it (a checkpoint would replace the log).
static void check_log_apart(const char* log_path, const char* dir, const char* flag) {
    char log[4096], folder[4096], log_folder[4096], err[ERR_LEN];
    if (resolve_path(log_path, log, sizeof(log), err) != 0) die("--log %s: %s", log_path, err);
    if (resolve_path(dir, folder, sizeof(folder), err) != 0) die("%s %s: %s", flag, dir, err);
    size_t n = strlen(log);
    if (!strcmp(log, folder)) die("--log %s: is the checkpoint folder (%s %s)", log_path, flag, dir);
    if (!strncmp(folder, log, n) && folder[n] == '/')
        die("--log %s: the checkpoint folder %s %s would be inside it, which is a file", log_path, flag, dir);
    folder_of(log, log_folder, sizeof(log_folder));
    if (!strcmp(log_folder, folder) && checkpoint_file_step(strrchr(log, '/') + 1) >= 0)
        die("--log %s: is a checkpoint's name in %s %s, which a checkpoint would replace", log_path, flag, dir);
}

// The outputs, before any of them is made: the checkpoint folder (flag: the option that named
// it) and rank 0's log, each a folder or file that exists or whose folders can be made, writable;
// the checkpoint folder none of another run's, the log none of the inputs and apart from the
// checkpoint folder.
static void check_outputs(const Run* r, const char* out_dir_flag) {
    const TrainOptions* o = &r->o;
    char err[ERR_LEN];
    if (o->out_dir && check_dirs(o->out_dir, err) != 0)
        die("%s %s: %s", out_dir_flag, *o->out_dir ? o->out_dir : "''", err);
    int n = o->out_dir ? check_checkpoint_folder(o->out_dir, r->resuming ? o->resume_dir : NULL, err) : 0;
    if (n < 0) die("%s %s", out_dir_flag, err);
    if (n > 0) die("%s %s: --resume %s continues it; give a new run another --out-dir", out_dir_flag, err, o->out_dir);
    if (r->ranks.launch.rank != 0) return;
    const ProgramInput inputs[] = {
        {"--train-data", o->train_data, 1}, {"--val-data", r->val ? o->val_data : NULL, 1},
        {"--tokenizer", o->tokenizer, 0}, {"--init-from", o->init_from, 0},
        {"--resume", r->resuming ? r->resume_model : NULL, 0}, {"--resume", r->resuming ? r->resume_state : NULL, 0}};
    int n_inputs = sizeof(inputs) / sizeof(inputs[0]);
    if (o->log_path &&
        (check_output_file(o->log_path, err) != 0 || check_output_not_input(o->log_path, inputs, n_inputs, err) != 0))
        die("--log %s", err);
    if (o->log_path && o->out_dir) check_log_apart(o->log_path, o->out_dir, out_dir_flag);
    if (o->save_init &&
        (atomic_check(o->save_init, err) != 0 || check_output_not_input(o->save_init, inputs, n_inputs, err) != 0))
        die("--save-init %s", err);
}

// --save-init: the model the run would start from (gpt_init_random's values, drawn on the host),
// written by rank 0.
static void save_initial_model(const Run* r) {
    if (r->ranks.launch.rank != 0) return;
    float* values = (float*)malloc(count_params(&r->config) * sizeof(float));
    if (!values) die("out of host memory for the initial model");
    init_param_values(values, &r->config, r->o.seed);
    save_model_values(r->o.save_init, &r->config, values);
    free(values);
    printf("initial model (seed %llu): %s\n", (unsigned long long)r->o.seed, r->o.save_init);
}

// The log, its folder made if missing: appended to when a resumed run finds one, else new.
static void open_log(Run* r) {
    char err[ERR_LEN];
    int appended;
    if (!(r->log = open_output_file(r->o.log_path, r->resuming, &appended, err))) die("--log %s", err);
    if (!appended) fprintf(r->log, "step,loss,val_loss,lr,grad_norm,ms,tokens_per_s,mfu,mem_gib\n");
}

// Checks everything the command line says against the files, reads the checkpoint values on
// the host, then takes the GPU: the model, its parameters (random, a checkpoint, or the
// interrupted run), the outputs.
static void setup(Run* r, const TrainOptions* options) {
    memset(r, 0, sizeof(*r));
    r->o = *options;
    TrainOptions* o = &r->o;
    char err[ERR_LEN];
    if (ranks_plan(&r->ranks, o->context_parallel, err) != 0) die("%s", err);
    const LaunchInfo* launch = &r->ranks.launch;
    if (o->zero_stage && !r->ranks.launched)
        die("--zero 1 shards the optimizer over ranks: start them with --gpus N or a launcher");
    // Only rank 0 speaks; errors (stderr) still come from every rank.
    if (launch->rank != 0 && !freopen("/dev/null", "w", stdout)) die("cannot silence rank %d", launch->rank);
    if (launch->world_size % o->context_parallel != 0 && launch->world_size > 1)
        die("--context-parallel %d does not divide the %d ranks", o->context_parallel, launch->world_size);
    r->rows = o->B * r->ranks.ring.count;
    r->cols = o->T / o->context_parallel;
    if (o->context_parallel > 1) {
        RingTransport* t = &r->ranks.ring;
        r->ring = (AttentionRing){t->size, t->first, t->count, ring_transport_pass, t};
        o->model_options.attention.ring = &r->ring;
        r->full_tokens = (int*)malloc((size_t)o->B * o->T * sizeof(int));
        r->full_targets = (int*)malloc((size_t)o->B * o->T * sizeof(int));
        if (!r->full_tokens || !r->full_targets) die("out of host memory for a batch");
    }
    resolve_model_shape(r);
    resolve_optimizer(r);
    resolve_batch(r);
    open_data(r);
    r->sample_rng.state = o->seed ^ 0x5851f42d4c957f2dULL;
    if (r->resuming) {
        if (o->steps <= r->resume.step) {
            if (options->steps > 0)
                die("--resume %s: the run is at step %d already, so --steps %d leaves it nothing to do", o->resume_dir,
                    r->resume.step, o->steps);
            die("--resume %s: the run is at step %d already, past one epoch (%d steps): give --steps above %d",
                o->resume_dir, r->resume.step, o->steps, r->resume.step);
        }
        // A resumed run must be the interrupted one: the same batch, schedule and rounding.
        TrainingState asked = training_state(r, r->resume.step);
        char note[ERR_LEN];
        if (resume_settings_differ(&r->resume, &asked, err, note)) die("--resume %s: %s", o->resume_dir, err);
        if (note[0]) printf("note: %s\n", note);
        restore_position(r);
    }
    if (o->profile) {
        int first = r->resuming ? r->resume.step + 1 : 1;
        if (o->profile_step == 0) r->profile_step = first < o->steps ? first + 1 : first;
        else r->profile_step = o->profile_step;
        if (r->profile_step < first || r->profile_step > o->steps)
            die("--profile %d: this run does steps %d to %d", o->profile_step, first, o->steps);
    }
    check_outputs(r, options->out_dir ? "--out-dir" : "--resume");
    print_optimizer(r);
    if (o->save_init) {   // the run ends with its initial model, before the GPU
        save_initial_model(r);
        exit(0);
    }
    // The long reads last: every value of the checkpoint files.
    if (r->resuming) {
        r->checkpoint_values = read_model_values(r->resume_model, &r->config);
        check_training_state_values(r->resume_state, &r->resume);
    } else if (o->init_from) {
        r->checkpoint_values = read_model_values(o->init_from, &r->config);
    }

    cudaDeviceProp prop;
    if (ranks_connect(&r->ranks, &prop, err) != 0) die("%s", err);
    r->dp.comm = r->ranks.comm;
    if (gpu_memory_unfit(memory_sizes_total(&r->sizes), err))
        die("-B %d -T %d %s; try a smaller -B or --recompute gelu,layernorm", o->B, o->T, err);
    gpt_build(&r->model, r->config, r->rows, r->cols, &o->model_options, r->ranks.launched ? &r->dp : NULL,
              &o->optimizer);
    if (r->checkpoint_values) {
        gpt_set_params(&r->model, r->checkpoint_values);
        free(r->checkpoint_values);
        r->checkpoint_values = NULL;
    } else {
        gpt_init_random(&r->model, o->seed);
    }
    if (r->resuming) load_optimizer_state(&r->model, &r->resume, r->resume_state);
    // Samples come from generate's inference model, the training model's parameters copied in,
    // its cache the training window: built now, so that a sampler that does not fit stops the run
    // before the first step.
    r->sampling = r->tok && o->sample_every > 0 && r->ranks.launch.rank == 0;
    if (r->sampling)
        sampler_build(&r->sampler, r->config, o->T, o->sample_tokens, (DrawSettings){o->temperature, o->top_k, 1.0f, 0});
    r->flops_per_token = flops_per_token(&r->config, o->T);
    r->peak_tflops = o->peak_tflops > 0.0f ? o->peak_tflops : device_peak_tflops(prop.name);
    if (r->profile_step) profile_reserve(&r->profile, gpt_profile_marks(&r->model, r->grad_accum));
    print_run(r, prop.name);

    if (o->out_dir && make_dirs(o->out_dir, err) != 0)
        die("%s %s: %s", options->out_dir ? "--out-dir" : "--resume", o->out_dir, err);
    if (o->log_path && r->ranks.launch.rank == 0) open_log(r);
}

static void teardown(Run* r) {
    if (r->log) fclose(r->log);
    free(r->full_tokens);
    free(r->full_targets);
    dataloader_close(r->train);
    if (r->val) dataloader_close(r->val);
    if (r->tok) tokenizer_free(r->tok);
    gpt_free(&r->model);
    if (r->sampling) inference_free(&r->sampler);
    profile_free(&r->profile);
}

// ----------------------------------------------------------------------------------------------
// The loop's parts

// The next batch of the loader into the model's host buffers: as it comes, or, context
// parallel, each model row the zigzag chunks of its sequence.
static void next_batch(Run* r, DataLoader* dl, const char* what) {
    GPT* g = &r->model;
    char err[ERR_LEN];
    int split = r->full_tokens != NULL;
    if (dataloader_next(dl, split ? r->full_tokens : g->host_tokens, split ? r->full_targets : g->host_targets,
                        err) != 0)
        die("%s: %s", what, err);
    if (split) {
        zigzag_split(&r->ring, r->full_tokens, r->o.B, r->o.T, g->host_tokens);
        zigzag_split(&r->ring, r->full_targets, r->o.B, r->o.T, g->host_targets);
    }
}

// One optimizer step: grad_accum micro-steps of forward, loss and backward, then the update at
// the step's rates. Returns the mean loss over every rank's batches; *norm gets the gradient
// norm before clipping.
static float train_step(Run* r, const StepRates* rates, float* norm) {
    GPT* g = &r->model;
    int rows = r->rows, cols = r->cols;
    float dloss_scale = 1.0f / (float)((double)rows * cols * r->grad_accum);
    gpt_zero_grads(g);
    double loss_sum = 0.0;
    for (int micro = 0; micro < r->grad_accum; micro++) {
        next_batch(r, r->train, "--train-data");
        gpt_forward(g, g->host_tokens, rows, cols);
        gpt_classifier(g, g->host_targets, rows, cols, dloss_scale, 1);
        gpt_backward(g, g->host_tokens, micro == r->grad_accum - 1);
        // Waits for this micro-step before its host buffers take the next batch.
        loss_sum += gpt_mean_loss(g, rows * cols);
    }
    float loss = (float)(loss_sum / r->grad_accum);
    *norm = gpt_update(g, rates);
    cudaCheck(cudaStreamSynchronize(g->stream));
    return nccl_mean_over_ranks(r->dp.comm, loss, g->stream);
}

// Mean loss over the first val_batches batches of the val loader (from its start).
static float validation_loss(Run* r) {
    GPT* g = &r->model;
    dataloader_reset(r->val);
    double sum = 0.0;
    for (int i = 0; i < r->o.val_batches; i++) {
        next_batch(r, r->val, "--val-data");
        gpt_forward(g, g->host_tokens, r->rows, r->cols);
        gpt_classifier(g, g->host_targets, r->rows, r->cols, 0.0f, 0);
        sum += gpt_mean_loss(g, r->rows * r->cols);
    }
    return nccl_mean_over_ranks(r->dp.comm, (float)(sum / r->o.val_batches), g->stream);
}

// What one step did, for the report.
typedef struct {
    int step;
    float loss, val_loss, lr, norm;   // val_loss NAN when not measured
    double seconds, tokens_per_s, mfu;
    size_t peak_mem;
} StepReport;

// The step's line on stdout and in the CSV log.
static void report(Run* r, const StepReport* s) {
    printf("step %5d/%d | loss %.6f | lr %.3e | norm %.4f | %7.1f ms | %7.1fK tok/s | MFU %5.1f%% | mem %.2f GiB",
           s->step, r->o.steps, s->loss, s->lr, s->norm, s->seconds * 1e3, s->tokens_per_s * 1e-3, s->mfu * 100.0,
           GIB(s->peak_mem));
    if (!isnan(s->val_loss)) printf(" | val loss %.6f", s->val_loss);
    printf("\n");
    fflush(stdout);
    if (r->log) {
        fprintf(r->log, "%d,%.9g,", s->step, s->loss);
        if (!isnan(s->val_loss)) fprintf(r->log, "%.9g", s->val_loss);
        fprintf(r->log, ",%.9g,%.9g,%.3f,%.1f,%.4f,%.3f\n", s->lr, s->norm, s->seconds * 1e3, s->tokens_per_s,
                s->mfu, GIB(s->peak_mem));
        fflush(r->log);
    }
}

// The model and the training state of the step, both written atomically.
static void save_checkpoint(Run* r, int step) {
    char model_path[4096], state_path[4096];
    checkpoint_paths(r->o.out_dir, step, model_path, state_path, sizeof(model_path));
    TrainingState s = training_state(r, step);
    gpt_save_checkpoint(&r->model, model_path);
    save_training_state(&r->model, &s, state_path);
    printf("checkpoint: %s, %s\n", model_path, state_path);
}

// The profile of the step just done (--profile): its parts' times against their floors.
static void print_profile(Run* r, const StepReport* s) {
    const GPT* g = &r->model;
    double ms[NUM_PROFILE_PARTS][NUM_PROFILE_PHASES];
    PartWork work[NUM_PROFILE_PARTS][NUM_PROFILE_PHASES];
    profile_collect(&r->profile, ms);
    ProfileShape shape = {.rows = r->rows, .cols = r->cols, .context_parallel = r->o.context_parallel,
                          .micro_steps = r->grad_accum, .classifier_rows = g->sizes.logits_rows,
                          .params = g->num_params, .updated_params = g->shard.owned};
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) shape.muon_matrices[i] = gpt_muon_matrices(g, i);
    profile_work(&g->config, &shape, work);
    ProfileSummary summary = {.step = s->step, .step_seconds = s->seconds, .mfu = s->mfu,
                              .peak_tflops = r->peak_tflops,
                              .flops_per_s = r->o.peak_tflops > 0.0f ? r->o.peak_tflops * 1e12 : H200_DENSE_BF16_FLOPS,
                              .bytes_per_s = H200_MEMORY_BYTES_PER_S};
    profile_print(stdout, &summary, ms, work);
}

// ----------------------------------------------------------------------------------------------
// The loop

static void train(Run* r) {
    const TrainOptions* o = &r->o;
    size_t peak_mem = 0;
    double total_time = 0.0;
    long long timed_tokens = 0;
    // Counted by the steps done, so that --steps 2147483647 ends without step passing INT_MAX.
    for (int done = r->start_step; done < o->steps; done++) {
        int step = done + 1;
        double t0 = now_seconds();
        StepRates rates = step_rates(&o->schedule, &o->optimizer, step, o->steps);
        StepReport s = {.step = step, .val_loss = NAN, .lr = rates.lr[GROUP_MATRIX]};
        int profiled = step == r->profile_step;
        if (profiled) r->model.profile = &r->profile;
        s.loss = train_step(r, &rates, &s.norm);
        s.seconds = now_seconds() - t0;
        r->model.profile = NULL;
        if (!isfinite(s.loss)) die("the loss is %f at step %d: training diverged (try a lower --lr)", s.loss, step);
        if (!isfinite(s.norm))
            die("the gradient norm is %f at step %d: training diverged (try a lower --lr)", s.norm, step);
        size_t used = gpu_memory_in_use();
        peak_mem = used > peak_mem ? used : peak_mem;
        s.peak_mem = peak_mem;
        s.tokens_per_s = o->total_batch / s.seconds;
        // One process per GPU: launch.world_size GPUs made these tokens (1 when the ring is simulated).
        s.mfu = model_flops_utilisation(r->flops_per_token, s.tokens_per_s, r->peak_tflops, r->ranks.launch.world_size);
        if (step > r->start_step + 1) {  // the first step pays for warm-up
            total_time += s.seconds;
            timed_tokens += o->total_batch;
        }
        if (r->val && (step % o->val_every == 0 || step == o->steps)) s.val_loss = validation_loss(r);
        report(r, &s);
        if (profiled) print_profile(r, &s);
        if (r->sampling && (step % o->sample_every == 0 || step == o->steps))
            print_sample(&r->sampler, r->model.params_memory, o->sample_tokens, &r->sample_rng, r->tok);
        if (o->out_dir && ((o->checkpoint_every > 0 && step % o->checkpoint_every == 0) || step == o->steps))
            save_checkpoint(r, step);
    }
    if (timed_tokens > 0)
        printf("done: %.1fK tokens/s on average after the first step, peak memory in use %.2f GiB\n",
               timed_tokens / total_time * 1e-3, GIB(peak_mem));
}

int main(int argc, char** argv) {
    TrainOptions options;
    parse_args(argc, argv, &options);
    if (options.gpus > 0) {
        // This program again as the ranks, --gpus left out of their command line.
        int gpus = 0;
        char err[ERR_LEN];
        if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
        if (launch_gpus(argc, argv, options.gpus_args, options.gpus, gpus, nccl_comm_available(), err) != 0)
            die("%s", err);
        return 0;
    }
    static Run run;
    setup(&run, &options);
    train(&run);
    teardown(&run);
    ranks_free(&run.ranks);
    return 0;
}
