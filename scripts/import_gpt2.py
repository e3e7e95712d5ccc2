#!/usr/bin/env python3
"""scripts/import_gpt2.py: turns a Hugging Face GPT-2 checkpoint into a flashgpt checkpoint.

usage: import_gpt2.py [--bf16] HF_DIR OUT.bin

HF_DIR holds config.json (n_embd, n_layer, n_head, n_positions, vocab_size) and
model.safetensors, read here with plain numpy: an 8-byte little-endian header length, a JSON
header giving each tensor's dtype (F32, F16 or BF16 here), shape and data_offsets, then the raw
data. Tensor names may carry a "transformer." prefix; the attention mask buffers (attn.bias,
attn.masked_bias) and lm_head.weight (tied to wte) are not read.

OUT.bin is the llm.c-compatible model checkpoint: int32 header[256] ([0] 20240326, [1] version
3 (fp32 parameters) or, with --bf16, 5 (bf16, rounded to nearest even), [2] maxT, [3] V, [4] L,
[5] NH, [6] C, [7] Vp), then the parameters in checkpoint order:
  wte (Vp, C), wpe (maxT, C), ln1w (L, C), ln1b (L, C), qkvw (L, 3C, C), qkvb (L, 3C),
  attprojw (L, C, C), attprojb (L, C), ln2w (L, C), ln2b (L, C), fcw (L, 4C, C), fcb (L, 4C),
  fcprojw (L, C, 4C), fcprojb (L, C), lnfw (C), lnfb (C)
wte gets zero rows up to Vp, V rounded up to a multiple of 128. GPT-2 stores its linear layers
as Conv1D, weight (in, out); flashgpt stores (out, in), so those weights are transposed.

Token ids: the model expects GPT-2's own ids, which the tokenizer gives when it loads GPT-2's
encoder.json and vocab.bpe (from the same Hugging Face repository or OpenAI's release).
"""
import json
import os
import sys

import numpy as np

USAGE = "usage: import_gpt2.py [--bf16] HF_DIR OUT.bin"
CHECKPOINT_MAGIC = 20240326
SAFETENSORS_DTYPES = {"F32": 4, "F16": 2, "BF16": 2}


class ImportFailure(Exception):
    """A one-line reason the import cannot go on."""


def fail(message):
    raise ImportFailure(message)


def read_config(path):
    if not os.path.isfile(path):
        fail(f"{path}: no such file")
    try:
        with open(path) as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: not a readable JSON file ({e})")
    if not isinstance(config, dict):
        fail(f"{path}: not a JSON object")
    sizes = {}
    for key, alternative in [("n_embd", None), ("n_layer", None), ("n_head", None),
                             ("n_positions", "n_ctx"), ("vocab_size", None)]:
        value = config.get(key, config.get(alternative))
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            fail(f"{path}: '{key}' is missing or not a positive integer")
        sizes[key] = value
    if sizes["n_embd"] % sizes["n_head"]:
        fail(f"{path}: n_embd {sizes['n_embd']} is not a multiple of n_head {sizes['n_head']}")
    return sizes


