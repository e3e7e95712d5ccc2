#!/usr/bin/env python3
# A token shard of uniformly random GPT-2 token ids (vocabulary 50257), in the shard format of
# data/ (header of 256 int32: magic 20240520, version 1, token count, vocabulary size), for
# timing train_gpt without a dataset:
#   python3 scripts/random_tokens.py OUT.bin N_TOKENS
import os
import sys
from array import array

path, n, vocab = sys.argv[1], int(sys.argv[2]), 50257
os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
tokens = array("H", (t % vocab for t in array("H", os.urandom(2 * n))))
header = array("i", [20240520, 1, n, vocab] + [0] * 252)
with open(path, "wb") as f:
    f.write(header.tobytes())
    f.write(tokens.tobytes())
