"""scripts/torch_gpt2.py: train_gpt's models in PyTorch, for the benchmarks that compare against
them (scripts/bench_torch_gpt2.py for speed, scripts/train_torch_reference.py for what they
learn); nothing in the build uses it.

Written from the architectures' descriptions (scripts/gpt_architecture.py), each component
switchable as train_gpt's are:
- GPT-2's (arch gpt2): pre-LayerNorm blocks (eps 1e-5, weight and bias), learned positions wpe,
  biases in the linear layers, tanh GELU, the token embedding tied to the output projection;
- the modern recipe's (arch modern): RMSNorm without weights (eps 1e-6, given explicitly:
  PyTorch's rms_norm would take its input type's machine epsilon); no wpe but rotary position
  embeddings (RoFormer's, paired as in GPT-NeoX, "rotate half": element i of a head with element
  i + HS/2, turned by the angle t * base^(-2i/HS) at position t) on each head's q and k, after an
  RMSNorm of each over the head (QK-norm); a ReLU^2 MLP; no biases; an output head lm_head of
  its own; the logits z soft-capped as softcap * tanh(z / softcap) before the loss;
- the parts of the 2026 recipe, each on its own (embedding_norm: the embedding, positions
  added, RMSNorm'ed before the first block, as nanochat's norm(wte(idx)); qk_scale: each head's
  q and k multiplied by it after QK-norm and rotary, as nanochat's 1.2; residual_lambdas: each
  block takes resid_lambda * x + x0_lambda * x0, x0 the stream the embedding left, two learned
  numbers of the block, Scalar modules whose weights are the table's per-layer slices;
  value_embeddings: on every other layer, the last among them, v += gate * value_embedding(idx)
  per head, gate = 3 sigmoid(value_gate(ln1[..., :12])), an embedding and a linear layer of the
  block; smear: the stem's output x_t += smear_lambda * sigmoid(smear_gate(x_t[:24])) * x_{t-1}
  for t > 0, a linear layer and a Scalar of the model; backout: before the final norm x -=
  backout_lambda * x_mid, x_mid the stream leaving block L // 2, a Scalar of the model).
Attention is F.scaled_dot_product_attention (causal, scaled by 1/sqrt(HS)); a layer l of a window
pattern sees at most the W = windows[l % window_count] keys [t - W + 1, t] (a boolean mask, which
takes SDPA off its flash kernel: a reference, not a rival in speed); the vocabulary is
padded to a multiple of 128, the padded logits left out of the loss. Each parameter is a slice of
a tensor of the parameter table (scripts/gpt_parameters.py; GPT.table_parameters pairs them) and
starts as its row says: N(0, 0.02) for the 2-D weights, 0.02 / sqrt(2L) for the two residual
projections, zero biases and padded vocabulary rows, LayerNorm weights 1; with zero_init the
residual projections and lm_head 0; or by nanochat's init (NANOCHAT_INIT). Or a flashgpt model checkpoint's values (GPT.load_checkpoint,
through CHECKPOINT_MODULES). The residual stream is fp32 as PyTorch's mixed precision has it (the
norms too); emulate rounds it to bf16 after every add ("residual"), its gradient where the
branches add into it ("residual-grad"), or both, as a bf16 stream does. In float64 (the model
and its inputs) it computes in float64 throughout.
"""
import math
import sys

if __name__ == "__main__":  # a module, run by mistake: it says what it is, with or without torch
    print(__doc__.strip())
    sys.exit(0)

import torch
import torch.nn as nn
import torch.nn.functional as F

from gpt_architecture import GPT2
from gpt_parameters import SMEAR_GATE_CHANNELS, VALUE_GATE_CHANNELS, Shape, ValueEmbeddingLayers, layout, slice_names

