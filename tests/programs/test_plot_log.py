#!/usr/bin/env python3
"""tests/programs/test_plot_log.py: scripts/plot_log.py on small logs written here.

A log of 6 steps with 2 validations must give an SVG that xml.etree parses, with a train-loss
polyline of 6 points, a validation polyline and dots at 2, a tokens/s polyline of 6; a resumed
log (a second header, steps redone) keeps one point per step, the later value; values that are
not finite or beyond float32's range (nan, inf, 1e308) are left out and every coordinate stays a
finite number. An empty log, a header alone, one step, a wrong header, a short line, a step
that is not a whole number and a device that never ends must fail with one line on stderr and
write nothing. Files go to $FLASHGPT_TMP; prints PASS / FAIL lines like tests/lib/test.h.
"""
import math
import os
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from case import Case, run_script  # noqa: E402

PLOTTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "plot_log.py")
TMP = os.environ.get("FLASHGPT_TMP") or tempfile.mkdtemp()
HEADER = "step,loss,val_loss,lr,grad_norm,ms,tokens_per_s,mfu,mem_gib\n"
SVG = "{http://www.w3.org/2000/svg}"


def line(step, loss, val=""):
    return f"{step},{loss},{val},0.001,0.5,16.0,{500000 + step},0.04,1.6\n"


