"""scripts/compare_curves.py: validation curves of training runs side by side (python3 alone): sides
of several seeds each, paired seed by seed, or (--runs) single runs against one target loss.

Sides: each side is a name and the CSV logs of its runs (train_gpt's --log columns, which
scripts/train_torch_reference.py writes too), one run per seed:

  python3 scripts/compare_curves.py flashgpt 'runs/f-s*.csv' reference 'runs/r-s*.csv'

Runs of two sides pair where their paths hold the same text in the place of their globs'
wildcards (runs/f-s2.csv and runs/r-s2.csv: seed 2), as paired runs do: the same initial
weights and data order on both sides (scripts/gpu/parity.sh), so that their difference is
free of the seed's. Prints, at every step where all the runs validated, each side's mean
validation loss and its seed spread (max - min), and the first side's paired difference from
each other side: the mean over the pairs of first minus other, and its spread; then the final
losses, and the final paired differences pair by pair; then how soon each side reaches a target
loss (--target, or the first side's mean final loss): the step at which its mean curve first
reaches it (linearly between validations), times its training seconds per step (validation
excluded). The seconds per step are the mean over a side's logs after their first step, or over
the logs of --timing NAME=GLOB, runs of that side made alone on the GPU when its curve's runs
shared it; logs of one step give no time, and a side without one gets its step alone.
--train-loss adds each side's training loss at the validation steps (the mean over the steps since
the validation before, then over its runs) and says of its mean curves whether the validation
loss rises after its lowest point, and if so whether the training loss falls meanwhile
(over-fitting) or rises too (divergence).

Single runs (--runs): one log each, of different optimizers, learning rates or recipes
(scripts/gpu/muon.sh, gpu/modern.sh and gpu/masks.sh run it):

  python3 scripts/compare_curves.py --runs adamw-6e-4.csv muon-0.02.csv ...

Prints a table: each run (named by its file, without .csv) with its final validation loss, the
step at which its validation curve first reaches the target (linearly between validations), the
training time to that step (the steps' own seconds, validation excluded), both also as a share
of the best baseline run's steps and training time, and its tokens/s (mean over the steps past
the first); then the validation curves side by side. The target is --target, or the lowest final
validation loss of the runs whose names start with --baseline (adamw).

A --target must be a finite loss above 0, and no two sides (or runs) may share a name.
"""
import argparse
import csv
import glob
import math
import os
import re
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


def run_key(pattern, path):
    """What stands in path, which glob found for pattern, from the place of pattern's first
    wildcard to that of its last ("2" of runs/f-s2.csv for runs/f-s*.csv): runs of two sides
    with the same key are a pair."""
    wild = [m.span() for m in re.finditer(r"[*?]|\[[^]]+\]", pattern)]
    if not wild:
        return ""
    tail = len(pattern) - wild[-1][1]
    return path[wild[0][0]:len(path) - tail]


def read_runs(name, pattern, read=read_run):
    """The runs of the logs pattern matches, by run_key, each as read(path) gives it."""
    paths = sorted(glob.glob(pattern))
    if not paths:
        sys.exit(f"error: {name}: {pattern}: no file matches")
    return {run_key(pattern, p): read(p) for p in paths}


def read_train_loss(path):
    """{step: training loss} of a log."""
    try:
        with open(path, newline="") as f:
            return {int(row["step"]): float(row["loss"]) for row in csv.DictReader(f)}
    except (OSError, KeyError, TypeError, ValueError, csv.Error) as e:
        sys.exit(f"error: {path}: not a training log ({e})")


def window_means(train, steps):
    """{step: the mean training loss of the steps after the step before it in steps, up to it}."""
    means, prev = {}, 0
    for step in steps:
        window = [loss for s, loss in train.items() if prev < s <= step]
        means[step] = sum(window) / len(window) if window else math.nan
        prev = step
    return means


