// gpt/schedule.c: the rates of each step from the schedule's description (gpt/schedule.h).
#include "gpt/schedule.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

float rate_at(const RateShape* r, int step, int steps) {
    if (step <= r->warmup) return r->start + (r->peak - r->start) * step / r->warmup;
    int from = steps - r->warmdown > r->warmup ? steps - r->warmdown : r->warmup;
    if (step <= from || from >= steps) return r->peak;
    double progress = (double)(step - from) / (steps - from);
    // The cosine's difference is taken in float, then the rest in double: the cosine's own rounding.
    if (r->form == WARMDOWN_COSINE) return (float)(r->end + 0.5 * (r->peak - r->end) * (1.0 + cos(M_PI * progress)));
    return (float)(r->peak + ((double)r->end - r->peak) * progress);
}

StepSchedule preset_schedule(const ArchitecturePreset* p, int muon) {
    const PresetDefaults* d = &p->defaults;
    StepSchedule s = {.lr_shape = d->wsd ? LR_SHAPE_WSD : LR_SHAPE_COSINE, .min_lr_frac = d->min_lr_frac};
    if (d->wsd) s.warmdown_frac = d->warmdown_frac != 0.0f ? d->warmdown_frac : WARMDOWN_FRAC_DEFAULT;
    if (muon && d->momentum_warmup_steps) {
        s.momentum_warmup_steps = d->momentum_warmup_steps;
        s.momentum_start = d->momentum_start != 0.0f ? d->momentum_start : MOMENTUM_START_DEFAULT;
    }
    return s;
}

void schedule_shapes(const StepSchedule* s, const OptimizerConfig* o, int steps, RateShape* lr, RateShape* momentum,
                     RateShape* weight_decay) {
    int wsd = s->lr_shape == LR_SHAPE_WSD;
    *lr = (RateShape){.start = 0.0f, .peak = o->lr, .end = o->lr * s->min_lr_frac, .warmup = s->warmup_steps,
                      .warmdown = wsd ? (int)floor((double)s->warmdown_frac * steps + 0.5) : steps,
                      .form = wsd ? WARMDOWN_LINEAR : WARMDOWN_COSINE};
    *momentum = (RateShape){.start = s->momentum_start, .peak = o->momentum, .end = s->momentum_end,
                            .warmup = s->momentum_warmup_steps, .warmdown = s->momentum_cooldown_steps,
                            .form = WARMDOWN_LINEAR};
    int linear = s->decay_shape == DECAY_SHAPE_LINEAR;
    *weight_decay = (RateShape){.start = o->weight_decay, .peak = o->weight_decay, .end = 0.0f, .warmup = 0,
                                .warmdown = linear ? steps : 0, .form = WARMDOWN_LINEAR};
}

StepRates optimizer_rates(const OptimizerConfig* o, float lr) {
    StepRates r = {.momentum = o->momentum, .weight_decay = o->weight_decay};
    int muon = o->kind == OPTIMIZER_MUON;
    float factor = lr / o->lr;
    r.lr[GROUP_MATRIX] = lr;
    r.lr[GROUP_EMBEDDING] = muon ? o->embedding_lr * factor : lr;
    r.lr[GROUP_HEAD] = muon ? o->head_lr * factor : lr;
    r.lr[GROUP_VECTOR] = muon ? o->vector_lr * factor : lr;
    return r;
}

StepRates step_rates(const StepSchedule* s, const OptimizerConfig* o, int step, int steps) {
    RateShape lr, momentum, weight_decay;
    schedule_shapes(s, o, steps, &lr, &momentum, &weight_decay);
    StepRates r = optimizer_rates(o, rate_at(&lr, step, steps));
    r.momentum = rate_at(&momentum, step, steps);
    r.weight_decay = rate_at(&weight_decay, step, steps);
    return r;
}

