#!/usr/bin/env python3
"""tests/reference/evaluate_reference.py CHECKPOINT SCORES_CSV: ./evaluate's --scores against float64 numpy.

Runs the checkpoint's GPT-2 forward in float64, as train_gpt's model computes it (pre-LayerNorm
with eps 1e-5, learned positions, tanh GELU, causal softmax attention scaled by 1/sqrt(HS), the
logits through the tied wte over the real V ids only), on every row of the CSV that evaluate
wrote (item,line,label,ending,tokens,sum_loss,mean_loss,ids; ids: the row's tokens, the ending's
`tokens` last). A row's reference sum_loss is the sum of the cross-entropies (natural log) of
its ending's tokens, each predicted from every token before it. It checks, for every row, that
sum_loss and mean_loss are within TOL of the reference, relative: |got - ref| / max(1, |ref|);
and, for every item, that evaluate's lowest sum and lowest mean are the reference's, where the
reference's best and second best are further apart than TOL allows either to move. Prints the
worst errors and each failure; exits 1 on a failure or bad input (one "error:" line).
Needs numpy (`make venv`).
"""
import csv
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
try:
    import numpy as np
except ImportError:
    np = None  # said in one line (needed.exit_without) before anything else

from gpt2_checkpoint import Checkpoint, from_bf16_bits
import gpt_parameters
from gpt_architecture import GPT2
from needed import exit_without
from output_file import Failure, fail

exit_without(numpy=np)

# evaluate computes in bf16 (8 bits of mantissa, the logits too) against float64 here: a logit
# of size 10 is rounded by up to 0.04, and a row's sum adds a dozen such errors up. A row scored
# at the wrong positions or from another row's tokens is off by tens of percent.
TOL = 5e-2
LN_EPS = 1e-5
COLUMNS = ["item", "line", "label", "ending", "tokens", "sum_loss", "mean_loss", "ids"]
GELU_SCALE = np.sqrt(2 / np.pi)


def parameters(ck):
    """name -> float64 array, in checkpoint order (the parameter table's, scripts/gpt_parameters.py)."""
    flat = (from_bf16_bits(ck.values) if ck.bf16 else np.asarray(ck.values)).astype(np.float64)
    p, offset = {}, 0
    for kind, shape in gpt_parameters.layout(ck.shape, ck.arch):
        n = int(np.prod(shape))
        p[kind.name] = flat[offset:offset + n].reshape(shape)
        offset += n
    return p


def layernorm(x, w, b):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + LN_EPS) * w + b