EMULATIONS = ("residual", "residual-grad")
RMS_NORM_EPS = 1e-6  # layers/rmsnorm.h's
# The module of GPT below that holds each tensor of a flashgpt checkpoint, by the module of
# Hugging Face's GPT-2 that scripts/gpt2_checkpoint.py names its slices after ("h.{l}." before a
# block's): the one table a checkpoint with another tensor extends.
CHECKPOINT_MODULES = {"wte": "wte", "wpe": "wpe", "ln_1": "ln1", "attn.c_attn": "qkv", "attn.c_proj": "attproj",
                      "ln_2": "ln2", "mlp.c_fc": "fc", "mlp.c_proj": "fcproj", "ln_f": "lnf", "lm_head": "lm_head",
                      "resid_lambda": "resid_lambda", "x0_lambda": "x0_lambda", "value_embedding": "value_embedding",
                      "value_gate": "value_gate", "smear_gate": "smear_gate", "smear_lambda": "smear_lambda",
                      "backout_lambda": "backout_lambda"}


def checkpoint_parameter(hf_name):
    """The name in GPT of the parameter a checkpoint slice holds ("h.3.attn.c_attn.weight":
    "blocks.3.qkv.weight"); ValueError for a slice GPT has no module for."""
    prefix, name = "", hf_name
    if name.startswith("h."):
        _, layer, name = name.split(".", 2)
        prefix = f"blocks.{layer}."
    module, kind = name.rsplit(".", 1)
    if module not in CHECKPOINT_MODULES:
        raise ValueError(f"the checkpoint's {hf_name} has no place in this model")
    return f"{prefix}{CHECKPOINT_MODULES[module]}.{kind}"


class RoundBf16(torch.autograd.Function):
    """The identity, with its value (forward) and its gradient (backward) rounded to bf16 where
    asked: what storing a tensor in bf16 does."""

    @staticmethod
    def forward(ctx, x, value, grad):
        ctx.grad = grad
        return x.to(torch.bfloat16).to(x.dtype) if value else x

    @staticmethod
    def backward(ctx, g):
        return (g.to(torch.bfloat16).to(g.dtype) if ctx.grad else g), None, None


def widened(x):
    """x in fp32 at least: bf16 and fp32 as fp32, fp64 as it is."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) over the last dimension, without weights, in fp32 at least."""

    def __init__(self, eps=RMS_NORM_EPS):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        x = widened(x)
        return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + self.eps)