// 0 when a momentum of Muon's schedule (flag) is within [0, 1) where its steps (steps_flag) are
// given, and 0 where they are not; else -1 with err.
static int momentum_refused(const char* flag, float v, const char* steps_flag, int steps, char* err, size_t len) {
    if (steps > 0 && !(v >= 0.0f && v < 1.0f)) snprintf(err, len, "%s %g must be in [0, 1)", flag, v);
    else if (steps == 0 && v != 0.0f) snprintf(err, len, "%s without %s has no effect", flag, steps_flag);
    else return 0;
    return -1;
}

int step_schedule_invalid(const StepSchedule* s, int muon, char* err, size_t len) {
    if (s->lr_shape != LR_SHAPE_COSINE && s->lr_shape != LR_SHAPE_WSD)
        snprintf(err, len, "--lr-schedule %d is neither cosine nor wsd", s->lr_shape);
    else if (s->warmup_steps < 0) snprintf(err, len, "--warmup-steps %d must be >= 0", s->warmup_steps);
    else if (!(s->min_lr_frac >= 0.0f && s->min_lr_frac <= 1.0f))
        snprintf(err, len, "--min-lr-frac %g must be in [0, 1]", s->min_lr_frac);
    else if (s->lr_shape == LR_SHAPE_WSD && !(s->warmdown_frac > 0.0f && s->warmdown_frac <= 1.0f))
        snprintf(err, len, "--warmdown-frac %g must be in (0, 1]", s->warmdown_frac);
    else if (s->lr_shape == LR_SHAPE_COSINE && s->warmdown_frac != 0.0f)
        snprintf(err, len, "--warmdown-frac is a setting of --lr-schedule wsd");
    else if (!muon && (s->momentum_warmup_steps || s->momentum_start != 0.0f))
        snprintf(err, len, "--momentum-warmup-steps is a setting of --optimizer muon");
    else if (!muon && (s->momentum_cooldown_steps || s->momentum_end != 0.0f))
        snprintf(err, len, "--momentum-cooldown-steps is a setting of --optimizer muon");
    else if (s->momentum_warmup_steps < 0)
        snprintf(err, len, "--momentum-warmup-steps %d must be >= 0", s->momentum_warmup_steps);
    else if (s->momentum_cooldown_steps < 0)
        snprintf(err, len, "--momentum-cooldown-steps %d must be >= 0", s->momentum_cooldown_steps);
    else if (momentum_refused("--momentum-start", s->momentum_start, "--momentum-warmup-steps",
                              s->momentum_warmup_steps, err, len) ||
             momentum_refused("--momentum-end", s->momentum_end, "--momentum-cooldown-steps",
                              s->momentum_cooldown_steps, err, len))
        return -1;
    else if (s->decay_shape != DECAY_SHAPE_CONSTANT && s->decay_shape != DECAY_SHAPE_LINEAR)
        snprintf(err, len, "--weight-decay-schedule %d is neither constant nor linear", s->decay_shape);
    else return 0;
    return -1;
}

const char* lr_shape_name(int shape) { return shape == LR_SHAPE_WSD ? "wsd" : "cosine"; }
const char* decay_shape_name(int shape) { return shape == DECAY_SHAPE_LINEAR ? "linear" : "constant"; }

void step_schedule_describe(const StepSchedule* s, const OptimizerConfig* o, char* out, size_t len) {
    int n = snprintf(out, len, "warmup %d, ", s->warmup_steps);
    if (s->lr_shape == LR_SHAPE_WSD)
        n += snprintf(out + n, len - n, "constant, then linear to %g x lr over the last %g%% of the steps",
                      s->min_lr_frac, s->warmdown_frac * 100.0);
    else n += snprintf(out + n, len - n, "cosine to %g x lr", s->min_lr_frac);
    n += snprintf(out + n, len - n, ", weight decay %g%s", o->weight_decay,
                  s->decay_shape == DECAY_SHAPE_LINEAR ? " down to 0 at the end" : "");
    if (s->momentum_warmup_steps)
        n += snprintf(out + n, len - n, ", momentum from %g over the first %d steps", s->momentum_start,
                      s->momentum_warmup_steps);
    if (s->momentum_cooldown_steps)
        snprintf(out + n, len - n, ", momentum down to %g over the last %d steps", s->momentum_end,
                 s->momentum_cooldown_steps);
}