class SafeTensors:
    """The tensors of one .safetensors file, mapped, not read, until asked for."""

    def __init__(self, path):
        self.path = path
        if not os.path.isfile(path):
            fail(f"{path}: no such file")
        size = os.path.getsize(path)
        if size < 8:
            fail(f"{path}: truncated ({size} bytes, no header)")
        with open(path, "rb") as f:
            header_len = int.from_bytes(f.read(8), "little")
            if header_len > size - 8:
                fail(f"{path}: truncated (header of {header_len} bytes, file of {size})")
            try:
                header = json.loads(f.read(header_len))
            except ValueError:
                fail(f"{path}: not a safetensors file (header is not JSON)")
        if not isinstance(header, dict):
            fail(f"{path}: not a safetensors file (header is not a JSON object)")
        header.pop("__metadata__", None)
        self.entries = header
        self.data_start = 8 + header_len
        self.data_len = size - self.data_start
        self.data = np.memmap(path, dtype=np.uint8, mode="r")

    def find(self, name):
        """The stored name of a tensor, with or without the "transformer." prefix, or None."""
        for stored in (name, "transformer." + name):
            if stored in self.entries:
                return stored
        return None

    def get(self, name, shape):
        """The tensor `name` as float32 after checking its dtype, shape and bounds."""
        stored = self.find(name)
        if stored is None:
            fail(f"{self.path}: tensor '{name}' not found")
        entry = self.entries[stored]
        where = f"{self.path}: tensor '{stored}'"
        try:
            dtype, got_shape = entry["dtype"], tuple(entry["shape"])
            begin, end = entry["data_offsets"]
        except (KeyError, TypeError, ValueError):
            fail(f"{where} has a malformed header entry")
        if not isinstance(dtype, str) or dtype not in SAFETENSORS_DTYPES:
            fail(f"{where} has dtype {dtype}; supported: F32, F16, BF16")
        if got_shape != tuple(shape):
            fail(f"{where} has shape {list(got_shape)}, expected {list(shape)}")
        nbytes = int(np.prod(shape)) * SAFETENSORS_DTYPES[dtype]
        offsets_ok = isinstance(begin, int) and isinstance(end, int) and begin >= 0
        if not offsets_ok or end - begin != nbytes:
            fail(f"{where} has data_offsets {[begin, end]}, which do not span its {nbytes} bytes")
        if end > self.data_len:
            fail(f"{self.path}: truncated (tensor '{stored}' ends at byte {self.data_start + end}, "
                 f"the file at {self.data_start + self.data_len})")
        raw = self.data[self.data_start + begin:self.data_start + end]
        if dtype == "F32":
            values = raw.view("<f4")
        elif dtype == "F16":
            values = raw.view("<f2").astype(np.float32)
        else:  # bf16 is the upper half of a float32
            values = (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
        return values.reshape(shape)


def to_bf16_bits(x):
    """float32 -> bf16 bit patterns (uint16), round to nearest, ties to even; NaN stays NaN."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def checkpoint_tensors(st, sizes):
    """Yields the flashgpt parameters in checkpoint order as float32 arrays, one layer's slice of
    a per-layer tensor at a time (so that only one tensor is ever in memory)."""
    C, L, maxT, V = sizes["n_embd"], sizes["n_layer"], sizes["n_positions"], sizes["vocab_size"]
    wte = np.zeros(((V + 127) // 128 * 128, C), dtype=np.float32)
    wte[:V] = st.get("wte.weight", (V, C))
    yield wte
    yield st.get("wpe.weight", (maxT, C))
    # (name, shape as stored, stored as Conv1D (in, out) and so transposed)
    per_layer = [("ln_1.weight", (C,), False), ("ln_1.bias", (C,), False),
                 ("attn.c_attn.weight", (C, 3 * C), True), ("attn.c_attn.bias", (3 * C,), False),
                 ("attn.c_proj.weight", (C, C), True), ("attn.c_proj.bias", (C,), False),
                 ("ln_2.weight", (C,), False), ("ln_2.bias", (C,), False),
                 ("mlp.c_fc.weight", (C, 4 * C), True), ("mlp.c_fc.bias", (4 * C,), False),
                 ("mlp.c_proj.weight", (4 * C, C), True), ("mlp.c_proj.bias", (C,), False)]
    for name, shape, transposed in per_layer:
        for l in range(L):
            tensor = st.get(f"h.{l}.{name}", shape)
            yield tensor.T if transposed else tensor
    yield st.get("ln_f.weight", (C,))
    yield st.get("ln_f.bias", (C,))


def import_gpt2(hf_dir, out_path, bf16):
    """Writes out_path (via a temporary file, renamed at the end); returns a summary line."""
    if not os.path.isdir(hf_dir):
        fail(f"{hf_dir}: no such directory")
    sizes = read_config(os.path.join(hf_dir, "config.json"))
    st = SafeTensors(os.path.join(hf_dir, "model.safetensors"))
    C, L, NH = sizes["n_embd"], sizes["n_layer"], sizes["n_head"]
    maxT, V = sizes["n_positions"], sizes["vocab_size"]
    Vp = (V + 127) // 128 * 128
    header = np.zeros(256, dtype="<i4")
    header[:8] = [CHECKPOINT_MAGIC, 5 if bf16 else 3, maxT, V, L, NH, C, Vp]
    tmp_path = out_path + ".tmp"
    count = 0
    try:
        with open(tmp_path, "wb") as f:
            f.write(header.tobytes())
            for tensor in checkpoint_tensors(st, sizes):
                f.write(to_bf16_bits(tensor).astype("<u2").tobytes() if bf16
                        else np.ascontiguousarray(tensor, dtype="<f4").tobytes())
                count += tensor.size
        os.replace(tmp_path, out_path)
    except OSError as e:
        fail(f"{out_path}: cannot write ({e.strerror})")
    finally:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
    return (f"{out_path}: GPT-2 L={L} NH={NH} C={C} maxT={maxT} V={V} (Vp={Vp}), "
            f"{count} parameters in {'bf16' if bf16 else 'fp32'} (version {header[1]})")


def main(argv):
    if "-h" in argv or "--help" in argv:
        print(USAGE)
        return 0
    bf16 = "--bf16" in argv
    args = [a for a in argv if a != "--bf16"]
    unknown = [a for a in args if a.startswith("-")]
    if unknown:
        print(f"error: unknown flag {unknown[0]} ({USAGE})", file=sys.stderr)
        return 1
    if len(args) != 2:
        print(f"error: expected HF_DIR and OUT.bin ({USAGE})", file=sys.stderr)
        return 1
    try:
        print(import_gpt2(args[0], args[1], bf16))
    except ImportFailure as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
