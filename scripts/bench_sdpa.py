#!/usr/bin/env python3
"""PyTorch scaled_dot_product_attention on the shapes of bench/bench_attention.cu, for comparison.

Backends FLASH_ATTENTION (FlashAttention-2) and CUDNN_ATTENTION, bf16, causal, q/k/v (B, NH, T, HS).
Head size 64 with NH = 16 and 128 with NH = 8; B = 16384 / T (B = 1 when T > 16K).
FLOPs: forward 4 B NH T^2 HS, halved for causal; backward 2.5x the forward.
Time: CUDA events around one call, 3 warm-up calls, median of 10. Prints a Markdown table.
Usage: bench_sdpa.py [HS T]: every shape, or the one given (for a profiler, say).
A benchmark only: the build and the tests never use it. Needs torch with CUDA.
"""
import argparse
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

TOKENS_PER_CALL = 16384
SEQ_LENS = [512, 1024, 2048, 4096, 8192, 16384, 32768]
HEAD_SIZES = (64, 128)
WARMUP, REPS = 3, 10


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
    (B, NH, T, HS) bf16 uniform in [-1, 1) (scripts/bench_flex.py times its attention by it too)."""
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


def bench(backend, B, NH, T, HS):
    with sdpa_kernel(backend):
        return time_attention(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), B, NH, T, HS)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("HS", nargs="?", type=int, help="the head size of the one shape to run, 64 or 128 [every shape]")
    ap.add_argument("T", nargs="?", type=int, help="its sequence length")
    a = ap.parse_args(argv)
    if a.T is None and a.HS is not None or a.T is not None and (a.HS not in HEAD_SIZES or a.T <= 0):
        ap.error("one shape is HS (64 or 128) and T > 0")
    only = [a.HS, a.T] if a.T else None
    exit_without(torch=torch)
    if not torch.cuda.is_available():
        print("bench_sdpa: skipped (no CUDA device)")
        return 0
    print(f"torch {torch.__version__} scaled_dot_product_attention, {torch.cuda.get_device_name()}, "
          f"bf16, causal, {TOKENS_PER_CALL} tokens per call (B = 1 when T > {TOKENS_PER_CALL})\n")
    print("| HS | T | B×NH | backend | fwd ms | fwd TFLOP/s | bwd ms | bwd TFLOP/s |")
    print("|---|---|---|---|---|---|---|---|")
    for HS in HEAD_SIZES:
        NH = 1024 // HS
        for T in ([only[1]] if only else SEQ_LENS):
            if only and HS != only[0]:
                continue
            B = max(1, TOKENS_PER_CALL // T)
            fwd_flops = 4 * B * NH * T * T * HS * 0.5
            for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                print_row(HS, T, B, NH, name, fwd_flops, lambda: bench(backend, B, NH, T, HS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
