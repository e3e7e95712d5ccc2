#!/usr/bin/env python3
"""tests/gen_gpt_reference.py OUTDIR: the float64 numpy reference of the whole GPT-2.

Runs a tiny GPT-2 (B=2, T=37, maxT=40, V=97 padded to Vp=128, L=2, NH=2, C=128) forward and
backward on one seeded batch, then 10 AdamW steps on that same batch, and writes
OUTDIR/gpt_reference.bin for tests/test_gpt.cu. The file layout (all little-endian):
  int32 header[256]  [0] 20241129, [1] 1, [2] B, [3] T, [4] maxT, [5] V, [6] Vp, [7] L, [8] NH,
                     [9] C, [10] nsteps, [11] P = number of parameter floats
  float32 hyper[16]  lr, b1, b2, eps, weight decay, grad clip
  int32 inputs (B, T), int32 targets (B, T)
  float32 params (P)       initial values, each exactly representable in bf16
  float32 logits (B, T, V) real vocabulary only;  float32 loss
  float32 grads (P)        of the mean loss at the initial params;  float32 grad_norm (unclipped)
  float32 losses (nsteps)  losses[i]: the batch's loss before update i + 1
Parameters are in checkpoint order: wte (Vp, C), wpe (maxT, C), ln1w (L, C), ln1b (L, C),
qkvw (L, 3C, C), qkvb (L, 3C), attprojw (L, C, C), attprojb (L, C), ln2w (L, C), ln2b (L, C),
fcw (L, 4C, C), fcb (L, 4C), fcprojw (L, C, 4C), fcprojb (L, C), lnfw (C), lnfb (C).
Every bias starts N(0, 0.02) and layernorm weights 1 + N(0, 0.1), so all of them matter. The
key part of qkvb has an exactly zero gradient (softmax ignores a shift shared by a row's scores):
compare gradients with an absolute tolerance there.

With FLASHGPT_GRADCHECK=1 the hand-written backward is first checked against central finite
differences at random coordinates of every parameter tensor.
"""
import os
import sys

import numpy as np

B, T, MAXT, V, L, NH, C = 2, 37, 40, 97, 2, 2, 128
VP = (V + 127) // 128 * 128
HS = C // NH
NSTEPS = 10
LR, BETA1, BETA2, ADAM_EPS, WEIGHT_DECAY, GRAD_CLIP = 1e-3, 0.9, 0.95, 1e-8, 0.1, 1.0
LN_EPS = 1e-5
SEED = 20241129
MAGIC, VERSION = 20241129, 1

PARAM_SHAPES = [
    ("wte", (VP, C)), ("wpe", (MAXT, C)),
    ("ln1w", (L, C)), ("ln1b", (L, C)),
    ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)),
    ("attprojw", (L, C, C)), ("attprojb", (L, C)),
    ("ln2w", (L, C)), ("ln2b", (L, C)),
    ("fcw", (L, 4 * C, C)), ("fcb", (L, 4 * C)),
    ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)),
    ("lnfw", (C,)), ("lnfb", (C,)),
]
DECAYED = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}
NUM_PARAMS = sum(int(np.prod(shape)) for _, shape in PARAM_SHAPES)


def views(flat):
    """Named views, in checkpoint order, of a flat (P) array."""
    out, offset = {}, 0
    for name, shape in PARAM_SHAPES:
        n = int(np.prod(shape))
        out[name] = flat[offset:offset + n].reshape(shape)
        offset += n
    return out


