// train/plan.cu: a run resolved before the GPU (train/plan.h): the model's shape and
// architecture, the optimizer and its schedule, the batch and FP8, the data, the resume, the
// outputs.
#include "train/plan.h"

#include <glob.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "common/atomic_file.h"
#include "common/error.h"
#include "common/output_path.h"
#include "gpt/checkpoint.h"
#include "gpt/generation.h"
#include "train/checkpoint_folder.h"

// The architecture: a checkpoint's (from_file), or --arch's preset at the model's context and
// layers (its key windows follow the context); each component given on its own replaces its
// field, the key windows (--document-mask, --window, --window-pattern) theirs, and with a
// checkpoint the result must be the checkpoint's. A value without effect is refused (gpt/config.h's
// gpt_config_drop_without_effect says why).
static void resolve_architecture(RunPlan* p, int from_file) {
    TrainOptions* o = &p->o;
    Architecture* arch = &p->config.arch;
    const Architecture file = *arch;
    char err[ERR_LEN];
    if (!from_file || o->arch_given) {
        const ArchitecturePreset* preset = &architecture_presets[o->arch];
        if (architecture_of_preset(preset, p->config.maxT, p->config.L, arch, err, sizeof(err)) != 0)
            die("--arch %s at context %d, %d layers: %s", preset->name, p->config.maxT, p->config.L, err);
    }
    int32_t slots[ARCHITECTURE_SLOTS], given[ARCHITECTURE_SLOTS];
    memcpy(slots, arch, sizeof(slots));
    memcpy(given, &o->components, sizeof(given));
    for (int i = 0; i < ARCHITECTURE_SLOTS; i++)
        if (o->components_given[i]) slots[i] = given[i];
    memcpy(arch, slots, sizeof(slots));
    // The key windows: the documents take the tokenizer's <|endoftext|>, which the shards start
    // each document with (prepare_data).
    if (o->document_mask) {
        if (!p->tok) die("--document-mask: a document starts at <|endoftext|>, whose id comes from --tokenizer: give it");
        arch->documents = 1;
        arch->document_token = tokenizer_eot(p->tok);
    }
    if (o->window || o->window_pattern_given) {
        arch->window_count = o->window ? 1 : o->window_pattern.window_count;
        memcpy(arch->windows, o->window_pattern.windows, sizeof(arch->windows));
        if (o->window) arch->windows[0] = o->window;
    }
    char asked[ARCHITECTURE_TEXT], have[ARCHITECTURE_TEXT];
    architecture_describe(arch, p->config.maxT, p->config.L, asked, sizeof(asked));
    if (from_file && !architecture_equal(arch, &file)) {
        architecture_describe(&file, p->config.maxT, p->config.L, have, sizeof(have));
        die("the architecture asked for (%s) is not that of %s (%s)", asked, o->resume_dir ? o->resume_dir : o->init_from,
            have);
    }
    const char* why = architecture_invalid(arch);
    if (!why) why = block_unsupported(arch, p->config.C / p->config.NH);
    if (why) die("the architecture (%s): %s", asked, why);
    if ((why = gpt_config_invalid(&p->config))) {   // the key windows against the context and layers
        char model[ARCHITECTURE_TEXT + 128];
        gpt_config_describe(&p->config, model, sizeof(model));
        die("the model (%s): %s", model, why);
    }
    if (p->tok && architecture_document_token_differs(arch, tokenizer_eot(p->tok),
                                                      o->resume_dir ? o->resume_dir : o->init_from, err, sizeof(err)))
        die("--tokenizer %s: %s", o->tokenizer, err);
}

