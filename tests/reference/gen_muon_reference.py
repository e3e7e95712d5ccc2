#!/usr/bin/env python3
"""tests/reference/gen_muon_reference.py OUTDIR: the float64 numpy reference of Muon (gpt/optimizer.h,
layers/muon.h) and its variants, written to OUTDIR/muon_reference.bin for tests/unit/gpt/test_muon.cu.

A variant (Variant) is Muon's settings that train_gpt's options change: how qkvw is cut into
matrices (--muon-qkv: fused, split, head-pairs), the Newton-Schulz coefficients (--muon-ns:
quintic, polar), cautious weight decay (--cautious-weight-decay), NorMuon and its beta (--normuon,
--normuon-beta2), and the weight decay. Three parts:
- Newton-Schulz: seeded matrices of each shape Muon takes in the tiny GPT-2 of
  tests/reference/gen_gpt_reference.py (qkvw (L, 3C, C), attprojw (L, C, C), fcw (L, 4C, C),
  fcprojw (L, C, 4C)), a wide one of its own and head pairs (2HS, C) of a model of four heads,
  each a batch of matrices, with what five iterations of each coefficient set make of them;
- one update of each variant (UPDATES) on a model of four heads (L 1, NH 4, C 256: head pairs
  of (128, 256) differ from q, k and v), from the same start: seeded parameters as master
  weights, bf16 gradients (their norm above the clip), a momentum and Adam moments of a run at
  step T0 (v random everywhere, so NorMuon's moments start from a run's too), and the master
  weights and v after one Muon step at a learning-rate scale, m after it (every variant's);
- NSTEPS Muon steps of the tiny GPT-2 on its one batch from its initial parameters, for each
  variant of STEPS: the loss before each.
Layout (little-endian):
  int32 header[256]  [0] 20261202, [1] 1, [2] B, [3] T, [4] maxT, [5] V, [6] Vp, [7] L, [8] NH,
                     [9] C, [10] NSTEPS, [11] P (the tiny GPT-2's), [12] Newton-Schulz cases,
                     [13] T0, [14] updates, [15] step runs, [16..91] the architecture (GPT-2's;
                     gen_gpt_reference.py's layout)
  float32 hyper[16]  lr, momentum, embedding lr, vector lr, b1, b2, eps, grad clip, lr scale (of
                     the one update)
  per case: int32 count, rows, cols, coefficients (0 quintic, 1 Polar Express);
            float32 input (count, rows, cols), each a bf16 value; float32 output (count, rows, cols)
  the update model: int32 maxT, V, L, NH, C (GPT-2's architecture), P_u;
            float32 params (P_u), grads (P_u), each a bf16 value; m (P_u), v (P_u) before; m (P_u) after
  per update: int32 qkv, ns, cautious, normuon; float32 weight decay, NorMuon's beta2;
            float32 master (P_u), v (P_u) after
  int32 inputs (B, T), int32 targets (B, T); float32 params (P)
  per step run: int32 qkv, ns, cautious, normuon; float32 weight decay, beta2; float32 losses (NSTEPS)
"""
import os
import sys
from typing import NamedTuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import gen_gpt_reference as gpt  # noqa: E402  (the model, its init and batch)
import gpt_parameters  # noqa: E402  (each tensor's group, multipliers and Muon's matrices)
from gpt_architecture import Architecture  # noqa: E402

MAGIC, VERSION = 20261202, 1
NSTEPS, T0 = 10, 3
LR, MOMENTUM, EMBEDDING_LR, HEAD_LR, VECTOR_LR = 0.02, 0.95, 0.001, 0.002, 0.002
BETA1, BETA2, ADAM_EPS, WEIGHT_DECAY, GRAD_CLIP = 0.8, 0.95, 1e-8, 0.1, 1.0
LR_SCALE = 0.75
NS_STEPS, NS_EPS = 5, 1e-7
# Each coefficient set: the factor on the norm, then (a, b, c) of each iteration. The quintic
# (Keller Jordan's); Polar Express (Amsel et al. 2025, arXiv 2505.16932) for five iterations,
# safety factor 2e-2 and cushion 2, its norm taken 2% large, as modded-nanogpt and nanochat run it.
NS_COEFFICIENTS = {
    "quintic": (1.0, [(3.4445, -4.7750, 2.0315)] * NS_STEPS),
    "polar": (1.02, [(8.156554524902461, -22.48329292557795, 15.878769915207462),
                     (4.042929935166739, -2.808917465908714, 0.5000178451051316),
                     (3.8916678022926607, -2.772484153217685, 0.5060648178503393),
                     (3.285753657755655, -2.3681294933425376, 0.46449024233003106),
                     (2.3465413258596377, -1.7097828382687081, 0.42323551169305323)]),
}
NS_KINDS = ("quintic", "polar")  # as the file numbers them (layers/newton_schulz.h's order)
NORMUON_FLOOR = 1e-10  # the second moment's and the scaled norm's floor
PEAKS = {"embedding": EMBEDDING_LR, "head": HEAD_LR, "vector": VECTOR_LR}  # Adam's, by group


