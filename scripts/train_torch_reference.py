#!/usr/bin/env python3
"""scripts/train_torch_reference.py: the PyTorch reference of the training-parity benchmark (a
benchmark only; nothing in the build uses it). It trains the GPT-2 of train_gpt on train_gpt's
token shards with train_gpt's hyperparameters and writes train_gpt's CSV log, so that the two
validation curves can be laid side by side (scripts/gpu/parity.sh, scripts/compare_curves.py).

What it shares with train_gpt, by construction:
- the model and its init (scripts/torch_gpt2.py), of train_gpt's architecture options (--arch
  gpt2|modern|2026, 2026's key windows following --context, then each component and
  --window-pattern: scripts/gpt_architecture.py; documents it does not compute) and --head-size:
  drawn from
  --seed by PyTorch's generator by the table's init or nanochat's (--init), or, with --init-from, train_gpt's own initial weights (`train_gpt
  --save-init FILE`, the same seed and model), so that both sides start from the same draws;
  the architecture is then the checkpoint's, and options that ask for another are refused;
- the data: train_gpt's batches in train_gpt's order for --seed (scripts/shard_batches.py:
  data/dataloader.c's samples and its shuffle of every epoch, one rank), with --align-documents
  its rows aligned to documents at --tokenizer's <|endoftext|>; the vocabulary --tokenizer's,
  else the shards'; validation on the first --val-batches batches of the val shards, in order,
  every --val-every steps and at the last;
- the optimizer (--optimizer, scripts/torch_optimizers.py, each tensor as the parameter table
  says): AdamW (b1 0.9, b2 0.95, eps 1e-8), weight decay on the 2-D weights only; or Muon for
  the blocks' matrices with AdamW for wte and wpe (--embedding-lr), an untied head (--head-lr)
  and the vectors (--vector-lr), the embeddings and the head at betas of their own where given
  (--embedding-beta1 and the others, else --adam-beta1 and 2), and Muon's variants (--muon-qkv, --muon-ns,
  --cautious-weight-decay, --normuon, --normuon-beta2: off unless given or the preset's, as
  train_gpt's); --optimizer and each setting not given take train_gpt's default for the optimizer
  and the preset of --arch, else the one nearest the architecture (the modern preset's AdamW lr
  2e-3 and Muon wte at 0.05; 2026's Muon, head pairs, NorMuon, weight decay 0.1 and schedule), and
  each is bounded as train_gpt bounds it; the global gradient norm clipped to --grad-clip; the
  rates of each step by train_gpt's schedule and its options, each not given the preset's
  (scripts/gpt_schedule.py: a warmup, then a cosine or a warm-down to lr * --min-lr-frac, every
  group's lr alike; Muon's momentum warm-up and cool-down; a constant or linear weight decay);
- the loss: mean cross-entropy over the real vocabulary.
The numerics are PyTorch's usual mixed precision: fp32 weights, residual stream, norms and
gradients, bf16 autocast for the matmuls and attention. --emulate (residual, residual-grad) rounds
the residual stream or its gradient to bf16 as a bf16 stream does: for ablations.

  python3 scripts/train_torch_reference.py --model d6 -B 32 -T 512 --lr 1e-3 --warmup-steps 49 \\
      --train-data 'datasets/x/train_*.bin' --log runs/ref/log.csv
  python3 scripts/train_torch_reference.py --arch modern --optimizer muon --model d6 -B 32 -T 512 \\
      --init-from runs/init-s1.bin --train-data 'datasets/x/train_*.bin' --log runs/ref/modern.csv
"""
import argparse
import contextlib
import glob
import math
import os
import sys
import time

try:
    import numpy as np
except ImportError:
    np = None  # said once the arguments are read, which need none

import gpt_architecture
import gpt_schedule
from gpt2_checkpoint import Checkpoint, Shape, from_bf16_bits
from needed import exit_without
from output_file import Failure, atomic_output, check_output
from shard_batches import Batches, open_stream, read_tokenizer
from gpt_parameters import MODEL_PRESETS, MUON_QKV, muon_qkv_unfit
from torch_optimizers import (GROUP_BETAS, NORMUON_BETA2_DEFAULT, NS_COEFFICIENTS, SETTINGS, VARIANTS, Muon, adamw,
                              defaults, group_betas, invalid, set_adamw_rates, variant_defaults)

