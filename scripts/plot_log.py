#!/usr/bin/env python3
"""scripts/plot_log.py: draws train_gpt's --log CSV as one SVG, with the standard library only.

usage: plot_log.py LOG.csv OUT.svg [--title TEXT]

LOG.csv has the header step,loss,val_loss,lr,grad_norm,ms,tokens_per_s,mfu,mem_gib and a line
per step; val_loss is empty on the steps without validation. A resumed run appends to the same
file, so steps may repeat (the steps redone after the last checkpoint) or a second header may
appear: a later line for a step replaces an earlier one, and header lines are skipped.
The SVG has two panels against step: the train loss (a line) and the validation loss (a line
with dots) on one, tokens/s on the other, each with ticked axes, labels and a legend.
A step must be a whole number from 0 to 2^53. A value that is not finite (nan, inf: a run that
diverged) or beyond float32's range (train_gpt logs float32 numbers) is left out of its line,
and the summary line says how many were.
OUT.svg is written by output_file.py's rules (a temporary file renamed at the end, a link at
OUT.svg followed, LOG.csv never overwritten).
"""
import csv
import math
import sys
from xml.sax.saxutils import escape

from output_file import Failure, atomic_output, check_output

USAGE = "usage: plot_log.py LOG.csv OUT.svg [--title TEXT]"
COLUMNS = ["step", "loss", "val_loss", "lr", "grad_norm", "ms", "tokens_per_s", "mfu", "mem_gib"]
WIDTH, PANEL_H, LEFT, RIGHT, TOP, GAP = 760, 260, 70, 20, 40, 70
TRAIN, VAL, SPEED = "#1f77b4", "#d62728", "#2ca02c"
MAX_STEP = 2 ** 53  # the whole numbers a float holds exactly
MAX_LINE = 1 << 16  # characters in a line: train_gpt's are about a hundred
FLOAT32_MAX = 3.4028234663852886e38


def bounded_lines(f, path):
    """The lines of f, refused past MAX_LINE characters: a file that is no log (a device that
    never ends) is not read into memory."""
    while True:
        text = f.readline(MAX_LINE + 1)
        if not text:
            return
        if len(text) > MAX_LINE:
            raise Failure(f"{path}: a line longer than {MAX_LINE} characters: not a train_gpt log")
        yield text


def read_log(path):
    """{step: row} with the numbers as floats (val_loss None where empty), last line winning."""
    try:
        with open(path, newline="") as f:
            lines = list(csv.reader(bounded_lines(f, path)))
    except OSError as e:
        raise Failure(f"{path}: cannot read ({e.strerror})")
    except (csv.Error, UnicodeDecodeError) as e:
        raise Failure(f"{path}: not a CSV file ({e})")
    if not lines or lines[0] != COLUMNS:
        raise Failure(f"{path}: not a train_gpt log (the first line must be {','.join(COLUMNS)})")
    rows = {}
    for number, fields in enumerate(lines[1:], start=2):
        if fields == COLUMNS or not fields:  # a resumed run's header, a blank line
            continue
        if len(fields) != len(COLUMNS):
            raise Failure(f"{path}:{number}: {len(fields)} fields, expected {len(COLUMNS)}")
        try:
            row = {k: (float(v) if v != "" else None) for k, v in zip(COLUMNS, fields)}
        except ValueError:
            raise Failure(f"{path}:{number}: a field is not a number")
        if row["step"] is None or row["loss"] is None or row["tokens_per_s"] is None:
            raise Failure(f"{path}:{number}: step, loss or tokens_per_s is empty")
        step = row["step"]
        if not (0 <= step <= MAX_STEP and step == math.floor(step)):
            raise Failure(f"{path}:{number}: step {fields[0]} is not a whole number from 0 to 2^53")
        rows[int(step)] = row
    if len(rows) < 2:
        raise Failure(f"{path}: {len(rows)} step{'s' if len(rows) != 1 else ''} logged; "
                      "a curve needs at least 2")
    return [rows[s] for s in sorted(rows)]


def plottable(v):
    return v is not None and abs(v) <= FLOAT32_MAX  # False for nan too


def ticks(lo, hi, count=5):
    """Round tick values covering [lo, hi] (within float32's range): steps of 1, 2 or 5 times a
    power of ten. A range too narrow to draw (a flat line) is widened around its values."""
    size = max(abs(lo), abs(hi))
    if hi - lo <= 1e-9 * size:
        pad = max(1.0, 1e-6 * size)
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(lo / step) * step
    last = math.ceil(hi / step) * step
    return [first + i * step for i in range(round((last - first) / step) + 1)]


