#!/usr/bin/env python3
"""tests/programs/test_torch_reference.py: the PyTorch reference's model and optimizers
(scripts/torch_gpt2.py, scripts/torch_optimizers.py) against the float64 numpy reference of
tests/reference/gen_gpt_reference.py, in float64 on the CPU, for four of its files
($FLASHGPT_TESTDATA/gpt_reference.bin: GPT-2's architecture; gpt_modern_reference.bin: the modern
one with a rotary base of 100 and a soft cap of 2, every tensor random; gpt_parts_reference.bin
and gpt_gpt2_parts_reference.bin: the parts of the 2026 recipe on each):
- the model of the file's architecture (read from its header slots as the checkpoint's are),
  its parameters set through GPT.load_checkpoint from scripts/gpt2_checkpoint.py's layout (the
  path of --init-from): the loss within 1e-6 relative, every tensor's gradient within 1e-5
  relative L2 (the file stores them in float32);
- the reference trainer's AdamW (its groups, the clip at 1) for the file's steps on the batch:
  each step's loss within 1e-5 relative;
- its Muon (the parameter table's groups: the matrices, wte, lm_head, the vectors, each at its
  rate), for the Muon steps of the files that have them: each loss within 1e-2 relative, as
  tests/unit/gpt/test_gpt.cu allows train_gpt (Newton-Schulz runs in bf16 on both);
- its Muon of each variant run of $FLASHGPT_TESTDATA/muon_reference.bin (tests/reference/gen_muon_reference.py:
  plain, and q, k and v, Polar Express, cautious decay and NorMuon at once, on the tiny GPT-2): each
  loss within 1e-2 relative, as tests/unit/gpt/test_muon.cu allows train_gpt;
- nanochat's init (GPT(init="nanochat"), train_gpt's --init nanochat) of a modern model with the
  residual lambdas, tensor by tensor as gpt/param_table.c draws it: wte N(0, 0.8), the head
  N(0, 0.001), qkvw and fcw uniform of std 1/sqrt(C) and 0.4/sqrt(C), the projections zero, the
  lambdas from 1.15 and 0.2 to 1.05 and 0.05;
- Muon's Adam groups at their betas: the embeddings' and the head's own where given, the vectors'
  (--adam-beta1 and 2) otherwise;
- a window pattern (train_gpt's --window-pattern): in a one-layer modern model whose layer sees W
  keys, a token changes the final norm's output at its own position and the W - 1 after it, and
  at none later; without the window, at every later one.
The project never depends on torch: without it every case is SKIPPED (the GPU machine's python
has it). Prints PASS / FAIL / SKIPPED lines like tests/lib/test.h.
"""
import os
import sys
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from case import Case  # noqa: E402
from gpt2_checkpoint import Shape, architecture_from_slots, layout  # noqa: E402
from gpt_architecture import MAX_WINDOWS, PRESETS, SLOTS  # noqa: E402
from gpt_schedule import Rates, optimizer_rates  # noqa: E402
from torch_optimizers import VARIANTS  # noqa: E402

try:
    import torch
except ImportError:
    torch = None
else:
    from torch_gpt2 import GPT, checkpoint_parameter
    from torch_optimizers import Muon, adamw

TESTDATA = os.environ.get("FLASHGPT_TESTDATA", "build/testdata")
FILES = (("gpt2", "gpt_reference.bin"), ("modern", "gpt_modern_reference.bin"),
         ("modern with parts", "gpt_parts_reference.bin"), ("gpt2 with parts", "gpt_gpt2_parts_reference.bin"))
TOL_LOSS, TOL_GRAD, TOL_ADAMW, TOL_MUON = 1e-6, 1e-5, 1e-5, 1e-2


def read_reference(path):
    """The file's parts by name (gen_gpt_reference.py's layout)."""
    with open(path, "rb") as f:
        data = f.read()
    header = np.frombuffer(data, "<i4", 256)
    B, T, maxT, V, _, L, NH, C, nsteps, P, muon_steps = (int(v) for v in header[2:13])
    r = {"B": B, "T": T, "shape": Shape(maxT, V, L, NH, C), "arch": architecture_from_slots(header[16:16 + SLOTS])}
    offset = 1024
    for name, dtype, count in (("hyper", "<f4", 16), ("inputs", "<i4", B * T), ("targets", "<i4", B * T),
                               ("params", "<f4", P), ("logits", "<f4", B * T * V), ("loss", "<f4", 1),
                               ("grads", "<f4", P), ("grad_norm", "<f4", 1), ("losses", "<f4", nsteps),
                               ("muon_losses", "<f4", muon_steps)):
        r[name] = np.frombuffer(data, dtype, count, offset).astype(np.float64 if dtype == "<f4" else np.int64)
        offset += 4 * count
    if offset != len(data):
        raise ValueError(f"{path}: {len(data)} bytes, the header says {offset}")
    return r


