"""scripts/torch_optimizers.py: train_gpt's two optimizers (gpt/optimizer.h) in PyTorch, on a model
of scripts/torch_gpt2.py, for scripts/train_torch_reference.py and scripts/bench_torch_gpt2.py.
Muon is written here from train_gpt's description (gpt/optimizer.h, layers/muon.h), not from its
code.

- defaults(kind, preset): train_gpt's settings of the optimizer kind (adamw, muon) for the
  architecture preset (gpt2, modern, 2026: --arch's, else gpt_architecture.nearest_preset's;
  gpt/optimizer.h's preset_optimizer_defaults), and variant_defaults(kind, preset) Muon's
  variants there (2026's head pairs and NorMuon; every other preset's off). SETTINGS: each setting's flag, bounds and the
  runs it belongs to, and invalid(kind, s, untied_head) the check of a run's settings against
  them and of Muon's variants (gpt/optimizer.h's optimizer_settings, optimizer_invalid and
  muon_variants_invalid, held to them by tests/mirrors/test_rules.py). VARIANTS: Muon's variants'
  flags and their values when off; NS_COEFFICIENTS: the Newton-Schulz coefficient sets (held to
  layers/newton_schulz.h's by the same test). Python alone, like the rest of this file until an
  optimizer is made: the scripts settle their options before they load torch.
Each tensor is updated as its row of the parameter table (scripts/gpt_parameters.py, through
GPT.table_parameters) says: its group, its multiples of the group's rate (lr_scale) and of the
weight decay (decay_scale: the 2-D weights), and the matrices Muon cuts it into.
- adamw(model, s): AdamW (b1 0.9, b2 0.95, eps 1e-8) of every tensor at s.lr; set_adamw_rates(opt,
  rates) sets a step's rates: each group's lr the schedule's times its "lr_scale", its weight decay
  the schedule's times its "decay_scale".
- Muon(model, s): Nesterov momentum on the gradient of each tensor of the matrix group (its
  slices stacked, cut into matrices as s.muon_qkv says), each of its matrices orthogonalised by
  newton_schulz with the coefficients s.muon_ns names, with s.normuon normalised by NorMuon
  (normuon), and applied with lr * sqrt(max(1, rows / cols)) after decoupled weight decay (with
  s.cautious_weight_decay, only of the weights whose update has their sign); AdamW (betas s.adam_beta1,
  s.adam_beta2, eps 1e-8) for the rest: the embedding group (wte, the head too when tied, and
  wpe), the head group (an untied lm_head) and the vectors (norms' weights, biases), each at its
  own rate. step(rates) takes a step's rates (scripts/gpt_schedule.py's Rates: each group's
  learning rate, the momentum, the weight decay).
s: the settings, as attributes: lr, weight_decay, grad_clip, muon_momentum, embedding_lr, head_lr,
vector_lr, adam_beta1, adam_beta2 (defaults' keys), and Muon's variants muon_qkv ("fused", "split",
"head-pairs"), muon_ns ("quintic", "polar"), cautious_weight_decay, normuon (bools) and
normuon_beta2 (VARIANTS' keys; an AdamW run's as VARIANTS has them). Both take PyTorch's fused AdamW on the GPU,
its default elsewhere (tests/programs/test_torch_reference.py runs them on the CPU).
"""
from typing import NamedTuple

from gpt_architecture import PRESET_DEFAULTS
from gpt_parameters import muon_matrix

try:
    import torch
except ImportError:
    torch = None  # defaults() needs none; the scripts say so before they make an optimizer

# Muon's Newton-Schulz coefficient sets (--muon-ns, layers/newton_schulz.h): the factor the norm is
# taken by, then (a, b, c) of each of the five iterations. The quintic's one polynomial; Polar
# Express's (Amsel et al. 2025, arXiv 2505.16932), one per iteration, computed for five iterations
# with a safety factor of 2e-2 and a cushion of 2, the norm taken 2% large, as nanochat and
# modded-nanogpt run it.
NS_COEFFICIENTS = {
    "quintic": (1.0, ((3.4445, -4.7750, 2.0315),) * 5),
    "polar": (1.02, ((8.156554524902461, -22.48329292557795, 15.878769915207462),
                     (4.042929935166739, -2.808917465908714, 0.5000178451051316),
                     (3.8916678022926607, -2.772484153217685, 0.5060648178503393),
                     (3.285753657755655, -2.3681294933425376, 0.46449024233003106),
                     (2.3465413258596377, -1.7097828382687081, 0.42323551169305323))),
}
NS_EPS = 1e-7
ADAM_EPS = 1e-8
NORMUON_FLOOR = 1e-10  # NorMuon's floor of a second moment and of the scaled update's norm
# Muon's variants (gpt/optimizer.h): each flag, its key and its value when off (AdamW's, and a
# Muon run's without it); NorMuon's beta where NorMuon is on and no beta is given.
VARIANTS = (("--muon-qkv", "muon_qkv", "fused"), ("--muon-ns", "muon_ns", "quintic"),
            ("--cautious-weight-decay", "cautious_weight_decay", False), ("--normuon", "normuon", False))
