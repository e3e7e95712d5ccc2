"""scripts/torch_optimizers.py: train_gpt's two optimizers (gpt/optimizer.h) in PyTorch, on a model
of scripts/torch_gpt2.py, for scripts/train_torch_reference.py and scripts/bench_torch_gpt2.py.
Muon is written here from train_gpt's description (gpt/optimizer.h, layers/muon.h), not from its
code.

- defaults(kind, preset): train_gpt's settings of the optimizer kind (adamw, muon) for the
  architecture preset (gpt2, modern; gpt/optimizer.h's optimizer_defaults and
  modern_optimizer_defaults). Python alone, like the rest of this file until an optimizer is
  made: the scripts settle their options before they load torch.
- adamw(model, s): AdamW (b1 0.9, b2 0.95, eps 1e-8) of every tensor at s.lr, the weight decay
  on the 2-D weights only.
- Muon(model, s): Nesterov momentum on each block matrix's gradient (the layers' matrices of one
  kind stacked), orthogonalised by newton_schulz and applied with lr * sqrt(max(1, rows / cols))
  after decoupled weight decay; AdamW (betas s.adam_beta1, s.adam_beta2, eps 1e-8) for the rest:
  wte (the head too when tied) and wpe at s.embedding_lr and an untied head lm_head at
  s.head_lr, both with the weight decay; the vectors (norms' weights, biases) at s.vector_lr
  without. step(scale) takes the schedule's factor of every peak.
s: the settings, as attributes: lr, weight_decay, muon_momentum, embedding_lr, head_lr,
vector_lr, adam_beta1, adam_beta2 (defaults' keys). Both take PyTorch's fused AdamW on the GPU,
its default elsewhere (tests/test_torch_reference.py runs them on the CPU).
"""
try:
    import torch
except ImportError:
    torch = None  # defaults() needs none; the scripts say so before they make an optimizer

# Muon's Newton-Schulz quintic and its steps (layers/muon.h).
NS_COEFFICIENTS, NS_STEPS, NS_EPS = (3.4445, -4.7750, 2.0315), 5, 1e-7
ADAM_EPS = 1e-8
MATRICES = ("qkv", "attproj", "fc", "fcproj")  # the blocks' linear layers whose weights Muon takes


def defaults(kind, preset):
    """train_gpt's settings for --optimizer kind and the architecture preset."""
    if kind == "adamw":
        return {"lr": 2e-3 if preset == "modern" else 3e-4, "weight_decay": 0.1}
    return {"lr": 0.02, "weight_decay": 0.0, "muon_momentum": 0.95,
            "embedding_lr": 0.05 if preset == "modern" else 0.001, "head_lr": 0.002, "vector_lr": 0.002,
            "adam_beta1": 0.8, "adam_beta2": 0.95}


def adamw(model, s):
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": s.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=s.lr, betas=(0.9, 0.95), eps=ADAM_EPS,
                             fused=decay[0].is_cuda)


def newton_schulz(u):
    """u (count, rows, cols) fp32: each matrix scaled to unit Frobenius norm in bf16, then five
    quintic iterations on its shorter side as bf16 matmuls (fp32 accumulation, one rounding a
    product, as cuBLASLt's alpha/beta epilogue does)."""
    a, b, c = NS_COEFFICIENTS
    x = u.bfloat16()
    norm = x.float().square().sum(dim=(-2, -1), keepdim=True).sqrt()
    x = (x.float() / (norm + NS_EPS)).bfloat16()
    tall = x.size(-2) > x.size(-1)
    if tall:
        x = x.mT.contiguous()
    for _ in range(NS_STEPS):
        gram = torch.bmm(x, x.mT)
        poly = torch.baddbmm(gram, gram, gram, beta=b, alpha=c)
        x = torch.baddbmm(x, poly, x, beta=a, alpha=1.0)
    return x.mT if tall else x


class Muon:
    def __init__(self, model, s):
        self.lr, self.momentum, self.weight_decay = s.lr, s.muon_momentum, s.weight_decay
        self.kinds = [[getattr(block, name).weight for block in model.blocks] for name in MATRICES]
        self.buffers = [torch.zeros(len(ps), *ps[0].shape, device=ps[0].device, dtype=ps[0].dtype)
                        for ps in self.kinds]
        matrices = {id(p) for ps in self.kinds for p in ps}
        embeddings = [model.wte.weight] + ([model.wpe.weight] if model.wpe is not None else [])
        head = [model.lm_head.weight] if model.lm_head is not None else []
        vectors = [p for p in model.parameters() if id(p) not in matrices and p.dim() < 2]
        groups = [{"params": embeddings, "weight_decay": s.weight_decay, "peak": s.embedding_lr},
                  {"params": head, "weight_decay": s.weight_decay, "peak": s.head_lr},
                  {"params": vectors, "weight_decay": 0.0, "peak": s.vector_lr}]
        self.adam = torch.optim.AdamW([g for g in groups if g["params"]], lr=s.embedding_lr,
                                      betas=(s.adam_beta1, s.adam_beta2), eps=ADAM_EPS, fused=model.wte.weight.is_cuda)

    def step(self, scale):
        for group in self.adam.param_groups:
            group["lr"] = group["peak"] * scale
        self.adam.step()
        lr = self.lr * scale
        with torch.no_grad():
            for params, buf in zip(self.kinds, self.buffers):
                grad = torch.stack([p.grad for p in params])
                buf.lerp_(grad, 1 - self.momentum)
                update = newton_schulz(grad.lerp_(buf, self.momentum)).to(grad.dtype)
                update *= max(1.0, grad.size(-2) / grad.size(-1)) ** 0.5
                for p, u in zip(params, update):
                    p.mul_(1 - lr * self.weight_decay).add_(u, alpha=-lr)

    def zero_grad(self, set_to_none=True):
        self.adam.zero_grad(set_to_none=set_to_none)
        for params in self.kinds:
            for p in params:
                p.grad = None