try:
    import torch
except ImportError:
    torch = None  # said once the arguments and the log are checked, which need no torch
else:
    from torch_gpt2 import EMULATIONS, GPT


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train-data", required=True, help="shard glob")
    ap.add_argument("--val-data", help="shard glob [the train glob with val_ for train_ in the file name]")
    ap.add_argument("--model", default="d12", help=f"a preset of gpt/config.h: {', '.join(MODEL_PRESETS)} [d12]")
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--head-size", type=int, choices=(64, 128),
                    help="the heads' size, the channels unchanged: C / HS heads [the preset's: 64]")
    ap.add_argument("--init", choices=("default", "nanochat"),
                    help="PyTorch's draws by the table's init or nanochat's (train_gpt's --init) [default]")
    ap.add_argument("--init-from", metavar="FILE",
                    help="start from this model checkpoint of the run's model (train_gpt --save-init writes "
                         "the initial one of a seed) [PyTorch's draws from --seed]")
    ap.add_argument("--tokenizer", metavar="FILE",
                    help="the shards' tokenizer: the vocabulary, and the <|endoftext|> of --align-documents "
                         "[the vocabulary from the shards' header]")
    ap.add_argument("--align-documents", action="store_true",
                    help="each training row starts at a document's <|endoftext|> (whose id --tokenizer gives) and "
                         "runs on into the next documents, as train_gpt's")
    ap.add_argument("-B", type=int, default=4)
    ap.add_argument("-T", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=0, help="optimizer steps [0: one epoch]")
    gpt_architecture.add_options(ap)
    ap.add_argument("--optimizer", choices=["adamw", "muon"], help="[adamw; 2026 muon]")
    ap.add_argument("--lr", type=float,
                    help="peak: AdamW's, or Muon's for the matrices [adamw 3e-4 (modern and 2026 2e-3), muon 0.02]")
    gpt_schedule.add_options(ap)
    ap.add_argument("--weight-decay", type=float, help="[adamw 0.1, muon 0 (2026 0.1)]")
    ap.add_argument("--muon-momentum", type=float, help="muon: the matrices' Nesterov momentum [0.95]")
    ap.add_argument("--embedding-lr", type=float,
                    help="muon: AdamW's peak for wte (the head when tied) and wpe [0.001; modern and 2026 0.05]")
    ap.add_argument("--head-lr", type=float, help="muon: AdamW's peak for an untied head [0.002]")
    ap.add_argument("--vector-lr", type=float, help="muon: AdamW's peak for the vectors [0.002]")
    ap.add_argument("--adam-beta1", type=float, help="muon: the betas of that AdamW [0.8]")
    ap.add_argument("--adam-beta2", type=float, help="[0.95]")
    ap.add_argument("--embedding-beta1", type=float, help="muon: that AdamW's betas for the embeddings [--adam-beta1]")
    ap.add_argument("--embedding-beta2", type=float, help="[--adam-beta2]")
    ap.add_argument("--head-beta1", type=float, help="muon: its betas for an untied head [--adam-beta1]")
    ap.add_argument("--head-beta2", type=float, help="[--adam-beta2]")
    ap.add_argument("--muon-qkv", choices=MUON_QKV,
                    help="muon: qkvw as one (3C, C) matrix a layer, as q, k and v, or as their head pairs "
                         "[fused; 2026 head-pairs]")
    ap.add_argument("--muon-ns", choices=tuple(NS_COEFFICIENTS),
                    help="muon: the Newton-Schulz coefficients, the quintic's or Polar Express's [quintic]")
    ap.add_argument("--cautious-weight-decay", action="store_true", default=None,
                    help="muon: decay each matrix weight only where its update has its sign")
    ap.add_argument("--normuon", nargs="?", const=1, type=int, choices=(0, 1),
                    help="muon: NorMuon, each update's rows evened out by a second moment of each; --normuon "
                         "alone is 1 [0; 2026 1]")
    ap.add_argument("--normuon-beta2", type=float, help="its beta, in [0, 1) [0.95]")
    ap.add_argument("--grad-clip", type=float, help="the global gradient norm's bound; 0: none [1]")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--val-every", type=int, default=100)
    ap.add_argument("--val-batches", type=int, default=20)
    ap.add_argument("--compile", action="store_true", help="the model under torch.compile")
    ap.add_argument("--emulate", default="", help="comma-separated: residual, residual-grad")
    ap.add_argument("--log", help="CSV log in train_gpt's columns (written through a temporary, in place at the end)")
    a = ap.parse_args(argv)
    if a.init and a.init_from:
        ap.error("--init draws the initial model, which --init-from reads from its checkpoint: it has no effect")
    if a.align_documents and not a.tokenizer:
        ap.error("--align-documents: a row starts at <|endoftext|>, whose id comes from --tokenizer: give it")
    if a.T > a.context:
        ap.error(f"-T {a.T} is longer than the model's context {a.context} (--context)")
    for flag, value, least in (("-B", a.B, 1), ("-T", a.T, 1), ("--val-batches", a.val_batches, 1),
                               ("--steps", a.steps, 0), ("--val-every", a.val_every, 0),
                               ("--warmup-steps", a.warmup_steps, 0)):
        if value < least:
            ap.error(f"{flag} {value} must be >= {least}")
    # train_gpt's bound: a seed is 64 bits, unsigned (the schedule's bounds: gpt_schedule's, once the
    # preset whose defaults it takes is known: settle_architecture).
    if not 0 <= a.seed < 2 ** 64:
        ap.error(f"--seed {a.seed} must be 0 to 2^64 - 1")
    if a.val_data is None:
        head, tail = os.path.split(a.train_data)
        a.val_data = os.path.join(head, tail.replace("train_", "val_", 1)) if "train_" in tail else ""
    return ap, a