def print_train_loss(sides, train_sides, steps):
    """The training loss beside the validation loss at the validation steps, and what each side's
    mean curves do after the lowest validation loss."""
    val = {name: {s: sum(v[s] for _, v in runs.values()) / len(runs) for s in steps} for name, runs in sides}
    train = {}
    for name, runs in train_sides:
        per_run = [window_means(t, steps) for t in runs.values()]
        train[name] = {s: sum(m[s] for m in per_run) / len(per_run) for s in steps}
    print("\ntraining loss (the mean of the steps since the validation before) and validation loss:")
    print("| step | " + " | ".join(f"{n} training | {n} validation" for n, _ in sides) + " |")
    print("|---" * (2 * len(sides) + 1) + "|")
    for step in steps:
        print(f"| {step} | " + " | ".join(f"{train[n][step]:.4f} | {val[n][step]:.4f}" for n, _ in sides) + " |")
    print("\nafter the lowest validation loss (mean curves):")
    for name, _ in sides:
        lowest = min(steps, key=val[name].get)
        last = steps[-1]
        rise = val[name][last] - val[name][lowest]
        t0, t1 = train[name][lowest], train[name][last]
        if lowest == last:
            verdict = "the validation loss is lowest at the last step"
        elif t1 < t0:
            verdict = (f"over-fitting: the validation loss rises {rise:+.4f} after step {lowest} while the training "
                       f"loss falls from {t0:.4f} to {t1:.4f}")
        else:
            verdict = (f"divergence: the validation loss rises {rise:+.4f} after step {lowest} and the training "
                       f"loss with it, from {t0:.4f} to {t1:.4f}")
        print(f"  {name}: lowest validation {val[name][lowest]:.4f} at step {lowest}, last {val[name][last]:.4f}; "
              f"{verdict}")


def paired_differences(first, other, step):
    """{key: first's validation loss minus other's at step} over the runs that pair."""
    return {k: first[k][1][step] - other[k][1][step] for k in first if k in other}


def seconds_per_step(runs):
    """Mean training seconds of a step, past each run's first (which warms up); None when no
    run has a step past its first."""
    times = [t for seconds, _ in runs.values() for step, t in seconds.items() if step > min(seconds)]
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


def compare_sides(ap, a):
    """The first form: NAME GLOB sides, their seeds paired."""
    if len(a.inputs) % 2:
        ap.error("sides come in pairs: NAME GLOB")
    names = a.inputs[::2]
    for name in names:
        if names.count(name) > 1:
            sys.exit(f"error: side {name} is given twice: each side needs a name of its own")
    sides = [(name, read_runs(name, pattern)) for name, pattern in zip(names, a.inputs[1::2])]
    timing = {}
    for spec in a.timing:
        name, _, pattern = spec.partition("=")
        if name not in dict(sides) or not pattern:
            ap.error(f"--timing {spec}: not NAME=GLOB of a side")
        if name in timing:
            sys.exit(f"error: --timing {name}: given twice")
        timing[name] = seconds_per_step(read_runs(name, pattern, read=lambda path: read_run(path, validated=False)))
    steps = sorted(set.intersection(*(set(v) for _, runs in sides for _, v in runs.values())))
    if not steps:
        sys.exit("error: the runs share no validation step")

    def stats(values):
        values = list(values)
        return sum(values) / len(values), max(values) - min(values)

    def side_stats(runs, step):
        return stats(v[step] for _, v in runs.values())

    first_name, first = sides[0]
    print("| step | " + " | ".join(f"{n} ({len(r)} runs): mean (spread)" for n, r in sides) +
          "".join(f" | {first_name} - {n}, paired: mean (spread)" for n, _ in sides[1:]) + " |")
    print("|---" * (2 * len(sides)) + "|")
    for step in steps:
        cells = ["{:.4f} ({:.4f})".format(*side_stats(runs, step)) for _, runs in sides]
        for _, runs in sides[1:]:
            diffs = paired_differences(first, runs, step)
            cells.append("{:+.4f} ({:.4f})".format(*stats(diffs.values())) if diffs else "no pairs")
        print(f"| {step} | " + " | ".join(cells) + " |")
    last = steps[-1]
    target = a.target if a.target is not None else side_stats(first, last)[0]
    print(f"\nfinal (step {last}):")
    for name, runs in sides:
        mean, spread = side_stats(runs, last)
        finals = ", ".join(f"{v[last]:.4f}" for _, v in runs.values())
        print(f"  {name}: mean {mean:.4f}, spread {spread:.4f} ({finals})")
    for name, runs in sides[1:]:
        diffs = paired_differences(first, runs, last)
        if not diffs:
            print(f"  {first_name} - {name}: no runs pair (their names differ where the globs have wildcards)")
            continue
        mean, spread = stats(diffs.values())
        each = ", ".join(f"{k}: {d:+.4f}" for k, d in diffs.items())
        print(f"  {first_name} - {name}, paired: mean {mean:+.4f}, spread {spread:.4f} over {len(diffs)} pairs "
              f"of {max(len(first), len(runs))} runs ({each})")
    print(f"\nto validation loss {target:.4f} (the mean curve; training time, validation excluded):")
    first_time = None
    for i, (name, runs) in enumerate(sides):
        step = step_reaching({s: side_stats(runs, s)[0] for s in steps}, target)
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
    if a.train_loss:
        train_sides = [(name, read_runs(name, pattern, read=read_train_loss))
                       for name, pattern in zip(names, a.inputs[1::2])]
        print_train_loss(sides, train_sides, steps)