// Muon's variants: each given (refused under AdamW), else defaults' (a resumed run's own, or off);
// NorMuon's beta given with NorMuon alone, else its default where NorMuon is on.
static void resolve_muon_variants(OptimizerConfig* opt, const OptimizerConfig* defaults) {
    const struct {
        const char* flag;
        int* value;
        int fallback;
    } variants[] = {{"--muon-qkv", &opt->muon_qkv, defaults->muon_qkv},
                    {"--muon-ns", &opt->muon_ns, defaults->muon_ns},
                    {"--cautious-weight-decay", &opt->cautious_weight_decay, defaults->cautious_weight_decay},
                    {"--normuon", &opt->normuon, defaults->normuon}};
    int muon = opt->kind == OPTIMIZER_MUON;
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
        if (*variants[i].value < 0) *variants[i].value = muon ? variants[i].fallback : 0;
        else if (!muon) die("%s is a setting of --optimizer muon", variants[i].flag);
    }
    if (isnan(opt->normuon_beta2)) {
        float run = defaults->normuon ? defaults->normuon_beta2 : NORMUON_BETA2_DEFAULT;
        opt->normuon_beta2 = opt->normuon ? run : 0.0f;
    } else if (!muon) die("--normuon-beta2 is a setting of --optimizer muon");
    else if (!opt->normuon) die("--normuon-beta2 without --normuon has no effect");
}

// Which of Adam's betas, 1 or 2, the setting s is of a group's own (--embedding-beta1 and the
// others), or 0.
static int group_beta_of(const OptimizerSetting* s) {
    if (s->offset == offsetof(OptimizerConfig, embedding_b1) || s->offset == offsetof(OptimizerConfig, head_b1)) return 1;
    if (s->offset == offsetof(OptimizerConfig, embedding_b2) || s->offset == offsetof(OptimizerConfig, head_b2)) return 2;
    return 0;
}

// The optimizer: --optimizer, else a resumed run's own, else the preset's (gpt/optimizer.h's
// preset_optimizer), and each setting given or its default: a resumed run's own (its training
// state records every setting it ran with), else the defaults of the preset the run is trained
// as (gpt/optimizer.h's preset_optimizer_defaults: --arch's, or the preset nearest the
// architecture), which the schedule takes too (p->preset). Muon's own settings are refused under
// AdamW, whose betas are fixed, and --head-lr with a tied head; Muon's variants likewise
// (resolve_muon_variants); the whole is bounded by gpt/optimizer.h's optimizer_invalid, and head
// pairs need an even head count.
static void resolve_optimizer(RunPlan* p) {
    TrainOptions* o = &p->o;
    OptimizerConfig* opt = &o->optimizer;
    const Architecture* arch = &p->config.arch;
    const ArchitecturePreset* preset = o->arch_given ? &architecture_presets[o->arch] : architecture_nearest_preset(arch);
    p->preset = preset;
    if (!o->optimizer_given) opt->kind = p->resuming ? (OptimizerKind)p->resume.optimizer : preset_optimizer(preset);
    OptimizerConfig defaults = preset_optimizer_defaults(opt->kind, preset);
    if (p->resuming && (int)opt->kind == p->resume.optimizer) {
        // The state records an untied head's rate alone (and the files of earlier versions not
        // even that): a rate it has no record of takes the preset's.
        OptimizerConfig run = training_state_optimizer(&p->resume);
        if (run.head_lr == 0.0f) run.head_lr = defaults.head_lr;
        defaults = run;
        snprintf(p->optimizer_defaults, sizeof(p->optimizer_defaults), "the run's own (%s)", p->resume_state);
    } else {
        snprintf(p->optimizer_defaults, sizeof(p->optimizer_defaults), "%s's defaults (%s%s)", preset->name,
                 o->arch_given ? "--arch " : "the preset nearest the architecture", o->arch_given ? preset->name : "");
    }
    for (int i = 0; i < NUM_OPTIMIZER_SETTINGS; i++) {
        const OptimizerSetting* s = &optimizer_settings[i];
        float* value = (float*)((char*)opt + s->offset);
        if (isnan(*value)) {
            *value = optimizer_setting_value(&defaults, s);
            // A group's beta that the defaults have at the vectors' follows the vectors' as given
            // (the table lists --adam-beta1 and 2 before the groups' betas).
            int beta = group_beta_of(s);
            if (beta && *value == (beta == 1 ? defaults.b1 : defaults.b2)) *value = beta == 1 ? opt->b1 : opt->b2;
        } else if (s->use != SETTING_EVERY_RUN && opt->kind != OPTIMIZER_MUON)
            die("%s is a setting of --optimizer muon", s->flag);
        else if (s->use == SETTING_MUON_UNTIED_HEAD && !arch->untied_head)
            die("%s: the model's head is wte (--head tied), at --embedding-lr", s->flag);
    }
    opt->eps = defaults.eps;
    resolve_muon_variants(opt, &defaults);
    char err[ERR_LEN];
    if (optimizer_invalid(opt, arch->untied_head, err, sizeof(err)) != 0) die("%s", err);
    const char* why = opt->kind == OPTIMIZER_MUON ? muon_qkv_unfit(opt->muon_qkv, &p->config) : NULL;
    if (why) die("%s", why);
}

