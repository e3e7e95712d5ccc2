// tests/mirrors/print_schedule.c: prints the step schedule's rates (gpt/schedule.h) over runs of several
// schedules and optimizers as JSON, for tests/mirrors/test_schedule.py to compare with
// scripts/gpt_schedule.py's:
//   {"runs": [a run each: {"schedule": StepSchedule's fields, "optimizer": its kind and settings,
//             "steps": N, "rates": [a step each: [the groups' lr by ParamGroup, momentum,
//             weight decay]]}],
//    "presets": [for each preset and optimizer: {"preset": its name, "optimizer": adamw or muon,
//                "schedule": preset_schedule's fields}]}
// Every float is C99's hexadecimal form ("%a"), which Python's float.fromhex reads exactly. The
// runs: the default cosine, with a warmup and a final fraction and with a warmup longer than the
// run; warmup-stable-decay with warm-downs whose step count rounds either way, one that would
// start inside the warmup and one of every step; Muon's momentum warm-up and cool-down, apart
// and overlapping; a linear weight decay; under AdamW and Muon; each preset's schedule at its
// optimizer's defaults (preset_optimizer_defaults), over a run longer than 2026's momentum warm-up.
#include <stdio.h>

#include "gpt/schedule.h"

static void print_float(const char* name, float v, const char* after) { printf("\"%s\": \"%a\"%s", name, v, after); }

static void print_schedule(const StepSchedule* s) {
    printf("\"schedule\": {\"lr_shape\": \"%s\", \"warmup_steps\": %d, ", s->lr_shape == LR_SHAPE_WSD ? "wsd" : "cosine",
           s->warmup_steps);
    print_float("min_lr_frac", s->min_lr_frac, ", ");
    print_float("warmdown_frac", s->warmdown_frac, ", ");
    printf("\"momentum_warmup_steps\": %d, ", s->momentum_warmup_steps);
    print_float("momentum_start", s->momentum_start, ", ");
    printf("\"momentum_cooldown_steps\": %d, ", s->momentum_cooldown_steps);
    print_float("momentum_end", s->momentum_end, ", ");
    printf("\"decay_shape\": \"%s\"}", s->decay_shape == DECAY_SHAPE_LINEAR ? "linear" : "constant");
}

static void print_run(const StepSchedule* s, const OptimizerConfig* o, int steps) {
    static int runs = 0;
    printf("%s\n {", runs++ ? "," : "");
    print_schedule(s);
    printf(",\n  \"optimizer\": {\"optimizer\": \"%s\", ", optimizer_name(o->kind));
    print_float("lr", o->lr, ", ");
    print_float("weight_decay", o->weight_decay, ", ");
    print_float("muon_momentum", o->momentum, ", ");
    print_float("embedding_lr", o->embedding_lr, ", ");
    print_float("head_lr", o->head_lr, ", ");
    print_float("vector_lr", o->vector_lr, "");
    printf("},\n  \"steps\": %d, \"rates\": [", steps);
    for (int step = 1; step <= steps; step++) {
        StepRates r = step_rates(s, o, step, steps);
        printf("%s[", step > 1 ? ", " : "");
        for (int g = 0; g < NUM_PARAM_GROUPS; g++) printf("\"%a\", ", r.lr[g]);
        printf("\"%a\", \"%a\"]", r.momentum, r.weight_decay);
    }
    printf("]}");
}

int main(void) {
    OptimizerConfig adamw = optimizer_defaults(OPTIMIZER_ADAMW), muon = optimizer_defaults(OPTIMIZER_MUON);
    muon.lr = 0.023f;
    muon.embedding_lr = 0.3f;
    muon.head_lr = 0.0041f;
    muon.vector_lr = 0.0007f;
    muon.weight_decay = 0.03f;
    const StepSchedule cosine = {0}, warm = {.warmup_steps = 7, .min_lr_frac = 0.1f},
                       long_warmup = {.warmup_steps = 90, .min_lr_frac = 0.3f};
    const StepSchedule wsd = {.lr_shape = LR_SHAPE_WSD, .warmup_steps = 10, .min_lr_frac = 0.05f,
                              .warmdown_frac = 0.65f},
                       inside = {.lr_shape = LR_SHAPE_WSD, .warmup_steps = 30, .min_lr_frac = 0.2f,
                                 .warmdown_frac = 0.9f},
                       every_step = {.lr_shape = LR_SHAPE_WSD, .warmdown_frac = 1.0f,
                                     .decay_shape = DECAY_SHAPE_LINEAR};
    const StepSchedule momentum = {.warmup_steps = 5, .momentum_warmup_steps = 30, .momentum_start = 0.85f,
                                   .momentum_cooldown_steps = 20, .momentum_end = 0.8f},
                       overlapping = {.lr_shape = LR_SHAPE_WSD, .warmdown_frac = 0.5f, .momentum_warmup_steps = 60,
                                      .momentum_start = 0.5f, .momentum_cooldown_steps = 70, .momentum_end = 0.9f,
                                      .decay_shape = DECAY_SHAPE_LINEAR};
    printf("{\"runs\": [");
    const OptimizerConfig* both[] = {&adamw, &muon};
    for (int k = 0; k < 2; k++) {
        print_run(&cosine, both[k], 100);
        print_run(&warm, both[k], 113);
        print_run(&long_warmup, both[k], 60);
        print_run(&wsd, both[k], 100);
        print_run(&wsd, both[k], 97);    // 0.65 * 97 = 63.05 steps of warm-down: 63
        print_run(&wsd, both[k], 98);    // 63.7: 64
        print_run(&inside, both[k], 50);
        print_run(&every_step, both[k], 40);
    }
    print_run(&momentum, &muon, 100);
    print_run(&overlapping, &muon, 100);
    for (int p = 0; p < NUM_ARCHITECTURE_PRESETS; p++)
        for (int k = 0; k < 2; k++) {
            const StepSchedule s = preset_schedule(&architecture_presets[p], k);
            const OptimizerConfig o = preset_optimizer_defaults(k ? OPTIMIZER_MUON : OPTIMIZER_ADAMW,
                                                                &architecture_presets[p]);
            print_run(&s, &o, 400);
        }
    printf("],\n\"presets\": [");
    for (int p = 0; p < NUM_ARCHITECTURE_PRESETS; p++)
        for (int k = 0; k < 2; k++) {
            const StepSchedule s = preset_schedule(&architecture_presets[p], k);
            printf("%s\n {\"preset\": \"%s\", \"optimizer\": \"%s\", ", p || k ? "," : "",
                   architecture_presets[p].name, k ? "muon" : "adamw");
            print_schedule(&s);
            printf("}");
        }
    printf("]}\n");
    return 0;
}