def compare_runs(a):
    """The second form (--runs): single runs against the target, shares of the best baseline run's."""
    baseline_prefix = a.baseline if a.baseline is not None else "adamw"
    paths = {}
    for path in a.inputs:
        name = os.path.basename(path).removesuffix(".csv")
        if name in paths:
            sys.exit(f"error: two runs are named {name} ({paths[name]}, {path}): each needs a name of its own")
        paths[name] = path
    runs = []
    for name, path in paths.items():
        seconds, val = read_run(path)
        try:
            rate = tokens_per_s(path)
        except (OSError, KeyError, ValueError) as e:
            sys.exit(f"error: {path}: not a training log ({e})")
        runs.append((name, seconds, val, rate))
    finals = {name: val[max(val)] for name, _, val, _ in runs}
    baseline = [name for name in finals if name.startswith(baseline_prefix)]
    if a.target is None and not baseline:
        sys.exit(f"error: no run's name starts with {baseline_prefix}: give --target")
    target = a.target if a.target is not None else min(finals[name] for name in baseline)
    best = min(baseline, key=finals.get) if baseline else None
    print(f"target: validation loss {target:.4f}" +
          ("" if a.target is not None else f" (the best {baseline_prefix} run's final, {best})"))
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


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", metavar="NAME GLOB | LOG",
                    help="NAME GLOB pairs, a side each; with --runs, train_gpt CSV logs, one run each")
    ap.add_argument("--runs", action="store_true", help="single runs, one log each, against one target loss")
    ap.add_argument("--target", type=float, metavar="LOSS",
                    help="the loss to reach [the first side's mean final loss; with --runs the best baseline run's]")
    ap.add_argument("--timing", action="append", default=[], metavar="NAME=GLOB",
                    help="logs whose step times are side NAME's seconds per step")
    ap.add_argument("--train-loss", action="store_true",
                    help="the training loss beside the validation loss, and whether the latter rises")
    ap.add_argument("--baseline", metavar="PREFIX",
                    help="with --runs, the name prefix of the runs that set the target [adamw]")
    a = ap.parse_args(argv)
    if a.target is not None and not (math.isfinite(a.target) and a.target > 0):
        sys.exit(f"error: --target {a.target:g}: not a loss to reach (a finite number above 0)")
    if a.runs:
        for flag, given in (("--timing", a.timing), ("--train-loss", a.train_loss)):
            if given:
                ap.error(f"{flag} is a setting of sides (NAME GLOB), not of --runs")
        compare_runs(a)
    else:
        if a.baseline is not None:
            ap.error("--baseline is a setting of --runs")
        compare_sides(ap, a)


if __name__ == "__main__":
    main(sys.argv[1:])
