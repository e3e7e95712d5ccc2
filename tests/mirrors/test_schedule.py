#!/usr/bin/env python3
"""tests/mirrors/test_schedule.py: scripts/gpt_schedule.py's rates are gpt/schedule.h's, bit for bit: every
group's learning rate, the momentum and the weight decay at every step of the runs
build/tests/mirrors/print_schedule prints (cosine and warmup-stable-decay, Muon's momentum warm-up and
cool-down, a linear weight decay, AdamW and Muon, each preset's schedule), and the schedule each
preset gives a run of either optimizer (preset_schedule). The comparison is seen to fail on a rule
changed on one side. Then the options as train_torch_reference.py reads them: the defaults of the
settings only some schedules take, the preset's where not given and each given over it, and the
refusals, in train_gpt's words. Prints PASS / FAIL
lines like tests/lib/test.h.
"""
import argparse
import json
import math
import os
import subprocess
import sys
from types import SimpleNamespace

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from case import Case  # noqa: E402
import gpt_schedule as schedule  # noqa: E402

PRINT_SCHEDULE = os.path.join(ROOT, os.environ.get("BUILD", "build"), "tests", "mirrors", "print_schedule")


def read_run(run):
    """A printed run as (Schedule, optimizer settings, steps, rates: a list of [lr by group...,
    momentum, decay] per step), every float exact."""
    def exact(d):
        return {k: float.fromhex(v) if isinstance(v, str) and v.startswith(("0x", "-0x")) else v for k, v in d.items()}
    rates = [[float.fromhex(v) for v in step] for step in run["rates"]]
    return schedule.Schedule(**exact(run["schedule"])), SimpleNamespace(**exact(run["optimizer"])), run["steps"], rates


def run_differences(run, step_rates=schedule.step_rates):
    """How step_rates differs from the C's rates of one printed run, a line each (the first few)."""
    s, o, steps, printed = read_run(run)
    out = []
    for step, c in enumerate(printed, 1):
        r = step_rates(s, o, step, steps)
        mine = [r.lr[g] for g in schedule.GROUPS] + [r.momentum, r.weight_decay]
        if mine != c:
            out.append(f"{o.optimizer} {s} step {step}/{steps}: {mine} here, {c} in C")
        if len(out) == 3:
            break
    return out


def options(*args):
    ap = argparse.ArgumentParser()
    schedule.add_options(ap)
    return ap.parse_args(list(args))


