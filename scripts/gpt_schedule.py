"""scripts/gpt_schedule.py: train_gpt's step schedule (gpt/schedule.h) for the Python scripts
(python3 alone: no numpy, no torch): the rates of each step of a run, each optimizer group's
learning rate, Muon's momentum and the weight decay, and train_gpt's options for them. Computed
with the C's float32 roundings, so that for the same settings the rates are train_gpt's bit for
bit; tests/mirrors/test_schedule.py holds the two together (build/tests/mirrors/print_schedule).

Every rate has one shape (RateShape): from its start value at step 0 linearly up to its peak at
step warmup, level, then over the last warmdown steps down to its end value at the last step,
linearly or as a half cosine (steps count from 1):
- the learning rate: from 0 over --warmup-steps up to --lr, then "cosine" (down to
  lr * --min-lr-frac over the rest of the run) or "wsd" (level, then linearly down to
  lr * --min-lr-frac over the last --warmdown-frac of the steps); AdamW's one group and Muon's
  matrices at that rate, Muon's Adam groups at their own peaks times lr / --lr;
- Muon's momentum: from --momentum-start over --momentum-warmup-steps up to --muon-momentum, then
  down to --momentum-end over the last --momentum-cooldown-steps;
- the weight decay: "constant" (lr * weight_decay follows the learning rate) or "linear" (down to
  0 at the last step).
The optimizer settings o a function takes are attributes, as train_torch_reference.py's options
hold them: optimizer ("adamw" or "muon"), lr, weight_decay and, under Muon, muon_momentum,
embedding_lr, head_lr, vector_lr. A setting not given takes the preset's (preset_schedule: the
preset's learning-rate shape, warm-down and end, and under Muon its momentum warm-up;
scripts/gpt_architecture.py's PRESET_DEFAULTS), else the anchors' default.
"""
import math
import struct
from typing import NamedTuple

from gpt_architecture import PRESET_DEFAULTS

LR_SHAPES = ("cosine", "wsd")
DECAY_SHAPES = ("constant", "linear")
GROUPS = ("matrix", "embedding", "head", "vector")  # gpt/param_table.h's ParamGroup
# The anchors' values of the settings only some shapes take (gpt/schedule.h).
WARMDOWN_FRAC_DEFAULT, MOMENTUM_START_DEFAULT, MOMENTUM_END_DEFAULT = 0.65, 0.85, 0.85


def f32(x):
    """x rounded to float32 (nearest, ties to even), as a Python float. An operation on float32
    values done in double and rounded so is the float32 operation's result."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


class Schedule(NamedTuple):
    """gpt/schedule.h's StepSchedule: a setting its shape does not take is 0; the floats float32."""
    lr_shape: str = "cosine"
    warmup_steps: int = 0
    min_lr_frac: float = 0.0
    warmdown_frac: float = 0.0
    momentum_warmup_steps: int = 0
    momentum_start: float = 0.0
    momentum_cooldown_steps: int = 0
    momentum_end: float = 0.0
    decay_shape: str = "constant"


class RateShape(NamedTuple):
    start: float
    peak: float
    end: float
    warmup: int
    warmdown: int
    cosine: bool


class Rates(NamedTuple):
    """A step's rates: lr by group (GROUPS), Muon's momentum, the weight decay."""
    lr: dict
    momentum: float
    weight_decay: float


def rate_at(r, step, steps):
    """r's value at step (1 to steps) of a run of steps."""
    if step <= r.warmup:
        return f32(r.start + f32(f32(f32(r.peak - r.start) * f32(step)) / f32(r.warmup)))
    start = max(steps - r.warmdown, r.warmup)
    if step <= start or start >= steps:
        return r.peak
    progress = (step - start) / (steps - start)
    if r.cosine:
        return f32(r.end + 0.5 * f32(r.peak - r.end) * (1.0 + math.cos(math.pi * progress)))
    return f32(r.peak + (r.end - r.peak) * progress)


