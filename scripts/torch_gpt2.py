"""scripts/torch_gpt2.py: train_gpt's GPT-2 in PyTorch, for the benchmarks that compare against
it (scripts/bench_torch_gpt2.py for speed, scripts/train_torch_reference.py for what it learns);
nothing in the build uses it.

The model of gpt/: pre-LayerNorm blocks, learned positions, the token embedding tied to the
output projection, tanh GELU, LayerNorm eps 1e-5, attention through
F.scaled_dot_product_attention (causal); the vocabulary padded to a multiple of 128, the padded
logits left out of the loss. Its init is gpt/parameters.cu's: N(0, 0.02) for the 2-D weights,
0.02 / sqrt(2L) for the two residual projections, zero biases and padded vocabulary rows,
LayerNorm weights 1; or a flashgpt model checkpoint's values (GPT.load_checkpoint, through
CHECKPOINT_MODULES). The residual stream is fp32 as PyTorch's mixed precision has it; emulate
rounds it to bf16 after every add ("residual"), its gradient where the branches add into it
("residual-grad"), or both, as a bf16 stream does.
"""
import math
import sys

if __name__ == "__main__":  # a module, run by mistake: it says what it is, with or without torch
    print(__doc__.strip())
    sys.exit(0)

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {"d2": (2, 128, 2), "d6": (6, 384, 6), "d12": (12, 768, 12), "d24": (24, 1024, 16),
           "d36": (36, 1280, 20), "d48": (48, 1600, 25)}   # (L, C, NH), gpt/config.h's
EMULATIONS = ("residual", "residual-grad")
# The module of GPT below that holds each tensor of a flashgpt checkpoint, by the module of
# Hugging Face's GPT-2 that scripts/gpt2_checkpoint.py names its slices after ("h.{l}." before a
# block's): the one table a checkpoint with another tensor extends.
CHECKPOINT_MODULES = {"wte": "wte", "wpe": "wpe", "ln_1": "ln1", "attn.c_attn": "qkv", "attn.c_proj": "attproj",
                      "ln_2": "ln2", "mlp.c_fc": "fc", "mlp.c_proj": "fcproj", "ln_f": "lnf"}


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


class Block(nn.Module):
    def __init__(self, C, NH, stream):
        super().__init__()
        self.NH, self.stream = NH, stream
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.attproj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fcproj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, NH, T, HS)
        x = self.stream(x + self.attproj(y.transpose(1, 2).reshape(B, T, C)))
        return self.stream(x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))


class GPT(nn.Module):
    def __init__(self, L, C, NH, V, maxT, emulate=()):
        super().__init__()
        self.V = V
        value, grad = "residual" in emulate, "residual-grad" in emulate
        self.stream = (lambda x: RoundBf16.apply(x, value, grad)) if value or grad else (lambda x: x)
        Vp = (V + 127) // 128 * 128
        self.wte, self.wpe = nn.Embedding(Vp, C), nn.Embedding(maxT, C)
        self.blocks = nn.ModuleList(Block(C, NH, self.stream) for _ in range(L))
        self.lnf = nn.LayerNorm(C)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    std = 0.02 / math.sqrt(2 * L) if name.endswith("proj.weight") else 0.02
                    nn.init.normal_(p, 0.0, std)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)
            self.wte.weight[V:].zero_()

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
        x = self.stream(self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device)))
        for block in self.blocks:
            x = block(x)
        logits = (self.lnf(x) @ self.wte.weight.t())[..., :self.V].float()  # tied output projection
        return F.cross_entropy(logits.reshape(-1, self.V), targets.reshape(-1))
