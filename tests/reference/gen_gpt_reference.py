#!/usr/bin/env python3
"""tests/reference/gen_gpt_reference.py OUTDIR: the float64 numpy reference of the whole GPT, in both
architectures of gpt/config.h, the modern one with attention's key windows, and each with the
parts of the 2026 recipe.

Runs a tiny GPT (B=2, T=37, maxT=40, V=97 padded to Vp=128, L=2 (3 with the parts), NH=2,
C=128) forward and
backward on one seeded batch, then 10 AdamW steps on that same batch, and writes
OUTDIR/gpt_reference.bin (GPT-2's architecture) and OUTDIR/gpt_modern_reference.bin (the modern
one: rotary, RMSNorm, QK-norm, ReLU^2, no biases, an untied head, soft-capped logits; the latter
also 10 Muon steps) and OUTDIR/gpt_masked_reference.bin (the modern one whose attention sees a
key window per row, attention/mask.h: documents starting at token DOCUMENT_TOKEN, placed at
DOCUMENT_STARTS in the batch, and the window pattern full,9: layer 0 sees the row's document,
layer 1 its last 9 keys of it at most), OUTDIR/gpt_parts_reference.bin (the modern one with the
parts of the 2026 recipe: an embedding norm, a QK scale of 1.25, residual lambdas, value
embeddings (on layers 0 and 2 of the 3), the smear, the backout (of layer 1's output); 10 Muon
steps too) and OUTDIR/gpt_gpt2_parts_reference.bin (GPT-2's with an embedding norm, residual lambdas,
value embeddings, the smear and the backout: learned positions under the norm, LayerNorm blocks)
for tests/unit/gpt/test_gpt.cu. The
file layout (all little-endian):
  int32 header[256]  [0] 20241129, [1] 1, [2] B, [3] T, [4] maxT, [5] V, [6] Vp, [7] L, [8] NH,
                     [9] C, [10] nsteps, [11] P = number of parameter floats, [12] Muon steps
                     (0: none), [16..97] the architecture as the model checkpoint holds it
                     (gpt/checkpoint.h: rotary, rotary_base, rms_norm, qk_norm, relu2, bias,
                     untied_head, zero_init, softcap, documents, document_token, window_count,
                     the 64 windows, embedding_norm, qk_scale, residual_lambdas,
                     value_embeddings, smear, backout; the floats by their bits)
  float32 hyper[16]  AdamW's lr, b1, b2, eps, weight decay, grad clip; then Muon's lr, momentum,
                     embedding lr, head lr, vector lr, b1, b2, eps, weight decay (its clip: AdamW's)
  int32 inputs (B, T), int32 targets (B, T)
  float32 params (P)       initial values, each exactly representable in bf16
  float32 logits (B, T, V) real vocabulary only, before the soft cap;  float32 loss
  float32 grads (P)        of the mean loss at the initial params;  float32 grad_norm (unclipped)
  float32 losses (nsteps)  losses[i]: the batch's loss before AdamW update i + 1
  float32 muon losses (Muon steps): the same under Muon (gpt/optimizer.h)
Parameters are in checkpoint order (the parameter table's, scripts/gpt_parameters.py), the
architecture's tensors only: wte (Vp, C), wpe (maxT, C),
ln1w (L, C), ln1b (L, C), qkvw (L, 3C, C), qkvb (L, 3C), attprojw (L, C, C), attprojb (L, C),
ln2w (L, C), ln2b (L, C), fcw (L, 4C, C), fcb (L, 4C), fcprojw (L, C, 4C), fcprojb (L, C),
lnfw (C), lnfb (C), lm_head (Vp, C), resid_lambda (L, 1), x0_lambda (L, 1), value_embedding
(L', Vp, C), value_gate (L', NH, 12) (L' the layers with value embeddings: 0 and 2), smear_gate
(1, 24), smear_lambda (1), backout_lambda (1). The modern
model has wte, the four matrices and lm_head; the parts' tensors come with the part of their name.
Every tensor starts random so that all of them matter: every bias N(0, 0.02) and layernorm
weights 1 + N(0, 0.1); the modern model's projections are not zero, its head is N(0, 0.1) (its
logits ~1) and its soft cap 2 (30 in the preset, which a tiny model's logits would not feel), so
that the cap bends them; its rotary base is 100 (not the preset's 10000), so that a base not
taken from the file shows. With the embedding norm the stream has an RMS of 1, not wte's 0.02:
the residual projections are then drawn ten times larger, so that the blocks still move it; the
residual lambdas start at 1 + N(0, 0.2) and 0.5 + N(0, 0.2), so that x0 counts. A model that left
out the QK scale would miss the parts' logits by 5% and qkvw's gradient by 40%; one that left out
the lambdas, its logits by 13% or more (those two at 2 layers). The value embeddings are drawn
N(0, 0.2), as large as the values, and the gates' weights N(0, 0.3), so that the gates spread over
(0, 3): without them the parts' logits move by 20% (GPT-2's by 7%) and qkvw's gradient by 78%
(11%). The smear's gate weights are N(0, 0.3) and its lambda 0.5 + N(0, 0.1) (0 and 0 in
training): without it the logits move by 33% (37%) and wte's gradient by 30% (29%). The
backout's lambda is 0.8 + N(0, 0.1) (0 in training): without it the logits move by 11% (6%) and
fcw's gradient by 50% (52%). The key part of
GPT-2's qkvb has an exactly zero gradient (softmax ignores a shift shared by a row's scores): compare gradients with an absolute tolerance
there.

With FLASHGPT_GRADCHECK=1 the hand-written backward of each architecture is first checked against
central finite differences at random coordinates of every parameter tensor.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import gpt_parameters  # noqa: E402  (the tensors, their shapes, order and decay)
from gpt_architecture import Architecture  # noqa: E402

B, T, MAXT, V, L, NH, C = 2, 37, 40, 97, 2, 2, 128
VP = (V + 127) // 128 * 128
HS = C // NH
NSTEPS = 10
LR, BETA1, BETA2, ADAM_EPS, WEIGHT_DECAY, GRAD_CLIP = 1e-3, 0.9, 0.95, 1e-8, 0.1, 1.0
LN_EPS, RMS_EPS = 1e-5, 1e-6
HEAD_STD = 0.1
SEED = 20241129
MAGIC, VERSION = 20241129, 1

# The architectures (gpt/config.h's fields, in its order).
MAX_WINDOWS = 64
UNMASKED = dict(documents=0, document_token=0, window_count=0, windows=[0] * MAX_WINDOWS)
NO_PARTS = dict(embedding_norm=0, qk_scale=0.0, residual_lambdas=0, value_embeddings=0, smear=0, backout=0)
GPT2 = dict(rotary=0, rotary_base=10000.0, rms_norm=0, qk_norm=0, relu2=0, bias=1, untied_head=0, zero_init=0,
            softcap=0.0, **UNMASKED, **NO_PARTS)
MODERN = dict(rotary=1, rotary_base=100.0, rms_norm=1, qk_norm=1, relu2=1, bias=0, untied_head=1, zero_init=0,
              softcap=2.0, **UNMASKED, **NO_PARTS)
DOCUMENT_TOKEN = 3
MASKED = dict(MODERN, documents=1, document_token=DOCUMENT_TOKEN, window_count=2,
              windows=[0, 9] + [0] * (MAX_WINDOWS - 2))
# The parts of the 2026 recipe on the modern model and on GPT-2's (LayerNorm, learned positions,
# biases, a tied head).
PARTS = dict(MODERN, embedding_norm=1, qk_scale=1.25, residual_lambdas=1, value_embeddings=1, smear=1, backout=1)
GPT2_PARTS = dict(GPT2, embedding_norm=1, residual_lambdas=1, value_embeddings=1, smear=1, backout=1)
# Where the masked batch's documents start (DOCUMENT_TOKEN; nowhere else): row 0 with a document
# of one token first; row 1 with a first document that has no start token, a document of one
# token inside and one at the last position.
DOCUMENT_STARTS = ([0, 1, 13, 30], [20, 21, 36])

SHAPE = gpt_parameters.Shape(MAXT, V, L, NH, C)
BACKOUT_LAYER = L // 2  # the block whose output the backout gives back a share of (gpt/config.h's)


def use_layers(n):
    """Makes the functions below compute a model of n layers (they read L, SHAPE and BACKOUT_LAYER at
    each call): the parts' files take 3, so that the value embeddings are on two layers and the
    backout's middle block is not the last (whose share the final norm would scale away)."""
    global L, SHAPE, BACKOUT_LAYER
    L, SHAPE, BACKOUT_LAYER = n, gpt_parameters.Shape(MAXT, V, n, NH, C), n // 2


