"""scripts/gpt2_checkpoint.py: what import_gpt2.py and export_hf.py share, with numpy alone:
the flashgpt model checkpoint, how its parameters map to Hugging Face GPT-2 tensors, bf16 bits,
and the safetensors file.

The checkpoint is llm.c's: int32 header[256] ([0] 20240326, [1] version 3 (fp32 parameters) or
5 (bf16), [2] maxT, [3] V, [4] L, [5] NH, [6] C, [7] Vp = V rounded up to a multiple of 128),
then the parameters in the parameter table's order (scripts/gpt_parameters.py), GPT-2's:
  wte (Vp, C), wpe (maxT, C), ln1w (L, C), ln1b (L, C), qkvw (L, 3C, C), qkvb (L, 3C),
  attprojw (L, C, C), attprojb (L, C), ln2w (L, C), ln2b (L, C), fcw (L, 4C, C), fcb (L, 4C),
  fcprojw (L, C, 4C), fcprojb (L, C), lnfw (C), lnfb (C)
A per-layer parameter is its L layers one after the other, so the file is a run of slices that
each match one Hugging Face tensor (layout() lists them). wte's rows past V are padding (zero):
Hugging Face's wte.weight has V rows. GPT-2 stores its linear layers as Conv1D, weight (in, out);
flashgpt stores (out, in), so those slices are the transposes of the Hugging Face tensors.
Versions 6 (fp32) and 7 (bf16) are train_gpt's models of another architecture (gpt/checkpoint.h):
header slots 8-83 hold it (scripts/gpt_architecture.py's fields in their order, the floats by
their bits, the windows one slot each; every later slot 0; a field without effect is dropped as
the file is read, so that a GPT-2 in a version 6 file is GPT-2), and the parameters are the
tensors it has in the table's order (scripts/gpt_parameters.py), lm_head (Vp, C) last when its head is untied (named lm_head.weight, padding rows past V).
Versions 8 (fp32) and 9 (bf16) are those of a model with a part of the 2026 recipe: the parts'
slots from 84 on too (gpt_architecture.PARTS), every later slot 0. The import writes GPT-2's
versions; the export takes them, and versions 6 to 9 holding GPT-2's architecture; Checkpoint
reads all six.

safetensors: an 8-byte little-endian header length, a JSON header giving each tensor's dtype,
shape and data_offsets (from the end of the header; "__metadata__" holds strings), then the data,
which the tensors tile (SafeTensors.check_tiling).
"""
import json
import os
import sys
from typing import NamedTuple

try:
    import numpy as np
except ImportError:
    np = None  # a script says so once its arguments are read (needed.exit_without)

import gpt_parameters
from gpt_architecture import (FLOAT_FIELDS, GPT2, MAX_WINDOWS, PARTS_SLOT, SLOTS, Architecture, drop_without_effect,
                               invalid)
from gpt_parameters import Shape, padded_vocab  # noqa: F401  (the scripts take them from here too)
from needed import exit_without
from output_file import Failure, atomic_output, fail

CHECKPOINT_MAGIC = 20240326
VERSION_FP32, VERSION_BF16 = 3, 5
VERSION_ARCH_FP32, VERSION_ARCH_BF16 = 6, 7
VERSION_PARTS_FP32, VERSION_PARTS_BF16 = 8, 9
VERSIONS_PARTS = (VERSION_PARTS_FP32, VERSION_PARTS_BF16)
VERSIONS_OTHER_ARCHITECTURE = (VERSION_ARCH_FP32, VERSION_ARCH_BF16) + VERSIONS_PARTS
ARCHITECTURE_SLOTS = slice(8, 8 + SLOTS)
PARTS_HEADER_SLOT = 8 + PARTS_SLOT  # the first header slot past versions 6 and 7's
HEADER_INTS = 256
HEADER_BYTES = 4 * HEADER_INTS
# The largest size a header slot (int32) holds, also once the vocabulary is padded to 128.
MAX_SIZE = 2 ** 31 - 128
SAFETENSORS_DTYPES = {"F32": 4, "F16": 2, "BF16": 2}
SAFETENSORS_MAX_HEADER = 100_000_000  # the safetensors library refuses longer headers


