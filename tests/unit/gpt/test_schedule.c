// tests/unit/gpt/test_schedule.c: the step schedule (gpt/schedule.h), on the CPU. The default schedule's
// rates are, bit for bit, those of the formulas it stands for (written out here: a linear warmup,
// a cosine to min_lr_frac in double, and Muon's Adam groups at peak * (lr / --lr) in float) over
// runs of many settings; the shapes' values at the steps that define them (warmup, cosine,
// warmup-stable-decay, Muon's momentum warm-up and cool-down, a linear weight decay); the bounds
// of each setting, refused naming its flag; the optimizer's line; each preset's defaults.
#include <math.h>
#include <string.h>

#include "common/rng.h"
#include "gpt/schedule.h"
#include "tests/lib/test.h"

// The learning rate of the default schedule as a formula: warmup from lr / warmup, a cosine to
// lr * min_lr_frac at the last step.
static float cosine_formula(float lr, int warmup, float min_lr_frac, int step, int steps) {
    if (step <= warmup) return lr * step / warmup;
    float min_lr = lr * min_lr_frac;
    if (steps <= warmup) return lr;
    double progress = (double)(step - warmup) / (steps - warmup);
    return (float)(min_lr + 0.5 * (lr - min_lr) * (1.0 + cos(M_PI * progress)));
}

static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof(a)) == 0; }

static float random_float(Rng* rng, float lo, float hi) { return lo + (hi - lo) * (float)rng_uniform(rng); }

static void test_default_is_the_formula(void) {
    test_begin("schedule: the default's rates are the cosine formula's and peak * (lr / --lr), bit for bit");
    Rng rng = {54};
    long long compared = 0;
    for (int run = 0; run < 400 && !test_case_failures; run++) {
        OptimizerConfig o = optimizer_defaults(run % 2 ? OPTIMIZER_MUON : OPTIMIZER_ADAMW);
        o.lr = random_float(&rng, 1e-5f, 0.1f);
        o.embedding_lr = random_float(&rng, 1e-4f, 0.1f);
        o.head_lr = random_float(&rng, 1e-4f, 0.1f);
        o.vector_lr = random_float(&rng, 1e-4f, 0.1f);
        o.weight_decay = random_float(&rng, 0.0f, 0.5f);
        int steps = 1 + (int)(rng_next(&rng) % 3000);
        StepSchedule s = {.warmup_steps = (int)(rng_next(&rng) % (uint64_t)(steps + 50)),
                          .min_lr_frac = run % 5 ? random_float(&rng, 0.0f, 1.0f) : 0.0f};
        for (int step = 1; step <= steps; step++) {
            StepRates r = step_rates(&s, &o, step, steps);
            float lr = cosine_formula(o.lr, s.warmup_steps, s.min_lr_frac, step, steps);
            float factor = lr / o.lr;
            int muon = o.kind == OPTIMIZER_MUON;
            float groups[NUM_PARAM_GROUPS] = {lr, muon ? o.embedding_lr * factor : lr,
                                              muon ? o.head_lr * factor : lr, muon ? o.vector_lr * factor : lr};
            for (int g = 0; g < NUM_PARAM_GROUPS; g++)
                CHECK(same_bits(r.lr[g], groups[g]), "run %d (%s, lr %g, warmup %d, min %g, %d steps) step %d group "
                      "%d: %.9g, the formula %.9g", run, optimizer_name(o.kind), o.lr, s.warmup_steps, s.min_lr_frac,
                      steps, step, g, r.lr[g], groups[g]);
            CHECK(same_bits(r.momentum, o.momentum) && same_bits(r.weight_decay, o.weight_decay),
                  "run %d step %d: momentum %.9g, decay %.9g", run, step, r.momentum, r.weight_decay);
            compared++;
            if (test_case_failures) break;
        }
    }
    printf("    %lld steps compared\n", compared);
    test_end();
}

static void test_cosine(void) {
    test_begin("schedule: warmup, then the cosine to min_lr_frac at the last step");
    OptimizerConfig o = optimizer_defaults(OPTIMIZER_ADAMW);
    o.lr = 1.0f;
    StepSchedule s = {.warmup_steps = 10, .min_lr_frac = 0.1f};
    const struct {
        int step;
        float lr;
    } at[] = {{1, 0.1f}, {10, 1.0f}, {60, 0.55f}, {110, 0.1f}};
    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
        float lr = step_rates(&s, &o, at[i].step, 110).lr[GROUP_MATRIX];
        CHECK(fabsf(lr - at[i].lr) < 1e-6f, "step %d: %g, expected %g", at[i].step, lr, at[i].lr);
    }
    StepSchedule short_run = {.warmup_steps = 20};
    CHECK(step_rates(&short_run, &o, 5, 5).lr[GROUP_MATRIX] == 0.25f, "a run inside its warmup");
    test_end();
}