// The step schedule, as given, each setting a preset gives (gpt/schedule.h's preset_schedule) not
// given: a resumed run's own (its training state records the schedule it ran with, under the same
// optimizer), else the run's preset's (resolve_optimizer's). A resumed run's other settings, and
// those given, are checked against its own. A setting that only some shapes take is refused
// elsewhere, and takes the preset's, else the anchors' default (gpt/schedule.h) where it is taken
// and not given; a setting without effect is refused; the whole is bounded by gpt/schedule.h's
// step_schedule_invalid.
static void resolve_schedule(RunPlan* p) {
    TrainOptions* o = &p->o;
    StepSchedule* s = &o->schedule;
    int muon = o->optimizer.kind == OPTIMIZER_MUON;
    int own = p->resuming && (int)o->optimizer.kind == p->resume.optimizer;
    const StepSchedule preset = own ? p->resume.schedule : preset_schedule(p->preset, muon);
    if (!o->lr_schedule_given) s->lr_shape = preset.lr_shape;
    if (!o->min_lr_frac_given) s->min_lr_frac = preset.min_lr_frac;
    if (!o->momentum_warmup_given) s->momentum_warmup_steps = preset.momentum_warmup_steps;
    int wsd = s->lr_shape == LR_SHAPE_WSD;
    const struct {
        const char* flag;
        int given, taken;
        const char* taker;
    } shaped[] = {{"--warmdown-frac", o->warmdown_given, wsd, "--lr-schedule wsd"},
                  {"--momentum-warmup-steps", o->momentum_warmup_given, muon, "--optimizer muon"},
                  {"--momentum-start", o->momentum_start_given, muon, "--optimizer muon"},
                  {"--momentum-cooldown-steps", o->momentum_cooldown_given, muon, "--optimizer muon"},
                  {"--momentum-end", o->momentum_end_given, muon, "--optimizer muon"}};
    for (size_t i = 0; i < sizeof(shaped) / sizeof(shaped[0]); i++)
        if (shaped[i].given && !shaped[i].taken) die("%s is a setting of %s", shaped[i].flag, shaped[i].taker);
    if (o->momentum_start_given && !s->momentum_warmup_steps)
        die("--momentum-start without --momentum-warmup-steps has no effect");
    if (o->momentum_end_given && !s->momentum_cooldown_steps)
        die("--momentum-end without --momentum-cooldown-steps has no effect");
    // A linear decay of no weight decay decays nothing; a resumed run goes on as its state records it.
    if (!p->resuming && s->decay_shape == DECAY_SHAPE_LINEAR && o->optimizer.weight_decay == 0.0f)
        die("--weight-decay-schedule linear without --weight-decay has no effect");
    if (wsd && !o->warmdown_given)
        s->warmdown_frac = preset.lr_shape == LR_SHAPE_WSD ? preset.warmdown_frac : WARMDOWN_FRAC_DEFAULT;
    if (s->momentum_warmup_steps && !o->momentum_start_given)
        s->momentum_start = preset.momentum_warmup_steps ? preset.momentum_start : MOMENTUM_START_DEFAULT;
    if (s->momentum_cooldown_steps && !o->momentum_end_given) s->momentum_end = MOMENTUM_END_DEFAULT;
    char err[ERR_LEN];
    if (step_schedule_invalid(s, muon, err, sizeof(err)) != 0) die("%s", err);
}

