#!/usr/bin/env python3
"""tests/reference/gen_muon_reference.py OUTDIR: the float64 numpy reference of Muon (gpt/optimizer.h,
layers/muon.h), written to OUTDIR/muon_reference.bin for tests/unit/gpt/test_muon.cu.

Three parts, on the tiny GPT-2 of tests/reference/gen_gpt_reference.py (its init, batch and model):
- Newton-Schulz: five seeded matrices, one of each shape Muon takes in that model (qkvw (L, 3C,
  C), attprojw (L, C, C), fcw (L, 4C, C), fcprojw (L, C, 4C)) and a wide one of its own, each
  a batch of matrices, with what five iterations of the quintic make of them;
- one update: the model's parameters as master weights, seeded bf16 gradients (their norm above
  the clip), a momentum and Adam moments of a run at step T0, and the master weights, m and v
  after one Muon step at a learning-rate scale;
- NSTEPS Muon steps from the initial parameters on the one batch: the loss before each.
Layout (little-endian):
  int32 header[256]  [0] 20261202, [1] 1, [2] B, [3] T, [4] maxT, [5] V, [6] Vp, [7] L, [8] NH,
                     [9] C, [10] NSTEPS, [11] P, [12] cases, [13] T0, [16..91] the architecture
                     (GPT-2's; gen_gpt_reference.py's layout)
  float32 hyper[16]  lr, momentum, embedding lr, vector lr, b1, b2, eps, weight decay, grad clip,
                     lr scale (of the one update)
  per case: int32 count, rows, cols; float32 input (count, rows, cols), each a bf16 value;
            float32 output (count, rows, cols)
  int32 inputs (B, T), int32 targets (B, T); float32 params (P)
  float32 grads (P), each a bf16 value; m (P), v (P) before; master (P), m (P), v (P) after
  float32 losses (NSTEPS)
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import gen_gpt_reference as gpt  # noqa: E402  (the model, its init and batch)
import gpt_parameters  # noqa: E402  (each tensor's group, multipliers and Muon's matrices)

MAGIC, VERSION = 20261202, 1
NSTEPS, T0 = 10, 3
LR, MOMENTUM, EMBEDDING_LR, HEAD_LR, VECTOR_LR = 0.02, 0.95, 0.001, 0.002, 0.002
BETA1, BETA2, ADAM_EPS, WEIGHT_DECAY, GRAD_CLIP = 0.8, 0.95, 1e-8, 0.1, 1.0
LR_SCALE = 0.75
NS_A, NS_B, NS_C, NS_STEPS, NS_EPS = 3.4445, -4.7750, 2.0315, 5, 1e-7
PEAKS = {"embedding": EMBEDDING_LR, "head": HEAD_LR, "vector": VECTOR_LR}  # Adam's, by group


def newton_schulz(m):
    """What five quintic iterations make of the matrix m (rows, cols), on the shorter side."""
    x = m / (np.sqrt((m ** 2).sum()) + NS_EPS)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    for _ in range(NS_STEPS):
        a = x @ x.T
        x = NS_A * x + (NS_B * a + NS_C * a @ a) @ x
    return x.T if tall else x


def muon_step(master, grad, m, v, t, lr_scale, arch=gpt.GPT2):
    """One step of train_gpt's Muon on master, m and v in place (the parameters of a model of
    the architecture arch), the gradient clipped first."""
    norm = np.sqrt((grad ** 2).sum())
    grad = grad * (GRAD_CLIP / norm) if norm > GRAD_CLIP else grad
    p, g, mv, vv = gpt.views(master, arch), gpt.views(grad, arch), gpt.views(m, arch), gpt.views(v, arch)
    for name, _ in gpt.param_shapes(arch):
        kind = gpt_parameters.KINDS[name]
        decay = WEIGHT_DECAY * kind.decay_scale
        if kind.group == "matrix":
            lr = LR * kind.lr_scale * lr_scale
            mv[name][...] = MOMENTUM * mv[name] + (1 - MOMENTUM) * g[name]
            u = (1 - MOMENTUM) * g[name] + MOMENTUM * mv[name]
            rows, cols = gpt_parameters.muon_matrix(kind, gpt.SHAPE)  # each slice cut into such matrices
            update = np.stack([newton_schulz(x) for x in u.reshape(-1, rows, cols)]).reshape(u.shape)
            p[name][...] -= lr * (decay * p[name] + update * np.sqrt(max(1.0, rows / cols)))
        else:
            lr = PEAKS[kind.group] * kind.lr_scale * lr_scale
            mv[name][...] = BETA1 * mv[name] + (1 - BETA1) * g[name]
            vv[name][...] = BETA2 * vv[name] + (1 - BETA2) * g[name] ** 2
            mhat, vhat = mv[name] / (1 - BETA1 ** t), vv[name] / (1 - BETA2 ** t)
            p[name][...] -= lr * (mhat / (np.sqrt(vhat) + ADAM_EPS) + decay * p[name])


def bf16(rng, shape, std):
    return gpt.round_to_bf16(rng.normal(0, std, shape)).astype(np.float64)


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
    L, C = gpt.L, gpt.C
    cases = []
    for count, rows, cols in [(L, 3 * C, C), (L, C, C), (L, 4 * C, C), (L, C, 4 * C), (3, 64, 200)]:
        x = mine.normal(0, 1e-3, (count, rows, cols))
        x += 3e-3 * mine.normal(size=(count, rows, 1)) * mine.normal(size=(count, 1, cols))
        x = gpt.round_to_bf16(x).astype(np.float64)
        cases.append((count, rows, cols, x, np.stack([newton_schulz(m) for m in x])))

    # One update from the state of a run at step T0.
    P = gpt.NUM_PARAMS
    grads = bf16(mine, P, 0.02)
    m0, v0 = mine.normal(0, 0.01, P), mine.normal(0, 0.01, P) ** 2
    master, m, v = params.copy(), m0.copy(), v0.copy()
    muon_step(master, grads, m, v, T0 + 1, LR_SCALE)

    # NSTEPS steps on the batch.
    flat, m_run, v_run, losses = params.copy(), np.zeros(P), np.zeros(P), []
    for t in range(1, NSTEPS + 1):
        loss, _, cache = gpt.forward(flat, inputs, targets)
        losses.append(loss)
        muon_step(flat, gpt.backward(flat, cache), m_run, v_run, t, 1.0)

    header = np.zeros(256, dtype="<i4")
    header[:14] = [MAGIC, VERSION, gpt.B, gpt.T, gpt.MAXT, gpt.V, gpt.VP, L, gpt.NH, C, NSTEPS, P, len(cases), T0]
    slots = gpt.architecture_slots(gpt.GPT2)
    header[16:16 + len(slots)] = slots
    hyper = np.zeros(16, dtype="<f4")
    hyper[:10] = [LR, MOMENTUM, EMBEDDING_LR, VECTOR_LR, BETA1, BETA2, ADAM_EPS, WEIGHT_DECAY, GRAD_CLIP, LR_SCALE]
    parts = [(header, "<i4"), (hyper, "<f4")]
    for count, rows, cols, x, out in cases:
        parts += [(np.array([count, rows, cols]), "<i4"), (x, "<f4"), (out, "<f4")]
    parts += [(inputs, "<i4"), (targets, "<i4"), (params, "<f4"), (grads, "<f4"), (m0, "<f4"), (v0, "<f4"),
              (master, "<f4"), (m, "<f4"), (v, "<f4"), (np.array(losses), "<f4")]
    path = os.path.join(outdir, "muon_reference.bin")
    gpt.write_reference(path, parts)
    print(f"{path}: {len(cases)} Newton-Schulz cases, one update, loss {losses[0]:.6f} -> {losses[-1]:.6f} "
          f"over {NSTEPS} Muon steps")


if __name__ == "__main__":
    main()