class Variant(NamedTuple):
    qkv: str = "fused"
    ns: str = "quintic"
    cautious: bool = False
    normuon: bool = False
    weight_decay: float = WEIGHT_DECAY
    beta2: float = 0.0  # NorMuon's


MUON = Variant()
# The one update's variants: each alone, then all of them; the cautious decay is large enough
# (lr wd |w| near lr |update|) that decaying where the signs differ, or everywhere, shows.
UPDATES = (MUON, Variant(qkv="split"), Variant(qkv="head-pairs"), Variant(ns="polar"),
           Variant(cautious=True, weight_decay=0.5), Variant(normuon=True, beta2=0.95),
           Variant("head-pairs", "polar", True, True, 0.5, 0.9))
# The runs of NSTEPS steps: Muon, and every variant at once (q, k and v of the tiny model's two heads).
STEPS = (MUON, Variant("split", "polar", True, True, 0.1, 0.95))
# The update's model: four heads of 64, so that its head pairs are neither q, k and v nor qkvw.
UPDATE_SHAPE = gpt_parameters.Shape(maxT=16, V=97, L=1, NH=4, C=256)


def newton_schulz(m, ns="quintic"):
    """What five iterations of the coefficient set ns make of the matrix m (rows, cols), on the
    shorter side."""
    norm_scale, steps = NS_COEFFICIENTS[ns]
    x = m / (norm_scale * np.sqrt((m ** 2).sum()) + NS_EPS)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    for a, b, c in steps:
        g = x @ x.T
        x = a * x + (b * g + c * g @ g) @ x
    return x.T if tall else x


def normuon(o, moments, beta2):
    """NorMuon on the orthogonalised update o (rows, cols): moments (the longer side's, one per row,
    or per column where rows < cols) updated in place by the mean squares of o's rows (columns), and
    o with each row (column) divided by its moment's square root, then scaled back to o's norm."""
    by_row = o.shape[0] >= o.shape[1]
    q = (o ** 2).mean(axis=1 if by_row else 0)
    moments[...] = beta2 * moments + (1 - beta2) * q
    inv = 1 / np.sqrt(np.maximum(moments, NORMUON_FLOOR))
    scaled = o * (inv[:, None] if by_row else inv[None, :])
    return scaled * np.sqrt((o ** 2).sum()) / max(np.sqrt((scaled ** 2).sum()), NORMUON_FLOOR)


def views_of(flat, shape, arch):
    """Named views, in checkpoint order, of a flat array of the model of shape and arch."""
    out, offset = {}, 0
    for kind, tensor in gpt_parameters.layout(shape, Architecture(**arch)):
        n = int(np.prod(tensor))
        out[kind.name] = flat[offset:offset + n].reshape(tensor)
        offset += n
    return out


def muon_matrix_step(p, g, m, v, lr, decay, rows, cols, variant):
    """Muon on the matrix tensor p (its gradient g, momentum m, v for NorMuon's moments), each slice
    cut into matrices of (rows, cols); decay: the tensor's weight decay."""
    m[...] = MOMENTUM * m + (1 - MOMENTUM) * g
    u = ((1 - MOMENTUM) * g + MOMENTUM * m).reshape(-1, rows, cols)
    update = np.stack([newton_schulz(x, variant.ns) for x in u])
    if variant.normuon:
        # Each matrix's moments at the start of its place in v.
        places = v.reshape(-1, rows * cols)
        for k in range(len(update)):
            update[k] = normuon(update[k], places[k, :max(rows, cols)], variant.beta2)
    update = update.reshape(p.shape)
    decayed = (update * p >= 0) if variant.cautious else np.ones_like(p)
    p[...] -= lr * (decay * p * decayed + update * np.sqrt(max(1.0, rows / cols)))


def muon_step(master, grad, m, v, t, lr_scale, arch=gpt.GPT2, shape=gpt.SHAPE, variant=MUON):
    """One step of train_gpt's Muon (of the variant) on master, m and v in place (the parameters of
    a model of the shape and architecture arch), the gradient clipped first."""
    norm = np.sqrt((grad ** 2).sum())
    grad = grad * (GRAD_CLIP / norm) if norm > GRAD_CLIP else grad
    p, g, mv, vv = (views_of(x, shape, arch) for x in (master, grad, m, v))
    for name in p:
        kind = gpt_parameters.KINDS[name]
        decay = variant.weight_decay * kind.decay_scale
        if kind.group == "matrix":
            rows, cols = gpt_parameters.muon_matrix(kind, shape, variant.qkv)  # each slice cut into such matrices
            muon_matrix_step(p[name], g[name], mv[name], vv[name], LR * kind.lr_scale * lr_scale, decay, rows, cols,
                             variant)
        else:
            lr = PEAKS[kind.group] * kind.lr_scale * lr_scale
            mv[name][...] = BETA1 * mv[name] + (1 - BETA1) * g[name]
            vv[name][...] = BETA2 * vv[name] + (1 - BETA2) * g[name] ** 2
            mhat, vhat = mv[name] / (1 - BETA1 ** t), vv[name] / (1 - BETA2 ** t)
            p[name][...] -= lr * (mhat / (np.sqrt(vhat) + ADAM_EPS) + decay * p[name])