// The model shape: the interrupted run's, a checkpoint's, or a preset's; the vocabulary from the
// tokenizer or the shards when no file states it; the architecture (resolve_architecture).
// Headers only: the values are read later.
static void resolve_model_shape(RunPlan* p) {
    TrainOptions* o = &p->o;
    GPTConfig* config = &p->config;
    char err[ERR_LEN];
    memset(config, 0, sizeof(*config));
    if (o->resume_dir) {
        if (find_resume_checkpoint(o->resume_dir, p->resume_model, p->resume_state, sizeof(p->resume_model),
                                   &p->resume, err) != 0)
            die("--resume %s", err);
        p->resuming = 1;
        *config = p->resume.config;
        if (!o->out_dir) o->out_dir = o->resume_dir;
    } else if (o->init_from && read_model_shape(o->init_from, config, err) != 0) {
        die("--init-from: %s", err);
    }
    const ModelPreset* preset = find_model_preset(o->model);
    if (!preset) die("--model %s: unknown (d2, d6, d12, d24, d36, d48)", o->model);
    if (config->L) {
        const char* source = o->resume_dir ? o->resume_dir : o->init_from;
        int NH = o->head_size ? preset->C / o->head_size : preset->NH;
        if (o->model_given && (preset->L != config->L || preset->C != config->C || NH != config->NH))
            die("--model %s (L %d C %d NH %d) does not match %s (L %d C %d NH %d)", o->model, preset->L,
                preset->C, NH, source, config->L, config->C, config->NH);
        if (o->context_given && o->context != config->maxT)
            die("--context %d does not match %s (context %d)", o->context, source, config->maxT);
    } else {
        config->L = preset->L;
        config->C = preset->C;
        config->NH = preset->NH;
        config->maxT = o->context;
        if (o->head_size) {
            if (preset->C % o->head_size)
                die("--head-size %d: --model %s's %d channels are not a multiple of it", o->head_size, o->model,
                    preset->C);
            config->NH = preset->C / o->head_size;
        }
    }
    if (o->head_size && config->C / config->NH != o->head_size)
        die("--head-size %d does not match %s (head size %d)", o->head_size, o->resume_dir ? o->resume_dir : o->init_from,
            config->C / config->NH);
    if (o->tokenizer) {
        p->tok = tokenizer_load(o->tokenizer, err);
        if (!p->tok) die("%s", err);
    }
    if (!config->V) {
        config->V = p->tok ? tokenizer_vocab_size(p->tok) : dataloader_vocab_size(o->train_data, err);
        if (config->V < 0) die("--train-data: %s", err);
        if (!config->V) die("%s: the shards do not state their vocabulary; give --tokenizer", o->train_data);
        config->Vp = padded_vocab(config->V);
    }
    if (p->tok && tokenizer_vocab_size(p->tok) != config->V)
        die("--tokenizer %s has %d tokens, the model %d", o->tokenizer, tokenizer_vocab_size(p->tok), config->V);
    const char* why = gpt_config_invalid(config);
    if (why) {
        char shape[ARCHITECTURE_TEXT + 128];
        gpt_config_describe(config, shape, sizeof(shape));
        die("the model (%s) cannot be built: %s", shape, why);
    }
    resolve_architecture(p, o->resume_dir || o->init_from);
}

// The FP8 matmuls: --fp8 and its settings as given, a resumed run's own where not given; the
// settings refused without FP8, and FP8 where the batch's or the model's sizes are not what FP8
// operands take (gpt_fp8_unfit). Delayed scaling keeps amax histories of each rank's own tensors,
// which the checkpoint holds for one rank only: refused with several processes. FP8 leaves the
// attention and the recomputation as they are: --attention naive and --recompute (whose GELU is
// the FP8 path's own kernel, gpt/block.h) go with it.
static void resolve_fp8(RunPlan* p) {
    TrainOptions* o = &p->o;
    ModelOptions* mo = &o->model_options;
    if (p->resuming) {
        if (!o->fp8_given) mo->fp8 = p->resume.fp8;
        if (!o->fp8_scaling_given) mo->fp8_scaling = (Fp8Scaling)p->resume.fp8_scaling;
        if (!o->fp8_grad_given) mo->fp8_grad_bf16 = p->resume.fp8_grad_bf16;
    }
    if (!mo->fp8) {
        if (o->fp8_scaling_given) die("--fp8-scaling without --fp8 has no effect");
        if (o->fp8_grad_given) die("--fp8-grad without --fp8 has no effect");
        mo->fp8_scaling = FP8_SCALING_CURRENT;
        mo->fp8_grad_bf16 = 0;
        return;
    }
    char list[16];
    fp8_name(mo->fp8, list, sizeof(list));
    const char* why = gpt_fp8_unfit(&p->config, p->batch.rows, p->batch.cols, mo);
    if (why) die("--fp8 %s: %s", list, why);
    if (mo->fp8_scaling == FP8_SCALING_DELAYED && p->ranks.launch.world_size > 1)
        die("--fp8-scaling delayed: each of the %d ranks would keep amax histories of its own, which a checkpoint "
            "does not hold; use --fp8-scaling current", p->ranks.launch.world_size);
}