def param_shapes(arch):
    """(name, shape) of the tensors the architecture has, in checkpoint order."""
    return [(kind.name, shape) for kind, shape in gpt_parameters.layout(SHAPE, Architecture(**arch))]


def decay_scale(name):
    """The multiple of the weight decay the tensor takes (the 2-D weights 1, the rest 0)."""
    return gpt_parameters.KINDS[name].decay_scale


def num_params(arch):
    return sum(int(np.prod(shape)) for _, shape in param_shapes(arch))


PARAM_SHAPES = param_shapes(GPT2)
NUM_PARAMS = num_params(GPT2)


def views(flat, arch=GPT2):
    """Named views, in checkpoint order, of a flat (P) array."""
    out, offset = {}, 0
    for name, shape in param_shapes(arch):
        n = int(np.prod(shape))
        out[name] = flat[offset:offset + n].reshape(shape)
        offset += n
    return out


def architecture_slots(arch):
    """The architecture as int32 slots, as the model checkpoint's header holds it."""
    ints = []
    for key, value in arch.items():
        if isinstance(value, list):
            ints += [int(v) for v in value]
        else:
            ints.append(np.array(value, dtype="<f4").view("<i4").item() if isinstance(value, float) else int(value))
    return ints


def round_to_bf16(x):
    """The float32 nearest to x that bf16 represents (round to nearest, ties to even)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


def init_params(rng, arch=GPT2):
    flat = np.zeros(num_params(arch))
    p = views(flat, arch)
    # Against a normed embedding (RMS 1, not wte's 0.02) the residual projections are drawn ten
    # times larger, so that the blocks move the stream and every part of them shows in the logits.
    residual_std = 0.02 / np.sqrt(2 * L) * (10 if arch["embedding_norm"] else 1)
    for name, shape in param_shapes(arch):
        if name in ("ln1w", "ln2w", "lnfw"):
            p[name][...] = 1 + rng.normal(0, 0.1, shape)
        elif name in ("attprojw", "fcprojw"):
            p[name][...] = rng.normal(0, residual_std, shape)
        elif name == "lm_head":
            p[name][...] = rng.normal(0, HEAD_STD, shape)
        elif name == "resid_lambda":  # away from 1 and 0, so that both scale what they multiply
            p[name][...] = 1 + rng.normal(0, 0.2, shape)
        elif name == "x0_lambda":
            p[name][...] = 0.5 + rng.normal(0, 0.2, shape)
        elif name == "value_embedding":  # as large as the values (ln1 @ qkvw^T: 0.02 sqrt(C)), so that they show
            p[name][...] = rng.normal(0, 0.2, shape)
        elif name == "value_gate":  # gates spread over (0, 3), not all at 1.5
            p[name][...] = rng.normal(0, 0.3, shape)
        elif name == "smear_gate":  # the smear's gates spread over (0, lambda)
            p[name][...] = rng.normal(0, 0.3, shape)
        elif name == "smear_lambda":  # a smear that shows (it starts at 0 in training)
            p[name][...] = 0.5 + rng.normal(0, 0.1, shape)
        elif name == "backout_lambda":  # a backout that shows (it starts at 0 in training)
            p[name][...] = 0.8 + rng.normal(0, 0.1, shape)
        else:  # other weights, and every bias (non-zero so that they matter in the forward)
            p[name][...] = rng.normal(0, 0.02, shape)
    p["wte"][V:] = 0
    if arch["value_embeddings"]:
        p["value_embedding"][:, V:] = 0
    if arch["untied_head"]:
        p["lm_head"][V:] = 0
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


def rmsnorm_forward(x):  # over the last axis, no weights
    rstd = 1 / np.sqrt((x ** 2).mean(-1, keepdims=True) + RMS_EPS)
    xhat = x * rstd
    return xhat, (xhat, rstd)


def rmsnorm_backward(dout, cache):
    xhat, rstd = cache
    return rstd * (dout - xhat * (dout * xhat).mean(-1, keepdims=True))


def norm_forward(x, p, name, l, arch):
    """The architecture's norm of x (B, T, C): LayerNorm with p[name + "w"], p[name + "b"] (of
    layer l, None for lnf), or RMSNorm."""
    if arch["rms_norm"]:
        return rmsnorm_forward(x)
    w, b = p[name + "w"], p[name + "b"]
    return layernorm_forward(x, w if l is None else w[l], b if l is None else b[l])


def norm_backward(dout, cache, p, g, name, l, arch):
    """dx of the norm, its weight's and bias's gradients into g (LayerNorm)."""
    if arch["rms_norm"]:
        return rmsnorm_backward(dout, cache)
    w = p[name + "w"] if l is None else p[name + "w"][l]
    dx, dw, db = layernorm_backward(dout, w, cache)
    if l is None:
        g[name + "w"][...], g[name + "b"][...] = dw, db
    else:
        g[name + "w"][l], g[name + "b"][l] = dw, db
    return dx


def rotate(x, base, sign):
    """x (B, T, NH, HS) rotated by the angles t f_i of each row's position t ("rotate half": i
    pairs with i + HS/2, f_i = base^(-2i/HS)); sign -1: by the opposite angles, the transpose."""
    angles = np.arange(T)[:, None] * base ** (-2.0 * np.arange(HS // 2) / HS)  # (T, HS/2)
    c, s = np.cos(angles)[None, :, None, :], sign * np.sin(angles)[None, :, None, :]
    lo, hi = x[..., :HS // 2], x[..., HS // 2:]
    return np.concatenate([lo * c - hi * s, hi * c + lo * s], axis=-1)


def qk_forward(qkv, arch):
    """qkv (B, T, 3C) with each head's q and k RMS-normed (qk_norm) and rotated (rotary), and
    the norm's caches."""
    caches = [None, None]
    if not arch["qk_norm"] and not arch["rotary"]:
        return qkv, caches
    x = qkv.reshape(B, T, 3, NH, HS).copy()
    for j in (0, 1):
        if arch["qk_norm"]:
            x[:, :, j], caches[j] = rmsnorm_forward(x[:, :, j])
        if arch["rotary"]:
            x[:, :, j] = rotate(x[:, :, j], arch["rotary_base"], 1)
    return x.reshape(B, T, 3 * C), caches