def slices(r, flat):
    """flat (P, checkpoint order) as the (Slice, values) pairs GPT.load_checkpoint takes."""
    offset = 0
    for sl in layout(r["shape"], r["arch"]):
        n = int(np.prod(sl.shape))
        yield sl, flat[offset:offset + n].reshape(sl.shape)
        offset += n


def model_of(r):
    s = r["shape"]
    model = GPT(s.L, s.C, s.NH, s.V, s.maxT, arch=r["arch"]).double()
    model.load_checkpoint(slices(r, r["params"]))
    return model


def batch(r):
    return (torch.from_numpy(r[k].reshape(r["B"], r["T"])) for k in ("inputs", "targets"))


def relative(got, want):
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def case_forward_backward(name, r):
    case = Case(f"torch reference {name}: loss and every gradient against float64")
    model = model_of(r)
    inputs, targets = batch(r)
    loss = model(inputs, targets)
    loss.backward()
    want = float(r["loss"][0])
    case.check(abs(loss.item() - want) <= TOL_LOSS * abs(want), f"loss {loss.item():.9f}, reference {want:.9f}")
    params = dict(model.named_parameters())
    offset, worst = 0, (0.0, "")
    for sl in layout(r["shape"], r["arch"]):
        n = int(np.prod(sl.shape))
        p = params[checkpoint_parameter(sl.hf_name)]
        err = relative(p.grad.numpy().reshape(-1), r["grads"][offset:offset + n])
        worst = max(worst, (err, sl.hf_name))
        case.check(err <= TOL_GRAD, f"d{sl.hf_name}: relative L2 error {err:.2e}")
        offset += n
    print(f"    {name}: loss {loss.item():.9f} against {want:.9f}; worst gradient d{worst[1]} {worst[0]:.1e}")
    case.end()


def steps(model, r, optimizer, count, scale_step, clip):
    """The loss before each of count steps of optimizer on the file's batch, the gradient's norm
    clipped to clip first."""
    inputs, targets = batch(r)
    losses = []
    for _ in range(count):
        loss = model(inputs, targets)
        losses.append(loss.item())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        scale_step()
        optimizer.zero_grad(set_to_none=True)
    return np.array(losses)


def case_optimizers(name, r):
    h = r["hyper"]
    case = Case(f"torch reference {name}: the trainer's AdamW, {len(r['losses'])} steps, against float64")
    model = model_of(r)
    opt = adamw(model, SimpleNamespace(lr=h[0], weight_decay=h[4]))
    case.check(np.allclose(opt.defaults["betas"] + (opt.defaults["eps"],), h[1:4], rtol=1e-6),
               f"betas {opt.defaults['betas']}, eps {opt.defaults['eps']}: the file's are {h[1:4]}")
    got = steps(model, r, opt, len(r["losses"]), opt.step, float(h[5]))
    err = np.abs(got - r["losses"]) / r["losses"]
    case.check(err.max() <= TOL_ADAMW, f"step {int(err.argmax()) + 1}: loss {got[err.argmax()]:.6f}, "
               f"reference {r['losses'][err.argmax()]:.6f}")
    print(f"    {name}: AdamW losses {got[0]:.6f} -> {got[-1]:.6f}, worst relative error {err.max():.1e}")
    case.end()
    if not len(r["muon_losses"]):
        return
    case = Case(f"torch reference {name}: the trainer's Muon, {len(r['muon_losses'])} steps, against float64")
    model = model_of(r)
    settings = SimpleNamespace(optimizer="muon", lr=h[6], muon_momentum=h[7], embedding_lr=h[8], head_lr=h[9],
                               vector_lr=h[10], adam_beta1=h[11], adam_beta2=h[12], embedding_beta1=h[11],
                               embedding_beta2=h[12], head_beta1=h[11], head_beta2=h[12], weight_decay=h[14],
                               normuon_beta2=0.0, **{key: off for _, key, off in VARIANTS})
    opt = Muon(model, settings)
    # Adam's groups, in any order: the embeddings at the embedding rate, an untied head at its own,
    # the vectors (the residual lambdas among them, each kind at its multiple of the rate); the
    # value embeddings with the embeddings, their gates and the smear's with the vectors.
    by_group = {}
    for g in opt.adam.param_groups:
        by_group.setdefault(g["group"], []).extend(id(p) for p in g["params"])
    groups = sorted((sorted(ids), group) for group, ids in by_group.items())
    valued = [b for b in model.blocks if b.value_embedding is not None]
    want = [([id(model.wte.weight)] + ([id(model.wpe.weight)] if model.wpe is not None else []) +
             [id(b.value_embedding.weight) for b in valued], "embedding")]
    if model.lm_head is not None:
        want.append(([id(model.lm_head.weight)], "head"))
    vectors = [id(p) for p in model.parameters() if p.dim() < 2] + [id(b.value_gate.weight) for b in valued]
    if model.smear_gate is not None:
        vectors.append(id(model.smear_gate.weight))
    if vectors:
        want.append((vectors, "vector"))
    want = sorted((sorted(ids), group) for ids, group in want)
    case.check(groups == want, f"Adam's groups (parameter ids, group) {groups}, expected {want}")
    rates = optimizer_rates(settings, settings.lr)
    got = steps(model, r, opt, len(r["muon_losses"]), lambda: opt.step(rates), float(h[5]))
    err = np.abs(got - r["muon_losses"]) / r["muon_losses"]
    case.check(err.max() <= TOL_MUON, f"step {int(err.argmax()) + 1}: loss {got[err.argmax()]:.6f}, "
               f"reference {r['muon_losses'][err.argmax()]:.6f}")
    print(f"    {name}: Muon losses {got[0]:.6f} -> {got[-1]:.6f}, worst relative error {err.max():.1e}")
    case.end()


