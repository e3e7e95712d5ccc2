#!/usr/bin/env python3
"""scripts/bench_torch_decode.py: the PyTorch baseline for generate's speed (a benchmark only;
nothing in the build uses it).

A plain decoding loop: train_gpt's GPT-2 (scripts/torch_gpt2.py's modules and init, random
weights, cast to bf16), a random prompt of --prompt tokens for each of the -B sequences through
one eager forward that fills a preallocated KV cache, then greedy decoding, one new token per
sequence a step, the step under torch.compile(mode="reduce-overhead", fullgraph=True) so that it
replays as one CUDA graph (--no-compile: the same step eager).

A CUDA graph replays fixed shapes and addresses, so the step's are: each layer's K and V caches
are (B, NH, S, HS) for S = prompt + warm-up + new tokens rounded up to 16, the position is a
1-element CUDA tensor, and the step writes its K and V at that position (index_copy_), writes
the next token into its token tensor and advances the position, all in place. The query attends
to all S cached keys through F.scaled_dot_product_attention, the keys after the position masked:
every step pays for the whole cache, wherever the position is.

Prints one Markdown row: model, B, prompt, new tokens, compiled, tokens/s over the batch
(B * new tokens / seconds of the timed steps), ms per step, and the peak memory PyTorch
allocated over the run (prefill included; GiB = 2^30 bytes). The time is the wall clock between
two torch.cuda.synchronize() around the timed steps, the CPU's launches included as they are in
generate's. --header prints a title line and the table's header first.

  python3 scripts/bench_torch_decode.py --header
  python3 scripts/bench_torch_decode.py --prompt 1000 -B 8
  python3 scripts/bench_torch_decode.py --prompt 16384 -B 32 --no-compile
"""
import argparse
import sys
import time

from gpt_parameters import MODEL_PRESETS
from needed import exit_without

try:
    import torch
except ImportError:
    torch = None  # said once the arguments are read: --help and their errors need no torch
else:
    import torch.nn.functional as F
    from torch_gpt2 import GPT

MAX_CONTEXT = MAX_VOCAB = 1 << 24  # gpt/config.h's GPT_MAX_CONTEXT and GPT_MAX_VOCAB
# The cache's length, a multiple of it: the mask's rows stay aligned as SDPA's memory-efficient
# kernel wants them (gpt-fast and Hugging Face's static cache round it the same way).
CACHE_ALIGN = 16


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser with its errors in one line, no usage before them."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_args(argv):
    """(the parser, the arguments); every check but --model's, which needs torch_gpt2."""
    ap = ArgumentParser(description=__doc__.split("\n\n")[0],
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="d12", help="a preset of gpt/config.h [d12]")
    ap.add_argument("--vocab", type=int, default=8192,
                    help="vocabulary, padded to a multiple of 128 as train_gpt pads it [8192]")
    ap.add_argument("-B", "--batch", type=int, default=1, help="sequences decoded together [1]")
    ap.add_argument("--prompt", type=int, default=1, help="prompt tokens of each sequence [1]")
    ap.add_argument("--tokens", type=int, default=256, help="new tokens of each sequence, timed [256]")
    ap.add_argument("--warmup", type=int, default=3,
                    help="untimed steps before them; compiled, the first compiles and the second "
                         "records the CUDA graph [3]")
    ap.add_argument("--seed", type=int, default=0, help="of the weights and the prompts [0]")
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="the step eager")
    ap.add_argument("--header", action="store_true", help="print the title and the table's header first")
    a = ap.parse_args(argv)
    for flag, value, least, most in (("--vocab", a.vocab, 1, MAX_VOCAB), ("-B", a.batch, 1, None),
                                     ("--prompt", a.prompt, 1, None), ("--tokens", a.tokens, 1, None),
                                     ("--warmup", a.warmup, 0, None)):
        if value < least or (most is not None and value > most):
            ap.error(f"{flag} {value}: must be " + (f"from {least} to {most}" if most else f"at least {least}"))
    if a.prompt + a.warmup + a.tokens > MAX_CONTEXT:
        ap.error(f"--prompt {a.prompt} + --warmup {a.warmup} + --tokens {a.tokens} positions: more "
                 "than the longest context, 2^24 (gpt/config.h)")
    return ap, a