def token_losses(p, shape, ids):
    """Cross-entropy of ids[j + 1] given ids[:j + 1], for j = 0 .. len(ids) - 2."""
    T, NH, C = len(ids), shape.NH, shape.C
    HS = C // NH
    x = p["wte"][ids] + p["wpe"][:T]
    causal = np.tril(np.ones((T, T), dtype=bool))
    for l in range(shape.L):
        qkv = layernorm(x, p["ln1w"][l], p["ln1b"][l]) @ p["qkvw"][l].T + p["qkvb"][l]
        q, k, v = qkv.reshape(T, 3, NH, HS).transpose(1, 2, 0, 3)  # each (NH, T, HS)
        scores = np.where(causal, q @ k.swapaxes(-1, -2) / np.sqrt(HS), -np.inf)
        att = np.exp(scores - scores.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        y = (att @ v).transpose(1, 0, 2).reshape(T, C)
        x = x + y @ p["attprojw"][l].T + p["attprojb"][l]
        h = layernorm(x, p["ln2w"][l], p["ln2b"][l]) @ p["fcw"][l].T + p["fcb"][l]
        h = 0.5 * h * (1 + np.tanh(GELU_SCALE * (h + 0.044715 * h ** 3)))
        x = x + h @ p["fcprojw"][l].T + p["fcprojb"][l]
    logits = layernorm(x, p["lnfw"], p["lnfb"]) @ p["wte"][:shape.V].T  # the padded rows never count
    logits -= logits.max(-1, keepdims=True)
    logprobs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return -logprobs[np.arange(T - 1), ids[1:]]


def read_rows(path, shape):
    """The CSV's rows as dicts of item, ending, tokens, sum_loss, mean_loss (numbers), ids (array)."""
    if not os.path.isfile(path):
        fail(f"{path}: no such file")
    try:
        with open(path, newline="") as f:
            lines = list(csv.reader(f))
    except (UnicodeDecodeError, csv.Error):
        fail(f"{path}: not a CSV file of text")
    if not lines or lines[0] != COLUMNS:
        fail(f"{path}:1: not evaluate's --scores (expected the header {','.join(COLUMNS)})")
    if len(lines) == 1:
        fail(f"{path}: no rows")
    rows = []
    for n, fields in enumerate(lines[1:], start=2):
        where = f"{path}:{n}"
        if len(fields) != len(COLUMNS):
            fail(f"{where}: {len(fields)} fields, expected {len(COLUMNS)}")
        try:
            row = {"item": int(fields[0]), "ending": int(fields[3]), "tokens": int(fields[4]),
                   "sum_loss": float(fields[5]), "mean_loss": float(fields[6]),
                   "ids": np.array([int(t) for t in fields[7].split()], dtype=np.int64)}
        except ValueError:
            fail(f"{where}: a field that is not a number")
        ids = row["ids"]
        if not 2 <= len(ids) <= shape.maxT:
            fail(f"{where}: {len(ids)} ids, expected 2 to the model's context of {shape.maxT}")
        if ids.min() < 0 or ids.max() >= shape.V:
            fail(f"{where}: an id outside the model's vocabulary of {shape.V}")
        if not 1 <= row["tokens"] <= len(ids) - 1:
            fail(f"{where}: tokens {row['tokens']}, expected 1 to {len(ids) - 1} (the ids after the first)")
        rows.append(row)
    return rows


def rel_error(got, ref):
    return abs(got - ref) / max(1.0, abs(ref))


def check(checkpoint, scores):
    """Prints the comparison; returns the number of failures."""
    ck = Checkpoint(checkpoint)
    if ck.arch != GPT2:
        fail(f"{checkpoint}: version {ck.version}, a model of another architecture than GPT-2's, which this "
             "reference does not compute")
    p = parameters(ck)
    rows = read_rows(scores, ck.shape)
    failures = 0
    worst = {"sum_loss": (0.0, None), "mean_loss": (0.0, None)}
    for row in rows:
        losses = token_losses(p, ck.shape, row["ids"])
        ref = {"sum_loss": losses[-row["tokens"]:].sum()}
        ref["mean_loss"] = ref["sum_loss"] / row["tokens"]
        row["ref"] = ref
        for key in worst:
            err = rel_error(row[key], ref[key])
            if err > worst[key][0]:
                worst[key] = (err, row)
            if err > TOL:
                failures += 1
                print(f"item {row['item']} ending {row['ending']}: {key} {row[key]:.6g}, reference "
                      f"{ref[key]:.6g} (error {err:.3g} > {TOL})")
    items = {}
    for row in rows:
        items.setdefault(row["item"], []).append(row)
    compared = {"sum_loss": 0, "mean_loss": 0}
    for item, endings in items.items():
        for key in compared:
            ref = sorted(endings, key=lambda r: r["ref"][key])
            if len(ref) < 2:
                continue
            best, second = ref[0]["ref"][key], ref[1]["ref"][key]
            # Either value may move by TOL relative: closer than that, the order is not decided.
            if second - best <= TOL * (max(1.0, abs(best)) + max(1.0, abs(second))):
                continue
            compared[key] += 1
            got = min(endings, key=lambda r: r[key])
            if got is not ref[0]:
                failures += 1
                print(f"item {item}: evaluate's lowest {key} is ending {got['ending']}, the "
                      f"reference's ending {ref[0]['ending']} (by a margin of {second - best:.4g})")
    for key, (err, row) in worst.items():
        at = f" (item {row['item']} ending {row['ending']})" if row else ""
        print(f"{key}: worst error {err:.3g}{at} of {len(rows)} rows; the lowest compared on "
              f"{compared[key]} of {len(items)} items (on the others the margin is within the tolerance)")
    return failures


def main(argv):
    if len(argv) != 2:
        print("error: usage: evaluate_reference.py CHECKPOINT SCORES_CSV", file=sys.stderr)
        return 1
    try:
        failures = check(*argv)
    except Failure as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if failures:
        print(f"{failures} checks failed (tolerance {TOL} relative)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
