// train/loop.cu: the run on the GPU and its loop (train/loop.h).
#include "train/loop.h"

#include <math.h>
#include <string.h>
#include "common/bytes.h"
#include "common/error.h"
#include "common/output_path.h"
#include "gpt/checkpoint.h"
#include "gpt/generation.h"
#include "gpt/mfu.h"
#include "train/checkpoint_folder.h"
#include "train/report.h"

// The ranks connect; the model is built, its parameters set (random, a checkpoint, or the
// interrupted run with its optimizer state); then the sampler and the outputs.
void trainer_start(Trainer* t, RunPlan* p) {
    memset(t, 0, sizeof(*t));
    t->plan = p;
    const TrainOptions* o = &p->o;
    char err[ERR_LEN];
    cudaDeviceProp prop;
    if (ranks_connect(&p->ranks, &prop, err) != 0) die("%s", err);
    p->dp.comm = p->ranks.comm;
    if (o->model_options.fp8 && prop.major * 10 + prop.minor < 89)
        die("--fp8: FP8 matmuls need FP8 tensor cores (compute capability 8.9 or later); %s is %d.%d", prop.name,
            prop.major, prop.minor);
    if (gpu_memory_unfit(memory_sizes_total(&p->sizes), err))
        die("-B %d -T %d %s; try a smaller -B or --recompute gelu,layernorm", o->B, o->T, err);
    gpt_build(&t->model, p->config, p->batch.rows, p->batch.cols, &o->model_options, p->ranks.launched ? &p->dp : NULL,
              &o->optimizer);
    if (p->checkpoint_values) {
        gpt_set_params(&t->model, p->checkpoint_values);
        free(p->checkpoint_values);
        p->checkpoint_values = NULL;
    } else {
        gpt_init_random(&t->model, o->seed, o->init_scheme);
    }
    if (p->resuming) load_optimizer_state(&t->model, &p->resume, p->resume_state);
    // Samples come from generate's inference model, the training model's parameters copied in,
    // its cache the training window: built before the first step, so that a sampler that does not
    // fit stops the run there.
    t->sampling = p->tok && o->sample_every > 0 && p->ranks.launch.rank == 0;
    if (t->sampling)
        sampler_build(&t->sampler, p->config, o->T, o->sample_tokens, (DrawSettings){o->temperature, o->top_k, 1.0f, 0});
    const ModelOptions* mo = &o->model_options;
    t->flops_per_token = mfu_flops_per_token(flops_per_token(&p->config, o->T),
                                             fp8_flops_per_token(&p->config, mo->fp8 & FP8_MLP, mo->fp8 & FP8_HEAD,
                                                                 mo->fp8_grad_bf16));
    t->peak_tflops = o->peak_tflops > 0.0f ? o->peak_tflops : device_peak_tflops(prop.name);
    if (p->profile_step) profile_reserve(&t->profile, gpt_profile_marks(&t->model, p->grad_accum));
    batch_rows_pin(&p->batch);
    cudaCheck(cudaMallocHost((void**)&t->values, 2 * sizeof(StepValues)));
    for (int i = 0; i < 2; i++) {
        cudaCheck(cudaEventCreate(&t->started[i]));
        cudaCheck(cudaEventCreate(&t->done[i]));
    }
    print_run(p, &t->model, prop.name, t->flops_per_token, t->peak_tflops);
    if (o->out_dir && make_dirs(o->out_dir, err) != 0)
        die("%s %s: %s", p->out_dir_flag, o->out_dir, err);
    if (o->log_path && p->ranks.launch.rank == 0) t->log = open_log(p);
}

// One optimizer step: grad_accum micro-steps of forward, loss and backward, then the update at
// the step's rates, queued on the GPU without waiting for it; the mean loss over every rank's
// batches and the gradient norm before clipping end in the model's scalars (gpt/gpt.h).
static void train_step(Trainer* t, const StepRates* rates) {
    RunPlan* p = t->plan;
    GPT* g = &t->model;
    BatchRows* b = &p->batch;
    int rows = b->rows, cols = b->cols;
    float dloss_scale = 1.0f / (float)((double)rows * cols * p->grad_accum);
    gpt_zero_grads(g);
    for (int micro = 0; micro < p->grad_accum; micro++) {
        int i = next_batch(b, p->train, "--train-data");
        gpt_forward(g, b->tokens[i], rows, cols);
        gpt_classifier(g, b->targets[i], rows, cols, dloss_scale, 1);
        batch_copied(b, i, g->stream);
        gpt_backward(g, b->tokens[i], micro == p->grad_accum - 1);
    }
    gpt_update(g, rates);
    gpt_finish_loss(g);
}

// Mean loss over the first val_batches batches of the val loader (from its start), over the ranks.
static float validation_loss(Trainer* t) {
    RunPlan* p = t->plan;
    GPT* g = &t->model;
    BatchRows* b = &p->batch;
    dataloader_reset(p->val);
    for (int k = 0; k < p->o.val_batches; k++) {
        int i = next_batch(b, p->val, "--val-data");
        gpt_forward(g, b->tokens[i], b->rows, b->cols);
        gpt_classifier(g, b->targets[i], b->rows, b->cols, 0.0f, 0);
        batch_copied(b, i, g->stream);
    }
    return gpt_mean_loss(g);
}