// The batch: B * T tokens per micro-step, grad_accum micro-steps per step.
static void resolve_batch(RunPlan* p) {
    TrainOptions* o = &p->o;
    if (o->T > p->config.maxT) die("-T %d is longer than the model's context %d (--context)", o->T, p->config.maxT);
    if ((long long)o->B * o->T > INT_MAX) die("-B %d -T %d: B * T must stay below 2^31 tokens", o->B, o->T);
    // One micro-step of every context-parallel group.
    long long tokens_per_micro = (long long)o->B * o->T * p->ranks.data_ranks;
    if (o->total_batch == 0) o->total_batch = tokens_per_micro;
    if (o->total_batch < 0 || o->total_batch % tokens_per_micro != 0)
        die("--total-batch-size %lld is not a positive multiple of B * T * data-parallel ranks = %d * %d * %d",
            o->total_batch, o->B, o->T, p->ranks.data_ranks);
    if (o->total_batch / tokens_per_micro > INT_MAX) die("--total-batch-size %lld: too many micro-steps", o->total_batch);
    p->grad_accum = (int)(o->total_batch / tokens_per_micro);
    const ModelOptions* mo = &o->model_options;
    if ((mo->recompute & RECOMPUTE_GELU) && p->config.arch.relu2)
        die("--recompute gelu: the relu2 MLP keeps relu(h)^2 alone (its backward takes relu(h) = sqrt), no GELU");
    if (p->config.arch.smear && o->context_parallel > 1)
        die("--context-parallel %d: the smear looks one token back, which lies in another chunk of the sequence at "
            "the start of each", o->context_parallel);
    const char* why = model_attention_unsupported(&p->config, mo, p->batch.rows, p->batch.cols);
    if (why) die("--attention %s: %s", attention_kind_name(mo->attention.kind), why);
    resolve_fp8(p);
    if (p->tok && o->sample_every > 0) {
        if (o->T < 2) die("--sample-every: -T %d leaves no room for a sample", o->T);
        if ((why = sampler_unsupported(&p->config, o->T, o->sample_tokens)))
            die("--sample-every: samples are drawn with flash attention: %s", why);
    }
    p->dp = (DataParallel){.comm = NULL, .rank = p->ranks.launch.rank, .world_size = p->ranks.launch.world_size,
                           .zero_stage = o->zero_stage};
    p->sizes = gpt_memory_sizes(&p->config, p->batch.rows, p->batch.cols, mo, &p->dp, &o->optimizer);
}

// The val loader, when there is validation: --val-data, or by default the val shards beside
// the train shards (dataloader_val_pattern) when there are any. Says which shards it reads, or
// plainly that validation is off and why.
static void open_val_data(RunPlan* p) {
    TrainOptions* o = &p->o;
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
    // needs its whole group), and the losses are averaged. They are the stream in order with or
    // without --align-documents, so that the validation losses of every run compare.
    p->val = dataloader_open(o->val_data, o->B, o->T, 0, 1, 0, o->seed, p->config.V, err);
    if (!p->val) die("--val-data: %s", err);
    if (dataloader_check_fingerprint(p->val, dataloader_fingerprint(p->train), err) != 0)
        die("--val-data and --train-data: %s", err);
    if (o->val_batches > dataloader_batches_per_epoch(p->val)) o->val_batches = (int)dataloader_batches_per_epoch(p->val);
    dataloader_describe(p->val, shards, sizeof(shards));
    printf("val data: %s: %s, %d batches every %d steps\n", o->val_data, shards, o->val_batches, o->val_every);
}

