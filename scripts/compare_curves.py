#!/usr/bin/env python3
"""scripts/compare_curves.py: validation curves of several runs side by side (python3 alone).

Each side is a name and the CSV logs of its runs (train_gpt's --log columns, which
scripts/train_torch_reference.py writes too), one run per seed:

  python3 scripts/compare_curves.py flashgpt 'runs/f-*.csv' reference 'runs/r-*.csv'

Prints, at every step where all the runs validated, each side's mean validation loss and its
seed spread (max - min), and each side's difference from the first; then the final losses; then
how soon each side reaches a target loss (--target, or the first side's mean final loss): the
step at which its mean curve first reaches it (linearly between validations), times its training
seconds per step (validation excluded). The seconds per step are the mean over a side's logs
after their first step, or over the logs of --timing NAME=GLOB, runs of that side made alone on
the GPU when its curve's runs shared it; logs of one step give no time, and a side without one
gets its step alone.
"""
import argparse
import csv
import glob
import math
import sys


def read_run(path, validated=True):
    """({step: training seconds of that step}, {step: val loss}); validated: the log must have
    a validation loss."""
    seconds, val = {}, {}
    try:
        with open(path, newline="") as f:
            lines = csv.reader(f)
            header = next(lines, [])
            for fields in filter(None, lines):
                if len(fields) != len(header):
                    raise ValueError(f"line {lines.line_num} has {len(fields)} fields, the header {len(header)}")
                row = dict(zip(header, fields))
                step, ms = int(row["step"]), float(row["ms"])
                if not ms > 0 or not math.isfinite(ms):
                    raise ValueError(f"line {lines.line_num}: ms {row['ms']} is not the time of a step")
                seconds[step] = ms / 1e3
                if row["val_loss"]:
                    v = float(row["val_loss"])
                    if math.isfinite(v):
                        val[step] = v
    except (OSError, KeyError, ValueError, csv.Error) as e:
        sys.exit(f"error: {path}: not a training log ({e})")
    if validated and not val:
        sys.exit(f"error: {path}: no validation loss")
    return seconds, val


def read_runs(name, pattern, validated=True):
    paths = sorted(glob.glob(pattern))
    if not paths:
        sys.exit(f"error: {name}: {pattern}: no file matches")
    return [read_run(p, validated) for p in paths]


def seconds_per_step(runs):
    """Mean training seconds of a step, past each run's first (which warms up); None when no
    run has a step past its first."""
    times = [t for seconds, _ in runs for step, t in seconds.items() if step > min(seconds)]
    return sum(times) / len(times) if times else None


def step_reaching(curve, target):
    """The (fractional) step at which the curve {step: loss} first reaches target, or None."""
    prev = None
    for step in sorted(curve):
        if curve[step] <= target:
            if prev is None:
                return float(step)
            s0, v0 = prev
            return s0 + (v0 - target) / (v0 - curve[step]) * (step - s0)
        prev = (step, curve[step])
    return None


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sides", nargs="+", help="NAME GLOB pairs")
    ap.add_argument("--target", type=float, help="the loss to reach [the first side's mean final loss]")
    ap.add_argument("--timing", action="append", default=[], metavar="NAME=GLOB",
                    help="logs whose step times are side NAME's seconds per step")
    a = ap.parse_args(argv)
    if len(a.sides) % 2:
        ap.error("sides come in pairs: NAME GLOB")
    sides = [(name, read_runs(name, pattern)) for name, pattern in zip(a.sides[::2], a.sides[1::2])]
    timing = {}
    for spec in a.timing:
        name, _, pattern = spec.partition("=")
        if name not in dict(sides) or not pattern:
            ap.error(f"--timing {spec}: not NAME=GLOB of a side")
        timing[name] = seconds_per_step(read_runs(name, pattern, validated=False))
    steps = sorted(set.intersection(*(set(v) for _, runs in sides for _, v in runs)))
    if not steps:
        sys.exit("error: the runs share no validation step")

    def stats(runs, step):
        vals = [v[step] for _, v in runs]
        return sum(vals) / len(vals), max(vals) - min(vals)

    print("| step | " + " | ".join(f"{n} ({len(r)} runs): mean (spread)" for n, r in sides) +
          "".join(f" | {n} - {sides[0][0]}" for n, _ in sides[1:]) + " |")
    print("|---" * (2 * len(sides)) + "|")
    for step in steps:
        means = [stats(runs, step) for _, runs in sides]
        cells = [f"{m:.4f} ({s:.4f})" for m, s in means]
        diffs = [f"{m - means[0][0]:+.4f}" for m, _ in means[1:]]
        print(f"| {step} | " + " | ".join(cells + diffs) + " |")
    last = steps[-1]
    target = a.target if a.target is not None else stats(sides[0][1], last)[0]
    print(f"\nfinal (step {last}):")
    for name, runs in sides:
        mean, spread = stats(runs, last)
        finals = ", ".join(f"{v[last]:.4f}" for _, v in runs)
        print(f"  {name}: mean {mean:.4f}, spread {spread:.4f} ({finals})")
    print(f"\nto validation loss {target:.4f} (the mean curve; training time, validation excluded):")
    first_time = None
    for i, (name, runs) in enumerate(sides):
        step = step_reaching({s: stats(runs, s)[0] for s in steps}, target)
        per_step = timing.get(name, seconds_per_step(runs))
        source = "alone" if name in timing else "from its curve's runs"
        timed = f"{per_step * 1e3:.1f} ms a step, {source}" if per_step else "no time: its logs have one step"
        if step is None:
            print(f"  {name}: not reached in {last} steps ({timed})")
        elif not per_step:
            print(f"  {name}: step {step:.0f} ({timed})")
        else:
            time = step * per_step
            first_time = time if i == 0 else first_time
            print(f"  {name}: step {step:.0f} x {per_step * 1e3:.1f} ms ({source}) = {time:.1f} s" +
                  (f", {first_time / time:.3f}x as soon as {sides[0][0]}" if first_time else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
