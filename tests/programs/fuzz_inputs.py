#!/usr/bin/env python3
"""tests/programs/fuzz_inputs.py: every program against mutated copies of its input files.

The valid files are made here: a text, a tokenizer, token shards (uint16 and uint32), GPT-2's
encoder.json and vocab.bpe, a model checkpoint of versions 3 and 5, training states of AdamW and Muon
(one of a step schedule of its own), a train_gpt log, a Hugging Face config.json and model.safetensors, multiple-choice items in
HellaSwag's layout. Each case changes one of them,
now and then two or three times over (bits flipped, bytes set, the file cut, extended, a piece of
it cut out or repeated, an int32 of its header set to 0, -1, 2^31-1 and the like, a size in the
header changed and the file resized to match, a value set to NaN; in the text formats a line, a
number or a character changed, in config.json a field's value), and runs the program that reads
it in a folder of its own, under a time limit. A case passes when the program
- exits 0, or stops with exit status 1 and one line starting "error: ", the last on stderr
  (train_gpt, generate and evaluate, with the devices hidden, stop at "error: no CUDA device"
  once every file checks out; of a shard, its header, size and a sample of its tokens, the other token ids
  being checked only as their batches are read);
- prints no sanitizer report or Python traceback, is not ended by a signal, ends in time;
- refuses what is corrupt for sure: a file whose size its header fixes, cut or extended; another
  magic number; a checkpoint value that is not finite, a second moment below 0; a training state
  header with an int field past its bounds (its header targets set each to a bound or one past
  it) or a slot past its fields set;
- when it succeeds, gives a result that checks out: encoding the text with a tokenizer it took and
  decoding the shard gives the text back, prepare_data's shards decode to its text, an imported
  checkpoint exports and came from a config that is GPT-2's in every field that changes the
  model and from tensors that tile their file's data, an exported one imports back to the same
  bytes (but the header's unused slots and wte's padding rows), a drawn log is well-formed SVG
  with finite coordinates;
- when it fails, leaves its folder as it was: outputs already there unchanged, nothing removed,
  no temporary left behind.
The cases are drawn from --seed, so a run is repeatable. One PASS line per program and file, or a
FAIL line per failed case naming the program, the file, the change and what it printed; the
case's folder is kept.

usage: fuzz_inputs.py [--cases N] [--seed S] [--bin DIR] [--only TEXT] [--limit SECONDS] [--jobs N]

--bin: the folder of bpe, prepare_data, train_gpt, generate and evaluate (the repository's by
default). A long run under the sanitizers takes a build of them with -fsanitize=address,undefined
(for train_gpt, generate and evaluate, their host code through nvcc's -Xcompiler) in a folder of
its own, and --cases 1000 --limit 60. The Python scripts run with $PYTHON (python3 by default);
the ones that need numpy say SKIPPED without it, as the CUDA programs do when not built. Files go to
$FLASHGPT_TMP/fuzz_inputs.
"""
import argparse
import array
import concurrent.futures
import hashlib
import json
import math
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from typing import Callable, NamedTuple, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPE = dict(maxT=64, V=300, L=1, NH=1, C=64)   # a small model of head size 64, which attention runs
VP = (SHAPE["V"] + 127) // 128 * 128
# The run the training state made here is of, as train_gpt's command line.
RUN_ARGS = ["-B", "1", "-T", "64", "--steps", "10", "--lr", "0.5", "--min-lr-frac", "0.5", "--warmup-steps", "2",
            "--weight-decay", "0.5", "--grad-clip", "0.5", "--seed", "7"]
# The Muon settings of the Muon run's state (state_file(muon=True)).
MUON_SETTINGS = [0.9, 0.001, 0.002, 0.8, 0.95]
MUON_ARGS = ["--optimizer", "muon", "--muon-momentum", "0.9", "--embedding-lr", "0.001", "--vector-lr", "0.002"]
# The schedule of the Muon run whose state is version 3 (state_file(muon=True, schedule=True)).
SCHEDULE_ARGS = ["--lr-schedule", "wsd", "--momentum-warmup-steps", "300", "--weight-decay-schedule", "linear"]
OLD_OUTPUT = b"an output already there, which a failed run must leave as it is\n"
SPECIAL_INTS = [0, -1, 1, 2, 3, 7, 8, 64, 127, 128, 255, 256, 257, 299, 300, 301, 384, 65535, 65536, 65537,
                1 << 24, (1 << 24) + 1, 1 << 30, 2**31 - 1, -2**31, -2]
SPECIAL_NUMBERS = ["0", "-1", "1", "2", "64", "2147483647", "2147483648", "-2147483649", "9223372036854775808",
                   "99999999999999999999999999999", "1e309", "1.5", "-0", "NaN", "Infinity", "-Infinity", "1e2",
                   "0x10", "00", "", "true", "null", "[]", "{}", '"7"', "3.4e38", "1e-45"]
SPECIAL_TEXT = ['"', "\\", "\\u", "\\ud800", "\\udc00x", "\\u00", "{", "}", "[", "]", ",", ":", "\x00", "\r",
                "\n", "\n\n", " ", "  ", "\t", "\u0120", "\u0100", "\u0143", "<|endoftext|>", "\u00e9",
                "#version: 0.2", "nan", "inf", "1e400", ",,", "step", "\ufeff", "\U0001F600", "\u2028"]