// The train loader, its rows aligned to documents with --align-documents, and the val loader
// (open_val_data), and the steps: one epoch by default.
static void open_data(RunPlan* p) {
    TrainOptions* o = &p->o;
    char err[ERR_LEN], shards[2 * 4096 + 64];
    p->train = dataloader_open(o->train_data, o->B, o->T, p->ranks.data_rank, p->ranks.data_ranks, 1, o->seed, p->config.V, err);
    if (!p->train) die("--train-data: %s", err);
    if (p->tok && dataloader_check_fingerprint(p->train, tokenizer_fingerprint(p->tok), err) != 0)
        die("--train-data and --tokenizer %s: %s", o->tokenizer, err);
    if (o->align_documents && dataloader_align_documents(p->train, tokenizer_eot(p->tok), err) != 0)
        die("--align-documents: %s", err);
    dataloader_describe(p->train, shards, sizeof(shards));
    printf("train data: %s: %s, %lld batches per epoch\n", o->train_data, shards,
           (long long)dataloader_batches_per_epoch(p->train));
    if (o->align_documents) {
        DataLoaderCoverage c = dataloader_coverage(p->train);
        printf("rows aligned to documents (<|endoftext|> = %d): %lld rows, each from the start of one of the %lld "
               "documents on into those after it; the rest of the document a row ends in starts no row: %.2f%% of the "
               "tokens unseen per epoch\n", tokenizer_eot(p->tok), (long long)c.samples, (long long)c.documents,
               100.0 * (double)c.unseen / (double)(c.tokens - 1));
    }
    open_val_data(p);
    if (o->steps <= 0) o->steps = (int)(dataloader_batches_per_epoch(p->train) / p->grad_accum);
    if (o->steps <= 0) die("--train-data %s: less than one step of data", o->train_data);
}

// Muon's momentum cool-down against the run's steps (known once the data is open): one longer
// than the run, or one that the warm-up leaves no step (gpt/schedule.h: a cool-down starts after
// the warm-up at the earliest), is not the cool-down its option asks for. A resumed run goes on as
// its state records it.
static void check_cooldown_fits(const RunPlan* p) {
    const StepSchedule* s = &p->o.schedule;
    int steps = p->o.steps, cooldown = s->momentum_cooldown_steps;
    if (p->resuming || !cooldown) return;
    if (cooldown > steps) die("--momentum-cooldown-steps %d is longer than the run (%d steps)", cooldown, steps);
    if (s->momentum_warmup_steps >= steps)
        die("--momentum-cooldown-steps %d has no effect: the momentum's warm-up (--momentum-warmup-steps %d) lasts "
            "the whole run (%d steps)", cooldown, s->momentum_warmup_steps, steps);
}

TrainingState run_training_state(const RunPlan* p, int step, int adam_t) {
    const TrainOptions* o = &p->o;
    const ModelOptions* mo = &o->model_options;
    TrainingState s = {.step = step, .world_size = p->ranks.data_ranks, .config = p->config, .B = o->B, .T = o->T,
                       .grad_accum = p->grad_accum, .steps = o->steps, .schedule = o->schedule, .seed = o->seed,
                       .train_loader = dataloader_state(p->train), .sample_rng = p->sample_rng.state,
                       .adam_t = adam_t, .attention = (int)mo->attention.kind,
                       .deterministic = mo->attention.deterministic, .recompute = mo->recompute,
                       .classifier_rows = p->sizes.logits_rows, .align_documents = o->align_documents,
                       .document_token = o->align_documents ? tokenizer_eot(p->tok) : 0, .fp8 = mo->fp8,
                       .fp8_scaling = (int)mo->fp8_scaling, .fp8_grad_bf16 = mo->fp8_grad_bf16,
                       .init_scheme = o->init_scheme};
    training_state_set_optimizer(&s, &o->optimizer);
    return s;
}

// Muon's variants in o as the optimizer's line says them: "" for none, else " (qkvw as q, k and v,
// Polar Express, NorMuon beta2 0.95, cautious weight decay)", those o has.
static void muon_variants_describe(const OptimizerConfig* o, char* out, size_t len) {
    const char* qkv[NUM_MUON_QKV] = {NULL, "qkvw as q, k and v", "qkvw as head pairs"};
    char normuon[64];
    snprintf(normuon, sizeof(normuon), "NorMuon beta2 %g", o->normuon_beta2);
    const char* parts[] = {qkv[o->muon_qkv], o->muon_ns == NEWTON_SCHULZ_POLAR_EXPRESS ? "Polar Express" : NULL,
                           o->normuon ? normuon : NULL, o->cautious_weight_decay ? "cautious weight decay" : NULL};
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        if (parts[i] && n < len) n += (size_t)snprintf(out + n, len - n, "%s%s", n ? ", " : " (", parts[i]);
    if (n && n < len) snprintf(out + n, len - n, ")");
}