NORMUON_BETA2_DEFAULT = 0.95


FLT_MAX = 3.4028234663852886e38  # the largest float32: the bound above of a setting without one


def defaults(kind, preset):
    """train_gpt's settings for --optimizer kind and the architecture preset: AdamW lr 3e-4,
    weight decay 0.1; Muon lr 0.02, momentum 0.95, Adam (0.8, 0.95) at 0.001 for the embeddings,
    0.002 for an untied head and for the vectors, no weight decay; both clip the gradient norm at
    1; where the preset sets them (gpt_architecture.PRESET_DEFAULTS), its AdamW lr (modern's and
    2026's 2e-3), its Muon embedding lr (0.05) and its weight decay (2026's 0.1)."""
    d = PRESET_DEFAULTS[preset]
    if kind == "adamw":
        return {"lr": d.adamw_lr or 3e-4, "weight_decay": d.weight_decay or 0.1, "grad_clip": 1.0}
    return {"lr": 0.02, "weight_decay": d.weight_decay or 0.0, "grad_clip": 1.0, "muon_momentum": 0.95,
            "embedding_lr": d.embedding_lr or 0.001, "head_lr": 0.002, "vector_lr": 0.002,
            "adam_beta1": 0.8, "adam_beta2": 0.95, "embedding_beta1": 0.8, "embedding_beta2": 0.95,
            "head_beta1": 0.8, "head_beta2": 0.95}


def variant_defaults(kind, preset):
    """Muon's variants (VARIANTS' keys) of a run of --optimizer kind trained as preset, where not
    given: the preset's --muon-qkv and --normuon under Muon, every other off (and all off under AdamW)."""
    variants = {key: off for _, key, off in VARIANTS}
    if kind == "muon":
        variants.update(muon_qkv=PRESET_DEFAULTS[preset].muon_qkv, normuon=PRESET_DEFAULTS[preset].normuon)
    return variants


# The Adam betas of a group's own (Muon's embeddings and untied head), each with the beta it
# follows when not given (train/plan.cu's resolve_optimizer: the vectors' as given).
GROUP_BETAS = {"embedding_beta1": "adam_beta1", "embedding_beta2": "adam_beta2", "head_beta1": "adam_beta1",
               "head_beta2": "adam_beta2"}


def group_betas(s, group):
    """The betas of Adam's update of group ("embedding", "head", "vector") under Muon, s's
    (gpt/optimizer.h's adam_betas)."""
    if group in ("embedding", "head"):
        return getattr(s, f"{group}_beta1"), getattr(s, f"{group}_beta2")
    return s.adam_beta1, s.adam_beta2


class Setting(NamedTuple):
    """A setting: its flag, its key in defaults(), the values it may take (hi FLT_MAX: no bound
    above but the floats'; an open bound is not taken itself) and the runs it belongs to: every
    run, muon's, or muon's with an untied head (a tied head is wte, at embedding_lr)."""
    flag: str
    key: str
    lo: float
    hi: float
    lo_open: bool
    hi_open: bool
    use: str  # "every run", "muon", "muon untied head"


# gpt/optimizer.h's optimizer_settings: a bound is open where the value itself breaks the
# optimizer (a learning rate of 0 learns nothing; a momentum or beta of 1 never forgets).
SETTINGS = (
    Setting("--lr", "lr", 0.0, FLT_MAX, True, False, "every run"),
    Setting("--weight-decay", "weight_decay", 0.0, FLT_MAX, False, False, "every run"),
    Setting("--grad-clip", "grad_clip", 0.0, FLT_MAX, False, False, "every run"),
    Setting("--muon-momentum", "muon_momentum", 0.0, 1.0, False, True, "muon"),
    Setting("--embedding-lr", "embedding_lr", 0.0, FLT_MAX, True, False, "muon"),
    Setting("--head-lr", "head_lr", 0.0, FLT_MAX, True, False, "muon untied head"),
    Setting("--vector-lr", "vector_lr", 0.0, FLT_MAX, True, False, "muon"),
    Setting("--adam-beta1", "adam_beta1", 0.0, 1.0, False, True, "muon"),
    Setting("--adam-beta2", "adam_beta2", 0.0, 1.0, False, True, "muon"),
    Setting("--embedding-beta1", "embedding_beta1", 0.0, 1.0, False, True, "muon"),
    Setting("--embedding-beta2", "embedding_beta2", 0.0, 1.0, False, True, "muon"),
    Setting("--head-beta1", "head_beta1", 0.0, 1.0, False, True, "muon untied head"),
    Setting("--head-beta2", "head_beta2", 0.0, 1.0, False, True, "muon untied head"),
)