def run_command_line(argv, usage, flag, expected, run):
    """The command line of the import and export scripts: -h, an optional flag, two paths.
    Calls run(first, second, flag_given), numpy there, and prints its line; any Failure is one
    error line. Returns the exit status."""
    if "-h" in argv or "--help" in argv:
        print(usage)
        return 0
    args = [a for a in argv if a != flag]
    unknown = [a for a in args if a.startswith("-")]
    if unknown:
        print(f"error: unknown flag {unknown[0]} ({usage})", file=sys.stderr)
        return 1
    if len(args) != 2:
        print(f"error: expected {expected} ({usage})", file=sys.stderr)
        return 1
    if "" in args:
        print(f"error: an empty name among {expected} ({usage})", file=sys.stderr)
        return 1
    exit_without(numpy=np)
    try:
        print(run(args[0], args[1], flag in argv))
    except Failure as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def check_regular_file(path):
    """Fails naming path unless it is a regular file (the readers map it and check its size)."""
    if not os.path.exists(path):
        fail(f"{path}: no such file")
    if not os.path.isfile(path):
        fail(f"{path}: {'is a directory' if os.path.isdir(path) else 'not a regular file'}")


class Slice(NamedTuple):
    """One Hugging Face tensor and where it sits in the checkpoint."""
    hf_name: str        # without the "transformer." prefix
    hf_shape: tuple     # as Hugging Face stores it
    shape: tuple        # as the checkpoint stores it
    transposed: bool    # a Conv1D weight: shape is hf_shape reversed
    kind: gpt_parameters.Kind   # the tensor of the parameter table it is (a slice of)



def parameter_count(s, hf=False, arch=GPT2):
    """The parameters the checkpoint of a model of shape s and architecture arch holds (hf:
    Hugging Face's, whose wte has V rows, not Vp), from the sizes alone: a header's sizes can be
    checked against a file's before layout(s) lists 12 L slices."""
    return gpt_parameters.count(s, arch, vocab_rows=s.V if hf else None)


def layout(s, arch=GPT2):
    """The checkpoint's slices in file order: those of the tensors architecture arch has, a
    per-layer one's layer by layer, each by its Hugging Face name (gpt_parameters.slice_names)."""
    slices = []
    for kind, _ in gpt_parameters.layout(s, arch):
        transposed = gpt_parameters.conv1d(kind)
        shape = gpt_parameters.slice_shape(kind, s)
        hf_shape = gpt_parameters.slice_shape(kind, s, vocab_rows=s.V)
        hf_shape = hf_shape[::-1] if transposed else hf_shape
        slices += [Slice(name, hf_shape, shape, transposed, kind) for name in gpt_parameters.slice_names(kind, s, arch)]
    return slices


def to_checkpoint(sl, hf_tensor):
    """A Hugging Face tensor as its checkpoint slice: transposed or zero-padded as it must be."""
    if sl.transposed:
        return hf_tensor.T
    if sl.shape != sl.hf_shape:  # wte, lm_head: padding rows
        padded = np.zeros(sl.shape, dtype=hf_tensor.dtype)
        padded[:sl.hf_shape[0]] = hf_tensor
        return padded
    return hf_tensor


def to_hf(sl, slice_values):
    """A checkpoint slice as its Hugging Face tensor: transposed or cut to V rows."""
    if sl.transposed:
        return slice_values.T
    return slice_values[:sl.hf_shape[0]]


def to_bf16_bits(x):
    """float32 -> bf16 bit patterns (uint16), round to nearest, ties to even; NaN stays NaN."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def from_bf16_bits(bits):
    """bf16 bit patterns -> float32, exactly (bf16 is the upper half of a float32)."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def write_checkpoint(path, shape, bf16, slices, inputs):
    """Writes the checkpoint of `shape` whose slices (float32, in layout order) come one at a
    time from `slices`, by output_file's rules (inputs: the files they are read from). Returns
    the parameter count."""
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[:8] = [CHECKPOINT_MAGIC, VERSION_BF16 if bf16 else VERSION_FP32, shape.maxT, shape.V,
                  shape.L, shape.NH, shape.C, shape.Vp]
    count = 0
    with atomic_output(path, inputs) as f:
        f.write(header.tobytes())
        for values in slices:
            f.write(to_bf16_bits(values).astype("<u2").tobytes() if bf16
                    else np.ascontiguousarray(values, dtype="<f4").tobytes())
            count += values.size
    return count


def architecture_from_slots(slots):
    """The Architecture in a header's slots from 8 on (int32, a slot per field in its order, the
    float fields by their bits, the windows MAX_WINDOWS of them)."""
    slots = np.asarray(slots, dtype="<i4")
    floats = slots.view("<f4")
    fields, at = {}, 0
    for field in Architecture._fields:
        if field == "windows":
            fields[field] = tuple(int(w) for w in slots[at:at + MAX_WINDOWS])
            at += MAX_WINDOWS
        else:
            fields[field] = float(floats[at]) if field in FLOAT_FIELDS else int(slots[at])
            at += 1
    return Architecture(**fields)