def qk_backward(dqkv, caches, arch):
    if not arch["qk_norm"] and not arch["rotary"]:
        return dqkv
    d = dqkv.reshape(B, T, 3, NH, HS).copy()
    for j in (0, 1):
        if arch["rotary"]:
            d[:, :, j] = rotate(d[:, :, j], arch["rotary_base"], -1)
        if arch["qk_norm"]:
            d[:, :, j] = rmsnorm_backward(d[:, :, j], caches[j])
    return d.reshape(B, T, 3 * C)


def visible_keys(inputs, arch, l):
    """(B, 1, T, T): whether row i of a sequence sees key j in layer l, j in [lo(i), i] with lo(i)
    the later of its document's start (the last DOCUMENT_TOKEN at or before i, else 0) and
    i - W + 1 for the layer's window W (attention/mask.h); causal without either."""
    t = np.arange(T)
    lo = np.zeros((B, T), dtype=np.int64)
    if arch["documents"]:
        lo = np.maximum.accumulate(np.where(inputs == arch["document_token"], t, 0), axis=1)
    window = arch["windows"][l % arch["window_count"]] if arch["window_count"] else 0
    if window:
        lo = np.maximum(lo, t - window + 1)
    return ((t[None, None, :] >= lo[:, :, None]) & (t[None, None, :] <= t[None, :, None]))[:, None]


