#!/usr/bin/env python3
"""PyTorch's attention on the shapes of bench/bench_attention.cu, for comparison.

Dense shapes (the default): scaled_dot_product_attention, causal, on its FLASH_ATTENTION
(FlashAttention-2) and CUDNN_ATTENTION backends, T from 512 to 32K. Masked shapes (--masked, or
one shape with its MASK): flex_attention (torch.nn.attention.flex_attention, compiled) with a
block mask from create_block_mask over the rule of flashgpt's key window: causal, and documents
of N tokens (a row sees its own document), a window of N keys, or both; beside it
scaled_dot_product_attention on its cuDNN backend, which takes such a mask only as a dense (T, T)
boolean matrix (it skips no block, and its mask alone is T² bytes: a shape where it fails or runs
out of memory says so); T 16K and 64K, documents of 1024 tokens and a window of 1024 keys.
bf16, q/k/v (B, NH, T, HS), head size 64 with NH = 16 and 128 with NH = 8; B = 16384 / T (B = 1
when T > 16K). FLOPs, as bench_attention counts them: forward 4 B NH HS times the (query, key)
pairs computed, T²/2 for causal and under a mask the pairs it leaves visible; backward 2.5x the
forward. Time: CUDA events around one call, 3 warm-up calls, median of 10. Prints a Markdown
table, the mask beside the backend.
Usage: bench_torch_attention.py [--masked] [HS T [MASK]]: every dense shape (with --masked every
masked one), or the one given (for a profiler, say); MASK is docs=N, window=N or docs=N,window=M.
A benchmark only: the build and the tests never use it. Needs torch with CUDA.
"""
import argparse
import re
import statistics
import sys

from needed import exit_without

try:
    import torch
except ImportError:
    torch = None  # said once the arguments are read: --help and their errors need no torch
else:
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

TOKENS_PER_CALL = 16384
HEAD_SIZES = (64, 128)
SEQ_LENS = [512, 1024, 2048, 4096, 8192, 16384, 32768]
MASKED_SEQ_LENS = [16384, 65536]
MASKS = [(1024, 0), (0, 1024)]   # (documents of N tokens, window of N keys), 0: none
WARMUP, REPS = 3, 10


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


def median_ms(call):
    """Median milliseconds over REPS runs after WARMUP; call(start, stop) records the events
    around the part it times."""
    times = []
    for rep in range(WARMUP + REPS):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        call(start, stop)
        torch.cuda.synchronize()
        if rep >= WARMUP:
            times.append(start.elapsed_time(stop))
    return statistics.median(times)


def time_attention(attend, B, NH, T, HS):
    """Median milliseconds of the forward and of the backward of out = attend(q, k, v), on q, k, v
    (B, NH, T, HS) bf16 uniform in [-1, 1)."""
    q, k, v = ((torch.rand(B, NH, T, HS, device="cuda", dtype=torch.bfloat16) * 2 - 1).requires_grad_()
               for _ in range(3))
    dout = torch.rand(B, NH, T, HS, device="cuda", dtype=torch.bfloat16) * 2 - 1

    def forward(start, stop):
        with torch.no_grad():
            start.record()
            attend(q, k, v)
            stop.record()

    def backward(start, stop):
        out = attend(q, k, v)
        start.record()
        torch.autograd.grad(out, (q, k, v), dout)
        stop.record()

    return median_ms(forward), median_ms(backward)


def print_row(HS, T, B, NH, name, fwd_flops, run):
    """One row of the table: run() gives the forward and backward milliseconds; a backend that
    refuses the shape or runs out of memory (a RuntimeError) gets the first line of its error."""
    try:
        fwd, bwd = run()
        print(f"| {HS} | {T} | {B}×{NH} | {name} | {fwd:.3f} | {fwd_flops / fwd * 1e-9:.1f} | "
              f"{bwd:.3f} | {2.5 * fwd_flops / bwd * 1e-9:.1f} |", flush=True)
    except RuntimeError as e:
        reason = str(e).strip().splitlines()[0][:80] if str(e).strip() else type(e).__name__
        print(f"| {HS} | {T} | {B}×{NH} | {name} | failed: {reason} | | | |", flush=True)
    torch.cuda.empty_cache()


