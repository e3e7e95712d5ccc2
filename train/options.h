// train/options.h: train_gpt's command line: every option in one table (train/options.cu), read
// into TrainOptions, which --help is written from. What the command line alone can refuse is
// refused here; the rest waits for the files (train/plan.h).
#ifndef FLASHGPT_TRAIN_OPTIONS_H
#define FLASHGPT_TRAIN_OPTIONS_H

#include <stdint.h>
#include "gpt/activations.h"
#include "gpt/config.h"
#include "gpt/optimizer.h"
#include "gpt/schedule.h"

// The command line as given; the plan fills in what is not (train/plan.h).
typedef struct {
    const char* model;           // preset name
    int context;                 // maxT
    int model_given, context_given;   // set on the command line (they must match a checkpoint)
    int head_size;               // --head-size: HS, NH = C / HS; 0: the preset's heads
    int arch;                    // architecture preset (gpt/config.h's architecture_presets)
    int arch_given;
    Architecture components;     // the architecture's fields given on their own (components_given,
    int components_given[ARCHITECTURE_SLOTS];    // in Architecture's slot order)
    int document_mask;           // --document-mask: each row sees its own document alone
    int window;                  // --window W, or 0
    Architecture window_pattern; // --window-pattern's windows (window_count 0: none)
    int window_pattern_given;
    const char* init_from;       // model checkpoint, or NULL
    int init_scheme;             // --init (InitScheme): how the initial model is drawn
    int init_given;
    const char* save_init;       // where to write the initial model and stop, or NULL
    const char* resume_dir;      // or NULL
    const char* train_data;      // shard glob
    const char* val_data;        // shard glob, "" for none, NULL: beside the train shards
    const char* tokenizer;       // or NULL
    int align_documents;         // --align-documents: each training row starts at a document
    int B, T;
    long long total_batch;       // tokens per step; 0: B * T
    int steps;                   // 0: one epoch
    StepSchedule schedule;       // the rates of each step (gpt/schedule.h): the settings only some
                                 // shapes take filled in by the plan
    int lr_schedule_given, min_lr_frac_given, warmdown_given, momentum_warmup_given, momentum_start_given,
        momentum_cooldown_given, momentum_end_given;   // those settings given on the command line (the rest
                                                       // take the preset's: train/plan.h)
    OptimizerConfig optimizer;   // --optimizer and its settings: NAN until given, then the
                                 // run's defaults fill in the rest (train/plan.h)
    int optimizer_given;         // --optimizer given (a resumed run's own otherwise, else the preset's)
    int normuon_given;           // --normuon given, with or without its value
    int val_every, val_batches;
    int sample_every, sample_tokens, top_k;
    float temperature;
    int checkpoint_every;
    const char* out_dir;         // or NULL: no checkpoints
    uint64_t seed;
    ModelOptions model_options;  // attention, recomputation, classifier chunks, FP8
    int fp8_given, fp8_scaling_given, fp8_grad_given;   // --fp8 and its settings given (a resumed
                                                        // run's own otherwise: train/plan.h)
    const char* log_path;        // CSV, or NULL
    float peak_tflops;           // 0: from the device name
    int gpus;                    // > 0: start this many ranks on this node (--gpus)
    unsigned char* gpus_args;    // per element of argv: 1 where --gpus or its value stands, or NULL
    int zero_stage;              // 1: shard the optimizer state over the ranks
    int context_parallel;        // ranks that share each sequence [1]
    int profile;                 // print the step profile (--profile)
    int profile_step;            // of this step; 0: the run's second
} TrainOptions;

// argv's options into *o, each not given at its default; --help prints the table and exits. Dies
// naming the argument that is wrong, or the options that exclude each other.
void train_options_parse(int argc, char** argv, TrainOptions* o);

#endif