// The optimizer's settings and its schedule, and where the settings not given came from
// (resolve_optimizer).
static void print_optimizer(const RunPlan* p) {
    const TrainOptions* o = &p->o;
    const OptimizerConfig* opt = &o->optimizer;
    if (opt->kind == OPTIMIZER_MUON) {
        char variants[256];
        muon_variants_describe(opt, variants, sizeof(variants));
        printf("optimizer: Muon lr %g, momentum %g (Nesterov) for the blocks' matrices%s; Adam (%g, %g) lr %g for the "
               "embeddings", opt->lr, opt->momentum, variants, opt->b1, opt->b2, opt->embedding_lr);
        // A group's own betas, where they are not the vectors'.
        if (opt->embedding_b1 != opt->b1 || opt->embedding_b2 != opt->b2)
            printf(" (betas %g, %g)", opt->embedding_b1, opt->embedding_b2);
        printf(", ");
        if (p->config.arch.untied_head) {
            printf("%g for the head", opt->head_lr);
            if (opt->head_b1 != opt->b1 || opt->head_b2 != opt->b2) printf(" (betas %g, %g)", opt->head_b1, opt->head_b2);
            printf(", ");
        }
        printf("%g for the vectors; ", opt->vector_lr);
    } else {
        printf("optimizer: AdamW lr %g, betas (%g, %g); ", opt->lr, opt->b1, opt->b2);
    }
    char schedule[512];
    step_schedule_describe(&o->schedule, opt, schedule, sizeof(schedule));
    printf("%s, grad clip %g; settings not given: %s\n", schedule, opt->grad_clip, p->optimizer_defaults);
}

