// gpt/schedule.h: the step schedule: the rates the optimizer takes at each step of a run
// (gpt_update): each optimizer group's learning rate, Muon's momentum and the weight decay. One
// description (StepSchedule: train_gpt's options, the training state's record of them) gives the
// shape of each; step_rates computes a step's rates from it, on the host, with no GPU work.
//
// Every rate has one shape (RateShape): from its start value at step 0 (before the first step)
// linearly up to its peak at step `warmup`, level, then over the last `warmdown` steps down to its
// end value at the last step, linearly or as a half cosine. Steps count from 1.
//   The learning rate: from 0 up to the optimizer's peak (--lr) over warmup_steps, then
//     cosine (the default): a cosine over the rest of the run down to peak * min_lr_frac;
//     wsd (warmup, stable, decay, as nanochat and modded-nanogpt train): level, then linearly
//       down to peak * min_lr_frac over the last warmdown_frac of the steps.
//     Every group follows it alike: AdamW's one group (every tensor) runs at that rate, Muon's
//     matrices too, and Muon's Adam groups at their own peaks times the schedule's factor
//     lr / --lr; each tensor at its group's rate times its row's lr_scale (gpt/param_table.h).
//   Muon's momentum: from momentum_start up to --muon-momentum over momentum_warmup_steps, then
//     down to momentum_end over the last momentum_cooldown_steps (modded-nanogpt's
//     0.85 -> 0.95 -> 0.85).
//   The weight decay: constant (the decay a step applies, lr * weight_decay, follows the learning
//     rate), or linear: from --weight-decay down to 0 at the last step (nanochat's).
// Plain C, so CPU programs and tests compute it; scripts/gpt_schedule.py computes the same
// rates, and tests/mirrors/test_schedule.py holds the two together.
#ifndef FLASHGPT_GPT_SCHEDULE_H
#define FLASHGPT_GPT_SCHEDULE_H

#include <stddef.h>
#include "gpt/optimizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { LR_SHAPE_COSINE, LR_SHAPE_WSD } LRShape;
typedef enum { DECAY_SHAPE_CONSTANT, DECAY_SHAPE_LINEAR } DecayShape;

// The anchors' values of the settings that only some shapes take: nanochat's warm-down over the
// last 65% of the steps, modded-nanogpt's momentum from and back to 0.85.
#define WARMDOWN_FRAC_DEFAULT 0.65f
#define MOMENTUM_START_DEFAULT 0.85f
#define MOMENTUM_END_DEFAULT 0.85f

// A run's schedule. A setting its shape does not take is 0, so the schedule of the defaults is
// all zeros: cosine, no momentum warm-up or cool-down, a constant decay. Every member is an int
// or a float: the training state records each in a slot of its own.
typedef struct {
    int lr_shape;                  // LRShape
    int warmup_steps;              // the learning rate's warmup
    float min_lr_frac;             // the learning rate's end, a fraction of each peak, in [0, 1]
    float warmdown_frac;           // wsd: the fraction of the steps in the warm-down, in (0, 1]
    int momentum_warmup_steps;     // Muon's
    float momentum_start;          // with momentum_warmup_steps: in [0, 1)
    int momentum_cooldown_steps;   // Muon's
    float momentum_end;            // with momentum_cooldown_steps: in [0, 1)
    int decay_shape;               // DecayShape
} StepSchedule;

typedef enum { WARMDOWN_LINEAR, WARMDOWN_COSINE } WarmdownForm;

// The shape of one rate over a run.
typedef struct {
    float start, peak, end;   // at step 0, in between, at the last step
    int warmup;               // steps from start to peak
    int warmdown;             // the last steps, from peak to end; they begin after the warmup at the
                              // earliest
    WarmdownForm form;
} RateShape;

// r's value at step (1 to steps) of a run of steps.
float rate_at(const RateShape* r, int step, int steps);

// The groups of gpt/param_table.h's ParamGroup.
#define NUM_PARAM_GROUPS (GROUP_VECTOR + 1)

// What one optimizer step takes.
typedef struct {
    float lr[NUM_PARAM_GROUPS];   // by ParamGroup: its tensors' rate (each times its lr_scale)
    float momentum;               // Muon's
    float weight_decay;           // each tensor's decay is this times its decay_scale and its lr
} StepRates;

// The schedule of a run trained as preset p (gpt/config.h's PresetDefaults) under Muon (muon 1)
// or AdamW, where its options give none of it: the preset's learning-rate shape, warm-down and
// end, and under Muon its momentum warm-up; a setting that the shape takes and the preset leaves
// at 0 at the anchors' default (above). GPT-2's and modern's: the schedule of the defaults.
StepSchedule preset_schedule(const ArchitecturePreset* p, int muon);

// The shapes of s's rates for the optimizer o over a run of steps: the learning rate of o's own
// group (AdamW's, or Muon's matrices'), the momentum, the weight decay.
void schedule_shapes(const StepSchedule* s, const OptimizerConfig* o, int steps, RateShape* lr, RateShape* momentum,
                     RateShape* weight_decay);

// The rates of a step at which o's own group runs at lr: every other group at its peak times
// lr / o->lr (AdamW: every group at lr), o's momentum and weight decay.
StepRates optimizer_rates(const OptimizerConfig* o, float lr);

// The rates of step (1 to steps) of a run of steps under s, for the optimizer o.
StepRates step_rates(const StepSchedule* s, const OptimizerConfig* o, int step, int steps);

// 0 when every setting of s is within its bounds and each is 0 where its shape or the optimizer
// (muon: 1 for Muon) does not take it; else -1 with err (len bytes) naming the flag.
int step_schedule_invalid(const StepSchedule* s, int muon, char* err, size_t len);

// "cosine" or "wsd"; "constant" or "linear".
const char* lr_shape_name(int shape);
const char* decay_shape_name(int shape);

// s for the optimizer o in words, for the optimizer's line: "warmup 700, cosine to 0.1 x lr,
// weight decay 0.1", then the momentum's warm-up and cool-down where s has them.
void step_schedule_describe(const StepSchedule* s, const OptimizerConfig* o, char* out, size_t len);

#ifdef __cplusplus
}
#endif

#endif