BAD_UTF8 = [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80", b"\xe2\x82"]


# ----------------------------------------------------------------------------------------------
# Mutations: each takes a random generator, the bytes of a file and its format (FORMATS below),
# and returns the new bytes and what was changed.

def flip_bits(rng, data, fmt):
    data = bytearray(data)
    spots = []
    for _ in range(rng.choice([1, 1, 2, 4, 8]) if data else 0):
        # Half of them in the header, where every bit means something.
        span = min(len(data), fmt.get("header") or len(data)) if rng.random() < 0.5 else len(data)
        at, bit = rng.randrange(span), rng.randrange(8)
        data[at] ^= 1 << bit
        spots.append(f"{at}:{bit}")
    return bytes(data), "bits flipped at " + (",".join(spots) or "no byte")


def set_bytes(rng, data, fmt):
    if not data:
        return data, "no byte to set"
    data = bytearray(data)
    at = rng.randrange(len(data))
    n = min(rng.choice([1, 2, 4, 8]), len(data) - at)
    value = rng.choice([0x00, 0xFF, 0x7F, 0x80, None])
    for i in range(n):
        data[at + i] = rng.randrange(256) if value is None else value
    return bytes(data), f"{n} bytes at {at} set to {'random ones' if value is None else hex(value)}"


def truncate(rng, data, fmt):
    header = fmt.get("header", 0)
    n = rng.choice([0, 1, header - 1, header, header + 1, len(data) - 1, len(data) - 2, len(data) // 2,
                    rng.randrange(len(data) + 1)])
    n = max(0, min(n, len(data) - 1))
    return data[:n], f"cut to {n} of {len(data)} bytes"


def extend(rng, data, fmt):
    n = rng.choice([1, 2, 4, 7, 64, 1000])
    tail = rng.choice([bytes(n), bytes(rng.randrange(256) for _ in range(n)), b"\n" * n, data[:n]])
    return data + tail, f"{len(tail)} bytes appended"


def splice(rng, data, fmt):
    if len(data) < 2:
        return data + data, "doubled"
    a = rng.randrange(len(data))
    b = min(len(data), a + rng.choice([1, 4, 16, 256, len(data)]))
    if rng.random() < 0.5:
        return data[:a] + data[b:], f"bytes {a}..{b} cut out"
    return data[:b] + data[a:b] + data[b:], f"bytes {a}..{b} repeated"


def rand_int32(rng, original):
    v = rng.choice(SPECIAL_INTS + [original + 1, original - 1, original * 2, None])
    return rng.randrange(-2**31, 2**31) if v is None else max(-2**31, min(2**31 - 1, v))


def set_field(rng, data, fmt):
    """An int32 of the header's slots, or of anywhere in the file, set to a special value."""
    anywhere = rng.random() < 0.2 and len(data) >= 4
    slot = rng.randrange(len(data) // 4) if anywhere else rng.choice(fmt["slots"])
    if 4 * slot + 4 > len(data):
        return data, f"int32 slot {slot}: past the end"
    old = struct.unpack_from("<i", data, 4 * slot)[0]
    new = rand_int32(rng, old)
    out = bytearray(data)
    struct.pack_into("<i", out, 4 * slot, new)
    return bytes(out), f"int32 slot {slot} {old} -> {new}"


def reshape(rng, data, fmt):
    """A size in the header set to a special value, mostly small, and the file cut or padded with
    zeros to the size that header implies, so that the checks past the file's size are reached."""
    if len(data) < fmt["header"]:
        return data, "no header to reshape"
    slot = rng.choice(fmt["sizes"])
    old = struct.unpack_from("<i", data, 4 * slot)[0]
    new = rng.choice([0, 1, 2, 3, 8, 16, 63, 65, 128, 256, 257, 299, 301, 2**31 - 1, -1, old * 2, old // 2, None])
    new = rand_int32(rng, old) if new is None else max(-2**31, min(2**31 - 1, new))
    out = bytearray(data)
    struct.pack_into("<i", out, 4 * slot, new)
    size = fmt["size"](struct.unpack_from(f"<{fmt['header'] // 4}i", out))
    if size is None or size < fmt["header"] or size > 64 << 20:
        return bytes(out), f"int32 slot {slot} {old} -> {new} (no size to match)"
    return bytes(out[:size] + bytes(max(0, size - len(out)))), f"int32 slot {slot} {old} -> {new}, {size} bytes"


def set_float(rng, data, fmt):
    """A value (fp32, or bf16: elem 2) set to NaN, an infinity, a huge, tiny or negative one."""
    count = (len(data) - fmt["header"]) // fmt["elem"]
    if count <= 0:
        return data, "no value to set"
    i = rng.randrange(count)
    value = rng.choice([float("nan"), float("inf"), -float("inf"), -1.0, 3.0e38, -0.0, 1e-40])
    at = fmt["header"] + i * fmt["elem"]
    bits = struct.pack("<f", value)[4 - fmt["elem"]:]   # bf16: the upper half
    return data[:at] + bits + data[at + fmt["elem"]:], f"value {i} set to {value}"


# The training state header's int fields (train/state.cu's state_fields) as (slot, least, most
# value); the shape's are the model file's to bound. In a file of versions 1 and 2 (the default
# schedule) every slot past 38 is 0.
STATE_INT_FIELDS = [(2, 0, 2**31 - 1), (9, 1, 2**31 - 1), (10, 1, 2**31 - 1), (11, 1, 2**31 - 1), (12, 0, 2**31 - 1),
                    (13, 1, 2**31 - 1), (14, 0, 2**31 - 1), (27, 0, 1), (28, 0, 1), (29, 0, 3), (30, 1, 2**31 - 1),
                    (31, 0, 2**31 - 1), (32, 0, 1)]
STATE_USED_SLOTS = 39


def set_state_bound(rng, data, fmt):
    """An int field of the training state header set to a bound or just past it (2^31 - 1 + 1 wraps
    to -2^31), or a slot past the fields set."""
    out = bytearray(data)
    if rng.random() < 0.25:
        slot, new = rng.randrange(STATE_USED_SLOTS, 256), rng.choice([1, -1, 2**31 - 1, -2**31, 0x3f800000])
    else:
        slot, lo, hi = rng.choice(STATE_INT_FIELDS)
        new = (rng.choice([lo - 1, lo, hi, hi + 1]) + 2**31) % 2**32 - 2**31
    old = struct.unpack_from("<i", out, 4 * slot)[0]
    struct.pack_into("<i", out, 4 * slot, new)
    return bytes(out), f"int32 slot {slot} {old} -> {new}"


def state_header_corrupt(data):
    """Why a training state header is corrupt for sure (an int field outside its bounds, a slot
    past the fields set), or None."""
    ints = struct.unpack_from("<256i", data)
    for slot, lo, hi in STATE_INT_FIELDS:
        if not lo <= ints[slot] <= hi:
            return f"slot {slot} {ints[slot]} outside [{lo}, {hi}]"
    unused = next((k for k in range(STATE_USED_SLOTS, 256) if ints[k]), None)
    return None if unused is None else f"slot {unused} past the fields set"


def text_line(rng, data, fmt):
    lines = data.split(b"\n")
    i = rng.randrange(len(lines))
    op = rng.choice(["cut", "repeated", "swapped", "emptied"])
    if op == "cut":
        del lines[i]
    elif op == "repeated":
        lines.insert(i, lines[i])
    elif op == "swapped":
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        op = f"swapped with line {j + 1}"
    else:
        lines[i] = b""
    return b"\n".join(lines), f"line {i + 1} {op}"


def text_insert(rng, data, fmt):
    at = rng.randrange(len(data) + 1)
    piece = rng.choice(BAD_UTF8) if rng.random() < 0.2 else rng.choice(SPECIAL_TEXT).encode()
    if rng.random() < 0.5 and at < len(data):
        return data[:at] + piece + data[at + 1:], f"byte {at} replaced by {piece!r}"
    return data[:at] + piece + data[at:], f"{piece!r} inserted at {at}"


def text_number(rng, data, fmt):
    numbers = list(re.finditer(rb"-?[0-9]+(\.[0-9]+)?(e-?[0-9]+)?", data))
    if not numbers:
        return text_insert(rng, data, fmt)
    m = rng.choice(numbers)
    new = rng.choice(SPECIAL_NUMBERS).encode()
    return data[:m.start()] + new + data[m.end():], f"number {m.group().decode()} at {m.start()} -> {new.decode()!r}"


BINARY = [flip_bits, set_bytes, truncate, extend, splice, set_field, set_field]
TEXT = [flip_bits, truncate, extend, splice, text_line, text_number, text_number, text_insert, text_insert]


def mutate_safetensors(rng, data, fmt):
    """The 8-byte header length, the JSON header (as text, the length kept right) or the data."""
    if len(data) < 8:
        return data + bytes(8), "padded to a header length"
    (n,) = struct.unpack_from("<Q", data)
    header, body = data[8:8 + n], data[8 + n:]
    what = rng.choice(["length", "json", "json", "json", "data"])
    if what == "length":
        v = max(0, rng.choice([0, 1, n - 1, n + 1, len(data), len(data) - 8, 2**31, 2**63, 2**64 - 1, 100_000_001]))
        return struct.pack("<Q", v) + data[8:], f"header length {n} -> {v}"
    if what == "json":
        new, how = rng.choice(TEXT)(rng, header, {"header": n})
        return struct.pack("<Q", len(new)) + new + body, "header JSON: " + how
    new, how = rng.choice([flip_bits, set_float, truncate, extend])(rng, body, {"header": 0, "elem": 4})
    return data[:8 + n] + new, "tensor data: " + how


CONFIG_VALUES = ['"relu"', '"gelu"', '"gelu_new"', '"gelu_pytorch_tanh"', '"gpt2"', '"gpt_neo"', "true", "false",
                 "null", "1e-06", "1e-05", "256", "255"]


def set_config_field(rng, data, fmt):
    """A field of config.json (one a line, as json.dumps(indent=2) writes it) set to another value."""
    fields = list(re.finditer(rb'^ *"([a-z_]+)": (.*?),?$', data, re.M))
    if not fields:
        return text_insert(rng, data, fmt)
    m = rng.choice(fields)
    new = rng.choice(CONFIG_VALUES + SPECIAL_NUMBERS).encode()
    return data[:m.start(2)] + new + data[m.end(2):], f"{m.group(1).decode()} {m.group(2).decode()} -> {new.decode()!r}"


# ----------------------------------------------------------------------------------------------
# The valid files

def parameter_count(s, hf=False, vp=VP):
    """scripts/gpt2_checkpoint.py's count: the checkpoint's (wte padded to vp rows) or HF's."""
    C = s["C"]
    return (s["V"] if hf else vp) * C + s["maxT"] * C + s["L"] * (12 * C * C + 13 * C) + 2 * C


def random_values(count, scale, seed):
    rng = random.Random(seed)
    return array.array("f", (rng.uniform(-scale, scale) for _ in range(count)))


def words_text(paragraphs, seed):
    rng = random.Random(seed)
    words = "the of and to in a is that for it as was with be by on not he this are or his from".split()
    lines = []
    for _ in range(paragraphs):
        lines += [" ".join(rng.choice(words) for _ in range(9)) + " " for _ in range(4)] + [""]
    return ("\n".join(lines) + "\n").encode()


def gpt2_files():
    """A small encoder.json and vocab.bpe in GPT-2's format: the 256 bytes through GPT-2's
    byte-to-unicode table, a few merges and <|endoftext|>."""
    printable = [b for b in range(256) if 33 <= b <= 126 or 0xA1 <= b <= 0xAC or b >= 0xAE]
    others = [b for b in range(256) if b not in printable]
    char = {b: chr(b) for b in printable}
    char.update({b: chr(256 + k) for k, b in enumerate(others)})
    space = char[32]
    merges = [(space, "t"), ("h", "e"), (space + "t", "he"), ("a", "n"), (space, "a"), (space + "a", "n"),
              (space + "an", "d"), ("i", "s"), (space, "o"), (space + "o", "f"), ("o", "r"), (space, "i")]
    tokens = [char[b] for b in range(256)] + [a + b for a, b in merges] + ["<|endoftext|>"]
    encoder = json.dumps({t: i for i, t in enumerate(tokens)}, ensure_ascii=False).encode()
    return encoder, ("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges)).encode()


def model_file(version):
    """A model checkpoint (gpt/checkpoint.h) of SHAPE, fp32 (3) or bf16 (5), wte's padding rows
    zero as train_gpt keeps them."""
    s = SHAPE
    values = random_values(parameter_count(s), 0.05, 1)
    values[s["V"] * s["C"]:VP * s["C"]] = array.array("f", bytes(4 * (VP - s["V"]) * s["C"]))
    body = values.tobytes()
    if version == 5:
        body = array.array("H", (bits >> 16 for bits in array.array("I", body))).tobytes()
    header = [20240326, version, s["maxT"], s["V"], s["L"], s["NH"], s["C"], VP]
    return struct.pack("<256i", *header, *[0] * 248) + body


def state_file(muon=False, schedule=False):
    """A training state (train/state.h) of step 5 of the run of RUN_ARGS (muon: and MUON_ARGS,
    version 2 with the optimizer and MUON_SETTINGS in slots 32-38; schedule: and SCHEDULE_ARGS,
    version 3 with the schedule in slots 39-45)."""
    s = SHAPE
    ints = [20241130, 2 if muon else 1, 5, s["maxT"], s["V"], s["L"], s["NH"], s["C"], VP, 1, 64, 1, 2, 10, 5]
    floats = list(struct.unpack("<4i", struct.pack("<4f", 0.5, 0.5, 0.5, 0.5)))
    # seed 7, loader epoch 0 step 5, sampler 99, flash, not deterministic, no recomputation,
    # classifier chunks of 64 rows, one rank
    rest = [7, 0, 0, 0, 5, 0, 99, 0, 0, 0, 0, 64, 1]
    if muon:
        rest += [1, *struct.unpack("<5i", struct.pack("<5f", *MUON_SETTINGS))]
    header = ints + floats + rest
    if schedule:  # a tied head's lr 0 in slot 38; then wsd over the last 65% of the steps, the momentum
        header[1] = 3  # from 0.85 over 300 steps, a linear decay
        header += [0] * (39 - len(header)) + [1, *struct.unpack("<i", struct.pack("<f", 0.65)), 300,
                                               *struct.unpack("<i", struct.pack("<f", 0.85)), 0, 0, 1]
    P = parameter_count(s)
    second_moments = array.array("f", (abs(x) for x in random_values(P, 0.001, 4)))
    return (struct.pack("<256i", *header, *[0] * (256 - len(header))) + random_values(P, 0.05, 2).tobytes() +
            random_values(P, 0.01, 3).tobytes() + second_moments.tobytes())


def uint32_shard(shard):
    """The same tokens as a version 2 shard (uint32 tokens)."""
    n = struct.unpack_from("<i", shard, 8)[0]
    tokens = array.array("I", array.array("H", shard[1024:1024 + 2 * n]))
    return struct.pack("<i", 20240520) + struct.pack("<i", 2) + shard[8:1024] + tokens.tobytes()


def safetensors_file():
    index, offset, C, L = {"__metadata__": {"format": "pt"}}, 0, SHAPE["C"], SHAPE["L"]
    per_layer = [("ln_1.weight", [C]), ("ln_1.bias", [C]), ("attn.c_attn.weight", [C, 3 * C]),
                 ("attn.c_attn.bias", [3 * C]), ("attn.c_proj.weight", [C, C]), ("attn.c_proj.bias", [C]),
                 ("ln_2.weight", [C]), ("ln_2.bias", [C]), ("mlp.c_fc.weight", [C, 4 * C]), ("mlp.c_fc.bias", [4 * C]),
                 ("mlp.c_proj.weight", [4 * C, C]), ("mlp.c_proj.bias", [C])]
    tensors = [("wte.weight", [SHAPE["V"], C]), ("wpe.weight", [SHAPE["maxT"], C])]
    tensors += [(f"h.{l}.{name}", shape) for name, shape in per_layer for l in range(L)]
    # The mask buffer h.0.attn.bias comes last: a tensor the import does not read, whose offsets count too.
    mask = [1, 1, SHAPE["maxT"], SHAPE["maxT"]]
    for name, shape in tensors + [("ln_f.weight", [C]), ("ln_f.bias", [C]), ("h.0.attn.bias", mask)]:
        n = 4 * math.prod(shape)
        index["transformer." + name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    header = json.dumps(index).encode()
    header += b" " * (-len(header) % 8)
    mask_values = array.array("f", [float(k <= q) for q in range(mask[2]) for k in range(mask[3])])
    return (struct.pack("<Q", len(header)) + header +
            random_values(parameter_count(SHAPE, hf=True), 0.05, 5).tobytes() + mask_values.tobytes())


def log_file():
    lines = ["step,loss,val_loss,lr,grad_norm,ms,tokens_per_s,mfu,mem_gib"]
    for step in range(1, 21):
        val = f"{5.0 - step * 0.05:.6f}" if step % 5 == 0 else ""
        lines.append(f"{step},{6.0 - step * 0.1:.6f},{val},0.001,{0.5 + step / 100:.4f},12.500,{100000 + step}.0,"
                     "0.3100,1.250")
    return ("\n".join(lines) + "\n").encode()


def items_file():
    """Eight items of HellaSwag's layout, short enough for SHAPE's context of 64 in the tokenizer
    made here: the keys of hellaswag_val.jsonl, escapes, a label as a string."""
    rng = random.Random(6)
    words = "the of and to in a is that for it as was with be by on not he this are or his from".split()
    lines = []
    for i in range(8):
        ctx = " ".join(rng.choice(words) for _ in range(6)) + (r' \u00e9\n\"x\" \ud83d\ude00' if i % 3 == 0 else "")
        endings = [" ".join(rng.choice(words) for _ in range(3)) for _ in range(4)]
        label = f'"{i % 4}"' if i == 5 else str(i % 4)
        lines.append(f'{{"ind": {i}, "activity_label": "words", "ctx": "{ctx}", "endings": {json.dumps(endings)}, '
                     f'"label": {label}, "split": "val", "source_id": null}}')
    return ("\n".join(lines) + "\n").encode()


def run(cmd, limit, cwd=None):
    """(exit status, or None past the limit; stdout as bytes; stderr as text)."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               ASAN_OPTIONS="detect_leaks=0:protect_shadow_gap=0", UBSAN_OPTIONS="print_stacktrace=1")
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=limit, cwd=cwd, env=env, stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout, p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired:
        return None, b"", f"(still running after {limit} s)"


def make_seeds(folder, bins, limit):
    """The valid files in folder: {name: path}. Exits with a FAIL line if one cannot be made."""
    names = {"text": "a.txt", "tokenizer": "data/tokenizer.bin", "shard": "data/train_000000.bin",
             "val": "data/val_000000.bin", "shard32": "shard32.bin", "encoder": "encoder.json",
             "vocab": "vocab.bpe", "model5": "model5.bin", "model3": "model3.bin", "state": "state.bin",
             "state_muon": "state_muon.bin", "state_schedule": "state_schedule.bin",
             "log": "log.csv", "config": "hf/config.json", "safetensors": "hf/model.safetensors",
             "items": "items.jsonl"}
    paths = {k: os.path.join(folder, v) for k, v in names.items()}
    os.makedirs(os.path.join(folder, "data"))
    os.makedirs(os.path.join(folder, "hf"))
    encoder, vocab = gpt2_files()
    config = {"model_type": "gpt2", "n_embd": SHAPE["C"], "n_layer": SHAPE["L"], "n_head": SHAPE["NH"],
              "n_positions": SHAPE["maxT"], "vocab_size": SHAPE["V"], "activation_function": "gelu_new",
              "layer_norm_epsilon": 1e-5, "n_inner": None, "scale_attn_weights": True,
              "scale_attn_by_inverse_layer_idx": False, "add_cross_attention": False, "tie_word_embeddings": True}
    made = {"text": words_text(60, 1), "encoder": encoder, "vocab": vocab, "model5": model_file(5),
            "model3": model_file(3), "state": state_file(), "state_muon": state_file(muon=True),
            "state_schedule": state_file(muon=True, schedule=True), "log": log_file(),
            "config": json.dumps(config, indent=2).encode(), "safetensors": safetensors_file(),
            "items": items_file()}
    for name, data in made.items():
        with open(paths[name], "wb") as f:
            f.write(data)
    bpe = os.path.join(bins, "bpe")
    for cmd in ([bpe, "train", "--input", paths["text"], "--vocab-size", "300", "--out", paths["tokenizer"]],
                [bpe, "encode", "--tokenizer", paths["tokenizer"], "--input", paths["text"], "--out", paths["shard"]]):
        rc, _, err = run(cmd, limit)
        if rc != 0:
            print(f"FAIL fuzz_inputs: the valid files: {' '.join(cmd)}: {err.strip()[-300:]}")
            sys.exit(1)
    shutil.copy(paths["shard"], paths["val"])
    with open(paths["shard"], "rb") as f, open(paths["shard32"], "wb") as out:
        out.write(uint32_shard(f.read()))
    return paths


# ----------------------------------------------------------------------------------------------
# Formats: their mutations; the header's bytes and the int32 slots worth setting; whether the
# header fixes the file's size; the bytes of the magic number; for reshape, the slots of sizes and
# the file size a header implies; for values, their size (elem) and where second moments start.

def shard_size(h):
    return 1024 + (2 if h[1] == 1 else 4) * h[2] if h[2] >= 0 else None


def tokenizer_size(h):
    return 32 + 4 * h[2] + h[5] + 12 * h[3] if min(h[2], h[3], h[5]) >= 0 else None


def model_size(elem, first):
    """The size of a checkpoint whose shape starts at slot first of the header (3: the state's
    master weights and two moments, elem 12)."""
    def size(h):
        maxT, V, L, NH, C, Vp = h[first:first + 6]
        if min(maxT, V, L, NH, C, Vp) <= 0:
            return None
        return 1024 + elem * parameter_count(dict(maxT=maxT, V=V, L=L, NH=NH, C=C), vp=Vp)
    return size


SHARD = dict(mutations=BINARY + [reshape], header=1024, slots=[0, 1, 2, 3, 4, 5, 6, 255], exact=True, magic=4,
             sizes=[1, 2, 2, 3], size=shard_size)
TOKENIZER = dict(mutations=BINARY + [reshape], header=32, slots=[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 40, 264, 265],
                 exact=True, magic=4, sizes=[2, 3, 4, 5], size=tokenizer_size)
MODEL5 = dict(mutations=BINARY + [set_float, reshape, reshape], header=1024, slots=[0, 1, 2, 3, 4, 5, 6, 7, 8, 255],
              exact=True, magic=4, sizes=[1, 2, 3, 4, 5, 6, 7], size=model_size(2, 2), elem=2)
MODEL3 = dict(MODEL5, size=model_size(4, 2), elem=4)
STATE = dict(mutations=BINARY + [set_float, reshape, reshape], header=1024, slots=list(range(41)), exact=True,
             magic=4, sizes=[2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 30, 31], size=model_size(12, 3), elem=4,
             second_moments=1024 + 8 * parameter_count(SHAPE))
STATE_HEADER = dict(STATE, mutations=[set_state_bound], corrupt=state_header_corrupt)
TEXTUAL = dict(mutations=TEXT, header=64, exact=False)
SAFETENSORS = dict(mutations=[mutate_safetensors], exact=False)
CONFIG = dict(TEXTUAL, mutations=TEXT + [set_config_field] * 3)


# ----------------------------------------------------------------------------------------------
# The programs and the files they read. A target's place(case) writes the files of its run into
# the case's folder, the mutated one among them, and returns the command; its accept(case)
# checks a run that succeeded: None, or what is wrong.

class Case:
    def __init__(self, folder, mutated, seeds, bins, python, limit):
        self.dir, self.mutated, self.seeds = folder, mutated, seeds
        self.bins, self.python, self.limit = bins, python, limit

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, data):
        os.makedirs(os.path.dirname(self.path(name)), exist_ok=True)
        with open(self.path(name), "wb") as f:
            f.write(data)
        return self.path(name)

    def copy(self, seed, name):
        os.makedirs(os.path.dirname(self.path(name)), exist_ok=True)
        return shutil.copy(self.seeds[seed], self.path(name))

    def bin(self, program):
        return os.path.join(self.bins, program)

    def script(self, name):
        return [self.python, os.path.join(ROOT, "scripts", name)]

    def run(self, cmd):
        return run(cmd, self.limit, cwd=self.dir)


class Target(NamedTuple):
    name: str          # "program: file"
    needs: str         # a program of --bin, "numpy" or "python3"
    seed: str          # the valid file it mutates
    fmt: dict
    place: Callable
    accept: Optional[Callable] = None


def read(path):
    with open(path, "rb") as f:
        return f.read()


def decodes_to(case, tokenizer_args, shards, text):
    """None when bpe decodes the shards, with these tokenizer flags, to text (<|endoftext|>
    aside: prepare_data puts one before each document); else what is wrong."""
    decoded = b""
    for shard in shards:
        rc, out, err = case.run([case.bin("bpe"), "decode", *tokenizer_args, "--input", shard])
        if rc != 0:
            return f"bpe decode of {os.path.basename(shard)} then failed: {err.strip()[-200:]}"
        decoded += out
    eot = b"<|endoftext|>"
    return None if decoded.replace(eot, b"") == read(text).replace(eot, b"") else "the shards do not decode to the text"


def round_trip(case, tokenizer_args, text):
    """None when a shard that bpe encodes from text with these tokenizer flags decodes to it."""
    out = case.path("round_trip.bin")
    rc, _, err = case.run([case.bin("bpe"), "encode", *tokenizer_args, "--input", text, "--out", out])
    return decodes_to(case, tokenizer_args, [out], text) if rc == 0 else f"bpe encode then failed: {err.strip()[-200:]}"


def bpe_encode_tokenizer(case):
    case.write("out.bin", OLD_OUTPUT)
    case.tokenizer = ["--tokenizer", case.write("tok.bin", case.mutated)]
    return [case.bin("bpe"), "encode", *case.tokenizer, "--input", case.seeds["text"], "--out", case.path("out.bin")]


def gpt2_files_with(case, which):
    """--gpt2 and the two files of the case, which of them the mutated one."""
    files = {"encoder": case.copy("encoder", "encoder.json"), "vocab": case.copy("vocab", "vocab.bpe")}
    case.write(os.path.basename(files[which]), case.mutated)
    return ["--gpt2", files["encoder"], files["vocab"]]


def bpe_encode_gpt2(which):
    def place(case):
        case.write("out.bin", OLD_OUTPUT)
        case.tokenizer = gpt2_files_with(case, which)
        return [case.bin("bpe"), "encode", *case.tokenizer, "--input", case.seeds["text"], "--out", case.path("out.bin")]
    return place


def tokenizer_round_trip(case):
    return round_trip(case, case.tokenizer, case.seeds["text"])


def bpe_decode(case):
    return [case.bin("bpe"), "decode", "--tokenizer", case.seeds["tokenizer"], "--input", case.write("in.bin", case.mutated)]


def bpe_train(case):
    case.write("out.bin", OLD_OUTPUT)
    text = case.write("text.txt", case.mutated)
    return [case.bin("bpe"), "train", "--input", text, "--vocab-size", "280", "--out", case.path("out.bin")]


def trained_round_trip(case):
    return round_trip(case, ["--tokenizer", case.path("out.bin")], case.path("text.txt"))


def prepare_data(source):
    """prepare_data into a folder that holds a dataset already; source, mutated: the tokenizer,
    encoder.json, vocab.bpe or the text."""
    def place(case):
        shutil.copytree(os.path.dirname(case.seeds["shard"]), case.path("ds"))
        case.text = case.seeds["text"]
        if source == "tokenizer":
            how = ["--tokenizer", case.write("tok.bin", case.mutated)]
        elif source == "text":
            how, case.text = ["--vocab-size", "280"], case.write("text.txt", case.mutated)
        else:
            how = gpt2_files_with(case, source)
        return [case.bin("prepare_data"), "--out-dir", case.path("ds"), *how, "--split-blank-lines", case.text]
    return place


def dataset_decodes(case):
    # train_NNNNNN.bin, then val_NNNNNN.bin: the documents in order
    shards = sorted(os.path.join(case.path("ds"), n) for n in os.listdir(case.path("ds")) if n != "tokenizer.bin")
    return decodes_to(case, ["--tokenizer", case.path("ds/tokenizer.bin")], shards, case.text)


def train_gpt_data(which):
    """train_gpt on a folder of a training shard, a validation shard and the tokenizer, which of
    them mutated."""
    def place(case):
        for seed in ("shard", "val", "tokenizer"):
            name = "data/" + os.path.basename(case.seeds[seed])
            if seed == which:
                case.write(name, case.mutated)
            else:
                case.copy(seed, name)
        return [case.bin("train_gpt"), "--model", "d2", "-B", "1", "-T", "64", "--train-data", "data/train_*.bin",
                "--tokenizer", "data/tokenizer.bin", "--out-dir", "run", "--log", "run/log.csv"]
    return place


def train_gpt_init_from(case):
    return [case.bin("train_gpt"), "--init-from", case.write("model.bin", case.mutated), "-B", "1", "-T", "64",
            "--train-data", case.seeds["shard"], "--tokenizer", case.seeds["tokenizer"]]


def train_gpt_resume(which, state="state", args=()):
    """train_gpt --resume of a folder whose model (model5) or state file (of the seed state, the
    run of RUN_ARGS and args) is mutated."""
    def place(case):
        for seed, name in (("model5", "ckpt/model_00000005.bin"), (state, "ckpt/state_00000005.bin")):
            if seed == which:
                case.write(name, case.mutated)
            else:
                case.copy(seed, name)
        return [case.bin("train_gpt"), "--resume", case.path("ckpt"), *RUN_ARGS, *args, "--train-data",
                case.seeds["shard"], "--tokenizer", case.seeds["tokenizer"]]
    return place


def generate(which):
    def place(case):
        checkpoint, tokenizer = case.seeds["model3"], case.seeds["tokenizer"]
        if which == "checkpoint":
            checkpoint = case.write("model.bin", case.mutated)
        else:
            tokenizer = case.write("tok.bin", case.mutated)
        return [case.bin("generate"), "--checkpoint", checkpoint, "--tokenizer", tokenizer, "the of and"]
    return place


def evaluate_items(case):
    """evaluate on mutated items, with --scores over an output already there."""
    case.write("scores.csv", OLD_OUTPUT)
    return [case.bin("evaluate"), "--checkpoint", case.seeds["model5"], "--tokenizer", case.seeds["tokenizer"],
            "--hellaswag", case.write("items.jsonl", case.mutated), "--scores", case.path("scores.csv")]


def import_gpt2(which):
    def place(case):
        case.write("out.bin", OLD_OUTPUT)
        case.copy("config", "hf/config.json")
        case.copy("safetensors", "hf/model.safetensors")
        case.write("hf/" + os.path.basename(case.seeds[which]), case.mutated)
        return [*case.script("import_gpt2.py"), case.path("hf"), case.path("out.bin")]
    return place


def imported_exports(case):
    rc, _, err = case.run([*case.script("export_hf.py"), case.path("out.bin"), case.path("back")])
    return None if rc == 0 else f"its checkpoint does not export: {err.strip()[-200:]}"


# The config fields that change what GPT-2 computes in transformers, and the values that are GPT-2's
# (the names of GELU's tanh form; n_inner null or 4 n_embd).
GPT2_CONFIG = {"model_type": ["gpt2"],
               "activation_function": ["gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_accurate"],
               "layer_norm_epsilon": [1e-5], "n_inner": [None, 4 * SHAPE["C"]], "scale_attn_weights": [True],
               "scale_attn_by_inverse_layer_idx": [False], "add_cross_attention": [False],
               "tie_word_embeddings": [True]}


def imported_gpt2_config(case):
    """The config it imported says GPT-2 in every field that changes the model, and the checkpoint exports."""
    try:
        config = json.loads(case.mutated)
    except (ValueError, RecursionError):
        config = None
    for key, values in GPT2_CONFIG.items():
        if isinstance(config, dict) and key in config and not any(
                type(config[key]) is type(v) and config[key] == v for v in values):
            return f"it imported a config whose {key} is {json.dumps(config[key])[:40]} as GPT-2"
    return imported_exports(case)


def imported_tiled_safetensors(case):
    """The tensors of the file it imported tile its data, one after another from its first byte to its last
    (the safetensors library's rule), and the checkpoint exports."""
    (n,) = struct.unpack_from("<Q", case.mutated)
    header, spans = json.loads(case.mutated[8:8 + n]), []
    for name, entry in header.items():
        offsets = entry.get("data_offsets") if isinstance(entry, dict) and name != "__metadata__" else [0, 0]
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(v) is int for v in offsets)):
            return f"it imported a file whose tensor {name[:40]} has data_offsets {json.dumps(offsets)[:40]}"
        spans.append(offsets)
    end = 0
    for begin, span_end in sorted(spans):
        if begin != end or span_end < begin:
            return f"it imported a file with data_offsets {[begin, span_end]} where a tensor from byte {end} belongs"
        end = span_end
    if end != len(case.mutated) - 8 - n:
        return f"it imported a file whose tensors end at byte {end} of its {len(case.mutated) - 8 - n} bytes of data"
    return imported_exports(case)


def export_hf(case):
    return [*case.script("export_hf.py"), case.write("model.bin", case.mutated), case.path("hf")]


def exported_imports(case):
    """The exported folder imports back to the checkpoint's bytes, but the header's unused slots
    and wte's padding rows (zero in the import)."""
    original = bytearray(read(case.path("model.bin")))
    version, maxT, V, L, NH, C, Vp = struct.unpack_from("<7i", original, 4)
    elem = 2 if version == 5 else 4
    original[32:1024] = bytes(1024 - 32)
    original[1024 + V * C * elem:1024 + Vp * C * elem] = bytes((Vp - V) * C * elem)
    flags = ["--bf16"] if version == 5 else []
    rc, _, err = case.run([*case.script("import_gpt2.py"), *flags, case.path("hf"), case.path("back.bin")])
    if rc != 0:
        return f"its folder does not import: {err.strip()[-200:]}"
    return None if read(case.path("back.bin")) == bytes(original) else "its folder imports to other bytes"


def plot_log(case):
    case.write("out.svg", OLD_OUTPUT)
    return [*case.script("plot_log.py"), case.write("log.csv", case.mutated), case.path("out.svg")]


def compare_curves(case):
    """compare_curves.py, the mutated log one side's, the valid one the other's."""
    return [*case.script("compare_curves.py"), "valid", case.seeds["log"], "mutated", case.write("log.csv", case.mutated)]


def curves_finite(case):
    return "it printed nan or inf" if re.search(rb"\bnan|\binf", case.out, re.I) else None


def svg_well_formed(case):
    try:
        svg = ElementTree.parse(case.path("out.svg")).getroot()
    except ElementTree.ParseError as e:
        return f"its SVG does not parse: {e}"
    for element in svg.iter():
        for key, value in element.attrib.items():
            if key in ("points", "x", "y", "x1", "x2", "y1", "y2", "cx", "cy") and re.search("nan|inf", value, re.I):
                return f"its SVG has {key}=\"{value[:60]}\""
    return None


TARGETS = [
    Target("bpe encode: tokenizer.bin", "bpe", "tokenizer", TOKENIZER, bpe_encode_tokenizer, tokenizer_round_trip),
    Target("bpe encode: encoder.json", "bpe", "encoder", TEXTUAL, bpe_encode_gpt2("encoder"), tokenizer_round_trip),
    Target("bpe encode: vocab.bpe", "bpe", "vocab", TEXTUAL, bpe_encode_gpt2("vocab"), tokenizer_round_trip),
    Target("bpe decode: shard", "bpe", "shard", SHARD, bpe_decode),
    Target("bpe decode: uint32 shard", "bpe", "shard32", SHARD, bpe_decode),
    Target("bpe train: text", "bpe", "text", TEXTUAL, bpe_train, trained_round_trip),
    Target("prepare_data: tokenizer.bin", "prepare_data", "tokenizer", TOKENIZER, prepare_data("tokenizer"),
           dataset_decodes),
    Target("prepare_data: encoder.json", "prepare_data", "encoder", TEXTUAL, prepare_data("encoder"), dataset_decodes),
    Target("prepare_data: vocab.bpe", "prepare_data", "vocab", TEXTUAL, prepare_data("vocab"), dataset_decodes),
    Target("prepare_data: text", "prepare_data", "text", TEXTUAL, prepare_data("text"), dataset_decodes),
    Target("train_gpt: train shard", "train_gpt", "shard", SHARD, train_gpt_data("shard")),
    Target("train_gpt: val shard", "train_gpt", "val", SHARD, train_gpt_data("val")),
    Target("train_gpt: tokenizer.bin", "train_gpt", "tokenizer", TOKENIZER, train_gpt_data("tokenizer")),
    Target("train_gpt: --init-from model", "train_gpt", "model5", MODEL5, train_gpt_init_from),
    Target("train_gpt: --resume model", "train_gpt", "model5", MODEL5, train_gpt_resume("model5")),
    Target("train_gpt: --resume state", "train_gpt", "state", STATE, train_gpt_resume("state")),
    Target("train_gpt: --resume Muon state", "train_gpt", "state_muon", STATE,
           train_gpt_resume("state_muon", "state_muon", MUON_ARGS)),
    Target("train_gpt: --resume state header bounds", "train_gpt", "state", STATE_HEADER, train_gpt_resume("state")),
    Target("train_gpt: --resume Muon state header bounds", "train_gpt", "state_muon", STATE_HEADER,
           train_gpt_resume("state_muon", "state_muon", MUON_ARGS)),
    Target("train_gpt: --resume state of a schedule", "train_gpt", "state_schedule", dict(STATE, slots=list(range(46))),
           train_gpt_resume("state_schedule", "state_schedule", MUON_ARGS + SCHEDULE_ARGS)),
    Target("generate: checkpoint", "generate", "model3", MODEL3, generate("checkpoint")),
    Target("generate: tokenizer.bin", "generate", "tokenizer", TOKENIZER, generate("tokenizer")),
    Target("evaluate: items.jsonl", "evaluate", "items", TEXTUAL, evaluate_items),
    Target("import_gpt2.py: model.safetensors", "numpy", "safetensors", SAFETENSORS, import_gpt2("safetensors"),
           imported_tiled_safetensors),
    Target("import_gpt2.py: config.json", "numpy", "config", CONFIG, import_gpt2("config"), imported_gpt2_config),
    Target("export_hf.py: model v5", "numpy", "model5", MODEL5, export_hf, exported_imports),
    Target("export_hf.py: model v3", "numpy", "model3", MODEL3, export_hf, exported_imports),
    Target("plot_log.py: log.csv", "python3", "log", TEXTUAL, plot_log, svg_well_formed),
    Target("compare_curves.py: log.csv", "python3", "log", TEXTUAL, compare_curves, curves_finite),
]


# ----------------------------------------------------------------------------------------------
# A case

def snapshot(folder):
    """Every path under folder, files with a hash of their bytes."""
    out = {}
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(top, name)
            regular = os.path.isfile(path) and not os.path.islink(path)
            out[os.path.relpath(path, folder)] = hashlib.sha1(read(path)).hexdigest() if regular else "not a file"
    return out


def bad_value(fmt, data):
    """The first value of a checkpoint file that is not finite (or a second moment below 0), or
    None."""
    body = data[fmt["header"]:]
    if fmt["elem"] == 2:   # bf16: not finite when the exponent's bits are all ones
        return next((i for i, b in enumerate(array.array("H", body)) if b & 0x7F80 == 0x7F80), None)
    values = array.array("f", body)
    bad = next((i for i, x in enumerate(values) if not math.isfinite(x)), None)
    if bad is None and "second_moments" in fmt:
        first = (fmt["second_moments"] - fmt["header"]) // 4
        bad = next((first + i for i, x in enumerate(values[first:]) if x < 0), None)
    return bad


def must_refuse(fmt, data, mutated, mutations):
    """Why the mutated file is corrupt for sure, or None."""
    if fmt["exact"] and reshape not in mutations and len(mutated) != len(data):
        return "its size does not match its header"
    if "magic" in fmt and mutated[:fmt["magic"]] != data[:fmt["magic"]]:
        return "another magic number"
    if "elem" in fmt and len(mutated) == len(data) and bad_value(fmt, mutated) is not None:
        return f"value {bad_value(fmt, mutated)} not finite, or a second moment below 0"
    if "corrupt" in fmt and len(mutated) == len(data):
        return fmt["corrupt"](mutated)
    return None


def problem_of(target, case, data, mutated, mutations, rc, err, before):
    """What is wrong with the run of a case, or None."""
    sanitizer = re.search(r"AddressSanitizer|LeakSanitizer|runtime error:|Traceback \(most recent call last\)", err)
    if rc is None:
        return f"ran past {case.limit} s"
    if rc < 0:
        return f"ended by signal {-rc}"
    if sanitizer:
        return f"{sanitizer.group()} (exit status {rc})"
    lines = [l for l in err.splitlines() if l.strip()]
    stopped = rc != 0 or target.needs in ("train_gpt", "generate", "evaluate")
    if stopped:
        errors = [l for l in lines if l.startswith("error: ")]
        if rc != 1 or len(errors) != 1 or lines[-1] != errors[0]:
            return f"exit status {rc} with {len(errors)} error lines, the last line not one"
        after = snapshot(case.dir)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        if changed:
            return "failed and changed its folder: " + ", ".join(changed[:4])
    if stopped and not lines[-1].startswith("error: no CUDA device"):
        return None
    why = must_refuse(target.fmt, data, mutated, mutations)
    if why:
        return f"took a file with {why}"
    return target.accept(case) if target.accept and not stopped else None


def run_case(target, index, seeds, bins, python, tmp, seed, limit):
    """(whether the case passed, the changes made, what went wrong and what the program said)."""
    rng = random.Random(f"{seed}:{target.name}:{index}")
    data = read(seeds[target.seed])
    mutations = [rng.choice(target.fmt["mutations"]) for _ in range(rng.choice([1, 1, 1, 1, 2, 3]))]
    mutated, hows = data, []
    for mutation in mutations:
        mutated, how = mutation(rng, mutated, target.fmt)
        hows.append(how)
    folder = os.path.join(tmp, "cases", re.sub(r"[^a-z0-9]+", "_", target.name.lower()) + f"_{index}")
    os.makedirs(folder)
    case = Case(folder, mutated, seeds, bins, python, limit)
    cmd = target.place(case)
    before = snapshot(folder)
    rc, case.out, err = case.run(cmd)
    problem = problem_of(target, case, data, mutated, mutations, rc, err, before)
    if problem is None:
        shutil.rmtree(folder)
        return True, "; ".join(hows), None
    said = err.strip()[-400:].replace("\n", " | ") or f"exit status {rc}, nothing on stderr"
    return False, "; ".join(hows), f"{problem}: {said} (in {folder})"


def main(argv):
    parser = argparse.ArgumentParser(description="every program against mutated copies of its input files")
    parser.add_argument("--cases", type=int, default=30, help="cases per program and file [30]")
    parser.add_argument("--seed", type=int, default=1, help="which cases [1]")
    parser.add_argument("--bin", default=ROOT, help="the folder of the C programs [the repository's]")
    parser.add_argument("--only", default="", help="only the targets whose name holds this text")
    parser.add_argument("--limit", type=float, default=20.0, help="seconds a case may run [20]")
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="cases run at once")
    args = parser.parse_args(argv)
    python = os.environ.get("PYTHON", "python3")
    if os.sep in python:   # the cases run in folders of their own
        python = os.path.abspath(python)
    tmp = os.path.join(os.environ.get("FLASHGPT_TMP", "/tmp"), "fuzz_inputs")
    shutil.rmtree(tmp, ignore_errors=True)
    bins = os.path.abspath(args.bin)
    have = {p: os.access(os.path.join(bins, p), os.X_OK) for p in ("bpe", "prepare_data", "train_gpt", "generate", "evaluate")}
    have["python3"] = True
    have["numpy"] = subprocess.run([python, "-c", "import numpy"], capture_output=True).returncode == 0
    if not have["bpe"]:
        print(f"FAIL fuzz_inputs: no bpe in {bins} to make the valid files with")
        return 1
    seeds = make_seeds(os.path.join(tmp, "seeds"), bins, args.limit)
    failures = 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for target in TARGETS:
            if args.only not in target.name:
                continue
            if not have[target.needs]:
                print(f"SKIPPED fuzz {target.name} ({target.needs} is not {'installed' if target.needs == 'numpy' else 'built'})")
                continue
            jobs = [pool.submit(run_case, target, i, seeds, bins, python, tmp, args.seed, args.limit)
                    for i in range(args.cases)]
            failed = [(i, how, what) for i, (passed, how, what) in enumerate(j.result() for j in jobs) if not passed]
            for i, how, what in failed:
                print(f"FAIL fuzz {target.name}: case {i} ({how}): {what}")
            if not failed:
                print(f"PASS fuzz {target.name} ({args.cases} mutated files)")
            sys.stdout.flush()
            failures += len(failed)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