def read_muon_reference(path):
    """The tiny GPT-2 and its runs of Muon's variants from gen_muon_reference.py's file: a dict as
    read_reference's (B, T, shape, arch, hyper, inputs, targets, params) and "runs", each (the
    variant's settings as attributes, the losses)."""
    with open(path, "rb") as f:
        data = f.read()
    header = np.frombuffer(data, "<i4", 256)
    B, T, maxT, V, _, L, NH, C, nsteps, P, cases, _, updates, runs = (int(v) for v in header[2:16])
    r = {"B": B, "T": T, "shape": Shape(maxT, V, L, NH, C), "arch": architecture_from_slots(header[16:16 + SLOTS]),
         "hyper": np.frombuffer(data, "<f4", 16, 1024).astype(np.float64)}
    offset = 1024 + 64
    for _ in range(cases):
        count, rows, cols, _ = np.frombuffer(data, "<i4", 4, offset)
        offset += 16 + 8 * int(count) * int(rows) * int(cols)
    update_P = int(np.frombuffer(data, "<i4", 6, offset)[5])
    offset += 24 + 4 * 5 * update_P + updates * (24 + 8 * update_P)
    for name, count in (("inputs", B * T), ("targets", B * T), ("params", P)):
        r[name] = np.frombuffer(data, "<i4" if name != "params" else "<f4", count, offset)
        r[name] = r[name].astype(np.float64 if name == "params" else np.int64)
        offset += 4 * count
    r["runs"] = []
    for _ in range(runs):
        qkv, ns, cautious, normuon = (int(v) for v in np.frombuffer(data, "<i4", 4, offset))
        weight_decay, beta2 = (float(v) for v in np.frombuffer(data, "<f4", 2, offset + 16))
        variant = SimpleNamespace(muon_qkv=("fused", "split", "head-pairs")[qkv], muon_ns=("quintic", "polar")[ns],
                                  cautious_weight_decay=bool(cautious), normuon=bool(normuon), normuon_beta2=beta2,
                                  weight_decay=weight_decay)
        r["runs"].append((variant, np.frombuffer(data, "<f4", nsteps, offset + 24).astype(np.float64)))
        offset += 24 + 4 * nsteps
    if offset != len(data):
        raise ValueError(f"{path}: {len(data)} bytes, the header says {offset}")
    return r


def case_muon_variants(r):
    h = r["hyper"]  # lr, momentum, embedding lr, vector lr, b1, b2, eps, grad clip
    for variant, want in r["runs"]:
        what = (f"{variant.muon_qkv} {variant.muon_ns}, {'cautious ' if variant.cautious_weight_decay else ''}decay "
                f"{variant.weight_decay:g}" + (f", NorMuon {variant.normuon_beta2:g}" if variant.normuon else ""))
        case = Case(f"torch reference: the trainer's Muon, {what}, {len(want)} steps, against float64")
        settings = SimpleNamespace(optimizer="muon", lr=h[0], muon_momentum=h[1], embedding_lr=h[2], head_lr=0.0,
                                   vector_lr=h[3], adam_beta1=h[4], adam_beta2=h[5], embedding_beta1=h[4],
                                   embedding_beta2=h[5], head_beta1=h[4], head_beta2=h[5], **vars(variant))
        model = model_of(r)
        opt = Muon(model, settings)
        rates = Rates(lr={"matrix": h[0], "embedding": h[2], "head": 0.0, "vector": h[3]}, momentum=h[1],
                      weight_decay=variant.weight_decay)
        got = steps(model, r, opt, len(want), lambda: opt.step(rates), float(h[7]))
        err = np.abs(got - want) / want
        case.check(err.max() <= TOL_MUON, f"step {int(err.argmax()) + 1}: loss {got[err.argmax()]:.6f}, "
                   f"reference {want[err.argmax()]:.6f}")
        print(f"    {what}: Muon losses {got[0]:.6f} -> {got[-1]:.6f}, worst relative error {err.max():.1e}")
        case.end()