static void test_wsd(void) {
    test_begin("schedule: wsd: warmup, level, then linear to min_lr_frac over the last warmdown_frac");
    OptimizerConfig o = optimizer_defaults(OPTIMIZER_MUON);
    o.lr = 0.02f;
    o.embedding_lr = 0.3f;
    StepSchedule s = {.lr_shape = LR_SHAPE_WSD, .warmup_steps = 4, .min_lr_frac = 0.05f, .warmdown_frac = 0.65f};
    // 100 steps: the warm-down is the last 65, from step 35 (at the peak) to 100 (at 5%).
    const struct {
        int step;
        float factor;
    } at[] = {{1, 0.25f}, {4, 1.0f}, {20, 1.0f}, {35, 1.0f}, {36, 1.0f - 0.95f / 65}, {68, 0.525f - 0.95f / 130},
              {99, 0.05f + 0.95f / 65}, {100, 0.05f}};
    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
        StepRates r = step_rates(&s, &o, at[i].step, 100);
        CHECK(fabsf(r.lr[GROUP_MATRIX] - 0.02f * at[i].factor) < 1e-8f, "step %d: %.9g, expected %.9g", at[i].step,
              r.lr[GROUP_MATRIX], 0.02f * at[i].factor);
        CHECK(fabsf(r.lr[GROUP_EMBEDDING] - 0.3f * at[i].factor) < 1e-7f, "step %d: the embeddings at %.9g, "
              "expected %.9g", at[i].step, r.lr[GROUP_EMBEDDING], 0.3f * at[i].factor);
    }
    // The warm-down count rounds to the nearest step (0.65 * 9 = 5.85: 6), and starts after the warmup
    // at the earliest.
    CHECK(fabsf(step_rates(&s, &o, 3, 9).lr[GROUP_MATRIX] - 0.015f) < 1e-9f &&
          step_rates(&s, &o, 4, 9).lr[GROUP_MATRIX] == 0.02f, "a warm-down that would start inside the warmup");
    CHECK(fabsf(step_rates(&s, &o, 5, 9).lr[GROUP_MATRIX] - 0.02f * (1.0f - 0.95f / 5)) < 1e-8f,
          "the warm-down of a short run: %.9g", step_rates(&s, &o, 5, 9).lr[GROUP_MATRIX]);
    s.warmdown_frac = 1.0f;
    s.warmup_steps = 0;
    CHECK(fabsf(step_rates(&s, &o, 1, 10).lr[GROUP_MATRIX] - 0.02f * (1.0f - 0.095f)) < 1e-8f,
          "a warm-down of every step: %.9g", step_rates(&s, &o, 1, 10).lr[GROUP_MATRIX]);
    test_end();
}

static void test_momentum_and_decay(void) {
    test_begin("schedule: Muon's momentum warm-up and cool-down, a weight decay linear to 0");
    OptimizerConfig o = optimizer_defaults(OPTIMIZER_MUON);
    o.weight_decay = 0.2f;
    StepSchedule s = {.momentum_warmup_steps = 300, .momentum_start = 0.85f, .momentum_cooldown_steps = 50,
                      .momentum_end = 0.9f, .decay_shape = DECAY_SHAPE_LINEAR};
    const struct {
        int step;
        float momentum, decay;
    } at[] = {{1, 0.85f + 0.1f / 300, 0.2f * 0.999f}, {150, 0.9f, 0.2f * 0.85f}, {300, 0.95f, 0.2f * 0.7f},
              {301, 0.95f, 0.2f * 0.699f}, {950, 0.95f, 0.2f * 0.05f}, {975, 0.925f, 0.2f * 0.025f},
              {1000, 0.9f, 0.0f}};
    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
        StepRates r = step_rates(&s, &o, at[i].step, 1000);
        CHECK(fabsf(r.momentum - at[i].momentum) < 1e-6f, "step %d: momentum %.9g, expected %.9g", at[i].step,
              r.momentum, at[i].momentum);
        CHECK(fabsf(r.weight_decay - at[i].decay) < 1e-7f, "step %d: decay %.9g, expected %.9g", at[i].step,
              r.weight_decay, at[i].decay);
    }
    CHECK(step_rates(&s, &o, 1000, 1000).weight_decay == 0.0f, "the decay at the last step is not 0");
    test_end();
}