// The model and the training state of the step, both written atomically.
static void save_checkpoint(Trainer* t, int step) {
    const RunPlan* p = t->plan;
    char model_path[4096], state_path[4096];
    checkpoint_paths(p->o.out_dir, step, model_path, state_path, sizeof(model_path));
    TrainingState s = run_training_state(p, step, t->model.adam_t);
    gpt_save_checkpoint(&t->model, model_path);
    save_training_state(&t->model, &s, state_path);
    printf("checkpoint: %s, %s\n", model_path, state_path);
}

// The step times after the first, for the average the run ends with.
typedef struct {
    size_t peak_mem;
    double seconds;
    long long tokens;
} RunTotals;

// Step s->step's values once the GPU has them (from slot of the trainer's buffers), checked, and
// its times: s->seconds is the GPU's time from the step's first work to its last (events), which
// counts any wait of the GPU for the host within the step. A time taken on the host would say how
// fast the host queues, which runs ahead of the GPU.
static void finish_step(Trainer* t, StepReport* s, int slot, RunTotals* totals) {
    const RunPlan* p = t->plan;
    const TrainOptions* o = &p->o;
    cudaCheck(cudaEventSynchronize(t->done[slot]));
    s->loss = t->values[slot].loss;
    s->norm = t->values[slot].norm;
    if (!isfinite(s->loss)) die("the loss is %f at step %d: training diverged (try a lower --lr)", s->loss, s->step);
    if (!isfinite(s->norm))
        die("the gradient norm is %f at step %d: training diverged (try a lower --lr)", s->norm, s->step);
    float ms;
    cudaCheck(cudaEventElapsedTime(&ms, t->started[slot], t->done[slot]));
    s->seconds = ms * 1e-3;
    size_t used = gpu_memory_in_use();
    totals->peak_mem = used > totals->peak_mem ? used : totals->peak_mem;
    s->peak_mem = totals->peak_mem;
    s->tokens_per_s = o->total_batch / s->seconds;
    // One process per GPU: launch.world_size GPUs made these tokens (1 when the ring is simulated).
    s->mfu = model_flops_utilisation(t->flops_per_token, s->tokens_per_s, t->peak_tflops, p->ranks.launch.world_size);
    if (s->step > p->start_step + 1) {  // the first step pays for warm-up
        totals->seconds += s->seconds;
        totals->tokens += o->total_batch;
    }
}

void train(Trainer* t) {
    RunPlan* p = t->plan;
    const TrainOptions* o = &p->o;
    GPT* g = &t->model;
    RunTotals totals = {0, 0.0, 0};
    StepReport lagging;       // the step queued before this one, not yet reported
    int has_lagging = 0;
    // Counted by the steps done, so that --steps 2147483647 ends without step passing INT_MAX.
    for (int done = p->start_step; done < o->steps; done++) {
        int step = done + 1, slot = step % 2;
        StepRates rates = step_rates(&o->schedule, &o->optimizer, step, o->steps);
        StepReport s = {.step = step, .val_loss = NAN, .lr = rates.lr[GROUP_MATRIX]};
        int profiled = step == p->profile_step;
        if (profiled) g->profile = &t->profile;
        cudaCheck(cudaEventRecord(t->started[slot], g->stream));
        train_step(t, &rates);
        cudaCheck(cudaMemcpyAsync(&t->values[slot], &g->scalars->values, sizeof(StepValues), cudaMemcpyDeviceToHost,
                                  g->stream));
        cudaCheck(cudaEventRecord(t->done[slot], g->stream));
        g->profile = NULL;
        if (has_lagging) {
            finish_step(t, &lagging, 1 - slot, &totals);
            report_step(&lagging, o->steps, t->log);
            has_lagging = 0;
        }
        int validate = p->val && (step % o->val_every == 0 || step == o->steps);
        int sample = t->sampling && (step % o->sample_every == 0 || step == o->steps);
        int save = o->out_dir && ((o->checkpoint_every > 0 && step % o->checkpoint_every == 0) || step == o->steps);
        if (!(validate || sample || save || profiled || step == o->steps)) {
            lagging = s;
            has_lagging = 1;
            continue;
        }
        finish_step(t, &s, slot, &totals);
        if (validate) s.val_loss = validation_loss(t);
        report_step(&s, o->steps, t->log);
        if (profiled) print_profile(p, g, &t->profile, &s, t->peak_tflops);
        if (sample) print_sample(&t->sampler, g->params_memory, o->sample_tokens, &p->sample_rng, p->tok);
        if (save) save_checkpoint(t, step);
    }
    if (totals.tokens > 0)
        printf("done: %.1fK tokens/s on average after the first step, peak memory in use %.2f GiB\n",
               totals.tokens / totals.seconds * 1e-3, GIB(totals.peak_mem));
}

void trainer_free(Trainer* t) {
    if (t->log) fclose(t->log);
    if (t->values) {
        cudaCheck(cudaFreeHost(t->values));
        for (int i = 0; i < 2; i++) {
            cudaCheck(cudaEventDestroy(t->started[i]));
            cudaCheck(cudaEventDestroy(t->done[i]));
        }
    }
    gpt_free(&t->model);
    if (t->sampling) inference_free(&t->sampler);
    profile_free(&t->profile);
}