def bf16(rng, shape, std):
    return gpt.round_to_bf16(rng.normal(0, std, shape)).astype(np.float64)


def variant_parts(variant):
    """The variant as the file holds it: its ints, then its floats."""
    ints = [gpt_parameters.MUON_QKV.index(variant.qkv), NS_KINDS.index(variant.ns), int(variant.cautious),
            int(variant.normuon)]
    return [(np.array(ints), "<i4"), (np.array([variant.weight_decay, variant.beta2]), "<f4")]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_muon_reference.py OUTDIR")
    outdir = sys.argv[1]
    rng = np.random.default_rng(gpt.SEED)
    params = gpt.init_params(rng)
    tokens = rng.integers(0, gpt.V, (gpt.B, gpt.T + 1))
    inputs, targets = tokens[:, :-1], tokens[:, 1:]

    # Newton-Schulz on momentum-like matrices: a direction shared by the rows, and noise.
    mine = np.random.default_rng(46)
    L, C, S = gpt.L, gpt.C, UPDATE_SHAPE
    cases = []
    for count, rows, cols in [(L, 3 * C, C), (L, C, C), (L, 4 * C, C), (L, C, 4 * C), (3, 64, 200),
                              (6, 2 * S.C // S.NH, S.C)]:
        x = mine.normal(0, 1e-3, (count, rows, cols))
        x += 3e-3 * mine.normal(size=(count, rows, 1)) * mine.normal(size=(count, 1, cols))
        x = gpt.round_to_bf16(x).astype(np.float64)
        for ns in NS_KINDS:
            cases.append((count, rows, cols, ns, x, np.stack([newton_schulz(m, ns) for m in x])))

    # One update of each variant from the state of a run at step T0, on the model of four heads.
    P_u = gpt_parameters.count(S, Architecture(**gpt.GPT2))
    start = bf16(mine, P_u, 0.02)
    grads = bf16(mine, P_u, 0.02)
    m0, v0 = mine.normal(0, 0.01, P_u), mine.normal(0, 0.01, P_u) ** 2
    updates = []
    for variant in UPDATES:
        master, m, v = start.copy(), m0.copy(), v0.copy()
        muon_step(master, grads, m, v, T0 + 1, LR_SCALE, shape=S, variant=variant)
        updates.append((variant, master, v))
    m1 = m  # the momentum and Adam's m are every variant's

    # NSTEPS steps on the batch, of each run.
    runs = []
    for variant in STEPS:
        flat, m_run, v_run, losses = params.copy(), np.zeros(gpt.NUM_PARAMS), np.zeros(gpt.NUM_PARAMS), []
        for t in range(1, NSTEPS + 1):
            loss, _, cache = gpt.forward(flat, inputs, targets)
            losses.append(loss)
            muon_step(flat, gpt.backward(flat, cache), m_run, v_run, t, 1.0, variant=variant)
        runs.append((variant, losses))

    header = np.zeros(256, dtype="<i4")
    header[:16] = [MAGIC, VERSION, gpt.B, gpt.T, gpt.MAXT, gpt.V, gpt.VP, L, gpt.NH, C, NSTEPS, gpt.NUM_PARAMS,
                   len(cases), T0, len(updates), len(runs)]
    slots = gpt.architecture_slots(gpt.GPT2)
    header[16:16 + len(slots)] = slots
    hyper = np.zeros(16, dtype="<f4")
    hyper[:9] = [LR, MOMENTUM, EMBEDDING_LR, VECTOR_LR, BETA1, BETA2, ADAM_EPS, GRAD_CLIP, LR_SCALE]
    parts = [(header, "<i4"), (hyper, "<f4")]
    for count, rows, cols, ns, x, out in cases:
        parts += [(np.array([count, rows, cols, NS_KINDS.index(ns)]), "<i4"), (x, "<f4"), (out, "<f4")]
    parts += [(np.array([S.maxT, S.V, S.L, S.NH, S.C, P_u]), "<i4"), (start, "<f4"), (grads, "<f4"), (m0, "<f4"),
              (v0, "<f4"), (m1, "<f4")]
    for variant, master, v in updates:
        parts += variant_parts(variant) + [(master, "<f4"), (v, "<f4")]
    parts += [(inputs, "<i4"), (targets, "<i4"), (params, "<f4")]
    for variant, losses in runs:
        parts += variant_parts(variant) + [(np.array(losses), "<f4")]
    path = os.path.join(outdir, "muon_reference.bin")
    gpt.write_reference(path, parts)
    said = ", ".join(f"{losses[0]:.6f} -> {losses[-1]:.6f}" for _, losses in runs)
    print(f"{path}: {len(cases)} Newton-Schulz cases, {len(updates)} updates, losses over {NSTEPS} Muon steps "
          f"of {len(runs)} variants: {said}")


if __name__ == "__main__":
    main()