def setting_refused(setting, v):
    """None when the setting may be v, else its bounds: "--lr 0 must be > 0", "--muon-momentum 1
    must be in [0, 1)"."""
    s = setting
    if (v > s.lo if s.lo_open else v >= s.lo) and (v < s.hi if s.hi_open else v <= s.hi):
        return None
    if s.hi == FLT_MAX:
        return f"{s.flag} {v:g} must be {'>' if s.lo_open else '>='} {s.lo:g}"
    return f"{s.flag} {v:g} must be in {'(' if s.lo_open else '['}{s.lo:g}, {s.hi:g}{')' if s.hi_open else ']'}"


def variants_invalid(kind, s):
    """None when Muon's variants in s (VARIANTS' keys and normuon_beta2, as attributes) apply: each
    off under AdamW, NorMuon's beta in [0, 1) with NorMuon and 0 without, cautious decay with a
    weight decay; else why not, naming the flag."""
    for flag, key, off in VARIANTS:
        if getattr(s, key) != off and kind != "muon":
            return f"{flag} is a setting of --optimizer muon"
    beta = s.normuon_beta2
    if s.normuon and not 0.0 <= beta < 1.0:
        return f"--normuon-beta2 {beta:g} must be in [0, 1)"
    if not s.normuon and beta != 0.0:
        return "--normuon-beta2 without --normuon has no effect"
    if s.cautious_weight_decay and s.weight_decay == 0.0:
        return "--cautious-weight-decay without --weight-decay has no effect"
    return None


def invalid(kind, s, untied_head):
    """None when every setting of a run of the kind (an untied head's rate where untied_head) in s
    (defaults' keys and Muon's variants, as attributes) is within its bounds, the variants apply
    (variants_invalid), and the weight decay is within the rates it is applied with, else why not,
    naming the flag: lr * weight_decay of a decayed weight each step at the peak, at 1 or more,
    erases the weights whatever the gradients say."""
    muon = kind == "muon"
    for setting in SETTINGS:
        if (setting.use != "every run" and not muon) or (setting.use == "muon untied head" and not untied_head):
            continue
        why = setting_refused(setting, getattr(s, setting.key))
        if why:
            return why
    why = variants_invalid(kind, s)
    if why:
        return why
    # The groups with decayed weights: AdamW's one; Muon's matrices, embeddings and an untied head.
    decayed = (("--lr", s.lr), ("--embedding-lr", s.embedding_lr if muon else 0.0),
               ("--head-lr", s.head_lr if muon and untied_head else 0.0))
    for flag, lr in decayed:
        if lr * s.weight_decay >= 1.0:
            return (f"--weight-decay {s.weight_decay:g}: times {flag} {lr:g} it is {lr * s.weight_decay:g}, and must "
                    "stay below 1 (at 1 a step at the peak erases the decayed weights)")
    return None


def adamw(model, s):
    groups = {}  # the tensors of each (lr_scale, decay_scale)
    for kind, params in model.table_parameters():
        groups.setdefault((kind.lr_scale, kind.decay_scale), []).extend(params)
    return torch.optim.AdamW([{"params": params, "lr": s.lr * scale, "lr_scale": scale, "decay_scale": decay,
                               "weight_decay": s.weight_decay * decay} for (scale, decay), params in groups.items()],
                             lr=s.lr, betas=(0.9, 0.95), eps=ADAM_EPS, fused=model.wte.weight.is_cuda)


def set_adamw_rates(opt, rates):
    """The step's rates into the groups of adamw's optimizer opt (AdamW: every group at one rate)."""
    for group in opt.param_groups:
        group["lr"] = rates.lr["matrix"] * group["lr_scale"]
        group["weight_decay"] = rates.weight_decay * group["decay_scale"]


