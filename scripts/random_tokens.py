#!/usr/bin/env python3
"""scripts/random_tokens.py: a token shard of uniformly random GPT-2 token ids (vocabulary
50257), in the shard format of data/ (header of 256 int32: magic 20240520, version 1, token
count, vocabulary size, then uint16 tokens), for timing train_gpt without a dataset.

usage: random_tokens.py OUT.bin N_TOKENS

N_TOKENS is from 1 to 2^31 - 1 (the header's int32). OUT.bin's folder is made if missing;
OUT.bin is written by output_file.py's rules (a temporary file renamed at the end, a link at
OUT.bin followed), the tokens a chunk at a time.
"""
import os
import sys
from array import array

from output_file import Failure, atomic_output

USAGE = "usage: random_tokens.py OUT.bin N_TOKENS"
VOCAB = 50257
MAX_TOKENS = 2 ** 31 - 1
CHUNK = 1 << 20


def write_shard(path, n):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    header = array("i", [20240520, 1, n, VOCAB] + [0] * 252)
    with atomic_output(path) as f:
        f.write(header.tobytes())
        for done in range(0, n, CHUNK):
            count = min(CHUNK, n - done)
            f.write(array("H", (t % VOCAB for t in array("H", os.urandom(2 * count)))).tobytes())


def main(argv):
    if "-h" in argv or "--help" in argv:
        print(USAGE)
        return 0
    if len(argv) != 2 or argv[0].startswith("-"):
        print(f"error: expected OUT.bin and N_TOKENS ({USAGE})", file=sys.stderr)
        return 1
    path, count = argv
    if not (count.isascii() and count.isdigit() and len(count) <= 10 and 1 <= int(count) <= MAX_TOKENS):
        print(f"error: N_TOKENS '{count}' is not an integer from 1 to {MAX_TOKENS}", file=sys.stderr)
        return 1
    try:
        write_shard(path, int(count))
    except OSError as e:
        print(f"error: {path}: cannot write ({e.strerror})", file=sys.stderr)
        return 1
    except Failure as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