def time_causal_sdpa(backend, B, NH, T, HS):
    with sdpa_kernel(backend):
        return time_attention(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), B, NH, T, HS)


def time_flex(flex, B, NH, T, HS, docs, window):
    def mask_mod(b, h, q, k):
        seen = q >= k
        if docs:
            seen = seen & (q // docs == k // docs)
        if window:
            seen = seen & (q - k < window)
        return seen

    block_mask = create_block_mask(mask_mod, B=None, H=None, Q_LEN=T, KV_LEN=T, device="cuda")
    return time_attention(lambda q, k, v: flex(q, k, v, block_mask=block_mask), B, NH, T, HS)


def time_masked_cudnn(B, NH, T, HS, docs, window):
    t = torch.arange(T, device="cuda")
    q, k = t[:, None], t[None, :]
    seen = q >= k
    if docs:
        seen &= q // docs == k // docs
    if window:
        seen &= q - k < window
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return time_attention(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=seen), B, NH, T, HS)


def dense_rows(HS, T):
    B, NH = max(1, TOKENS_PER_CALL // T), 1024 // HS
    fwd_flops = 4 * B * NH * T * T * HS * 0.5
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        print_row(HS, T, B, NH, name, fwd_flops, lambda: time_causal_sdpa(backend, B, NH, T, HS))


def masked_rows(flex, HS, T, docs, window):
    B, NH = max(1, TOKENS_PER_CALL // T), 1024 // HS
    fwd_flops = 4 * B * NH * visible_pairs(T, docs, window) * HS
    print_row(HS, T, B, NH, f"flex, {mask_name(docs, window)}", fwd_flops,
              lambda: time_flex(flex, B, NH, T, HS, docs, window))
    print_row(HS, T, B, NH, f"cuDNN, {mask_name(docs, window)}", fwd_flops,
              lambda: time_masked_cudnn(B, NH, T, HS, docs, window))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--masked", action="store_true", help="every masked shape instead of every dense one")
    ap.add_argument("HS", nargs="?", type=int, help="the head size of the one shape to run, 64 or 128 [every shape]")
    ap.add_argument("T", nargs="?", type=int, help="its sequence length")
    ap.add_argument("MASK", nargs="?", help="its mask, for a masked shape: docs=N, window=N or docs=N,window=M")
    a = ap.parse_args(argv)
    if a.HS is not None and (a.T is None or a.HS not in HEAD_SIZES or a.T <= 0):
        ap.error("one shape is HS (64 or 128) and T > 0, and a masked one its MASK")
    if a.masked and a.HS is not None:
        ap.error("--masked runs every masked shape; one masked shape is HS T MASK")
    only_mask = parse_mask(a.MASK) if a.MASK is not None else None
    if a.MASK is not None and only_mask is None:
        ap.error(f"MASK {a.MASK!r}: docs=N, window=N or docs=N,window=M, each N > 0")
    masked = a.masked or only_mask is not None
    exit_without(torch=torch)
    if not torch.cuda.is_available():
        print("bench_torch_attention: skipped (no CUDA device)")
        return 0
    if masked:
        flex = torch.compile(flex_attention)
        print(f"torch {torch.__version__} flex_attention and cuDNN, {torch.cuda.get_device_name()}, bf16, causal with "
              f"a key window, {TOKENS_PER_CALL} tokens per call (B = 1 when T > {TOKENS_PER_CALL})\n")
    else:
        print(f"torch {torch.__version__} scaled_dot_product_attention, {torch.cuda.get_device_name()}, bf16, causal, "
              f"{TOKENS_PER_CALL} tokens per call (B = 1 when T > {TOKENS_PER_CALL})\n")
    print("| HS | T | B×NH | backend | fwd ms | fwd TFLOP/s | bwd ms | bwd TFLOP/s |")
    print("|---|---|---|---|---|---|---|---|")
    for HS in ([a.HS] if a.HS else HEAD_SIZES):
        for T in ([a.T] if a.T else MASKED_SEQ_LENS if masked else SEQ_LENS):
            if not masked:
                dense_rows(HS, T)
                continue
            for docs, window in ([only_mask] if only_mask else MASKS):
                masked_rows(flex, HS, T, docs, window)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
