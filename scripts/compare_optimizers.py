#!/usr/bin/env python3
"""scripts/compare_optimizers.py: runs of different optimizers and learning rates, one log each
(train_gpt's --log CSV), against one target loss (python3 alone; scripts/gpu_muon.sh runs it):

  python3 scripts/compare_optimizers.py adamw-6e-4.csv muon-0.02.csv ...

Prints a table: each run (named by its file, without .csv) with its final validation loss, the
step at which its validation curve first reaches the target (linearly between validations), the
training time to that step (the steps' own seconds, validation excluded), both also as a share
of the best baseline run's steps and training time, and its tokens/s (mean over the steps past
the first); then the validation curves side by side. The target is --target, or the lowest final
validation loss of the runs whose names start with --baseline (adamw).
"""
import argparse
import csv
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_curves import read_run, step_reaching  # noqa: E402


def tokens_per_s(path):
    """Mean tokens/s of the log's steps past its first."""
    with open(path, newline="") as f:
        rows = [(int(r["step"]), float(r["tokens_per_s"])) for r in csv.DictReader(f)]
    first = min(step for step, _ in rows)
    rates = [rate for step, rate in rows if step > first]
    return sum(rates) / len(rates) if rates else float("nan")


def seconds_to(seconds, step):
    """Training seconds up to the fractional step: the whole steps' times, then the fraction of the next's."""
    whole = int(step)
    done = sum(t for s, t in seconds.items() if s <= whole)
    return done + (step - whole) * seconds.get(whole + 1, 0.0)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+", help="train_gpt CSV logs, one run each")
    ap.add_argument("--target", type=float, help="the loss to reach [the best baseline run's final loss]")
    ap.add_argument("--baseline", default="adamw", help="the name prefix of the runs that set the target [adamw]")
    a = ap.parse_args(argv)
    runs = []
    for path in a.logs:
        seconds, val = read_run(path)
        try:
            rate = tokens_per_s(path)
        except (OSError, KeyError, ValueError) as e:
            sys.exit(f"error: {path}: not a training log ({e})")
        runs.append((os.path.basename(path).removesuffix(".csv"), seconds, val, rate))
    finals = {name: val[max(val)] for name, _, val, _ in runs}
    baseline = [name for name in finals if name.startswith(a.baseline)]
    if a.target is None and not baseline:
        sys.exit(f"error: no run's name starts with {a.baseline}: give --target")
    target = a.target if a.target is not None else min(finals[name] for name in baseline)
    best = min(baseline, key=finals.get) if baseline else None
    print(f"target: validation loss {target:.4f}" +
          ("" if a.target is not None else f" (the best {a.baseline} run's final, {best})"))
    # The best baseline run's steps and training time, which the shares are of.
    base_steps, base_time = next(((max(sec), sum(sec.values())) for n, sec, _, _ in runs if n == best), (None, None))
    print(f"\n| run | final val loss | step reaching the target | training s to it | "
          f"share of {best or 'the baseline'}'s steps, time | tokens/s |")
    print("|---|---|---|---|---|---|")
    for name, seconds, val, rate in runs:
        step = step_reaching(val, target)
        reach = "not reached" if step is None else f"{step:.0f} of {max(seconds)}"
        time = None if step is None else seconds_to(seconds, step)
        spent = "" if time is None else f"{time:.1f} of {sum(seconds.values()):.1f}"
        share = "" if time is None or base_steps is None else f"{step / base_steps:.0%}, {time / base_time:.0%}"
        print(f"| {name} | {finals[name]:.4f} | {reach} | {spent} | {share} | {rate / 1e3:.1f}K |")
    steps = sorted(set.intersection(*(set(val) for _, _, val, _ in runs)))
    print("\n| step | " + " | ".join(name for name, _, _, _ in runs) + " |")
    print("|---" * (len(runs) + 1) + "|")
    for step in steps:
        cells = [f"{val[step]:.4f}" if math.isfinite(val[step]) else "-" for _, _, val, _ in runs]
        print(f"| {step} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