static void test_bounds(void) {
    test_begin("schedule: each setting out of its bounds, or without effect, refused naming its flag");
    const struct {
        StepSchedule s;
        int muon;
        const char* error;   // NULL: valid
    } cases[] = {
        {{0}, 0, NULL},
        {{.lr_shape = LR_SHAPE_WSD, .warmdown_frac = 1.0f}, 0, NULL},
        {{.momentum_warmup_steps = 5, .momentum_start = 0.0f, .momentum_cooldown_steps = 1, .momentum_end = 0.5f}, 1,
         NULL},
        {{.lr_shape = 2}, 0, "--lr-schedule 2 is neither cosine nor wsd"},
        {{.warmup_steps = -1}, 0, "--warmup-steps -1 must be >= 0"},
        {{.min_lr_frac = 1.5f}, 0, "--min-lr-frac 1.5 must be in [0, 1]"},
        {{.lr_shape = LR_SHAPE_WSD}, 0, "--warmdown-frac 0 must be in (0, 1]"},
        {{.lr_shape = LR_SHAPE_WSD, .warmdown_frac = 1.5f}, 0, "--warmdown-frac 1.5 must be in (0, 1]"},
        {{.warmdown_frac = 0.5f}, 0, "--warmdown-frac is a setting of --lr-schedule wsd"},
        {{.momentum_warmup_steps = 5, .momentum_start = 0.5f}, 0,
         "--momentum-warmup-steps is a setting of --optimizer muon"},
        {{.momentum_end = 0.5f}, 0, "--momentum-cooldown-steps is a setting of --optimizer muon"},
        {{.momentum_warmup_steps = -2}, 1, "--momentum-warmup-steps -2 must be >= 0"},
        {{.momentum_warmup_steps = 5, .momentum_start = 1.0f}, 1, "--momentum-start 1 must be in [0, 1)"},
        {{.momentum_start = 0.5f}, 1, "--momentum-start without --momentum-warmup-steps has no effect"},
        {{.momentum_cooldown_steps = 5, .momentum_end = -0.5f}, 1, "--momentum-end -0.5 must be in [0, 1)"},
        {{.momentum_end = 0.5f}, 1, "--momentum-end without --momentum-cooldown-steps has no effect"},
        {{.decay_shape = 7}, 0, "--weight-decay-schedule 7 is neither constant nor linear"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[ERR_LEN] = "";
        int refused = step_schedule_invalid(&cases[i].s, cases[i].muon, err, sizeof(err)) != 0;
        if (!cases[i].error) CHECK(!refused, "case %zu refused: %s", i, err);
        else CHECK(refused && !strcmp(err, cases[i].error), "case %zu: '%s', expected '%s'", i, refused ? err : "",
                   cases[i].error);
    }
    test_end();
}

static void test_describe(void) {
    test_begin("schedule: the optimizer's line");
    OptimizerConfig o = optimizer_defaults(OPTIMIZER_MUON);
    o.weight_decay = 0.5f;
    char text[512];
    StepSchedule s = {.warmup_steps = 2, .min_lr_frac = 0.5f};
    step_schedule_describe(&s, &o, text, sizeof(text));
    CHECK(!strcmp(text, "warmup 2, cosine to 0.5 x lr, weight decay 0.5"), "the default: %s", text);
    s = (StepSchedule){.lr_shape = LR_SHAPE_WSD, .min_lr_frac = 0.05f, .warmdown_frac = 0.65f,
                       .momentum_warmup_steps = 300, .momentum_start = 0.85f, .momentum_cooldown_steps = 50,
                       .momentum_end = 0.9f, .decay_shape = DECAY_SHAPE_LINEAR};
    step_schedule_describe(&s, &o, text, sizeof(text));
    CHECK(!strcmp(text, "warmup 0, constant, then linear to 0.05 x lr over the last 65% of the steps, weight decay "
                        "0.5 down to 0 at the end, momentum from 0.85 over the first 300 steps, momentum down to "
                        "0.9 over the last 50 steps"), "wsd: %s", text);
    test_end();
}

// Each preset's defaults: gpt2's and modern's those of every earlier version (modern's AdamW at
// 2e-3, Muon's wte at 0.05), the default schedule; 2026's Muon with head pairs and NorMuon, weight
// decay 0.1, modern's rates, and a warm-down over the last 65% to 0.05 with Muon's momentum from
// 0.85 over the first 300 steps (under AdamW without the momentum's warm-up); each schedule valid.
static void test_preset_defaults(void) {
    test_begin("schedule: the defaults of each preset: the optimizer, its settings and the schedule");
    const ArchitecturePreset *gpt2 = &architecture_presets[0], *modern = &architecture_presets[1],
                             *recipe = &architecture_presets[2];
    char err[256];
    for (int p = 0; p < NUM_ARCHITECTURE_PRESETS; p++)
        for (int muon = 0; muon < 2; muon++) {
            const StepSchedule s = preset_schedule(&architecture_presets[p], muon);
            const OptimizerConfig o = preset_optimizer_defaults(muon ? OPTIMIZER_MUON : OPTIMIZER_ADAMW,
                                                                &architecture_presets[p]);
            CHECK(!step_schedule_invalid(&s, muon, err, sizeof(err)) && !optimizer_invalid(&o, 1, err, sizeof(err)),
                  "%s, %s: %s", architecture_presets[p].name, muon ? "muon" : "adamw", err);
        }
    const StepSchedule plain = {0};
    for (int muon = 0; muon < 2; muon++) {
        StepSchedule g = preset_schedule(gpt2, muon), m = preset_schedule(modern, muon);
        CHECK(!memcmp(&g, &plain, sizeof(g)) && !memcmp(&m, &plain, sizeof(m)), "gpt2's or modern's schedule is not "
              "the default");
    }
    OptimizerConfig g = preset_optimizer_defaults(OPTIMIZER_MUON, gpt2), d = optimizer_defaults(OPTIMIZER_MUON);
    CHECK(!memcmp(&g, &d, sizeof(g)) && preset_optimizer(gpt2) == OPTIMIZER_ADAMW &&
              preset_optimizer(modern) == OPTIMIZER_ADAMW, "gpt2's defaults are not the optimizer's own");
    OptimizerConfig m = preset_optimizer_defaults(OPTIMIZER_MUON, modern), a = preset_optimizer_defaults(OPTIMIZER_ADAMW, modern);
    CHECK(m.embedding_lr == 0.05f && m.weight_decay == 0.0f && !m.muon_qkv && !m.normuon && a.lr == 2e-3f &&
              a.weight_decay == 0.1f, "modern's defaults");
    CHECK(preset_optimizer(recipe) == OPTIMIZER_MUON, "2026's optimizer is not Muon");
    OptimizerConfig r = preset_optimizer_defaults(OPTIMIZER_MUON, recipe);
    CHECK(r.lr == 0.02f && r.embedding_lr == 0.05f && r.head_lr == 0.002f && r.vector_lr == 0.002f &&
              r.weight_decay == 0.1f && r.muon_qkv == MUON_QKV_HEAD_PAIRS && r.normuon && r.normuon_beta2 == 0.95f &&
              r.muon_ns == NEWTON_SCHULZ_QUINTIC && !r.cautious_weight_decay && r.momentum == 0.95f,
          "2026's Muon: lr %g wd %g qkv %d normuon %d", r.lr, r.weight_decay, r.muon_qkv, r.normuon);
    r = preset_optimizer_defaults(OPTIMIZER_ADAMW, recipe);
    CHECK(r.lr == 2e-3f && r.weight_decay == 0.1f && !r.muon_qkv && !r.normuon && r.normuon_beta2 == 0.0f,
          "2026's AdamW: lr %g wd %g", r.lr, r.weight_decay);
    const StepSchedule with_muon = {.lr_shape = LR_SHAPE_WSD, .min_lr_frac = 0.05f, .warmdown_frac = 0.65f,
                                    .momentum_warmup_steps = 300, .momentum_start = 0.85f},
                       with_adamw = {.lr_shape = LR_SHAPE_WSD, .min_lr_frac = 0.05f, .warmdown_frac = 0.65f};
    StepSchedule sm = preset_schedule(recipe, 1), sa = preset_schedule(recipe, 0);
    CHECK(!memcmp(&sm, &with_muon, sizeof(sm)) && !memcmp(&sa, &with_adamw, sizeof(sa)), "2026's schedule");
    test_end();
}

int main(void) {
    test_preset_defaults();
    test_default_is_the_formula();
    test_cosine();
    test_wsd();
    test_momentum_and_decay();
    test_bounds();
    test_describe();
    return test_exit_code();
}