def case_nanochat_init():
    case = Case("torch reference: nanochat's init of a modern model with the lambdas, tensor by tensor")
    L, C = 3, 256
    model = GPT(L, C, 2, 1000, 40, arch=PRESETS["modern"]._replace(residual_lambdas=1), init="nanochat")
    unit = C ** -0.5
    for kind, params in model.table_parameters():
        values = torch.stack([p.detach() for p in params]).double()
        if kind.name in ("wte", "lm_head"):
            case.check(not values[:, 1000:].any(), f"{kind.name}: a padding row is not zero")
            values = values[:, :1000]
        want = {"wte": 0.8, "lm_head": 0.001, "qkvw": unit, "fcw": 0.4 * unit}.get(kind.name)
        if want:
            case.check(abs(values.std().item() / want - 1) < 0.03, f"{kind.name}: std {values.std().item():.4g}, want "
                       f"{want:.4g}")
            if kind.name in ("qkvw", "fcw"):
                case.check(values.abs().max().item() <= 3 ** 0.5 * want, f"{kind.name}: past the uniform's bound")
        elif kind.name in ("attprojw", "fcprojw"):
            case.check(not values.any(), f"{kind.name} is not zero")
        elif kind.name in ("resid_lambda", "x0_lambda"):
            first, last = (1.15, 1.05) if kind.name == "resid_lambda" else (0.2, 0.05)
            want = torch.tensor([first + (last - first) * layer / (L - 1) for layer in range(L)], dtype=torch.float64)
            case.check(torch.allclose(values.flatten(), want, rtol=1e-6), f"{kind.name}: {values.flatten().tolist()}")
    case.end()


def case_group_betas():
    case = Case("torch reference: Muon's Adam groups at the embeddings' and the head's own betas, the vectors' at "
                "--adam-beta1 and 2")
    model = GPT(2, 128, 2, 300, 32, arch=PRESETS["modern"]._replace(residual_lambdas=1))
    settings = SimpleNamespace(optimizer="muon", lr=0.02, muon_momentum=0.95, embedding_lr=0.05, head_lr=0.002,
                               vector_lr=0.002, adam_beta1=0.8, adam_beta2=0.95, embedding_beta1=0.7,
                               embedding_beta2=0.995, head_beta1=0.8, head_beta2=0.96, weight_decay=0.0,
                               normuon_beta2=0.0, **{key: off for _, key, off in VARIANTS})
    want = {"embedding": (0.7, 0.995), "head": (0.8, 0.96), "vector": (0.8, 0.95)}
    groups = Muon(model, settings).adam.param_groups
    case.check(sorted({g["group"] for g in groups}) == sorted(want), f"the groups {[g['group'] for g in groups]}")
    for g in groups:
        case.check(tuple(g["betas"]) == want[g["group"]], f"{g['group']}: betas {g['betas']}")
    case.end()


def case_windows():
    case = Case("torch reference: a layer of window W sees the keys [t - W + 1, t]")
    W, T = 3, 8
    tokens = torch.randint(1, 50, (1, T))
    changed = tokens.clone()
    changed[0, 0] = 0
    for window_count, reach in ((1, W), (0, T)):
        windows = ((W,) if window_count else (0,)) + (0,) * (MAX_WINDOWS - 1)
        arch = PRESETS["modern"]._replace(zero_init=0, window_count=window_count, windows=windows)
        torch.manual_seed(1)
        model = GPT(1, 128, 2, 50, T, arch=arch).double()
        outputs = []
        model.lnf.register_forward_hook(lambda module, inputs, output: outputs.append(output))
        with torch.no_grad():
            model(tokens, tokens)
            model(changed, tokens)
        differs = [not torch.equal(outputs[0][0, t], outputs[1][0, t]) for t in range(T)]
        case.check(differs == [t < reach for t in range(T)],
                   f"{'window ' + str(W) if window_count else 'no window'}: the positions that change {differs}")
    case.end()


def main():
    if torch is None:
        print("SKIPPED test_torch_reference (no torch for this python: the project never depends on it)")
        return 0
    torch.manual_seed(0)
    for name, file in FILES:
        r = read_reference(os.path.join(TESTDATA, file))
        case_forward_backward(name, r)
        case_optimizers(name, r)
    case_muon_variants(read_muon_reference(os.path.join(TESTDATA, "muon_reference.bin")))
    case_nanochat_init()
    case_group_betas()
    case_windows()
    return 1 if Case.failures else 0


if __name__ == "__main__":
    sys.exit(main())