def attention_scale(arch):
    """The softmax's scale: 1/sqrt(HS), times qk_scale^2 with a QK scale (q and k each times it)."""
    return (arch["qk_scale"] ** 2 if arch["qk_scale"] else 1.0) / np.sqrt(HS)


def attention_forward(qkv, visible, scale):  # qkv (B, T, 3C), visible (B, 1, T, T) -> out (B, T, C)
    q, k, v = qkv.reshape(B, T, 3, NH, HS).transpose(2, 0, 3, 1, 4)  # each (B, NH, T, HS)
    scores = q @ k.swapaxes(-1, -2) * scale  # (B, NH, T, T)
    scores = np.where(visible, scores, -np.inf)
    att = np.exp(scores - scores.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    y = att @ v  # (B, NH, T, HS)
    return y.transpose(0, 2, 1, 3).reshape(B, T, C), (q, k, v, att, scale)


def attention_backward(dout, cache):
    q, k, v, att, scale = cache
    dy = dout.reshape(B, T, NH, HS).transpose(0, 2, 1, 3)  # (B, NH, T, HS)
    datt = dy @ v.swapaxes(-1, -2)
    dv = att.swapaxes(-1, -2) @ dy
    dscores = att * (datt - (datt * att).sum(-1, keepdims=True)) * scale  # masked: att = 0
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


def act_forward(x, arch):
    return np.maximum(x, 0) ** 2 if arch["relu2"] else gelu_forward(x)


def act_backward(dout, x, arch):
    return dout * 2 * np.maximum(x, 0) if arch["relu2"] else gelu_backward(dout, x)


# ---- the model

def linear(x, p, w, b, l):
    """x @ p[w][l]^T (+ p[b][l] when the architecture has the bias)."""
    out = x @ p[w][l].T
    return out + p[b][l] if b in p else out


def head(p, arch):
    return p["lm_head"] if arch["untied_head"] else p["wte"]


def smear_sigmoids(x, p):
    """sigmoid(x_t[:24] . smear_gate) (B, T) of each token of x: its smear gate over lambda."""
    z = x[..., :gpt_parameters.SMEAR_GATE_CHANNELS] @ p["smear_gate"][0]
    return 1 / (1 + np.exp(-z))


def value_slice(arch, l):
    """The slice of the value embeddings (and gates) layer l holds, or -1 for none."""
    return gpt_parameters.ValueEmbeddingLayers.slice(l, L) if arch["value_embeddings"] else -1


def value_gate_forward(ln1, p, s):
    """The gates (B, T, NH) of slice s: 3 sigmoid of the first channels of ln1 times value_gate."""
    z = ln1[..., :gpt_parameters.VALUE_GATE_CHANNELS] @ p["value_gate"][s].T
    return 3 / (1 + np.exp(-z))


def forward(flat, inputs, targets, arch=GPT2):
    """Returns (mean loss, logits (B, T, V) before the soft cap, cache for backward)."""
    p = views(flat, arch)
    x = p["wte"][inputs] + (0 if arch["rotary"] else p["wpe"][:T])  # (B, T, C)
    embedding_cache = None
    if arch["embedding_norm"]:
        x, embedding_cache = rmsnorm_forward(x)
    unsmeared = x
    if arch["smear"]:  # x_t += lambda sigmoid(x_t[:24] . smear_gate) x_{t-1}, t > 0
        x = x.copy()
        x[:, 1:] += p["smear_lambda"][0] * smear_sigmoids(unsmeared, p)[:, 1:, None] * unsmeared[:, :-1]
    x0, layers = x, []
    for l in range(L):
        before = x  # the stream the block before left
        if arch["residual_lambdas"]:
            x = p["resid_lambda"][l, 0] * x + p["x0_lambda"][l, 0] * x0
        ln1, ln1_cache = norm_forward(x, p, "ln1", l, arch)
        qkv = linear(ln1, p, "qkvw", "qkvb", l)  # (B, T, 3C)
        gate = None
        if value_slice(arch, l) >= 0:  # v += gate * value_embedding[token], per head
            s = value_slice(arch, l)
            gate = value_gate_forward(ln1, p, s)
            ve = p["value_embedding"][s][inputs].reshape(B, T, NH, HS)
            qkv[..., 2 * C:] += (gate[..., None] * ve).reshape(B, T, C)
        qkv, qk_caches = qk_forward(qkv, arch)
        atty, att_cache = attention_forward(qkv, visible_keys(inputs, arch, l), attention_scale(arch))
        x = x + linear(atty, p, "attprojw", "attprojb", l)
        ln2, ln2_cache = norm_forward(x, p, "ln2", l, arch)
        pre_act = linear(ln2, p, "fcw", "fcb", l)  # (B, T, 4C)
        h = act_forward(pre_act, arch)
        x = x + linear(h, p, "fcprojw", "fcprojb", l)
        layers.append((before, ln1, ln1_cache, qk_caches, att_cache, atty, ln2, ln2_cache, pre_act, h, gate))
        if l == BACKOUT_LAYER:
            x_mid = x  # the stream leaving the middle block
    if arch["backout"]:  # x -= backout_lambda x_mid
        x = x - p["backout_lambda"][0] * x_mid
    lnf, lnf_cache = norm_forward(x, p, "lnf", None, arch)
    logits = lnf @ head(p, arch)[:V].T  # (B, T, V): padded columns never count
    cap = arch["softcap"]
    z = cap * np.tanh(logits / cap) if cap > 0 else logits
    shifted = z - z.max(-1, keepdims=True)
    logprobs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    loss = -np.take_along_axis(logprobs, targets[..., None], -1).mean()
    cache = (inputs, targets, embedding_cache, unsmeared, x0, x_mid, layers, lnf, lnf_cache, np.exp(logprobs),
             logits)
    return loss, logits, cache


def backward(flat, cache, arch=GPT2):
    """Gradient (P) of the mean loss; the padding rows of wte and lm_head get 0."""
    p = views(flat, arch)
    grad = np.zeros_like(flat)
    g = views(grad, arch)
    inputs, targets, embedding_cache, unsmeared, x0, x_mid, layers, lnf, lnf_cache, probs, logits = cache
    dlogits = probs.copy()  # (softmax - onehot(target)) / (B * T)
    dlogits[np.arange(B)[:, None], np.arange(T), targets] -= 1
    dlogits /= B * T
    cap = arch["softcap"]
    if cap > 0:
        dlogits *= 1 - np.tanh(logits / cap) ** 2
    g_head = g["lm_head"] if arch["untied_head"] else g["wte"]
    g_head[:V] += np.einsum("btv,btc->vc", dlogits, lnf)
    dx = norm_backward(dlogits @ head(p, arch)[:V], lnf_cache, p, g, "lnf", None, arch)
    dx0 = np.zeros_like(x0)  # x0's gradient through the residual lambdas
    dmid = 0  # the middle block's output's gradient through the backout
    if arch["backout"]:
        g["backout_lambda"][0] = -(dx * x_mid).sum()
        dmid = -p["backout_lambda"][0] * dx
    for l in reversed(range(L)):
        if l == BACKOUT_LAYER:
            dx = dx + dmid
        before, ln1, ln1_cache, qk_caches, att_cache, atty, ln2, ln2_cache, pre_act, h, gate = layers[l]
        # x = x + h @ fcprojw^T + fcprojb
        g["fcprojw"][l] = np.einsum("bto,btc->oc", dx, h)
        if arch["bias"]:
            g["fcprojb"][l] = dx.sum((0, 1))
        dpre = act_backward(dx @ p["fcprojw"][l], pre_act, arch)
        g["fcw"][l] = np.einsum("bto,btc->oc", dpre, ln2)
        if arch["bias"]:
            g["fcb"][l] = dpre.sum((0, 1))
        dx = dx + norm_backward(dpre @ p["fcw"][l], ln2_cache, p, g, "ln2", l, arch)
        # x = x + atty @ attprojw^T + attprojb
        g["attprojw"][l] = np.einsum("bto,btc->oc", dx, atty)
        if arch["bias"]:
            g["attprojb"][l] = dx.sum((0, 1))
        dqkv = qk_backward(attention_backward(dx @ p["attprojw"][l], att_cache), qk_caches, arch)
        g["qkvw"][l] = np.einsum("bto,btc->oc", dqkv, ln1)
        if arch["bias"]:
            g["qkvb"][l] = dqkv.sum((0, 1))
        dln1 = dqkv @ p["qkvw"][l]
        if gate is not None:  # v += gate * value_embedding[token]
            s = value_slice(arch, l)
            dv = dqkv[..., 2 * C:].reshape(B, T, NH, HS)
            ve = p["value_embedding"][s][inputs].reshape(B, T, NH, HS)
            np.add.at(g["value_embedding"][s], inputs, (gate[..., None] * dv).reshape(B, T, C))
            dz = (dv * ve).sum(-1) * gate * (1 - gate / 3)  # (B, T, NH), through 3 sigmoid
            G = gpt_parameters.VALUE_GATE_CHANNELS
            g["value_gate"][s] = np.einsum("bth,btj->hj", dz, ln1[..., :G])
            dln1[..., :G] += dz @ p["value_gate"][s]
        dx = dx + norm_backward(dln1, ln1_cache, p, g, "ln1", l, arch)
        # x = resid_lambda * before + x0_lambda * x0
        if arch["residual_lambdas"]:
            g["resid_lambda"][l, 0] = (dx * before).sum()
            g["x0_lambda"][l, 0] = (dx * x0).sum()
            dx0 += p["x0_lambda"][l, 0] * dx
            dx = p["resid_lambda"][l, 0] * dx
    dx = dx + dx0  # the first block's stream is x0
    if arch["smear"]:  # x_t += gate_t x_{t-1}, gate_t = lambda sigmoid(z_t), z_t = x_t[:24] . smear_gate
        G = gpt_parameters.SMEAR_GATE_CHANNELS
        s = smear_sigmoids(unsmeared, p)
        gate = p["smear_lambda"][0] * s
        dgate = np.zeros((B, T))
        dgate[:, 1:] = (dx[:, 1:] * unsmeared[:, :-1]).sum(-1)
        dz = dgate * p["smear_lambda"][0] * s * (1 - s)
        g["smear_gate"][0] = np.einsum("bt,btj->j", dz, unsmeared[..., :G])
        g["smear_lambda"][0] = (dgate * s).sum()
        dsmear = dx.copy()
        dsmear[:, :-1] += gate[:, 1:, None] * dx[:, 1:]
        dsmear[..., :G] += dz[..., None] * p["smear_gate"][0]
        dx = dsmear
    if arch["embedding_norm"]:
        dx = rmsnorm_backward(dx, embedding_cache)
    np.add.at(g["wte"], inputs, dx)
    if not arch["rotary"]:
        g["wpe"][:T] = dx.sum(0)
    return grad


def adamw_step(flat, grad, m, v, t, decay_mask, lr_mask):
    """One AdamW update of flat, m and v in place, clipping grad to GRAD_CLIP global norm; each
    value at LR times its tensor's lr_scale (lr_mask), its decay decay_mask times the decay."""
    norm = np.sqrt((grad ** 2).sum())
    if norm > GRAD_CLIP:
        grad = grad * (GRAD_CLIP / norm)
    m[...] = BETA1 * m + (1 - BETA1) * grad
    v[...] = BETA2 * v + (1 - BETA2) * grad ** 2
    mhat = m / (1 - BETA1 ** t)
    vhat = v / (1 - BETA2 ** t)
    flat -= LR * lr_mask * (mhat / (np.sqrt(vhat) + ADAM_EPS) + WEIGHT_DECAY * decay_mask * flat)


def gradient_check(flat, inputs, targets, rng, arch, per_tensor=8, h=1e-4):
    """Checks backward against fourth-order central differences at random coordinates of every
    tensor. Their noise is about 1e-16 * loss / h (rounding), so a coordinate passes when the two
    differ by at most 1e-6 * |gradient| + 1e-9; exits 1 otherwise."""
    analytic = backward(flat, forward(flat, inputs, targets, arch)[2], arch)
    worst_rel, worst_abs, failures, offset = 0.0, 0.0, 0, 0
    for name, shape in param_shapes(arch):
        # rows of wte and lm_head past V and of wpe past T get no gradient: sample where one exists
        rows = {"wte": V, "wpe": T, "lm_head": V}.get(name, shape[0])
        size = int(np.prod(shape))
        for i in rng.integers(0, rows * size // shape[0], per_tensor) + offset:
            saved = flat[i]
            loss_at = {}
            for step in (-2, -1, 1, 2):
                flat[i] = saved + step * h
                loss_at[step] = forward(flat, inputs, targets, arch)[0]
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
    print(f"gradient check: {per_tensor} coordinates of each of {len(param_shapes(arch))} tensors, "
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


def model_reference(path, arch, seed, muon_steps, layers=2):
    """The reference file of the architecture at path: its init and batch from seed, the forward
    and backward, NSTEPS AdamW steps and muon_steps Muon steps (tests/reference/gen_muon_reference.py's)."""
    use_layers(layers)
    rng = np.random.default_rng(seed)
    flat = init_params(rng, arch)
    tokens = rng.integers(0, V, (B, T + 1))
    if arch["documents"]:  # the documents start where DOCUMENT_STARTS says, and nowhere else
        tokens[tokens == arch["document_token"]] = arch["document_token"] + 1
        for b, starts in enumerate(DOCUMENT_STARTS):
            tokens[b, starts] = arch["document_token"]
    inputs, targets = tokens[:, :-1], tokens[:, 1:]  # next-token prediction, as in training
    if os.environ.get("FLASHGPT_GRADCHECK") == "1":
        gradient_check(flat, inputs, targets, rng, arch)

    params0 = flat.copy()
    loss0, logits0, cache = forward(flat, inputs, targets, arch)
    grads0 = backward(flat, cache, arch)
    grad_norm0 = np.sqrt((grads0 ** 2).sum())

    P = num_params(arch)
    decay_mask, lr_mask = np.zeros(P), np.zeros(P)
    for name, view in views(decay_mask, arch).items():
        view[...] = decay_scale(name)
    for name, view in views(lr_mask, arch).items():
        view[...] = gpt_parameters.KINDS[name].lr_scale
    m, v = np.zeros(P), np.zeros(P)
    losses = []
    for t in range(1, NSTEPS + 1):
        loss, _, cache = forward(flat, inputs, targets, arch)
        losses.append(loss)
        adamw_step(flat, backward(flat, cache, arch), m, v, t, decay_mask, lr_mask)

    hyper = np.zeros(16, dtype="<f4")
    hyper[:6] = [LR, BETA1, BETA2, ADAM_EPS, WEIGHT_DECAY, GRAD_CLIP]
    muon_losses = []
    if muon_steps:
        import gen_muon_reference as muon  # noqa: E402  (it imports this file: only once this one is loaded)
        hyper[6:15] = [muon.LR, muon.MOMENTUM, muon.EMBEDDING_LR, muon.HEAD_LR, muon.VECTOR_LR, muon.BETA1,
                       muon.BETA2, muon.ADAM_EPS, muon.WEIGHT_DECAY]
        flat, m, v = params0.copy(), np.zeros(P), np.zeros(P)
        for t in range(1, muon_steps + 1):
            loss, _, cache = forward(flat, inputs, targets, arch)
            muon_losses.append(loss)
            muon.muon_step(flat, backward(flat, cache, arch), m, v, t, 1.0, arch, SHAPE)

    header = np.zeros(256, dtype="<i4")
    header[:13] = [MAGIC, VERSION, B, T, MAXT, V, VP, L, NH, C, NSTEPS, P, muon_steps]
    slots = architecture_slots(arch)
    header[16:16 + len(slots)] = slots
    write_reference(path, [(header, "<i4"), (hyper, "<f4"), (inputs, "<i4"), (targets, "<i4"),
                           (params0, "<f4"), (logits0, "<f4"), (loss0, "<f4"), (grads0, "<f4"),
                           (grad_norm0, "<f4"), (np.array(losses), "<f4"), (np.array(muon_losses), "<f4")])
    said = f", {muon_steps} Muon steps {muon_losses[0]:.6f} -> {muon_losses[-1]:.6f}" if muon_steps else ""
    print(f"{path}: L={L} C={C} B={B} T={T}, loss {losses[0]:.6f} -> {losses[-1]:.6f} "
          f"over {NSTEPS} AdamW steps{said}, grad norm {grad_norm0:.6f}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_gpt_reference.py OUTDIR")
    outdir = sys.argv[1]
    model_reference(os.path.join(outdir, "gpt_reference.bin"), GPT2, SEED, 0)
    model_reference(os.path.join(outdir, "gpt_modern_reference.bin"), MODERN, SEED + 1, NSTEPS)
    model_reference(os.path.join(outdir, "gpt_masked_reference.bin"), MASKED, SEED + 2, 0)
    model_reference(os.path.join(outdir, "gpt_parts_reference.bin"), PARTS, SEED + 3, NSTEPS, layers=3)
    model_reference(os.path.join(outdir, "gpt_gpt2_parts_reference.bin"), GPT2_PARTS, SEED + 4, 0, layers=3)


if __name__ == "__main__":
    main()
