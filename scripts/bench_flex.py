#!/usr/bin/env python3
"""PyTorch's FlexAttention and cuDNN on the masked shapes of bench/bench_attention.cu, for comparison.

flex_attention (torch.nn.attention.flex_attention, compiled) with a block mask from
create_block_mask over the same rule as flashgpt's key window: causal, and documents of N tokens
(a row sees its own document), a window of N keys, or both; and scaled_dot_product_attention on
its cuDNN backend, which takes such a mask only as a dense (T, T) boolean matrix (it skips no
block, and its mask alone is T² bytes: a shape where it fails or runs out of memory says so). bf16, q/k/v (B, NH, T, HS), head
size 64 with NH = 16 and 128 with NH = 8; B = 16384 / T (B = 1 when T > 16K).
FLOPs: forward 4 B NH HS times the (query, key) pairs the mask leaves visible; backward 2.5x the
forward, as bench_attention counts them. Time: as bench_sdpa.py's (its time_attention). Prints a Markdown table in bench_sdpa.py's columns, the mask beside the backend.
Usage: bench_flex.py [HS T MASK]: every masked shape, or the one given; MASK is docs=N, window=N
or docs=N,window=M. A benchmark only: the build and the tests never use it. Needs torch with
CUDA.
"""
import argparse
import re
import sys

from bench_sdpa import HEAD_SIZES, TOKENS_PER_CALL, print_row, time_attention
from needed import exit_without

try:
    import torch
except ImportError:
    torch = None  # said once the arguments are read: --help and their errors need no torch
else:
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

SEQ_LENS = [16384, 65536]
MASKS = [(1024, 0), (0, 1024)]   # (documents of N tokens, window of N keys), 0: none


def parse_mask(text):
    """(docs, window) of docs=N, window=N or docs=N,window=M, each N > 0; None when it is not."""
    m = re.fullmatch(r"(?:docs=(\d+))?(?:(?<=\d),)?(?:window=(\d+))?", text)
    if not m or not (m.group(1) or m.group(2)) or ("," in text) != bool(m.group(1) and m.group(2)):
        return None
    docs, window = int(m.group(1) or 0), int(m.group(2) or 0)
    if (m.group(1) and docs < 1) or (m.group(2) and window < 1):
        return None
    return docs, window


def mask_name(docs, window):
    return ", ".join(part for part in (f"docs {docs}" if docs else "", f"window {window}" if window else "") if part)


def visible_pairs(T, docs, window):
    """The (query, key) pairs a causal row sees under the mask, over one sequence."""
    pairs = 0
    for i in range(T):
        lo = i // docs * docs if docs else 0
        if window:
            lo = max(lo, i - window + 1)
        pairs += i - lo + 1
    return pairs


def bench(flex, B, NH, T, HS, docs, window):
    def mask_mod(b, h, q, k):
        seen = q >= k
        if docs:
            seen = seen & (q // docs == k // docs)
        if window:
            seen = seen & (q - k < window)
        return seen

    block_mask = create_block_mask(mask_mod, B=None, H=None, Q_LEN=T, KV_LEN=T, device="cuda")
    return time_attention(lambda q, k, v: flex(q, k, v, block_mask=block_mask), B, NH, T, HS)


def bench_cudnn(B, NH, T, HS, docs, window):
    t = torch.arange(T, device="cuda")
    q, k = t[:, None], t[None, :]
    seen = q >= k
    if docs:
        seen &= q // docs == k // docs
    if window:
        seen &= q - k < window
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return time_attention(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=seen), B, NH, T, HS)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("HS", nargs="?", type=int, help="the head size of the one shape to run, 64 or 128 [every shape]")
    ap.add_argument("T", nargs="?", type=int, help="its sequence length")
    ap.add_argument("MASK", nargs="?", help="its mask: docs=N, window=N or docs=N,window=M")
    a = ap.parse_args(argv)
    if a.HS is not None and (a.T is None or a.MASK is None or a.HS not in HEAD_SIZES or a.T <= 0):
        ap.error("one shape is HS (64 or 128), T > 0 and MASK")
    only_mask = parse_mask(a.MASK) if a.MASK is not None else None
    if a.MASK is not None and only_mask is None:
        ap.error(f"MASK {a.MASK!r}: docs=N, window=N or docs=N,window=M, each N > 0")
    exit_without(torch=torch)
    if not torch.cuda.is_available():
        print("bench_flex: skipped (no CUDA device)")
        return 0
    flex = torch.compile(flex_attention)
    print(f"torch {torch.__version__} flex_attention and cuDNN, {torch.cuda.get_device_name()}, bf16, causal with a key "
          f"window, {TOKENS_PER_CALL} tokens per call (B = 1 when T > {TOKENS_PER_CALL})\n")
    print("| HS | T | B×NH | backend | fwd ms | fwd TFLOP/s | bwd ms | bwd TFLOP/s |")
    print("|---|---|---|---|---|---|---|---|")
    for HS in ([a.HS] if a.HS else HEAD_SIZES):
        NH = 1024 // HS
        for T in ([a.T] if a.T else SEQ_LENS):
            for docs, window in ([only_mask] if only_mask else MASKS):
                B = max(1, TOKENS_PER_CALL // T)
                fwd_flops = 4 * B * NH * visible_pairs(T, docs, window) * HS
                print_row(HS, T, B, NH, f"flex, {mask_name(docs, window)}", fwd_flops,
                          lambda: bench(flex, B, NH, T, HS, docs, window))
                print_row(HS, T, B, NH, f"cuDNN, {mask_name(docs, window)}", fwd_flops,
                          lambda: bench_cudnn(B, NH, T, HS, docs, window))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