def label(v):
    """A tick label: 1.5K, 20M, 0.25, 3."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(v) >= scale:
            return f"{v / scale:g}{suffix}"
    return f"{v:.6g}" if v == int(v) else f"{v:.4g}"


def panel(top, series, y_title, x_ticks):
    """SVG elements of one panel: grid, ticks and labels, then each series of (class, legend,
    colour, [(step, value)], dots) as a polyline (dots: and a circle per point), then the legend."""
    values = [v for _, _, _, points, _ in series for _, v in points]
    y_ticks = ticks(min(values), max(values)) if values else ticks(0, 1)
    x_lo, x_hi, y_lo, y_hi = x_ticks[0], x_ticks[-1], y_ticks[0], y_ticks[-1]
    plot_w = WIDTH - LEFT - RIGHT

    def x(s):
        return LEFT + (s - x_lo) / (x_hi - x_lo) * plot_w

    def y(v):
        return top + (1 - (v - y_lo) / (y_hi - y_lo)) * PANEL_H

    out = ['<g class="panel">',
           f'<rect x="{LEFT}" y="{top}" width="{plot_w}" height="{PANEL_H}" fill="none" stroke="#888"/>']
    for t in y_ticks:
        out.append(f'<line x1="{LEFT}" y1="{y(t):.1f}" x2="{LEFT + plot_w}" y2="{y(t):.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{label(t)}</text>')
    for t in x_ticks:
        out.append(f'<line x1="{x(t):.1f}" y1="{top}" x2="{x(t):.1f}" y2="{top + PANEL_H}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{x(t):.1f}" y="{top + PANEL_H + 16}" text-anchor="middle">{label(t)}</text>')
    out.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{top + PANEL_H + 34}" text-anchor="middle">step</text>')
    out.append(f'<text transform="translate(16 {top + PANEL_H / 2:.1f}) rotate(-90)" '
               f'text-anchor="middle">{escape(y_title)}</text>')
    for i, (name, legend, colour, points, dots) in enumerate(series):
        coords = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in points)
        out.append(f'<polyline class="{name}" points="{coords}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        if dots:
            out += [f'<circle class="{name}" cx="{x(s):.1f}" cy="{y(v):.1f}" r="2.5" fill="{colour}"/>'
                    for s, v in points]
        ly = top + 16 + 18 * i
        out.append(f'<line x1="{LEFT + plot_w - 130}" y1="{ly - 4}" x2="{LEFT + plot_w - 108}" y2="{ly - 4}" '
                   f'stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{LEFT + plot_w - 102}" y="{ly}">{escape(legend)}</text>')
    out.append("</g>")
    return out


def plot(rows, title):
    """The SVG, and how many values were left out (not plottable)."""
    steps = [r["step"] for r in rows]
    x_ticks = ticks(min(steps), max(steps))
    train, val, speed = ([(r["step"], r[key]) for r in rows if plottable(r[key])]
                         for key in ("loss", "val_loss", "tokens_per_s"))
    logged = sum(r[key] is not None for r in rows for key in ("loss", "val_loss", "tokens_per_s"))
    loss_series = [("train_loss", "train loss", TRAIN, train, False)]
    if val:
        loss_series.append(("val_loss", "validation loss", VAL, val, True))
    height = TOP + 2 * PANEL_H + GAP + 50
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{LEFT}" y="24" font-size="15">{escape(title)}</text>']
    out += panel(TOP, loss_series, "loss (nats per token)", x_ticks)
    out += panel(TOP + PANEL_H + GAP, [("tokens_per_s", "tokens/s", SPEED, speed, False)], "tokens/s", x_ticks)
    out.append("</svg>")
    return "\n".join(out) + "\n", logged - len(train) - len(val) - len(speed)


def main(argv):
    if "-h" in argv or "--help" in argv:
        print(USAGE)
        return 0
    args, title = list(argv), None
    if "--title" in args:
        i = args.index("--title")
        if i + 1 >= len(args):
            print(f"error: --title needs a value ({USAGE})", file=sys.stderr)
            return 1
        title = args[i + 1]
        del args[i:i + 2]
    unknown = [a for a in args if a.startswith("-")]
    if unknown or len(args) != 2:
        what = f"unknown flag {unknown[0]}" if unknown else "expected LOG.csv and OUT.svg"
        print(f"error: {what} ({USAGE})", file=sys.stderr)
        return 1
    log_path, out_path = args
    try:
        check_output(out_path, [log_path])
        rows = read_log(log_path)
        svg, left_out = plot(rows, title if title is not None else log_path)
        with atomic_output(out_path, [log_path], binary=False) as f:
            f.write(svg)
    except Failure as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    validations = sum(r["val_loss"] is not None for r in rows)
    print(f"{out_path}: {len(rows)} steps, {validations} validations"
          + (f", {left_out} value{'s' if left_out > 1 else ''} left out (not finite, or beyond "
             "float32's range)" if left_out else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