def write(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def run(*args, **kwargs):
    return run_script(PLOTTER, *args, **kwargs)


def points(root, cls):
    """The (x, y) points of the polyline of that class, or None."""
    for p in root.iter(SVG + "polyline"):
        if p.get("class") == cls:
            return [tuple(map(float, xy.split(","))) for xy in p.get("points").split()]
    return None


def plotted(case, log_path, svg_path):
    """Runs the plotter, which must succeed; returns the parsed SVG root or None."""
    result = run(log_path, svg_path, "--title", "a <test> & more")
    if not case.check(result.returncode == 0, f"exit {result.returncode}: {result.stderr.strip()}"):
        return None
    case.check(len(result.stdout.splitlines()) == 1 and result.stderr == "",
               f"want one line on stdout, got {result.stdout!r} {result.stderr!r}")
    try:
        return ET.parse(svg_path).getroot()
    except ET.ParseError as e:
        case.check(False, f"not valid XML: {e}")
        return None


def case_plot():
    case = Case("plot: two panels, train, validation and tokens/s lines, ticks and legend")
    log = write("log.csv", HEADER + "".join(line(s, 10 - s, "9.5" if s in (3, 6) else "") for s in range(1, 7)))
    root = plotted(case, log, os.path.join(TMP, "log.svg"))
    if root is not None:
        case.check(root.tag == SVG + "svg", f"root is {root.tag}")
        train, val, speed = points(root, "train_loss"), points(root, "val_loss"), points(root, "tokens_per_s")
        case.check(train is not None and len(train) == 6, f"train_loss points {train}")
        case.check(val is not None and len(val) == 2, f"val_loss points {val}")
        case.check(speed is not None and len(speed) == 6, f"tokens_per_s points {speed}")
        dots = [c for c in root.iter(SVG + "circle") if c.get("class") == "val_loss"]
        case.check(len(dots) == 2, f"{len(dots)} validation dots")
        if train and len(train) == 6:
            xs, ys = [x for x, _ in train], [y for _, y in train]
            case.check(xs == sorted(xs) and len(set(xs)) == 6, "train x not increasing")
            case.check(ys == sorted(ys), "a falling loss must go down the page (y grows)")
        texts = [t.text for t in root.iter(SVG + "text")]
        for want in ("step", "train loss", "validation loss", "tokens/s", "a <test> & more"):
            case.check(want in texts, f"no text {want!r}")
        case.check(len(list(root.iter(SVG + "g"))) == 2, "want 2 panels")
    case.end()


def case_resumed():
    case = Case("plot: a resumed log (second header, steps redone) keeps the later values")
    first = "".join(line(s, 10 - s) for s in range(1, 5))
    again = "".join(line(s, 20 - s, "7" if s == 4 else "") for s in range(3, 7))
    root = plotted(case, write("resumed.csv", HEADER + first + HEADER + again), os.path.join(TMP, "resumed.svg"))
    if root is not None:
        train = points(root, "train_loss")
        case.check(train is not None and len(train) == 6, f"train_loss points {train}")
        case.check(len(points(root, "val_loss") or []) == 1, "want one validation point")
        if train and len(train) == 6:
            case.check(train[2][1] < train[1][1], "step 3 must take the resumed (higher) loss")
    case.end()


def coordinates(root):
    """Every number in the SVG's geometry: points, centres, line ends, text positions."""
    numbers = []
    for element in root.iter():
        for key in ("x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "width", "height"):
            if key in element.attrib and not element.get(key).endswith("%"):
                numbers.append(element.get(key))
        numbers += element.get("points", "").replace(",", " ").split()
    return numbers


def case_unplottable(name, rows, want_train, want_speed):
    """rows: (step, loss, tokens/s) as logged; want_*: how many points each line keeps."""
    case = Case(name)
    text = HEADER + "".join(f"{s},{loss},,0.001,0.5,16.0,{speed},0.04,1.6\n" for s, loss, speed in rows)
    root = plotted(case, write("unplottable.csv", text), os.path.join(TMP, "unplottable.svg"))
    if root is not None:
        bad = [n for n in coordinates(root) if not math.isfinite(float(n))]
        case.check(not bad, f"coordinates that are not finite: {bad[:5]}")
        train, speed = points(root, "train_loss"), points(root, "tokens_per_s")
        case.check(train is not None and len(train) == want_train, f"train_loss points {train}")
        case.check(speed is not None and len(speed) == want_speed, f"tokens_per_s points {speed}")
    case.end()


def case_error(name, text, must_mention):
    case = Case(name)
    svg = os.path.join(TMP, "error.svg")
    result = run(write("error.csv", text), svg)
    lines = result.stderr.splitlines()
    case.check(result.returncode != 0, "exit status 0")
    case.check(len(lines) == 1, f"want one line on stderr, got {result.stderr!r}")
    case.check(must_mention in result.stderr, f"message {result.stderr.strip()!r} lacks {must_mention!r}")
    case.check(not os.path.exists(svg) and not os.path.exists(svg + ".tmp"), "an SVG was written")
    case.end()


def main():
    case_plot()
    case_resumed()
    case_error("error: empty log", "", "not a train_gpt log")
    case_error("error: header only", HEADER, "0 steps logged")
    case_error("error: one step", HEADER + line(1, 5.0), "1 step logged")
    case_error("error: another CSV", "a,b\n1,2\n", "not a train_gpt log")
    case_error("error: a short line", HEADER + line(1, 5.0) + "2,4.5\n", "error.csv:3")
    case_error("error: not a number", HEADER + line(1, 5.0) + line(2, "x"), "not a number")
    for step in ("nan", "2.5", "-1", "1e300"):
        case_error(f"error: step {step}", HEADER + line(1, 5.0) + f"{step},4.0,,0.001,0.5,16.0,500000,0.04,1.6\n",
                   "error.csv:3: step")
    case_unplottable("plot: nan loss in the first row is left out", [(1, "nan", 5), (2, 4, 6), (3, 3, 7)], 2, 3)
    case_unplottable("plot: nan loss in a later row is left out", [(1, 5, 5), (2, "nan", 6), (3, 3, 7)], 2, 3)
    case_unplottable("plot: inf and -inf are left out", [(1, "inf", 5), (2, 4, "-inf"), (3, 3, 7)], 2, 2)
    case_unplottable("plot: 1e308 and -1e308 are left out", [(1, "1e308", 5), (2, "-1e308", 6), (3, 3, 7)], 1, 3)
    case_unplottable("plot: float32's extremes are drawn", [(1, "3.4e38", 5), (2, "-3.4e38", 6)], 2, 2)
    case_unplottable("plot: a flat line at 1e38", [(1, "1e38", 5), (2, "1e38", 6)], 2, 2)
    case_unplottable("plot: no tokens/s to draw", [(1, 5, "nan"), (2, 4, "nan")], 2, 0)
    case = Case("error: /dev/zero as the log, at once")
    result = run("/dev/zero", os.path.join(TMP, "x.svg"), limit_s=30)
    case.check(result.returncode not in (0, None) and "/dev/zero: a line longer than" in result.stderr and
               len(result.stderr.splitlines()) == 1, f"got {result!r}")
    case.end()
    case = Case("error: missing log")
    result = run(os.path.join(TMP, "nowhere.csv"), os.path.join(TMP, "x.svg"))
    case.check(result.returncode != 0 and "nowhere.csv" in result.stderr and len(result.stderr.splitlines()) == 1,
               f"got {result!r}")
    case.end()
    return 1 if Case.failures else 0


if __name__ == "__main__":
    sys.exit(main())