def settle_architecture(ap, a, init):
    """a.arch: the architecture of the options, from init's (a Checkpoint, or None) without --arch,
    its windows checked against --model's layers and --context; then the optimizer and every
    setting not given, by train_gpt's defaults for them (gpt/optimizer.h's preset_optimizer and
    preset_optimizer_defaults, taken by resolve_optimizer in train/plan.cu), the settings checked as
    train_gpt checks them, and the schedule (a.schedule, each setting not given the preset's:
    resolve_schedule's): a bad option is argparse's error, an architecture other than init's a
    Failure naming its file."""
    L, C, NH = model_shape(ap, a)
    shape = init.shape if init else Shape(maxT=a.context, V=0, L=L, NH=NH, C=C)
    try:
        a.arch, preset = gpt_architecture.from_options(a, init, shape)
    except ValueError as e:
        ap.error(str(e))
    if init and gpt_architecture.as_stored(a.arch) != init.arch:
        raise Failure(f"{init.path}: the architecture asked for ({gpt_architecture.describe(a.arch, shape)}) is not "
                      f"the checkpoint's ({gpt_architecture.describe(init.arch, shape)})")
    if init:
        a.arch = init.arch  # the file's floats, not the options' doubles
    if a.arch.documents:
        raise Failure(f"{init.path}: the model's attention sees a row's own document alone, the reference's every "
                      "earlier key (or its window's)")
    a.optimizer = a.optimizer or gpt_architecture.PRESET_DEFAULTS[preset].optimizer
    given = {setting.key for setting in SETTINGS if getattr(a, setting.key) is not None}
    for setting in SETTINGS:
        if setting.key in given and setting.use != "every run" and a.optimizer != "muon":
            ap.error(f"{setting.flag} is a setting of --optimizer muon")
        if setting.key in given and setting.use == "muon untied head" and not a.arch.untied_head:
            ap.error(f"{setting.flag}: the model's head is wte (--head tied), at --embedding-lr")
    preset_defaults = defaults(a.optimizer, preset)
    for key, value in preset_defaults.items():
        if key not in given:
            setattr(a, key, value)
    # A group's beta not given follows the vectors' as given (train/plan.cu's resolve_optimizer).
    for key, followed in GROUP_BETAS.items():
        if key in preset_defaults and key not in given and preset_defaults[key] == preset_defaults[followed]:
            setattr(a, key, getattr(a, followed))
    # Muon's variants: each given under Muon alone, else the preset's (off under AdamW); NorMuon's
    # beta given with NorMuon alone, its default where NorMuon is on (train/plan.cu's
    # resolve_muon_variants).
    variants = variant_defaults(a.optimizer, preset)
    for flag, key, _ in VARIANTS:
        if getattr(a, key) is None:
            setattr(a, key, variants[key])
        elif a.optimizer != "muon":
            ap.error(f"{flag} is a setting of --optimizer muon")
    a.normuon = bool(a.normuon)
    if a.normuon_beta2 is None:
        a.normuon_beta2 = NORMUON_BETA2_DEFAULT if a.normuon else 0.0
    elif a.optimizer != "muon":
        ap.error("--normuon-beta2 is a setting of --optimizer muon")
    elif not a.normuon:
        ap.error("--normuon-beta2 without --normuon has no effect")
    why = invalid(a.optimizer, a, a.arch.untied_head)
    if why:
        ap.error(why)
    try:
        a.schedule = gpt_schedule.from_options(a, a.optimizer == "muon", preset)
    except ValueError as e:
        ap.error(str(e))
    if a.schedule.decay_shape == "linear" and a.weight_decay == 0.0:
        ap.error("--weight-decay-schedule linear without --weight-decay has no effect")


