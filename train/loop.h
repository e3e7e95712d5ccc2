// train/loop.h: a planned run (train/plan.h) on the GPU, and its loop. trainer_start takes the
// GPU: the ranks connect, the model is built with its parameters (random from the seed, a
// checkpoint's, or the interrupted run's with its optimizer state), the sampler and the outputs
// made. Then each step: the step's rates (gpt/schedule.h), grad_accum micro-steps of forward,
// loss and backward on the next batches, the update; validation, the report (train/report.h),
// samples and checkpoints when they are due. The model is the library in gpt/ (gpt/gpt.h); this
// loop only decides when each part runs.
// The host queues a step without waiting for the GPU (the loss and the gradient norm stay there,
// the next batch is read while the GPU runs, the host at most a batch ahead: train/batches.h):
// a step's report is made once the next step is queued, from its values copied back beside the
// GPU's work. A step with validation, a sample, a checkpoint or the profile, and the last, is
// reported before anything else runs, so that the lines and files are those of a loop that waits
// for each step.
#ifndef FLASHGPT_TRAIN_LOOP_H
#define FLASHGPT_TRAIN_LOOP_H

#include <stdio.h>
#include "gpt/gpt.h"
#include "gpt/inference.h"
#include "gpt/profile.h"
#include "train/plan.h"

typedef struct {
    RunPlan* plan;
    GPT model;
    InferenceModel sampler;      // rank 0 with --sample-every: the model samples are drawn on
    int sampling;
    FILE* log;                   // or NULL
    double flops_per_token;      // the MFU's basis (mfu_flops_per_token: FP8's FLOPs at half)
    float peak_tflops;           // 0: unknown
    Profile profile;
    StepValues* values;          // (2) pinned: the loss and norm of the last two steps queued
    cudaEvent_t started[2];      // of the same steps: the GPU reaches the step's first work
    cudaEvent_t done[2];         // and has done its last, its values copied
} Trainer;

// The run of the plan p on the GPU (p's checkpoint values are consumed), said on stdout
// (print_run).
void trainer_start(Trainer* t, RunPlan* p);
// The steps from the plan's start to its last.
void train(Trainer* t);
void trainer_free(Trainer* t);

#endif