class Checkpoint:
    """A checkpoint file, checked (magic, version, sizes, the architecture, file size, every value
    finite, as train_gpt requires) and mapped: shape, arch (GPT2 for versions 3 and 5; a field
    without effect dropped, as train_gpt reads it: gpt_architecture.drop_without_effect), bf16.
    refuse: a function of the architecture that says why the caller cannot take it (or None),
    asked once the header and the file size check out, before the values are read."""

    def __init__(self, path, refuse=None):
        self.path = path
        check_regular_file(path)
        size = os.path.getsize(path)
        if size < HEADER_BYTES:
            fail(f"{path}: truncated ({size} bytes, less than the {HEADER_BYTES}-byte header)")
        header = np.fromfile(path, dtype="<i4", count=HEADER_INTS)
        if header[0] != CHECKPOINT_MAGIC:
            fail(f"{path}: not a model checkpoint (magic {header[0]}, expected {CHECKPOINT_MAGIC})")
        self.version = int(header[1])
        if self.version not in (VERSION_FP32, VERSION_BF16) + VERSIONS_OTHER_ARCHITECTURE:
            fail(f"{path}: unsupported checkpoint version {self.version} (expected {VERSION_FP32} or "
                 f"{VERSION_BF16}: GPT-2, fp32 or bf16; {VERSION_ARCH_FP32} or {VERSION_ARCH_BF16}: another "
                 f"architecture; {VERSION_PARTS_FP32} or {VERSION_PARTS_BF16}: with a part of the 2026 recipe)")
        maxT, V, L, NH, C, Vp = (int(v) for v in header[2:8])
        if min(maxT, V, L, NH, C) <= 0 or C % NH or Vp != padded_vocab(V):
            fail(f"{path}: corrupt header (maxT {maxT}, V {V}, L {L}, NH {NH}, C {C}, Vp {Vp})")
        self.shape = Shape(maxT, V, L, NH, C)
        self.arch = GPT2
        if self.version in VERSIONS_OTHER_ARCHITECTURE:
            # Versions 6 and 7 end before the parts' slots, whose zeros read as none of them.
            end = ARCHITECTURE_SLOTS.stop if self.version in VERSIONS_PARTS else PARTS_HEADER_SLOT
            past = np.flatnonzero(header[end:])
            if past.size:
                slot = end + int(past[0])
                fail(f"{path}: corrupt header: slot {slot} holds {header[slot]}, past the architecture every slot is 0")
            self.arch = architecture_from_slots(header[ARCHITECTURE_SLOTS])
            why = invalid(self.arch)
            if not why:
                self.arch = drop_without_effect(self.arch, self.shape)[0]  # read as the model it computes
                if self.arch.documents and self.arch.document_token >= V:
                    why = f"the document token {self.arch.document_token} is outside the vocabulary"
            if why:
                fail(f"{path}: corrupt header: {why}")
        self.bf16 = self.version in (VERSION_BF16, VERSION_ARCH_BF16, VERSION_PARTS_BF16)
        count = parameter_count(self.shape, arch=self.arch)
        want = HEADER_BYTES + count * (2 if self.bf16 else 4)
        if size != want:
            fail(f"{path}: {'truncated' if size < want else 'trailing bytes'} "
                 f"({size} bytes, expected {want} for this header)")
        why = refuse(self.arch) if refuse else None
        if why:
            fail(f"{path}: version {self.version}, {why}")
        self.values = np.memmap(path, dtype="<u2" if self.bf16 else "<f4", mode="r",
                                offset=HEADER_BYTES, shape=(count,))
        chunk = 1 << 24  # values checked at a time, so that no copy of the whole model is made
        for start in range(0, count, chunk):
            part = self.values[start:start + chunk]
            bad = (part & 0x7F80) == 0x7F80 if self.bf16 else ~np.isfinite(part)  # bf16: exponent all ones
            if bad.any():
                fail(f"{path}: parameter {start + int(np.argmax(bad))} is not finite: corrupt checkpoint")

    def slices(self):
        """(Slice, its values as stored: bf16 bits or float32, in checkpoint shape) in order."""
        offset = 0
        for sl in layout(self.shape, self.arch):
            n = int(np.prod(sl.shape))
            yield sl, self.values[offset:offset + n].reshape(sl.shape)
            offset += n


