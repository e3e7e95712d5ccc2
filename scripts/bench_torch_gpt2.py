#!/usr/bin/env python3
# The PyTorch baseline for train_gpt's speed (a benchmark only; nothing in the build uses it):
# train_gpt's model (scripts/torch_gpt2.py; d12 by default: L 12, C 768, NH 12) of the
# architecture of --arch, the component options and --window-pattern (train_gpt's,
# scripts/gpt_architecture.py; GPT-2's by default), the model under torch.compile, bf16 autocast with fp32 weights, gradient
# clipping and train_gpt's optimizer (--optimizer: fused AdamW, or Muon with Adam for the rest,
# scripts/torch_optimizers.py; it and its settings at train_gpt's defaults for the architecture,
# 2026's Muon with head pairs and NorMuon among them), on random tokens of
# GPT-2's vocabulary (50257, padded to 50304). The context is T (learned positions sized to it),
# as in train_gpt's comparison.
# Prints tokens/s, the mean over the steps after the warm-up ones (which compile), and the peak
# memory PyTorch allocated (GiB = 2^30 bytes). Under torchrun the model is wrapped in
# DistributedDataParallel, every rank takes -B sequences a step, and tokens/s counts all ranks
# (peak memory: rank 0's).
#   python3 scripts/bench_torch_gpt2.py -B 1 -T 65536 --steps 8 --warmup 3
#   python3 scripts/bench_torch_gpt2.py --arch modern --optimizer muon -B 64 -T 1024
#   torchrun --nproc_per_node 2 scripts/bench_torch_gpt2.py -B 64 -T 1024
import argparse
import os
import time
from types import SimpleNamespace

import gpt_architecture
from gpt_parameters import Shape
from gpt_schedule import optimizer_rates
from needed import exit_without
from torch_optimizers import NORMUON_BETA2_DEFAULT, Muon, adamw, defaults, variant_defaults

try:
    import torch
except ImportError:
    torch = None  # said once the arguments are read: --help and their errors need no torch
else:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from torch_gpt2 import GPT


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-B", type=int, default=1)
    ap.add_argument("-T", type=int, default=65536)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--channels", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=3, help="untimed first steps (they compile)")
    ap.add_argument("--optimizer", choices=["adamw", "muon"], help="train_gpt's [adamw; 2026 muon]")
    gpt_architecture.add_options(ap)
    a = ap.parse_args()
    if a.steps <= a.warmup:
        ap.error("--steps must exceed --warmup")
    try:
        arch, preset = gpt_architecture.from_options(a, shape=Shape(a.T, 50257, a.layers, a.heads, a.channels))
    except ValueError as e:
        ap.error(str(e))
    a.optimizer = a.optimizer or gpt_architecture.PRESET_DEFAULTS[preset].optimizer
    exit_without(torch=torch)
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if world > 1:
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl")
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = f"cuda:{local_rank}"
    model = GPT(a.layers, a.channels, a.heads, 50257, a.T, arch=arch).to(dev)
    # train_gpt's defaults: Muon's variants the preset's.
    variants = variant_defaults(a.optimizer, preset)
    settings = SimpleNamespace(optimizer=a.optimizer, **defaults(a.optimizer, preset),
                               normuon_beta2=NORMUON_BETA2_DEFAULT if variants["normuon"] else 0.0, **variants)
    muon = a.optimizer == "muon"
    opt = Muon(model, settings) if muon else adamw(model, settings)
    rates = optimizer_rates(settings, settings.lr)  # every step at the peak
    step_fn = torch.compile(DistributedDataParallel(model, device_ids=[local_rank]) if world > 1 else model)
    times = []
    for step in range(a.steps):
        idx = torch.randint(0, 50257, (a.B, a.T), device=dev)
        targets = torch.randint(0, 50257, (a.B, a.T), device=dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = step_fn(idx, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings.grad_clip)
        if muon:
            opt.step(rates)
        else:
            opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        if rank == 0:
            print(f"step {step + 1}/{a.steps} | loss {loss.item():.4f} | {times[-1] * 1e3:.1f} ms", flush=True)
    timed = times[a.warmup:]
    tps = world * a.B * a.T * len(timed) / sum(timed)
    gpus = f", {world} GPUs (DDP)" if world > 1 else ""
    if rank == 0:
        print(f"torch {torch.__version__} GPT ({gpt_architecture.describe(arch)}, {a.optimizer}) L {a.layers} "
              f"C {a.channels} NH {a.heads}, B {a.B} T {a.T}{gpus}: "
              f"{tps / 1e3:.1f}K tokens/s (mean of steps {a.warmup + 1}-{a.steps}), "
              f"peak allocated {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