def main(argv):
    ap, a = parse_args(argv)
    exit_without(numpy=np)
    # The log may name no input (a shard, the checkpoint), and its folder must take it: known
    # before anything loads; then the checkpoint's header and values and the architecture, which
    # need no torch.
    inputs = glob.glob(a.train_data) + (glob.glob(a.val_data) if a.val_data else [])
    inputs += [a.init_from] if a.init_from else []
    inputs += [a.tokenizer] if a.tokenizer else []
    if a.log:
        check_output(a.log, inputs)
    a.vocab, a.document_token = read_tokenizer(a.tokenizer) if a.tokenizer else (0, None)
    init = Checkpoint(a.init_from) if a.init_from else None
    settle_architecture(ap, a, init)
    exit_without(torch=torch)
    L, C, NH = model_shape(ap, a)
    why = muon_qkv_unfit(a.muon_qkv, NH) if a.optimizer == "muon" else None
    if why:
        ap.error(why)
    unknown = set(filter(None, a.emulate.split(","))) - set(EMULATIONS)
    if unknown:
        ap.error(f"--emulate {a.emulate}: unknown {', '.join(sorted(unknown))}")
    if not torch.cuda.is_available():
        raise Failure("no CUDA device")
    with atomic_output(a.log, inputs, binary=False) if a.log else contextlib.nullcontext() as log:
        run(a, init, log, (L, C, NH))


def model_shape(ap, a):
    """(L, C, NH) of --model, its heads of --head-size where given (argparse's error for a model
    that is no preset, or whose C is not a multiple of it, as train_gpt's)."""
    if a.model not in MODEL_PRESETS:
        ap.error(f"--model {a.model}: not a preset ({', '.join(MODEL_PRESETS)})")
    L, C, NH = MODEL_PRESETS[a.model]
    if a.head_size:
        if C % a.head_size:
            ap.error(f"--head-size {a.head_size}: --model {a.model}'s {C} channels are not a multiple of it")
        NH = C // a.head_size
    return L, C, NH


def load_init(model, init, shape):
    """The model's parameters (fp32) set to the values of the checkpoint init (a Checkpoint),
    which must be of the model's shape (its architecture is: settle_architecture)."""
    if init.shape != shape:
        raise Failure(f"{init.path}: the checkpoint's model is {init.shape}, this run's {shape} "
                      "(--model, --context and the shards' vocabulary)")
    slices = ((sl, from_bf16_bits(v) if init.bf16 else np.array(v, dtype=np.float32)) for sl, v in init.slices())
    try:
        model.load_checkpoint(slices)
    except ValueError as e:
        raise Failure(f"{init.path}: {e}")


def to_device(rows, device):
    """A batch's rows (B, T+1) as the inputs and targets (B, T) on device."""
    rows = torch.from_numpy(rows).to(device, non_blocking=True)
    return rows[:, :-1], rows[:, 1:]