class Scalar(nn.Module):
    """One learned number (weight, of shape (1,)), as a per-layer scalar of the parameter table is."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(1))


def make_norm(C, arch):
    return RMSNorm() if arch.rms_norm else nn.LayerNorm(C)


class Rotary(nn.Module):
    """Rotary position embeddings of heads of size HS at positions 0 .. maxT - 1: the cosines
    and sines of the angles t * base^(-2i/HS) (i < HS/2), computed in float64 once."""

    def __init__(self, HS, maxT, base):
        super().__init__()
        frequencies = base ** (-2.0 * torch.arange(HS // 2, dtype=torch.float64) / HS)
        angles = torch.arange(maxT, dtype=torch.float64)[:, None] * frequencies  # (maxT, HS/2)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x):
        """x (B, T, NH, HS) at positions 0 .. T - 1, each half of a head turned against the other."""
        T, half = x.shape[1], x.shape[-1] // 2
        cos, sin = (t[:T, None, :].to(x.dtype) for t in (self.cos, self.sin))  # (T, 1, HS/2)
        first, second = x[..., :half], x[..., half:]
        return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)


class Block(nn.Module):
    def __init__(self, C, NH, arch, stream, rotary, value_rows=0, window=0):
        """value_rows: the rows (Vp) of the block's value embedding, 0 for a block without one;
        window: the most keys a row sees, its own included (0: every earlier key)."""
        super().__init__()
        self.NH, self.stream, self.relu2, self.window = NH, stream, arch.relu2, window
        self.ln1, self.ln2 = make_norm(C, arch), make_norm(C, arch)
        self.qkv, self.attproj = nn.Linear(C, 3 * C, bias=arch.bias), nn.Linear(C, C, bias=arch.bias)
        self.fc, self.fcproj = nn.Linear(C, 4 * C, bias=arch.bias), nn.Linear(4 * C, C, bias=arch.bias)
        self.qk_norm = RMSNorm() if arch.qk_norm else None
        self.rotary = rotary
        self.qk_scale = arch.qk_scale
        self.resid_lambda, self.x0_lambda = (Scalar(), Scalar()) if arch.residual_lambdas else (None, None)
        self.value_embedding = nn.Embedding(value_rows, C) if value_rows else None
        self.value_gate = nn.Linear(VALUE_GATE_CHANNELS, NH, bias=False) if value_rows else None

    def forward(self, x, x0, idx):
        """The block on x, the stream the block before left; x0: the embedding's stream; idx: the
        tokens (B, T)."""
        if self.resid_lambda is not None:
            x = self.stream(self.resid_lambda.weight * x + self.x0_lambda.weight * x0)
        B, T, C = x.shape
        ln1 = self.ln1(x)
        q, k, v = self.qkv(ln1).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH) for t in (q, k, v))
        if self.value_embedding is not None:
            gate = 3 * torch.sigmoid(self.value_gate(ln1[..., :VALUE_GATE_CHANNELS]))  # (B, T, NH)
            v = v + gate.unsqueeze(-1) * self.value_embedding(idx).view(B, T, self.NH, C // self.NH)
        if self.qk_norm is not None:
            q, k = self.qk_norm(q), self.qk_norm(k)
        if self.rotary is not None:
            q, k = self.rotary(q), self.rotary(k)
        if self.qk_scale:
            q, k = q * self.qk_scale, k * self.qk_scale
        q, k, v = (t.to(v.dtype).transpose(1, 2) for t in (q, k, v))  # (B, NH, T, HS)
        if 0 < self.window < T:
            rows = torch.arange(T, device=x.device)
            back = rows[:, None] - rows[None, :]  # (T, T): how far before row t each key is
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=(back >= 0) & (back < self.window))
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = self.stream(x + self.attproj(y.transpose(1, 2).reshape(B, T, C)))
        h = self.fc(self.ln2(x))
        h = F.relu(h).square() if self.relu2 else F.gelu(h, approximate="tanh")
        return self.stream(x + self.fcproj(h))


# nanochat's init (init "nanochat"), where it is not the table's: by tensor, N(0, std) ("normal"),
# uniform of the standard deviation std / sqrt(C) ("uniform": bound sqrt(3) times that), zero,
# or from a value at the first layer linearly to one at the last ("layers").
NANOCHAT_INIT = {"wte": ("normal", 0.8), "lm_head": ("normal", 0.001), "qkvw": ("uniform", 1.0),
                 "fcw": ("uniform", 0.4), "attprojw": ("zero",), "fcprojw": ("zero",),
                 "resid_lambda": ("layers", 1.15, 1.05), "x0_lambda": ("layers", 0.2, 0.05)}
INITS = ("default", "nanochat")


class GPT(nn.Module):
    def __init__(self, L, C, NH, V, maxT, emulate=(), arch=GPT2, init="default"):
        super().__init__()
        self.V, self.arch, self.shape = V, arch, Shape(maxT, V, L, NH, C)
        value, grad = "residual" in emulate, "residual-grad" in emulate
        self.stream = (lambda x: RoundBf16.apply(x, value, grad)) if value or grad else (lambda x: x)
        Vp = (V + 127) // 128 * 128
        self.wte = nn.Embedding(Vp, C)
        self.wpe = None if arch.rotary else nn.Embedding(maxT, C)
        rotary = Rotary(C // NH, maxT, arch.rotary_base) if arch.rotary else None
        values = [Vp if arch.value_embeddings and ValueEmbeddingLayers.slice(l, L) >= 0 else 0 for l in range(L)]
        windows = [arch.windows[l % arch.window_count] if arch.window_count else 0 for l in range(L)]
        self.blocks = nn.ModuleList(Block(C, NH, arch, self.stream, rotary, values[l], windows[l]) for l in range(L))
        self.lnf = make_norm(C, arch)
        self.embedding_norm = RMSNorm() if arch.embedding_norm else None
        self.lm_head = nn.Linear(C, Vp, bias=False) if arch.untied_head else None
        self.smear_gate = nn.Linear(SMEAR_GATE_CHANNELS, 1, bias=False) if arch.smear else None
        self.smear_lambda = Scalar() if arch.smear else None
        self.backout_lambda = Scalar() if arch.backout else None
        kinds = {id(p): kind for kind, params in self.table_parameters() for p in params}
        with torch.no_grad():
            for p in self.parameters():  # in the order of the modules, whose draws these are
                kind = kinds[id(p)]
                if kind.init == "ones":
                    nn.init.ones_(p)
                elif kind.init == "zero" or (kind.zero_init and arch.zero_init):
                    nn.init.zeros_(p)
                else:
                    nn.init.normal_(p, 0.0, kind.std / math.sqrt(2 * L) if kind.residual else kind.std)
                if kind.rows.of == "Vp":
                    p[V:].zero_()  # the padding rows
            for kind, params in self.table_parameters() if init == "nanochat" else ():
                how = NANOCHAT_INIT.get(kind.name)
                for layer, p in enumerate(params if how else ()):
                    if how[0] == "normal":
                        nn.init.normal_(p, 0.0, how[1])
                    elif how[0] == "uniform":
                        bound = math.sqrt(3.0) * how[1] / math.sqrt(C)
                        nn.init.uniform_(p, -bound, bound)
                    elif how[0] == "zero":
                        nn.init.zeros_(p)
                    else:
                        p.fill_(how[1] + (how[2] - how[1]) * (layer / (L - 1) if L > 1 else 0.0))
                    if kind.rows.of == "Vp":
                        p[V:].zero_()

    def table_parameters(self):
        """[(Kind, its parameters: the tensor, or a slice per layer that holds one)] of each tensor
        of the parameter table the model has, in checkpoint order."""
        params = dict(self.named_parameters())
        return [(kind, [params[checkpoint_parameter(name)] for name in slice_names(kind, self.shape, self.arch)])
                for kind, _ in layout(self.shape, self.arch)]

    def load_checkpoint(self, slices):
        """Every parameter set to a checkpoint's values: slices are (Slice, float32 array in the
        checkpoint's shape) as scripts/gpt2_checkpoint.py's Checkpoint.slices gives them (an
        nn.Linear weight is (out, in) there too). ValueError unless they are exactly this model's
        parameters, each once and of its shape."""
        params, loaded = dict(self.named_parameters()), set()
        with torch.no_grad():
            for sl, values in slices:
                name = checkpoint_parameter(sl.hf_name)
                if name in loaded or name not in params or tuple(params[name].shape) != values.shape:
                    raise ValueError(f"the checkpoint's {sl.hf_name} {values.shape} does not fit this model's "
                                     f"{name} {tuple(params[name].shape) if name in params else '(none)'}")
                params[name].copy_(torch.from_numpy(values))
                loaded.add(name)
        if loaded != set(params):
            raise ValueError(f"the checkpoint sets no {', '.join(sorted(set(params) - loaded))}")

    def forward(self, idx, targets):
        """The mean cross-entropy of the next tokens targets (B, T) after idx (B, T)."""
        x = self.wte(idx)
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        if self.embedding_norm is not None:
            x = self.embedding_norm(x)
        if self.smear_gate is not None:  # each token after the first of its row takes in the one before
            gate = self.smear_lambda.weight * torch.sigmoid(self.smear_gate(x[:, 1:, :SMEAR_GATE_CHANNELS]))
            x = torch.cat([x[:, :1], x[:, 1:] + gate * x[:, :-1]], dim=1)
        x = x0 = self.stream(x)
        for l, block in enumerate(self.blocks):
            x = block(x, x0, idx)
            if l == len(self.blocks) // 2:
                x_mid = x  # the stream leaving the middle block, a share of which the backout gives back
        if self.backout_lambda is not None:
            x = self.stream(x - self.backout_lambda.weight * x_mid)
        head = self.wte if self.lm_head is None else self.lm_head  # tied: wte is the output projection
        logits = widened((self.lnf(x) @ head.weight.t())[..., :self.V])
        if self.arch.softcap:
            logits = self.arch.softcap * torch.tanh(logits / self.arch.softcap)
        return F.cross_entropy(logits.reshape(-1, self.V), targets.reshape(-1))