// Where the interrupted run stood: its data loader position (counted in this run's batches per
// rank), its sampler and its step.
static void restore_position(RunPlan* p) {
    char err[ERR_LEN];
    int seen_again;
    if (dataloader_restore_ranks(p->train, p->resume.train_loader, p->resume.world_size, &seen_again, err) != 0)
        die("%s: %s", p->resume_state, err);
    if (seen_again)
        printf("note: %d data-parallel ranks resume a run of %d: the last samples of the epoch in progress "
               "are seen again\n", p->ranks.data_ranks, p->resume.world_size);
    p->sample_rng.state = p->resume.sample_rng;
    p->start_step = p->resume.step;
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
static void check_outputs(const RunPlan* p, const char* out_dir_flag) {
    const TrainOptions* o = &p->o;
    char err[ERR_LEN];
    if (o->out_dir && check_dirs(o->out_dir, err) != 0)
        die("%s %s: %s", out_dir_flag, *o->out_dir ? o->out_dir : "''", err);
    int n = o->out_dir ? check_checkpoint_folder(o->out_dir, p->resuming ? o->resume_dir : NULL, err) : 0;
    if (n < 0) die("%s %s", out_dir_flag, err);
    if (n > 0) die("%s %s: --resume %s continues it; give a new run another --out-dir", out_dir_flag, err, o->out_dir);
    if (p->ranks.launch.rank != 0) return;
    const ProgramInput inputs[] = {
        {"--train-data", o->train_data, 1}, {"--val-data", p->val ? o->val_data : NULL, 1},
        {"--tokenizer", o->tokenizer, 0}, {"--init-from", o->init_from, 0},
        {"--resume", p->resuming ? p->resume_model : NULL, 0}, {"--resume", p->resuming ? p->resume_state : NULL, 0}};
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
static void save_initial_model(const RunPlan* p) {
    if (p->ranks.launch.rank != 0) return;
    float* values = (float*)malloc(count_params(&p->config) * sizeof(float));
    if (!values) die("out of host memory for the initial model");
    init_param_values(values, &p->config, p->o.seed, p->o.init_scheme);
    save_model_values(p->o.save_init, &p->config, values);
    free(values);
    printf("initial model (seed %llu%s): %s\n", (unsigned long long)p->o.seed,
           p->o.init_scheme == INIT_SCHEME_NANOCHAT ? ", nanochat's init" : "", p->o.save_init);
}

// Checks everything the command line says against the files, then reads the checkpoint values
// on the host.
void plan_run(RunPlan* p, const TrainOptions* options) {
    memset(p, 0, sizeof(*p));
    p->o = *options;
    TrainOptions* o = &p->o;
    p->out_dir_flag = options->out_dir ? "--out-dir" : "--resume";
    char err[ERR_LEN];
    if (ranks_plan(&p->ranks, o->context_parallel, err) != 0) die("%s", err);
    const LaunchInfo* launch = &p->ranks.launch;
    if (o->zero_stage && !p->ranks.launched)
        die("--zero 1 shards the optimizer over ranks: start them with --gpus N or a launcher");
    // Only rank 0 speaks; errors (stderr) still come from every rank.
    if (launch->rank != 0 && !freopen("/dev/null", "w", stdout)) die("cannot silence rank %d", launch->rank);
    if (launch->world_size % o->context_parallel != 0 && launch->world_size > 1)
        die("--context-parallel %d does not divide the %d ranks", o->context_parallel, launch->world_size);
    batch_rows_init(&p->batch, &p->ranks, o->B, o->T);
    if (batch_rows_ring(&p->batch)) o->model_options.attention.ring = &p->batch.ring;
    resolve_model_shape(p);
    // The init a resumed run was drawn with is its own, unless given (and then the same).
    if (p->resuming && !o->init_given) o->init_scheme = p->resume.init_scheme;
    resolve_optimizer(p);
    resolve_schedule(p);
    resolve_batch(p);
    open_data(p);
    check_cooldown_fits(p);
    p->sample_rng.state = o->seed ^ 0x5851f42d4c957f2dULL;
    if (p->resuming) {
        if (o->steps <= p->resume.step) {
            if (options->steps > 0)
                die("--resume %s: the run is at step %d already, so --steps %d leaves it nothing to do", o->resume_dir,
                    p->resume.step, o->steps);
            die("--resume %s: the run is at step %d already, past one epoch (%d steps): give --steps above %d",
                o->resume_dir, p->resume.step, o->steps, p->resume.step);
        }
        // A resumed run must be the interrupted one: the same batch, schedule and rounding.
        TrainingState asked = run_training_state(p, p->resume.step, 0);
        char note[ERR_LEN];
        if (resume_settings_differ(&p->resume, &asked, err, note)) die("--resume %s: %s", o->resume_dir, err);
        if (note[0]) printf("note: %s\n", note);
        restore_position(p);
    }
    if (o->profile) {
        int first = p->resuming ? p->resume.step + 1 : 1;
        if (o->profile_step == 0) p->profile_step = first < o->steps ? first + 1 : first;
        else p->profile_step = o->profile_step;
        if (p->profile_step < first || p->profile_step > o->steps)
            die("--profile %d: this run does steps %d to %d", o->profile_step, first, o->steps);
    }
    check_outputs(p, p->out_dir_flag);
    print_optimizer(p);
    if (o->init_scheme != INIT_SCHEME_DEFAULT)
        printf("init: %s's (--init %s)%s\n", init_scheme_name(o->init_scheme), init_scheme_name(o->init_scheme),
               p->resuming ? ", the run's start; the weights come from its checkpoint" : "");
    if (o->save_init) {   // the run ends with its initial model, before the GPU
        save_initial_model(p);
        exit(0);
    }
    // The long reads last: every value of the checkpoint files.
    if (p->resuming) {
        p->checkpoint_values = read_model_values(p->resume_model, &p->config);
        check_training_state_values(p->resume_state, &p->resume);
    } else if (o->init_from) {
        p->checkpoint_values = read_model_values(o->init_from, &p->config);
    }
}

void plan_free(RunPlan* p) {
    batch_rows_free(&p->batch);
    dataloader_close(p->train);
    if (p->val) dataloader_close(p->val);
    if (p->tok) tokenizer_free(p->tok);
    free(p->checkpoint_values);
    ranks_free(&p->ranks);
}