def preset_schedule(preset, muon):
    """The schedule of a run trained as preset under Muon (muon True) or AdamW where its options give
    none of it (gpt/schedule.h's preset_schedule): the preset's learning-rate shape, warm-down and
    end, and under Muon its momentum warm-up; a setting that the shape takes and the preset leaves
    at 0 at the anchors' default."""
    d = PRESET_DEFAULTS[preset]
    wsd, warmup = d.lr_schedule == "wsd", d.momentum_warmup_steps if muon else 0
    return Schedule(d.lr_schedule, 0, f32(d.min_lr_frac), f32(d.warmdown_frac or WARMDOWN_FRAC_DEFAULT) if wsd else 0.0,
                    warmup, f32(d.momentum_start or MOMENTUM_START_DEFAULT) if warmup else 0.0)


def is_muon(o):
    return o.optimizer == "muon"


def schedule_shapes(s, o, steps):
    """The shapes (lr, momentum, weight decay) of s's rates for the optimizer settings o over a run of
    steps: the learning rate of o's own group (AdamW's, or Muon's matrices')."""
    lr, wsd = f32(o.lr), s.lr_shape == "wsd"
    momentum = f32(o.muon_momentum) if is_muon(o) else 0.0
    decay = f32(o.weight_decay)
    return (RateShape(0.0, lr, f32(lr * s.min_lr_frac), s.warmup_steps,
                      math.floor(s.warmdown_frac * steps + 0.5) if wsd else steps, not wsd),
            RateShape(s.momentum_start, momentum, s.momentum_end, s.momentum_warmup_steps, s.momentum_cooldown_steps,
                      False),
            RateShape(decay, decay, 0.0, 0, steps if s.decay_shape == "linear" else 0, False))


def optimizer_rates(o, lr):
    """The rates of a step at which o's own group runs at lr: every other group at its peak times
    lr / o.lr (AdamW: every group at lr), o's momentum and weight decay."""
    if not is_muon(o):
        return Rates(dict.fromkeys(GROUPS, lr), 0.0, f32(o.weight_decay))
    factor = f32(lr / f32(o.lr))
    peaks = {"embedding": o.embedding_lr, "head": o.head_lr, "vector": o.vector_lr}
    return Rates({"matrix": lr, **{g: f32(f32(peak) * factor) for g, peak in peaks.items()}}, f32(o.muon_momentum),
                 f32(o.weight_decay))


def step_rates(s, o, step, steps):
    """The rates of step (1 to steps) of a run of steps under the schedule s, for the settings o."""
    lr, momentum, decay = schedule_shapes(s, o, steps)
    return optimizer_rates(o, rate_at(lr, step, steps))._replace(momentum=rate_at(momentum, step, steps),
                                                                 weight_decay=rate_at(decay, step, steps))


def momentum_refused(flag, v, steps_flag, steps):
    if steps > 0 and not 0 <= v < 1:
        return f"{flag} {v:g} must be in [0, 1)"
    if steps == 0 and v != 0:
        return f"{flag} without {steps_flag} has no effect"
    return None


def invalid(s, muon):
    """None when every setting of s is within its bounds and 0 where its shape or the optimizer
    (muon: Muon) does not take it, else what is wrong, naming the flag (step_schedule_invalid)."""
    if s.lr_shape not in LR_SHAPES:
        return f"--lr-schedule {s.lr_shape} is neither cosine nor wsd"
    if s.warmup_steps < 0:
        return f"--warmup-steps {s.warmup_steps} must be >= 0"
    if not 0 <= s.min_lr_frac <= 1:
        return f"--min-lr-frac {s.min_lr_frac:g} must be in [0, 1]"
    if s.lr_shape == "wsd" and not 0 < s.warmdown_frac <= 1:
        return f"--warmdown-frac {s.warmdown_frac:g} must be in (0, 1]"
    if s.lr_shape == "cosine" and s.warmdown_frac != 0:
        return "--warmdown-frac is a setting of --lr-schedule wsd"
    if not muon and (s.momentum_warmup_steps or s.momentum_start != 0):
        return "--momentum-warmup-steps is a setting of --optimizer muon"
    if not muon and (s.momentum_cooldown_steps or s.momentum_end != 0):
        return "--momentum-cooldown-steps is a setting of --optimizer muon"
    for flag, steps in (("--momentum-warmup-steps", s.momentum_warmup_steps),
                        ("--momentum-cooldown-steps", s.momentum_cooldown_steps)):
        if steps < 0:
            return f"{flag} {steps} must be >= 0"
    why = (momentum_refused("--momentum-start", s.momentum_start, "--momentum-warmup-steps", s.momentum_warmup_steps)
           or momentum_refused("--momentum-end", s.momentum_end, "--momentum-cooldown-steps",
                               s.momentum_cooldown_steps))
    if why:
        return why
    if s.decay_shape not in DECAY_SHAPES:
        return f"--weight-decay-schedule {s.decay_shape} is neither constant nor linear"
    return None