def attention_heads(block, x):
    """The block's q, k, v for its input x (B, T, C), each (B, NH, T, HS)."""
    B, T, C = x.shape
    q, k, v = block.qkv(block.ln1(x)).split(C, dim=2)
    return [t.view(B, T, block.NH, C // block.NH).transpose(1, 2) for t in (q, k, v)]


def block_rest(block, x, y):
    """The block's output from its input x (B, T, C) and its attention's output y (B, NH, T, HS)."""
    B, T, C = x.shape
    x = x + block.attproj(y.transpose(1, 2).reshape(B, T, C))
    return x + block.fcproj(F.gelu(block.fc(block.ln2(x)), approximate="tanh"))


def greedy(model, x):
    """The most likely next token (B, 1) after the last position of x (B, T, C), among the real
    vocabulary (the padded logits left out)."""
    logits = model.lnf(x[:, -1:]) @ model.wte.weight.t()  # the tied output projection
    return logits[..., :model.V].argmax(-1)


def prefill(model, cache, prompt):
    """The prompt (B, T) through the model, its keys and values into the first T positions of
    the cache; returns the first new token (B, 1)."""
    T = prompt.shape[1]
    x = model.wte(prompt) + model.wpe(torch.arange(T, device=prompt.device))
    for block, (k_cache, v_cache) in zip(model.blocks, cache):
        q, k, v = attention_heads(block, x)
        k_cache[:, :, :T] = k
        v_cache[:, :, :T] = v
        x = block_rest(block, x, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    return greedy(model, x)


def decode_step(model, cache, token, pos):
    """One new token per sequence: token (B, 1) at position pos (a 1-element tensor) through the
    model, its keys and values into the cache at pos; then token holds the next token and pos is
    one more. Nothing's shape depends on pos, so the step captures as one CUDA graph."""
    x = model.wte(token) + model.wpe(pos)  # (B, 1, C)
    S = cache[0][0].shape[2]
    mask = (torch.arange(S, device=pos.device) <= pos).view(1, 1, 1, S)  # True: a key to attend to
    for block, (k_cache, v_cache) in zip(model.blocks, cache):
        q, k, v = attention_heads(block, x)
        k_cache.index_copy_(2, pos, k)
        v_cache.index_copy_(2, pos, v)
        x = block_rest(block, x, F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask))
    token.copy_(greedy(model, x))
    pos.add_(1)


def main(argv):
    ap, a = parse_args(argv)
    exit_without(torch=torch)
    if a.model not in MODEL_PRESETS:
        ap.error(f"--model {a.model}: not a preset ({', '.join(MODEL_PRESETS)})")
    if not torch.cuda.is_available():
        sys.exit("error: no CUDA device")
    L, C, NH = MODEL_PRESETS[a.model]
    S = -(-(a.prompt + a.warmup + a.tokens) // CACHE_ALIGN) * CACHE_ALIGN
    dev = "cuda"
    torch.manual_seed(a.seed)
    model = GPT(L, C, NH, a.vocab, S).to(dev).to(torch.bfloat16).eval()
    cache = [tuple(torch.zeros(a.batch, NH, S, C // NH, device=dev, dtype=torch.bfloat16) for _ in range(2))
             for _ in range(L)]
    token = torch.zeros(a.batch, 1, dtype=torch.long, device=dev)
    pos = torch.tensor([a.prompt], dtype=torch.long, device=dev)
    if a.compile:
        # Fixed addresses: the graph writes into these tensors in place (a mutated input that is
        # not static would make inductor skip the CUDA graph), and nothing is copied in per replay.
        for t in [token, pos] + [t for kv in cache for t in kv]:
            torch._dynamo.mark_static_address(t)
    step = torch.compile(decode_step, mode="reduce-overhead", fullgraph=True) if a.compile else decode_step
    if a.header:
        print(f"torch {torch.__version__} decoding, {torch.cuda.get_device_name()}: bf16 weights, greedy, "
              f"static KV cache of prompt + {a.warmup} warm-up + new tokens (rounded up to {CACHE_ALIGN}); "
              "peak: PyTorch's allocated memory, prefill included\n")
        print("| model | B | prompt | new tokens | compiled | tokens/s | ms per step | peak GiB |")
        print("|---|---|---|---|---|---|---|---|", flush=True)

    def run(steps):
        for _ in range(steps):
            # A new generation of the CUDA graphs' memory each step: no output of the last is kept.
            torch.compiler.cudagraph_mark_step_begin()
            step(model, cache, token, pos)

    with torch.no_grad():
        token.copy_(prefill(model, cache, torch.randint(0, a.vocab, (a.batch, a.prompt), device=dev)))
        run(a.warmup)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        run(a.tokens)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    # What the in-place writes rely on: inductor kept the CUDA graph (it warns why when it skips
    # one, as for a mutated input it does not take for static), and every call advanced pos once.
    if a.compile and torch._dynamo.utils.counters["inductor"]["cudagraph_skips"]:
        sys.exit("error: inductor ran the step without a CUDA graph (its warning above says why)")
    if pos.item() != a.prompt + a.warmup + a.tokens:
        sys.exit(f"error: the position is {pos.item()} after {a.warmup + a.tokens} steps from {a.prompt}")
    peak = torch.cuda.max_memory_allocated() / 2**30
    print(f"| {a.model}, V {a.vocab} | {a.batch} | {a.prompt} | {a.tokens} | "
          f"{'yes' if a.compile else 'no'} | {a.batch * a.tokens / seconds:.0f} | "
          f"{seconds * 1e3 / a.tokens:.3f} | {peak:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