def run(a, init, log, shape):
    """The run the arguments a describe, of the model shape (L, C, NH), from the checkpoint init (a
    Checkpoint) or None; each step's line goes to stdout and to log (a file, or None) in
    train_gpt's columns."""
    dev = "cuda"
    torch.manual_seed(a.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    train_stream, V = open_stream(a.train_data)
    val_stream = open_stream(a.val_data)[0] if a.val_data and glob.glob(a.val_data) else None
    V = a.vocab or V or int(train_stream.max()) + 1
    train = Batches(train_stream, a.B, a.T, True, a.seed, a.document_token if a.align_documents else None)
    val = Batches(val_stream, a.B, a.T, False, 0) if val_stream is not None and a.val_every > 0 else None
    val_batches = min(a.val_batches, val.per_epoch) if val else 0
    steps = a.steps or train.per_epoch
    L, C, NH = shape
    model = GPT(L, C, NH, V, a.context, a.emulate.split(","), a.arch, a.init or "default").to(dev)
    if init:
        load_init(model, init, Shape(maxT=a.context, V=V, L=L, NH=NH, C=C))
    opt = Muon(model, a) if a.optimizer == "muon" else adamw(model, a)
    step_fn = torch.compile(model) if a.compile else model
    settings = f"{a.optimizer} lr {a.lr:g}, weight decay {a.weight_decay:g}"
    if a.optimizer == "muon":
        settings += (f", momentum {a.muon_momentum:g}, qkvw {a.muon_qkv}, {a.muon_ns}" +
                     (", cautious weight decay" if a.cautious_weight_decay else "") +
                     (f", NorMuon beta2 {a.normuon_beta2:g}" if a.normuon else "") +
                     f", Adam ({a.adam_beta1:g}, {a.adam_beta2:g}) at {a.embedding_lr:g} for the embeddings "
                     "(betas {:g}, {:g}), ".format(*group_betas(a, "embedding")) +
                     ("{:g} for the head (betas {:g}, {:g}), ".format(a.head_lr, *group_betas(a, "head"))
                      if a.arch.untied_head else "") + f"{a.vector_lr:g} for the vectors")
    aligned = f" aligned to documents (<|endoftext|> = {a.document_token})" if a.align_documents else ""
    print(f"torch {torch.__version__} reference: {a.model} (L {L} C {C} NH {NH} V {V}), architecture "
          f"{gpt_architecture.describe(a.arch, Shape(maxT=a.context, V=V, L=L, NH=NH, C=C))}, B {a.B} T {a.T}{aligned}, {steps} steps, {settings}, seed {a.seed}, "
          f"emulate '{a.emulate}', init {a.init_from or 'drawn by PyTorch, ' + (a.init or 'default')}", flush=True)
    if log:
        log.write("step,loss,val_loss,lr,grad_norm,ms,tokens_per_s,mfu,mem_gib\n")

    def validation_loss():
        model.eval()
        val.reset()
        total = 0.0
        with torch.no_grad(), torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            for _ in range(val_batches):
                x, y = to_device(val.next(), dev)
                total += step_fn(x, y).item()
        model.train()
        return total / val_batches

    train_seconds = 0.0
    for step in range(1, steps + 1):
        rates = gpt_schedule.step_rates(a.schedule, a, step, steps)
        lr = rates.lr["matrix"]
        if a.optimizer == "adamw":
            set_adamw_rates(opt, rates)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        x, y = to_device(train.next(), dev)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = step_fn(x, y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip if a.grad_clip > 0 else float("inf"))
        if a.optimizer == "muon":
            opt.step(rates)
        else:
            opt.step()
        opt.zero_grad(set_to_none=True)
        loss, norm = loss.item(), norm.item()
        seconds = time.perf_counter() - t0
        train_seconds += seconds
        if not math.isfinite(loss):
            raise Failure(f"the loss is {loss} at step {step}: training diverged")
        val_loss = validation_loss() if val and (step % a.val_every == 0 or step == steps) else None
        line = f"step {step:5d}/{steps} | loss {loss:.6f} | lr {lr:.3e} | norm {norm:.4f} | {seconds * 1e3:7.1f} ms"
        print(line + (f" | val loss {val_loss:.6f}" if val_loss is not None else ""), flush=True)
        if log:
            mem = torch.cuda.max_memory_allocated() / 2**30
            log.write(f"{step},{loss:.9g},{'' if val_loss is None else f'{val_loss:.9g}'},{lr:.9g},{norm:.9g},"
                      f"{seconds * 1e3:.3f},{a.B * a.T / seconds:.1f},0,{mem:.3f}\n")
            log.flush()
    print(f"done: {a.B * a.T * steps / train_seconds / 1e3:.1f}K tokens/s over the training steps, "
          f"peak allocated {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except Failure as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