def round_to_bf16(x):
    """The float32 nearest to x that bf16 represents (round to nearest, ties to even)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


def init_params(rng):
    flat = np.zeros(NUM_PARAMS)
    p = views(flat)
    residual_std = 0.02 / np.sqrt(2 * L)
    for name, shape in PARAM_SHAPES:
        if name in ("ln1w", "ln2w", "lnfw"):
            p[name][...] = 1 + rng.normal(0, 0.1, shape)
        elif name in ("attprojw", "fcprojw"):
            p[name][...] = rng.normal(0, residual_std, shape)
        else:  # other weights, and every bias (non-zero so that they matter in the forward)
            p[name][...] = rng.normal(0, 0.02, shape)
    p["wte"][V:] = 0
    return round_to_bf16(flat).astype(np.float64)


# ---- layers: forward returns (out, cache), backward returns the input gradient (and params')

def layernorm_forward(x, w, b):  # x (B, T, C)
    mean = x.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + LN_EPS)
    xhat = (x - mean) * rstd
    return xhat * w + b, (xhat, rstd)


def layernorm_backward(dout, w, cache):
    xhat, rstd = cache
    dxhat = dout * w
    dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True)
                 - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    return dx, (dout * xhat).sum((0, 1)), dout.sum((0, 1))


def attention_forward(qkv):  # qkv (B, T, 3C) -> out (B, T, C)
    q, k, v = qkv.reshape(B, T, 3, NH, HS).transpose(2, 0, 3, 1, 4)  # each (B, NH, T, HS)
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(HS)  # (B, NH, T, T)
    scores = np.where(np.tril(np.ones((T, T), dtype=bool)), scores, -np.inf)
    att = np.exp(scores - scores.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    y = att @ v  # (B, NH, T, HS)
    return y.transpose(0, 2, 1, 3).reshape(B, T, C), (q, k, v, att)


def attention_backward(dout, cache):
    q, k, v, att = cache
    dy = dout.reshape(B, T, NH, HS).transpose(0, 2, 1, 3)  # (B, NH, T, HS)
    datt = dy @ v.swapaxes(-1, -2)
    dv = att.swapaxes(-1, -2) @ dy
    dscores = att * (datt - (datt * att).sum(-1, keepdims=True)) / np.sqrt(HS)  # masked: att = 0
    dq = dscores @ k
    dk = dscores.swapaxes(-1, -2) @ q
    return np.stack([dq, dk, dv]).transpose(1, 3, 0, 2, 4).reshape(B, T, 3 * C)


GELU_SCALE = np.sqrt(2 / np.pi)


def gelu_forward(x):
    return 0.5 * x * (1 + np.tanh(GELU_SCALE * (x + 0.044715 * x ** 3)))


def gelu_backward(dout, x):
    t = np.tanh(GELU_SCALE * (x + 0.044715 * x ** 3))
    dt = GELU_SCALE * (1 + 3 * 0.044715 * x ** 2)
    return dout * (0.5 * (1 + t) + 0.5 * x * (1 - t ** 2) * dt)


# ---- the model

def forward(flat, inputs, targets):
    """Returns (mean loss, logits (B, T, V), cache for backward)."""
    p = views(flat)
    x = p["wte"][inputs] + p["wpe"][:T]  # (B, T, C)
    layers = []
    for l in range(L):
        ln1, ln1_cache = layernorm_forward(x, p["ln1w"][l], p["ln1b"][l])
        qkv = ln1 @ p["qkvw"][l].T + p["qkvb"][l]  # (B, T, 3C)
        atty, att_cache = attention_forward(qkv)
        x = x + atty @ p["attprojw"][l].T + p["attprojb"][l]
        ln2, ln2_cache = layernorm_forward(x, p["ln2w"][l], p["ln2b"][l])
        pre_gelu = ln2 @ p["fcw"][l].T + p["fcb"][l]  # (B, T, 4C)
        h = gelu_forward(pre_gelu)
        x = x + h @ p["fcprojw"][l].T + p["fcprojb"][l]
        layers.append((ln1, ln1_cache, att_cache, atty, ln2, ln2_cache, pre_gelu, h))
    lnf, lnf_cache = layernorm_forward(x, p["lnfw"], p["lnfb"])
    logits = lnf @ p["wte"][:V].T  # (B, T, V): padded columns never count
    shifted = logits - logits.max(-1, keepdims=True)
    logprobs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    loss = -np.take_along_axis(logprobs, targets[..., None], -1).mean()
    cache = (inputs, targets, layers, lnf, lnf_cache, np.exp(logprobs))
    return loss, logits, cache


def backward(flat, cache):
    """Gradient (P) of the mean loss; the padding rows of wte get 0."""
    p = views(flat)
    grad = np.zeros_like(flat)
    g = views(grad)
    inputs, targets, layers, lnf, lnf_cache, probs = cache
    dlogits = probs.copy()  # (softmax - onehot(target)) / (B * T)
    dlogits[np.arange(B)[:, None], np.arange(T), targets] -= 1
    dlogits /= B * T
    g["wte"][:V] += np.einsum("btv,btc->vc", dlogits, lnf)
    dx, g["lnfw"][...], g["lnfb"][...] = layernorm_backward(dlogits @ p["wte"][:V], p["lnfw"],
                                                            lnf_cache)
    for l in reversed(range(L)):
        ln1, ln1_cache, att_cache, atty, ln2, ln2_cache, pre_gelu, h = layers[l]
        # x = x + h @ fcprojw^T + fcprojb
        g["fcprojw"][l] = np.einsum("bto,btc->oc", dx, h)
        g["fcprojb"][l] = dx.sum((0, 1))
        dpre = gelu_backward(dx @ p["fcprojw"][l], pre_gelu)
        g["fcw"][l] = np.einsum("bto,btc->oc", dpre, ln2)
        g["fcb"][l] = dpre.sum((0, 1))
        dln2, g["ln2w"][l], g["ln2b"][l] = layernorm_backward(dpre @ p["fcw"][l], p["ln2w"][l],
                                                              ln2_cache)
        dx = dx + dln2
        # x = x + atty @ attprojw^T + attprojb
        g["attprojw"][l] = np.einsum("bto,btc->oc", dx, atty)
        g["attprojb"][l] = dx.sum((0, 1))
        dqkv = attention_backward(dx @ p["attprojw"][l], att_cache)
        g["qkvw"][l] = np.einsum("bto,btc->oc", dqkv, ln1)
        g["qkvb"][l] = dqkv.sum((0, 1))
        dln1, g["ln1w"][l], g["ln1b"][l] = layernorm_backward(dqkv @ p["qkvw"][l], p["ln1w"][l],
                                                              ln1_cache)
        dx = dx + dln1
    np.add.at(g["wte"], inputs, dx)
    g["wpe"][:T] = dx.sum(0)
    return grad


def adamw_step(flat, grad, m, v, t, decay_mask):
    """One AdamW update of flat, m and v in place, clipping grad to GRAD_CLIP global norm."""
    norm = np.sqrt((grad ** 2).sum())
    if norm > GRAD_CLIP:
        grad = grad * (GRAD_CLIP / norm)
    m[...] = BETA1 * m + (1 - BETA1) * grad
    v[...] = BETA2 * v + (1 - BETA2) * grad ** 2
    mhat = m / (1 - BETA1 ** t)
    vhat = v / (1 - BETA2 ** t)
    flat -= LR * (mhat / (np.sqrt(vhat) + ADAM_EPS) + WEIGHT_DECAY * decay_mask * flat)


def gradient_check(flat, inputs, targets, rng, per_tensor=8, h=1e-4):
    """Checks backward against fourth-order central differences at random coordinates of every
    tensor. Their noise is about 1e-16 * loss / h (rounding), so a coordinate passes when the two
    differ by at most 1e-6 * |gradient| + 1e-9; exits 1 otherwise."""
    analytic = backward(flat, forward(flat, inputs, targets)[2])
    worst_rel, worst_abs, failures, offset = 0.0, 0.0, 0, 0
    for name, shape in PARAM_SHAPES:
        # rows of wte past V and of wpe past T get no gradient: sample where one exists
        rows = {"wte": V, "wpe": T}.get(name, shape[0])
        size = int(np.prod(shape))
        for i in rng.integers(0, rows * size // shape[0], per_tensor) + offset:
            saved = flat[i]
            loss_at = {}
            for step in (-2, -1, 1, 2):
                flat[i] = saved + step * h
                loss_at[step] = forward(flat, inputs, targets)[0]
            flat[i] = saved
            numeric = (8 * (loss_at[1] - loss_at[-1]) - (loss_at[2] - loss_at[-2])) / (12 * h)
            err = abs(numeric - analytic[i])
            worst_abs = max(worst_abs, err)
            if abs(numeric) > 1e-6:  # smaller ones (e.g. the key bias's, exactly 0) are all noise
                worst_rel = max(worst_rel, err / abs(numeric))
            if err > 1e-6 * abs(numeric) + 1e-9:
                failures += 1
                print(f"gradient check: {name} flat[{i}]: backward {analytic[i]:.9e}, "
                      f"finite difference {numeric:.9e}", file=sys.stderr)
        offset += size
    print(f"gradient check: {per_tensor} coordinates of each of {len(PARAM_SHAPES)} tensors, "
          f"max relative error {worst_rel:.1e}, max absolute error {worst_abs:.1e}, "
          f"{failures} failed")
    if failures:
        sys.exit(1)


def write_reference(path, parts):
    """The (array, dtype) parts one after another into path (its folder made), through a temporary."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "wb") as f:
        for array, dtype in parts:
            f.write(np.ascontiguousarray(array, dtype=dtype).tobytes())
    os.replace(path + ".tmp", path)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_gpt_reference.py OUTDIR")
    outdir = sys.argv[1]
    rng = np.random.default_rng(SEED)
    flat = init_params(rng)
    tokens = rng.integers(0, V, (B, T + 1))
    inputs, targets = tokens[:, :-1], tokens[:, 1:]  # next-token prediction, as in training
    if os.environ.get("FLASHGPT_GRADCHECK") == "1":
        gradient_check(flat, inputs, targets, rng)

    params0 = flat.copy()
    loss0, logits0, cache = forward(flat, inputs, targets)
    grads0 = backward(flat, cache)
    grad_norm0 = np.sqrt((grads0 ** 2).sum())

    decay_mask = np.zeros(NUM_PARAMS)
    for name, view in views(decay_mask).items():
        view[...] = name in DECAYED
    m, v = np.zeros(NUM_PARAMS), np.zeros(NUM_PARAMS)
    losses = []
    for t in range(1, NSTEPS + 1):
        loss, _, cache = forward(flat, inputs, targets)
        losses.append(loss)
        adamw_step(flat, backward(flat, cache), m, v, t, decay_mask)

    header = np.zeros(256, dtype="<i4")
    header[:12] = [MAGIC, VERSION, B, T, MAXT, V, VP, L, NH, C, NSTEPS, NUM_PARAMS]
    hyper = np.zeros(16, dtype="<f4")
    hyper[:6] = [LR, BETA1, BETA2, ADAM_EPS, WEIGHT_DECAY, GRAD_CLIP]
    path = os.path.join(outdir, "gpt_reference.bin")
    write_reference(path, [(header, "<i4"), (hyper, "<f4"), (inputs, "<i4"), (targets, "<i4"),
                           (params0, "<f4"), (logits0, "<f4"), (loss0, "<f4"), (grads0, "<f4"),
                           (grad_norm0, "<f4"), (np.array(losses), "<f4")])
    print(f"{path}: GPT-2 L={L} C={C} B={B} T={T}, loss {losses[0]:.6f} -> {losses[-1]:.6f} "
          f"over {NSTEPS} AdamW steps, grad norm {grad_norm0:.6f}")


if __name__ == "__main__":
    main()
