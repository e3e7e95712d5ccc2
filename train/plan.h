// train/plan.h: a run of train_gpt resolved before the GPU is taken. Every option not given is
// filled in: the model's shape and architecture (the interrupted run's, a checkpoint's, or a
// preset's), the init, the optimizer's settings (the interrupted run's, or the defaults of its
// preset), the step schedule, the batch and its micro-steps, the FP8 matmuls, the steps (one
// epoch by default). Every file is opened and checked: the shards and the tokenizer, the
// checkpoint's headers and then its values, the outputs (the checkpoint folder, the log); a
// resume is checked against the interrupted run and continues where it stood. Anything wrong
// ends the program with one line naming the flag or file before the GPU, so a command line can
// be checked on any machine.
#ifndef FLASHGPT_TRAIN_PLAN_H
#define FLASHGPT_TRAIN_PLAN_H

#include "common/rng.h"
#include "data/dataloader.h"
#include "distributed/ranks.h"
#include "gpt/gpt.h"
#include "tokenizer/tokenizer.h"
#include "train/batches.h"
#include "train/options.h"
#include "train/state.h"

typedef struct {
    TrainOptions o;              // as resolved: steps, total batch, val data, out dir, the optimizer's
                                 // settings and the schedule filled in
    const char* out_dir_flag;    // the option that named o.out_dir: --out-dir, or --resume
    Ranks ranks;                 // this process among the ranks, its context-parallel group
    BatchRows batch;             // the model's rows of a batch, and the ring of context parallelism
    DataParallel dp;             // its comm NULL until the ranks connect (and without a launcher)
    GPTConfig config;
    int grad_accum;              // micro-steps per step (per rank)
    Tokenizer* tok;              // or NULL
    DataLoader* train;
    DataLoader* val;             // or NULL
    int resuming;
    TrainingState resume;        // the interrupted run, when resuming
    char resume_model[4096], resume_state[4096];
    const ArchitecturePreset* preset;   // whose defaults the settings not given take (a resumed run's
                                        // optimizer settings excepted: its own)
    char optimizer_defaults[4200];   // where the settings not given came from
    float* checkpoint_values;    // the parameters of --init-from or the interrupted run, read and
                                 // checked on the host; NULL: random init
    MemorySizes sizes;           // of the model the run builds
    Rng sample_rng;              // a seed per sample
    int start_step;              // steps already done
    int profile_step;            // the step --profile times; 0: none
} RunPlan;

// The run of options resolved into *p (which must stay where it is: the model's attention plan
// points into it), saying on stdout what it reads and the optimizer; with --save-init the
// initial model is written and the program ends here.
void plan_run(RunPlan* p, const TrainOptions* options);
// The run as its training state file says it after step, the optimizer's step count adam_t.
TrainingState run_training_state(const RunPlan* p, int step, int adam_t);
void plan_free(RunPlan* p);

#endif