# The options that only some schedules take: (flag, attribute, the flag whose shape takes it).
SHAPED_OPTIONS = (("--warmdown-frac", "warmdown_frac", "--lr-schedule wsd"),
                  ("--momentum-warmup-steps", "momentum_warmup_steps", "--optimizer muon"),
                  ("--momentum-start", "momentum_start", "--optimizer muon"),
                  ("--momentum-cooldown-steps", "momentum_cooldown_steps", "--optimizer muon"),
                  ("--momentum-end", "momentum_end", "--optimizer muon"))


def add_options(ap):
    """train_gpt's schedule options on the argparse parser ap (those only some schedules take
    None unless given)."""
    ap.add_argument("--lr-schedule", choices=LR_SHAPES,
                    help="cosine: a cosine to lr * --min-lr-frac; wsd: level, then linear down to it "
                         "[cosine; 2026 wsd]")
    ap.add_argument("--warmup-steps", type=int, default=0, help="linear warmup of every learning rate [0]")
    ap.add_argument("--min-lr-frac", type=float, help="the learning rate's end, a fraction of each peak [0; 2026 0.05]")
    ap.add_argument("--warmdown-frac", type=float, help=f"wsd: the last fraction of the steps in the warm-down "
                                                        f"[{WARMDOWN_FRAC_DEFAULT}]")
    ap.add_argument("--momentum-warmup-steps", type=int, help="muon: the momentum's warm-up [0; 2026 300]")
    ap.add_argument("--momentum-start", type=float, help=f"muon: where it starts [{MOMENTUM_START_DEFAULT}]")
    ap.add_argument("--momentum-cooldown-steps", type=int, help="muon: the momentum's cool-down at the end [0]")
    ap.add_argument("--momentum-end", type=float, help=f"muon: where it ends [{MOMENTUM_END_DEFAULT}]")
    ap.add_argument("--weight-decay-schedule", choices=DECAY_SHAPES, default="constant",
                    help="constant, or linear down to 0 at the last step [constant]")


def from_options(a, muon, preset="gpt2"):
    """The schedule the parsed options a ask for under the optimizer (muon: Muon), each setting not
    given preset's (preset_schedule), as train_gpt resolves it; ValueError with train_gpt's
    message when it is refused."""
    p = preset_schedule(preset, muon)
    lr_schedule = a.lr_schedule or p.lr_shape
    min_lr_frac = p.min_lr_frac if a.min_lr_frac is None else a.min_lr_frac
    warmup = p.momentum_warmup_steps if a.momentum_warmup_steps is None else a.momentum_warmup_steps
    cooldown = a.momentum_cooldown_steps or 0
    wsd = lr_schedule == "wsd"
    for flag, attribute, taker in SHAPED_OPTIONS:
        if getattr(a, attribute) is not None and not (wsd if taker == "--lr-schedule wsd" else muon):
            raise ValueError(f"{flag} is a setting of {taker}")
    for flag, value, steps_flag, steps in (("--momentum-start", a.momentum_start, "--momentum-warmup-steps", warmup),
                                           ("--momentum-end", a.momentum_end, "--momentum-cooldown-steps", cooldown)):
        if value is not None and not steps:
            raise ValueError(f"{flag} without {steps_flag} has no effect")

    def given(value, default, taken):
        return f32(default if value is None else value) if taken else 0.0

    s = Schedule(lr_schedule, a.warmup_steps, f32(min_lr_frac),
                 given(a.warmdown_frac, p.warmdown_frac or WARMDOWN_FRAC_DEFAULT, wsd), warmup,
                 given(a.momentum_start, p.momentum_start or MOMENTUM_START_DEFAULT, warmup), cooldown,
                 given(a.momentum_end, MOMENTUM_END_DEFAULT, cooldown), a.weight_decay_schedule)
    why = invalid(s, muon)
    if why:
        raise ValueError(why)
    return s