class SafeTensors:
    """The tensors of one .safetensors file, mapped, not read, until asked for."""

    def __init__(self, path):
        self.path = path
        check_regular_file(path)
        size = os.path.getsize(path)
        if size < 8:
            fail(f"{path}: truncated ({size} bytes, no header)")
        with open(path, "rb") as f:
            header_len = int.from_bytes(f.read(8), "little")
            if header_len > SAFETENSORS_MAX_HEADER:
                fail(f"{path}: not a safetensors file (header of {header_len} bytes, "
                     f"more than safetensors' {SAFETENSORS_MAX_HEADER})")
            if header_len > size - 8:
                fail(f"{path}: truncated (header of {header_len} bytes, file of {size})")
            try:
                header = json.loads(f.read(header_len))
            except (ValueError, RecursionError):  # RecursionError: nested past Python's stack
                fail(f"{path}: not a safetensors file (header is not JSON)")
        if not isinstance(header, dict):
            fail(f"{path}: not a safetensors file (header is not a JSON object)")
        header.pop("__metadata__", None)
        self.entries = header
        self.data_start = 8 + header_len
        self.data_len = size - self.data_start
        self.check_tiling()
        self.data = np.memmap(path, dtype=np.uint8, mode="r")

    def check_tiling(self):
        """Fails unless the tensors' data_offsets tile the data, each tensor's bytes right after
        the one before, from the data's first byte to its last (the safetensors library's rule):
        no two tensors share a byte, and no byte belongs to none."""
        spans = []
        for name, entry in self.entries.items():
            offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
            if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(v) is int for v in offsets)):
                fail(f"{self.path}: tensor '{name}' has a malformed header entry (data_offsets)")
            if not 0 <= offsets[0] <= offsets[1]:
                fail(f"{self.path}: tensor '{name}' has data_offsets {offsets}, not 0 <= begin <= end")
            spans.append((offsets[0], offsets[1], name))
        end, last = 0, None
        for begin, span_end, name in sorted(spans):
            if begin < end:
                fail(f"{self.path}: tensors '{last}' and '{name}' overlap (data_offsets up to {end} and from {begin})")
            if begin > end:
                where = f"after '{last}', before '{name}'" if last else f"before '{name}'"
                fail(f"{self.path}: bytes {end} to {begin} of the data ({where}) belong to no tensor")
            end, last = span_end, name
        if end > self.data_len:
            fail(f"{self.path}: truncated (tensor '{last}' ends at byte {self.data_start + end}, the file at "
                 f"{self.data_start + self.data_len})")
        if end < self.data_len:
            fail(f"{self.path}: {self.data_len - end} bytes past the last tensor's end, which belong to no tensor")

    def find(self, name):
        """The stored name of a tensor, with or without the "transformer." prefix, or None."""
        for stored in (name, "transformer." + name):
            if stored in self.entries:
                return stored
        return None

    def get(self, name, shape):
        """The tensor `name` as float32 after checking its dtype, shape, bounds and values (all
        finite, as train_gpt requires)."""
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
        if end - begin != nbytes:  # check_tiling: begin <= end <= data_len
            fail(f"{where} has data_offsets {[begin, end]}, which do not span its {nbytes} bytes")
        raw = self.data[self.data_start + begin:self.data_start + end]
        if dtype == "F32":
            values = raw.view("<f4")
        elif dtype == "F16":
            values = raw.view("<f2").astype(np.float32)
        else:
            values = from_bf16_bits(raw.view("<u2"))
        finite = np.isfinite(values)
        if not finite.all():
            fail(f"{where}: value {int(np.argmin(finite))} is not finite: corrupt checkpoint")
        return values.reshape(shape)


def write_safetensors(path, index, values, metadata):
    """Writes the tensors index lists as (name, dtype "F32" or "BF16", shape): their header
    first, then their data, taken from `values` (float32 or bf16 bits, in index order) one
    array at a time, so that a whole model is never in memory. metadata: str -> str."""
    header = {"__metadata__": metadata}
    offset = 0
    for name, dtype, shape in index:
        nbytes = int(np.prod(shape)) * SAFETENSORS_DTYPES[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        for (name, dtype, shape), array in zip(index, values):
            if tuple(array.shape) != tuple(shape):
                raise ValueError(f"{name}: shape {array.shape}, header says {shape}")
            f.write(np.ascontiguousarray(array, dtype="<f4" if dtype == "F32" else "<u2").tobytes())