def main():
    case = Case("schedule: the C schedule is printed")
    printed = None
    if case.check(os.access(PRINT_SCHEDULE, os.X_OK), f"{PRINT_SCHEDULE} is not built (make test builds it)"):
        result = subprocess.run([PRINT_SCHEDULE], capture_output=True, text=True, timeout=60)
        if case.check(result.returncode == 0, f"print_schedule exited {result.returncode}: {result.stderr}"):
            printed = json.loads(result.stdout)
    case.end()
    if printed is None:
        return 1

    case = Case("schedule: each preset's schedule under either optimizer is gpt/schedule.c's")
    for p in printed["presets"]:
        mine = schedule.preset_schedule(p["preset"], p["optimizer"] == "muon")
        c = read_run(dict(p, rates=[], steps=0, optimizer={}))[0]
        case.check(mine == c, f"{p['preset']} {p['optimizer']}: {c} in C, {mine} here")
    case.check(len(printed["presets"]) == 6 and any(p["schedule"]["lr_shape"] == "wsd" for p in printed["presets"]),
               f"{len(printed['presets'])} presets' schedules printed")
    case.end()

    case = Case("schedule: scripts/gpt_schedule.py's rates are gpt/schedule.c's at every step, bit for bit")
    runs = printed["runs"]
    case.check(len(runs) >= 18 and sum(len(r["rates"]) for r in runs) > 1000, f"{len(runs)} runs printed")
    for run in runs:
        for why in run_differences(run):
            case.check(False, why)
    case.end()

    # A rule changed here alone is seen: the warm-down's step count truncated, the Adam groups'
    # rate as peak * lr / --lr, the momentum's warm-up counted from step 1.
    case = Case("schedule: a rule changed on one side is found")
    def shapes_truncated(s, o, steps):
        lr, momentum, decay = schedule.schedule_shapes(s, o, steps)
        return lr._replace(warmdown=math.floor(s.warmdown_frac * steps)) if s.lr_shape == "wsd" else lr, momentum, decay

    def rates_with(shapes=schedule.schedule_shapes, optimizer_rates=schedule.optimizer_rates):
        def step_rates(s, o, step, steps):
            lr, momentum, decay = shapes(s, o, steps)
            return optimizer_rates(o, schedule.rate_at(lr, step, steps))._replace(
                momentum=schedule.rate_at(momentum, step, steps), weight_decay=schedule.rate_at(decay, step, steps))
        return step_rates

    def unfactored(o, lr):
        r = schedule.optimizer_rates(o, lr)
        peaks = {"embedding": o.embedding_lr, "head": o.head_lr, "vector": o.vector_lr}
        if schedule.is_muon(o):
            r.lr.update({g: schedule.f32(schedule.f32(p * lr) / o.lr) for g, p in peaks.items()})
        return r

    def momentum_from_step_one(s, o, steps):
        lr, momentum, decay = schedule.schedule_shapes(s, o, steps)
        return lr, momentum._replace(warmup=momentum.warmup + 1 if momentum.warmup else 0), decay

    c_2026 = next(read_run(dict(p, rates=[], steps=0, optimizer={}))[0] for p in printed["presets"]
                  if p["preset"] == "2026" and p["optimizer"] == "muon")
    case.check(schedule.preset_schedule("2026", False) != c_2026, "2026's momentum warm-up under AdamW goes unseen")
    for what, variant in (("a truncated warm-down", rates_with(shapes=shapes_truncated)),
                          ("peak * lr / --lr", rates_with(optimizer_rates=unfactored)),
                          ("the momentum's warm-up from step 1", rates_with(shapes=momentum_from_step_one))):
        case.check(any(run_differences(run, variant) for run in runs), f"{what} goes unseen")
    case.end()

    case = Case("schedule: the options resolve as train_gpt's, refused in its words")
    s = schedule.from_options(options(), False)
    case.check(s == schedule.Schedule(), f"the defaults: {s}")
    s = schedule.from_options(options("--lr-schedule", "wsd", "--momentum-warmup-steps", "300",
                                      "--momentum-cooldown-steps", "50", "--momentum-end", "0.9"), True)
    case.check(s == schedule.Schedule("wsd", 0, 0.0, schedule.f32(0.65), 300, schedule.f32(0.85), 50,
                                      schedule.f32(0.9)), f"wsd with Muon's momentum: {s}")
    f32 = schedule.f32
    for args, muon, want in (
            ((), True, schedule.Schedule("wsd", 0, f32(0.05), f32(0.65), 300, f32(0.85))),
            ((), False, schedule.Schedule("wsd", 0, f32(0.05), f32(0.65))),
            (("--lr-schedule", "cosine", "--min-lr-frac", "0", "--momentum-warmup-steps", "0"), True,
             schedule.Schedule()),
            (("--warmdown-frac", "0.5", "--min-lr-frac", "0.1", "--momentum-start", "0.9"), True,
             schedule.Schedule("wsd", 0, f32(0.1), f32(0.5), 300, f32(0.9))),
            (("--momentum-warmup-steps", "20"), True, schedule.Schedule("wsd", 0, f32(0.05), f32(0.65), 20, f32(0.85)))):
        s = schedule.from_options(options(*args), muon, "2026")
        case.check(s == want, f"2026 {' '.join(args)}, {'muon' if muon else 'adamw'}: {s}, expected {want}")
    for args, muon, error in (
            (("--lr-schedule", "cosine", "--warmdown-frac", "0.5"), True,
             "--warmdown-frac is a setting of --lr-schedule wsd"),
            (("--momentum-start", "0.9"), False, "--momentum-start is a setting of --optimizer muon"),
            (("--momentum-warmup-steps", "0", "--momentum-start", "0.9"), True,
             "--momentum-start without --momentum-warmup-steps has no effect")):
        try:
            schedule.from_options(options(*args), muon, "2026")
            case.check(False, f"2026 {' '.join(args)}: taken")
        except ValueError as e:
            case.check(str(e) == error, f"2026 {' '.join(args)}: '{e}', expected '{error}'")
    s = schedule.from_options(options("--lr-schedule", "wsd", "--momentum-warmup-steps", "9"), True, "modern")
    case.check(s == schedule.Schedule("wsd", 0, 0.0, f32(0.65), 9, f32(0.85)), f"modern wsd: {s}")
    for args, muon, error in (
            (("--warmdown-frac", "0.5"), True, "--warmdown-frac is a setting of --lr-schedule wsd"),
            (("--lr-schedule", "wsd", "--warmdown-frac", "0"), True, "--warmdown-frac 0 must be in (0, 1]"),
            (("--momentum-warmup-steps", "10"), False, "--momentum-warmup-steps is a setting of --optimizer muon"),
            (("--momentum-end", "0.9"), False, "--momentum-end is a setting of --optimizer muon"),
            (("--momentum-start", "0.9"), True, "--momentum-start without --momentum-warmup-steps has no effect"),
            (("--momentum-cooldown-steps", "5", "--momentum-end", "1"), True, "--momentum-end 1 must be in [0, 1)"),
            (("--min-lr-frac", "2"), False, "--min-lr-frac 2 must be in [0, 1]")):
        try:
            schedule.from_options(options(*args), muon)
            case.check(False, f"{' '.join(args)}: taken")
        except ValueError as e:
            case.check(str(e) == error, f"{' '.join(args)}: '{e}', expected '{error}'")
    case.end()
    return 1 if Case.failures else 0


if __name__ == "__main__":
    sys.exit(main())
