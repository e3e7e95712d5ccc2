// train/loop.cu: the run on the GPU and its loop (train/loop.h).
#include "train/loop.h"

#include <math.h>
#include <string.h>
#include "common/bytes.h"
#include "common/clock.h"
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
    // its cache the training window: built now, so that a sampler that does not fit stops the run
    // before the first step.
    t->sampling = p->tok && o->sample_every > 0 && p->ranks.launch.rank == 0;
    if (t->sampling)
        sampler_build(&t->sampler, p->config, o->T, o->sample_tokens, (DrawSettings){o->temperature, o->top_k, 1.0f, 0});
    t->flops_per_token = flops_per_token(&p->config, o->T);
    t->peak_tflops = o->peak_tflops > 0.0f ? o->peak_tflops : device_peak_tflops(prop.name);
    if (p->profile_step) profile_reserve(&t->profile, gpt_profile_marks(&t->model, p->grad_accum));
    print_run(p, &t->model, prop.name, t->flops_per_token, t->peak_tflops);
    if (o->out_dir && make_dirs(o->out_dir, err) != 0)
        die("%s %s: %s", p->out_dir_flag, o->out_dir, err);
    if (o->log_path && p->ranks.launch.rank == 0) t->log = open_log(p);
}

// One optimizer step: grad_accum micro-steps of forward, loss and backward, then the update at
// the step's rates. Returns the mean loss over every rank's batches; *norm gets the gradient
// norm before clipping.
static float train_step(Trainer* t, const StepRates* rates, float* norm) {
    RunPlan* p = t->plan;
    GPT* g = &t->model;
    int rows = p->batch.rows, cols = p->batch.cols;
    float dloss_scale = 1.0f / (float)((double)rows * cols * p->grad_accum);
    gpt_zero_grads(g);
    double loss_sum = 0.0;
    for (int micro = 0; micro < p->grad_accum; micro++) {
        next_batch(&p->batch, p->train, g->host_tokens, g->host_targets, "--train-data");
        gpt_forward(g, g->host_tokens, rows, cols);
        gpt_classifier(g, g->host_targets, rows, cols, dloss_scale, 1);
        gpt_backward(g, g->host_tokens, micro == p->grad_accum - 1);
        // Waits for this micro-step before its host buffers take the next batch.
        loss_sum += gpt_mean_loss(g, rows * cols);
    }
    float loss = (float)(loss_sum / p->grad_accum);
    *norm = gpt_update(g, rates);
    cudaCheck(cudaStreamSynchronize(g->stream));
    return nccl_mean_over_ranks(p->dp.comm, loss, g->stream);
}

// Mean loss over the first val_batches batches of the val loader (from its start).
static float validation_loss(Trainer* t) {
    RunPlan* p = t->plan;
    GPT* g = &t->model;
    int rows = p->batch.rows, cols = p->batch.cols;
    dataloader_reset(p->val);
    double sum = 0.0;
    for (int i = 0; i < p->o.val_batches; i++) {
        next_batch(&p->batch, p->val, g->host_tokens, g->host_targets, "--val-data");
        gpt_forward(g, g->host_tokens, rows, cols);
        gpt_classifier(g, g->host_targets, rows, cols, 0.0f, 0);
        sum += gpt_mean_loss(g, rows * cols);
    }
    return nccl_mean_over_ranks(p->dp.comm, (float)(sum / p->o.val_batches), g->stream);
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

void train(Trainer* t) {
    RunPlan* p = t->plan;
    const TrainOptions* o = &p->o;
    size_t peak_mem = 0;
    double total_time = 0.0;
    long long timed_tokens = 0;
    // Counted by the steps done, so that --steps 2147483647 ends without step passing INT_MAX.
    for (int done = p->start_step; done < o->steps; done++) {
        int step = done + 1;
        double t0 = now_seconds();
        StepRates rates = step_rates(&o->schedule, &o->optimizer, step, o->steps);
        StepReport s = {.step = step, .val_loss = NAN, .lr = rates.lr[GROUP_MATRIX]};
        int profiled = step == p->profile_step;
        if (profiled) t->model.profile = &t->profile;
        s.loss = train_step(t, &rates, &s.norm);
        s.seconds = now_seconds() - t0;
        t->model.profile = NULL;
        if (!isfinite(s.loss)) die("the loss is %f at step %d: training diverged (try a lower --lr)", s.loss, step);
        if (!isfinite(s.norm))
            die("the gradient norm is %f at step %d: training diverged (try a lower --lr)", s.norm, step);
        size_t used = gpu_memory_in_use();
        peak_mem = used > peak_mem ? used : peak_mem;
        s.peak_mem = peak_mem;
        s.tokens_per_s = o->total_batch / s.seconds;
        // One process per GPU: launch.world_size GPUs made these tokens (1 when the ring is simulated).
        s.mfu = model_flops_utilisation(t->flops_per_token, s.tokens_per_s, t->peak_tflops, p->ranks.launch.world_size);
        if (step > p->start_step + 1) {  // the first step pays for warm-up
            total_time += s.seconds;
            timed_tokens += o->total_batch;
        }
        if (p->val && (step % o->val_every == 0 || step == o->steps)) s.val_loss = validation_loss(t);
        report_step(&s, o->steps, t->log);
        if (profiled) print_profile(p, &t->model, &t->profile, &s, t->peak_tflops);
        if (t->sampling && (step % o->sample_every == 0 || step == o->steps))
            print_sample(&t->sampler, t->model.params_memory, o->sample_tokens, &p->sample_rng, p->tok);
        if (o->out_dir && ((o->checkpoint_every > 0 && step % o->checkpoint_every == 0) || step == o->steps))
            save_checkpoint(t, step);
    }
    if (timed_tokens > 0)
        printf("done: %.1fK tokens/s on average after the first step, peak memory in use %.2f GiB\n",
               timed_tokens / total_time * 1e-3, GIB(peak_mem));
}

void trainer_free(Trainer* t) {
    if (t->log) fclose(t->log);
    gpt_free(&t->model);
    if (t->sampling) inference_free(&t->sampler);
    profile_free(&t->profile);
}
