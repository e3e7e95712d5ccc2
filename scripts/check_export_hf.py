#!/usr/bin/env python3
"""scripts/check_export_hf.py: checks an exported model against flashgpt's own loss.

usage: check_export_hf.py [--train-gpt PATH] [--rtol R] [--device DEV] CHECKPOINT.bin SHARD.bin B T

NEEDS torch and transformers (never a dependency of the project: run it where they are, e.g.
on the GPU machine), numpy, and for the comparison a built train_gpt and a CUDA device.

It exports CHECKPOINT.bin with export_hf.py into a temporary folder, loads that with
transformers' GPT2LMHeadModel (computing in fp32, TF32 off) and prints the mean cross-entropy
of the val loader's first batch of SHARD.bin: data/dataloader.c's sample b is the tokens
[b*T, b*T + T], its first T the inputs and its last T the targets, so the batch is the shard's
first B*T + 1 tokens. SHARD.bin is a token shard: int32 header[256] ([0] 20240520, [1] version
1 (uint16 tokens) or 2 (uint32), [2] token count), then the tokens.

With --train-gpt PATH it also runs
  PATH --init-from CHECKPOINT.bin --train-data SHARD.bin --val-data SHARD.bin -B B -T T
       --steps 1 --lr 1e-30 --val-every 1 --val-batches 1
whose step line ends "val loss X": the same batch through flashgpt, after one update too small
(lr 1e-30) to change any bf16 parameter. It prints both losses and PASS when they agree within
R relative (default 1e-2: train_gpt computes in bf16, 8 bits of mantissa, against fp32 here),
else FAIL; the exit status is 0 only on PASS (or, without --train-gpt, when the loss was computed).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    np = None  # each said once the arguments are read, which need none of them
try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None
try:
    from transformers import GPT2LMHeadModel
except ImportError:
    GPT2LMHeadModel = None

from export_hf import export_hf
from gpt2_checkpoint import Checkpoint
from needed import exit_without
from output_file import Failure, fail

SHARD_MAGIC = 20240520
SHARD_TOKEN_TYPES = {1: "<u2", 2: "<u4"}
VAL_LOSS = re.compile(r"^step .*\| val loss (\S+)\s*$")


def first_batch(path, B, T, vocab):
    """(inputs, targets), each (B, T) int64: the val loader's first batch of the shard."""
    if not os.path.isfile(path):
        fail(f"{path}: no such file")
    size = os.path.getsize(path)
    if size < 1024:
        fail(f"{path}: truncated ({size} bytes, less than the 1024-byte header)")
    header = np.fromfile(path, dtype="<i4", count=256)
    if header[0] != SHARD_MAGIC:
        fail(f"{path}: not a token shard (magic {header[0]}, expected {SHARD_MAGIC})")
    if int(header[1]) not in SHARD_TOKEN_TYPES:
        fail(f"{path}: unsupported shard version {header[1]} (expected 1: uint16 or 2: uint32)")
    token_type = np.dtype(SHARD_TOKEN_TYPES[int(header[1])])
    count = int(header[2])
    if size != 1024 + count * token_type.itemsize:
        fail(f"{path}: {size} bytes, but its header says {count} tokens")
    need = B * T + 1
    if count < need:
        fail(f"{path}: {count} tokens, fewer than the B*T + 1 = {need} of one batch")
    tokens = np.fromfile(path, dtype=token_type, count=need, offset=1024).astype(np.int64)
    if tokens.max() >= vocab:
        fail(f"{path}: token id {tokens.max()} is not below the model's vocabulary of {vocab}")
    rows = np.stack([tokens[b * T:b * T + T + 1] for b in range(B)])
    return rows[:, :-1], rows[:, 1:]


def transformers_loss(hf_dir, inputs, targets, device):
    """Mean cross-entropy of GPT2LMHeadModel from hf_dir on the batch, in fp32."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = GPT2LMHeadModel.from_pretrained(hf_dir, torch_dtype=torch.float32).to(device).eval()
    x = torch.from_numpy(inputs).to(device)
    y = torch.from_numpy(targets).to(device)
    with torch.no_grad():
        logits = model(input_ids=x).logits
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1)).item()


def train_gpt_loss(train_gpt, ckpt, shard, B, T):
    """The val loss train_gpt prints for the same batch, after a step with lr 1e-30."""
    cmd = [train_gpt, "--init-from", ckpt, "--train-data", shard, "--val-data", shard,
           "-B", str(B), "-T", str(T), "--steps", "1", "--lr", "1e-30", "--val-every", "1",
           "--val-batches", "1"]
    print("running: " + " ".join(cmd))
    try:
        result = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        fail(f"{train_gpt}: cannot run ({e.strerror})")
    if result.returncode != 0:
        last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:]
        fail(f"{train_gpt} exited with status {result.returncode}: {' '.join(last)}")
    losses = [m.group(1) for m in map(VAL_LOSS.match, result.stdout.splitlines()) if m]
    if not losses:
        fail(f"{train_gpt} printed no step line with 'val loss'")
    return float(losses[-1])


def main():
    parser = argparse.ArgumentParser(
        description="Exports a flashgpt checkpoint, computes its loss with transformers and "
                    "compares it with train_gpt's val loss on the same batch.")
    parser.add_argument("checkpoint")
    parser.add_argument("shard")
    parser.add_argument("B", type=int)
    parser.add_argument("T", type=int)
    parser.add_argument("--train-gpt", metavar="PATH", help="train_gpt to compare with (e.g. ./train_gpt)")
    parser.add_argument("--rtol", type=float, default=1e-2, help="relative tolerance [1e-2]")
    parser.add_argument("--device", help="torch device [cuda if there is one, else cpu]")
    args = parser.parse_args()
    try:
        if args.B <= 0 or args.T <= 0:
            fail(f"B {args.B} and T {args.T} must be positive")
        exit_without(numpy=np, torch=torch, transformers=GPT2LMHeadModel)
        shape = Checkpoint(args.checkpoint).shape
        if args.T > shape.maxT:
            fail(f"T {args.T} exceeds the model's context {shape.maxT}")
        inputs, targets = first_batch(args.shard, args.B, args.T, shape.V)
        with tempfile.TemporaryDirectory() as tmp:
            hf_dir = os.path.join(tmp, "hf")
            print(export_hf(args.checkpoint, hf_dir, fp32=False))
            device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
            hf_loss = transformers_loss(hf_dir, inputs, targets, device)
        print(f"transformers loss {hf_loss:.6f} (B {args.B}, T {args.T}, {device})")
        if not args.train_gpt:
            return 0
        flash_loss = train_gpt_loss(args.train_gpt, args.checkpoint, args.shard, args.B, args.T)
    except Failure as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    rel = abs(flash_loss - hf_loss) / abs(hf_loss)
    verdict = "PASS" if rel <= args.rtol else "FAIL"
    print(f"train_gpt val loss {flash_loss:.6f}")
    print(f"{verdict}: relative difference {rel:.2e}, tolerance {args.rtol:g}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