def newton_schulz(u, ns="quintic"):
    """u (count, rows, cols) fp32: each matrix scaled in bf16 to a Frobenius norm of 1 / the set
    ns's factor, then the set's five iterations on its shorter side as bf16 matmuls (fp32
    accumulation, one rounding a product, as cuBLASLt's alpha/beta epilogue does)."""
    norm_scale, steps = NS_COEFFICIENTS[ns]
    x = u.bfloat16()
    norm = x.float().square().sum(dim=(-2, -1), keepdim=True).sqrt()
    x = (x.float() / (norm_scale * norm + NS_EPS)).bfloat16()
    tall = x.size(-2) > x.size(-1)
    if tall:
        x = x.mT.contiguous()
    for a, b, c in steps:
        gram = torch.bmm(x, x.mT)
        poly = torch.baddbmm(gram, gram, gram, beta=b, alpha=c)
        x = torch.baddbmm(x, poly, x, beta=a, alpha=1.0)
    return x.mT if tall else x


def normuon(o, second, beta2):
    """NorMuon on o (count, rows, cols) fp32: second (count, n), the moments of o's rows (of its
    columns where rows < cols), each a running mean of the row's mean square at beta2; each row
    divided by its moment's root, then the matrix scaled back to o's Frobenius norm."""
    rows_of = o.size(-2) >= o.size(-1)
    second.mul_(beta2).add_(o.square().mean(dim=-1 if rows_of else -2), alpha=1.0 - beta2)
    root = second.clamp_min(NORMUON_FLOOR).rsqrt()
    evened = o * (root.unsqueeze(-1) if rows_of else root.unsqueeze(-2))
    norms = (o.square().sum(dim=(-2, -1), keepdim=True).sqrt(),
             evened.square().sum(dim=(-2, -1), keepdim=True).sqrt().clamp_min(NORMUON_FLOOR))
    return evened * (norms[0] / norms[1])


class Muon:
    def __init__(self, model, s):
        tensors = model.table_parameters()
        self.s = s
        # Each matrix tensor: its kind, its slices, the shape of the matrices Muon cuts them into.
        self.kinds = [(kind, params, muon_matrix(kind, model.shape, s.muon_qkv)) for kind, params in tensors
                      if kind.group == "matrix"]
        self.buffers = [torch.zeros(len(ps), *ps[0].shape, device=ps[0].device, dtype=ps[0].dtype)
                        for _, ps, _ in self.kinds]
        # NorMuon's moments: a row of max(rows, cols) per matrix.
        self.seconds = [torch.zeros(len(ps) * ps[0].numel() // (rows * cols), max(rows, cols), device=ps[0].device)
                        for _, ps, (rows, cols) in self.kinds] if s.normuon else None
        groups = {}  # Adam's tensors of each (group, lr_scale, decay_scale)
        for kind, params in tensors:
            if kind.group != "matrix":
                groups.setdefault((kind.group, kind.lr_scale, kind.decay_scale), []).extend(params)
        self.adam = torch.optim.AdamW([{"params": params, "group": group, "lr_scale": scale, "decay_scale": decay,
                                        "betas": group_betas(s, group)}
                                       for (group, scale, decay), params in groups.items()], lr=s.embedding_lr,
                                      betas=(s.adam_beta1, s.adam_beta2), eps=ADAM_EPS, fused=model.wte.weight.is_cuda)

    def step(self, rates):
        for group in self.adam.param_groups:
            group["lr"] = rates.lr[group["group"]] * group["lr_scale"]
            group["weight_decay"] = rates.weight_decay * group["decay_scale"]
        self.adam.step()
        s = self.s
        with torch.no_grad():
            for i, ((kind, params, (rows, cols)), buf) in enumerate(zip(self.kinds, self.buffers)):
                lr, decay = rates.lr["matrix"] * kind.lr_scale, rates.weight_decay * kind.decay_scale
                grad = torch.stack([p.grad for p in params])
                buf.lerp_(grad, 1 - rates.momentum)
                u = grad.lerp_(buf, rates.momentum).reshape(-1, rows, cols)
                update = newton_schulz(u, s.muon_ns).float()
                if s.normuon:
                    update = normuon(update, self.seconds[i], s.normuon_beta2)
                update = update.to(grad.dtype).reshape(grad.shape) * max(1.0, rows / cols) ** 0.5
                for p, u in zip(params, update):
                    if s.cautious_weight_decay:  # no decay of a weight whose update has the other sign
                        p.sub_(p * (u * p >= 0), alpha=lr * decay)
                    else:
                        p.mul_(1 - lr * decay)
                    p.add_(u, alpha=-lr)

    def zero_grad(self, set_to_none=True):
        self.adam.zero_grad(set_to_none=set_to_none)
        for _, params, _ in self.kinds:
            for p in params:
                p.grad = None
