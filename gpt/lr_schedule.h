// gpt/lr_schedule.h: the learning rate of each step: a linear warmup from lr/warmup to lr,
// then a cosine down to lr * min_lr_frac at the last step.
#ifndef FLASHGPT_GPT_LR_SCHEDULE_H
#define FLASHGPT_GPT_LR_SCHEDULE_H

#include <math.h>

typedef struct {
    float lr;            // peak
    int warmup_steps;
    float min_lr_frac;   // the end, as a fraction of lr
} LRSchedule;

// step counts from 1; steps is the run's last.
static inline float learning_rate(const LRSchedule* s, int step, int steps) {
    if (step <= s->warmup_steps) return s->lr * step / s->warmup_steps;
    float min_lr = s->lr * s->min_lr_frac;
    if (steps <= s->warmup_steps) return s->lr;
    double progress = (double)(step - s->warmup_steps) / (steps - s->warmup_steps);
    return (float)(min_lr + 0.5 * (s->lr - min_lr) * (1.0 + cos(M_PI * progress)));
}

#endif
