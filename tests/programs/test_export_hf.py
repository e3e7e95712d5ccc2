#!/usr/bin/env python3
"""tests/programs/test_export_hf.py: scripts/export_hf.py, checked against scripts/import_gpt2.py.

Round trips on tiny models (fake Hugging Face folders from test_import_gpt2.py, L=2, NH=2, C=16,
maxT=8, V=100; random checkpoints of another shape): import -> export -> import gives the same
checkpoint bytes, fp32 and bf16, and the exported tensors are the Hugging Face ones (read back
here with a reader of this file's own); export -> import of a random checkpoint gives it back.
A checkpoint of version 6 or 7 that holds GPT-2's architecture exports as GPT-2, also one whose
fields without effect (a rotary base without rotary, windows that bound nothing) are dropped as it
is read. Bad input
(checkpoint or output folder, a model of another architecture than GPT-2's, one whose attention
sees a key window per row or one with a part of the 2026 recipe (version 9), a version 6 file cut
short, which is truncated whatever its architecture) must fail with one line on stderr and leave
nothing behind. Files go to
$FLASHGPT_TMP; prints PASS / FAIL lines like tests/lib/test.h.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from case import Case, run_script  # noqa: E402
from test_import_gpt2 import TMP, V, make_checkpoint, nearest_bf16_bits, run_importer  # noqa: E402

EXPORTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                        "export_hf.py")


def run_exporter(*args, **kwargs):
    return run_script(EXPORTER, *args, **kwargs)


def read_safetensors(path):
    """name -> (dtype, shape, raw bytes), checking what the safetensors library checks: the
    data offsets tile the data exactly, in order, with nothing left over."""
    data = open(path, "rb").read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    metadata = header.pop("__metadata__", None)
    body = data[8 + n:]
    spans = sorted((e["data_offsets"], name) for name, e in header.items())
    end = 0
    for (begin, stop), name in spans:
        if begin != end:
            raise ValueError(f"{name} starts at {begin}, not {end}")
        end = stop
    if end != len(body):
        raise ValueError(f"tensors end at {end}, the data at {len(body)}")
    return metadata, {name: (e["dtype"], tuple(e["shape"]), body[e["data_offsets"][0]:e["data_offsets"][1]])
                      for name, e in header.items()}


def decode(dtype, shape, raw):
    if dtype == "F32":
        return np.frombuffer(raw, "<f4").reshape(shape)
    assert dtype == "BF16", dtype
    return np.frombuffer(raw, "<u2").reshape(shape)


def export_ok(case, ckpt, out_dir, *flags):
    """Runs the exporter, which must succeed with one line on stdout. Returns success."""
    result = run_exporter(*flags, ckpt, out_dir)
    ok = case.check(result.returncode == 0, f"export: exit {result.returncode}: {result.stderr.strip()}")
    case.check(result.stderr == "" and len(result.stdout.splitlines()) == 1,
               f"export: want one line on stdout and none on stderr, got {result.stdout!r} {result.stderr!r}")
    return ok


def import_ok(case, hf_dir, out, bf16):
    result = run_importer(*(["--bf16"] if bf16 else []), hf_dir, out)
    return case.check(result.returncode == 0, f"import: exit {result.returncode}: {result.stderr.strip()}")


def check_folder(case, out_dir, want_dtype, shape):
    """config.json and model.safetensors as export_hf.py promises; returns the tensors."""
    maxT, vocab, layers, heads, channels = shape
    case.check(sorted(os.listdir(out_dir)) == ["config.json", "model.safetensors"],
               f"folder holds {sorted(os.listdir(out_dir))}")
    config = json.load(open(os.path.join(out_dir, "config.json")))
    want = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": channels,
            "n_layer": layers, "n_head": heads, "n_positions": maxT, "n_ctx": maxT,
            "vocab_size": vocab, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new",
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16" if want_dtype == "BF16" else "float32"}
    wrong = {k: config.get(k) for k, v in want.items() if config.get(k) != v}
    case.check(not wrong, f"config.json has {wrong}")
    try:
        metadata, tensors = read_safetensors(os.path.join(out_dir, "model.safetensors"))
    except (ValueError, KeyError) as e:
        case.check(False, f"model.safetensors is malformed: {e}")
        return {}
    case.check(metadata == {"format": "pt"}, f"metadata {metadata}")
    dtypes = {dtype for dtype, _, _ in tensors.values()}
    case.check(dtypes == {want_dtype}, f"dtypes {dtypes}, expected {want_dtype}")
    case.check(all(n.startswith("transformer.") for n in tensors), "a name lacks 'transformer.'")
    return {n[len("transformer."):]: decode(*t) for n, t in tensors.items()}


def case_round_trip(name, bf16, fp32_flag=False):
    """HF -> import -> export -> import: the same bytes; the exported tensors are the HF ones
    (bf16: rounded as the importer rounds them; --fp32: those values widened)."""
    case = Case(name)
    tag = name.split(":")[0].replace(" ", "_")
    hf_dir, hf = make_checkpoint(f"export_{tag}", np.random.default_rng(11), extras=False)
    first, second = os.path.join(hf_dir, "first.bin"), os.path.join(hf_dir, "second.bin")
    out_dir = os.path.join(TMP, f"export_{tag}_hf")
    if import_ok(case, hf_dir, first, bf16) and export_ok(case, first, out_dir, *(["--fp32"] if fp32_flag else [])):
        dtype = "BF16" if bf16 and not fp32_flag else "F32"
        got = check_folder(case, out_dir, dtype, (8, V, 2, 2, 16))
        want_names = set(hf)
        case.check(set(got) == want_names, f"tensors {sorted(set(got) ^ want_names)} differ in presence")
        for n in sorted(want_names & set(got)):
            want = hf[n]
            if bf16:
                want = nearest_bf16_bits(want)
                if fp32_flag:
                    want = (want.astype(np.uint32) << 16).view(np.float32)
            if not case.check(got[n].shape == want.shape and np.array_equal(got[n], want), f"{n} differs"):
                break
        if import_ok(case, out_dir, second, bf16):
            case.check(open(first, "rb").read() == open(second, "rb").read(),
                       "the re-imported checkpoint's bytes differ")
    case.end()


def random_checkpoint(path, rng, bf16, shape=(16, 130, 3, 4, 32)):
    """A checkpoint of random values (wte's padding rows zero, as the trainer keeps them),
    written here from the format, independently of the scripts."""
    maxT, vocab, L, NH, C = shape
    Vp = (vocab + 127) // 128 * 128
    wte = np.zeros((Vp, C), np.float32)
    wte[:vocab] = rng.normal(0, 1, (vocab, C))
    rest = rng.normal(0, 1, maxT * C + L * (12 * C * C + 13 * C) + 2 * C).astype(np.float32)
    values = np.concatenate([wte.ravel(), rest])
    header = np.zeros(256, "<i4")
    header[:8] = [20240326, 5 if bf16 else 3, maxT, vocab, L, NH, C, Vp]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(nearest_bf16_bits(values).astype("<u2").tobytes() if bf16 else values.astype("<f4").tobytes())


def case_random(bf16):
    case = Case(f"export then import a random {'bf16' if bf16 else 'fp32'} checkpoint: the same bytes")
    tag = "bf16" if bf16 else "fp32"
    ckpt = os.path.join(TMP, f"random_{tag}.bin")
    back = os.path.join(TMP, f"random_{tag}_back.bin")
    out_dir = os.path.join(TMP, f"random_{tag}_hf")
    random_checkpoint(ckpt, np.random.default_rng(3), bf16)
    if export_ok(case, ckpt, out_dir):
        check_folder(case, out_dir, "BF16" if bf16 else "F32", (16, 130, 3, 4, 32))
        if import_ok(case, out_dir, back, bf16):
            case.check(open(ckpt, "rb").read() == open(back, "rb").read(), "the bytes differ")
    case.end()


def case_empty_out_dir():
    case = Case("export into an existing empty folder")
    ckpt, out_dir = os.path.join(TMP, "empty_dir.bin"), os.path.join(TMP, "empty_dir_hf")
    random_checkpoint(ckpt, np.random.default_rng(4), bf16=True)
    os.makedirs(out_dir)
    if export_ok(case, ckpt, out_dir + "/"):
        check_folder(case, out_dir, "BF16", (16, 130, 3, 4, 32))
    case.end()


def leftovers():
    return sorted(n for n in os.listdir(TMP) if ".tmp" in n)


def case_error(name, must_mention, args, out_dir=None, limit_s=120):
    """The exporter must fail within limit_s seconds with one stderr line naming must_mention,
    leave out_dir as it was (absent, or holding what it held) and no temporary folder."""
    case = Case(name)
    before = sorted(os.listdir(out_dir)) if out_dir and os.path.isdir(out_dir) else None
    result = run_exporter(*args, limit_s=limit_s)
    lines = result.stderr.splitlines()
    case.check(result.returncode not in (0, None), f"exit status {result.returncode}")
    case.check(len(lines) == 1, f"want one line on stderr, got {result.stderr!r}")
    case.check(must_mention in result.stderr, f"message {result.stderr.strip()!r} lacks {must_mention!r}")
    if out_dir:
        after = sorted(os.listdir(out_dir)) if os.path.isdir(out_dir) else None
        case.check(after == before, f"{out_dir} held {before}, now {after}")
    case.check(not leftovers(), f"left behind: {leftovers()}")
    case.end()


def bad_checkpoint(name, edit):
    """A valid random fp32 checkpoint, then edit(bytearray) applied to its bytes."""
    path = os.path.join(TMP, name + ".bin")
    random_checkpoint(path, np.random.default_rng(5), bf16=False)
    data = bytearray(open(path, "rb").read())
    data = edit(data)
    open(path, "wb").write(bytes(data))
    return path


def set_header(index, value):
    def edit(data):
        data[4 * index:4 * index + 4] = int(value).to_bytes(4, "little", signed=True)
        return data
    return edit


ARCH_SLOTS = 12 + 64  # header slots 8-83: gpt_architecture.py's fields, the floats by their bits, then 64 windows
# The 2026 recipe's parts, slots 84 on (versions 8, 9).
PARTS = ("embedding_norm", "qk_scale", "residual_lambdas", "value_embeddings", "smear", "backout")
GPT2_ARCH = dict(rotary=0, rotary_base=10000.0, rms_norm=0, qk_norm=0, relu2=0, bias=1, untied_head=0, zero_init=0,
                 softcap=0.0, documents=0, document_token=0, window_count=0)
MODERN_ARCH = dict(GPT2_ARCH, rotary=1, rms_norm=1, qk_norm=1, relu2=1, bias=0, untied_head=1, zero_init=1,
                   softcap=30.0)


def arch_checkpoint(name, arch, bf16, shape=(16, 130, 3, 4, 32), cut=0):
    """A checkpoint of version 6 (fp32) or 7 (bf16) of random values holding the architecture
    arch (GPT2_ARCH's fields, and the list of windows under "windows", else none), or with a part
    (PARTS) of version 8 or 9, written here from the format: the tensors the architecture has, in
    the order of gpt2_checkpoint.py's layout; its last cut bytes cut off. Returns (path, the
    parameters as float32 in that order)."""
    maxT, vocab, L, NH, C = shape
    Vp = (vocab + 127) // 128 * 128
    norm, bias = not arch["rms_norm"], arch["bias"]
    per_layer = 12 * C * C + 9 * C * bias + 4 * C * norm
    parts_count = 2 * L * arch.get("residual_lambdas", 0) + \
        (L + 1) // 2 * (Vp * C + NH * 12) * arch.get("value_embeddings", 0) + 25 * arch.get("smear", 0) + \
        arch.get("backout", 0)
    count = Vp * C * (1 + arch["untied_head"]) + maxT * C * (not arch["rotary"]) + L * per_layer + 2 * C * norm + \
        parts_count
    values = np.random.default_rng(7).normal(0, 1, count).astype(np.float32)
    values[vocab * C:Vp * C] = 0  # wte's padding rows
    if bf16:
        values = (nearest_bf16_bits(values).astype(np.uint32) << 16).view(np.float32)
    def slots(values):
        return [np.float32(v).view("<i4") if isinstance(v, float) else v for v in values]
    parts = [arch.get(k, 0) for k in PARTS]
    header = np.zeros(256, "<i4")
    header[:8] = [20240326, (9 if any(parts) else 7) if bf16 else (8 if any(parts) else 6), maxT, vocab, L, NH, C, Vp]
    fields = slots(v for k, v in arch.items() if k != "windows" and k not in PARTS)
    header[8:8 + len(fields)] = fields
    windows = arch.get("windows", [])
    header[8 + ARCH_SLOTS - 64:8 + ARCH_SLOTS - 64 + len(windows)] = windows
    header[8 + ARCH_SLOTS:8 + ARCH_SLOTS + len(parts)] = slots(parts)
    path = os.path.join(TMP, name + ".bin")
    data = header.tobytes() + (nearest_bf16_bits(values).astype("<u2") if bf16 else values.astype("<f4")).tobytes()
    with open(path, "wb") as f:
        f.write(data[:len(data) - cut])
    return path, values


def case_gpt2_in_version_6(bf16):
    """A checkpoint of version 6 or 7 whose architecture is GPT-2's exactly (as train_gpt writes
    one, which generate and train_gpt take) exports as GPT-2: importing the folder gives its
    parameters back."""
    version = 7 if bf16 else 6
    case = Case(f"export a version {version} checkpoint of GPT-2's architecture: its parameters come back")
    ckpt, values = arch_checkpoint(f"gpt2_v{version}", GPT2_ARCH, bf16)
    out_dir, back = os.path.join(TMP, f"gpt2_v{version}_hf"), os.path.join(TMP, f"gpt2_v{version}_back.bin")
    if export_ok(case, ckpt, out_dir) and import_ok(case, out_dir, back, bf16):
        got = np.fromfile(back, "<u2" if bf16 else "<f4", offset=1024)
        want = nearest_bf16_bits(values) if bf16 else values
        case.check(np.array_equal(got, want), "the imported parameters differ")
    case.end()


def case_fields_without_effect():
    """A checkpoint of version 6 or 7 holding a field without effect reads as the model it computes,
    the field dropped (as train_gpt reads it): a GPT-2 with a rotary base, a window of the context
    or more, or a pattern whose bound lies past the layers exports as GPT-2, its parameters coming
    back; a pattern longer than the layers keeps the entries the layers take."""
    sys.path.insert(0, os.path.dirname(EXPORTER))
    from gpt2_checkpoint import Checkpoint
    from gpt_architecture import GPT2
    for name, arch, bf16 in (("base_5000", dict(GPT2_ARCH, rotary_base=5000.0), True),
                             ("window_of_the_context", dict(GPT2_ARCH, window_count=1, windows=[16]), False),
                             ("windows_past_the_context", dict(GPT2_ARCH, window_count=2, windows=[99, 16]), True),
                             ("bound_past_the_layers", dict(GPT2_ARCH, window_count=4, windows=[0, 0, 0, 8]), False)):
        case = Case(f"export a version {7 if bf16 else 6} GPT-2 holding a field without effect ({name}): "
                    "read as GPT-2, its parameters come back")
        ckpt, values = arch_checkpoint(f"without_effect_{name}", arch, bf16)
        case.check(Checkpoint(ckpt).arch == GPT2, f"read as {Checkpoint(ckpt).arch}")
        out_dir, back = os.path.join(TMP, f"without_effect_{name}_hf"), os.path.join(TMP, f"without_effect_{name}.bin")
        if export_ok(case, ckpt, out_dir) and import_ok(case, out_dir, back, bf16):
            got = np.fromfile(back, "<u2" if bf16 else "<f4", offset=1024)
            case.check(np.array_equal(got, nearest_bf16_bits(values) if bf16 else values), "the imported parameters differ")
        case.end()
    case = Case("a version 6 pattern of 4 windows on 3 layers reads as the 3 the layers take")
    ckpt, _ = arch_checkpoint("four_windows", dict(GPT2_ARCH, window_count=4, windows=[8, 0, 99, 4]), False)
    read = Checkpoint(ckpt).arch
    case.check((read.window_count, read.windows[:4]) == (3, (8, 0, 0, 0)), f"read as {read}")
    case.end()
    case_error("error: a GPT-2 whose pattern bounds a layer still has key windows", "sees a key window per row",
               [ckpt, os.path.join(TMP, "four_windows_hf")], os.path.join(TMP, "four_windows_hf"))


def main():
    case_round_trip("fp32: import, export, import", bf16=False)
    case_round_trip("bf16: import --bf16, export, import --bf16", bf16=True)
    case_round_trip("bf16 --fp32: import --bf16, export --fp32, import --bf16", bf16=True, fp32_flag=True)
    case_random(bf16=False)
    case_random(bf16=True)
    case_empty_out_dir()

    case = Case("export --help prints the usage")
    result = run_exporter("--help")
    case.check(result.returncode == 0 and result.stdout.startswith("usage: "), f"got {result!r}")
    case.end()

    out = os.path.join(TMP, "error_hf")
    good = bad_checkpoint("good", lambda d: d)
    case_error("error: no arguments", "usage", [])
    case_error("error: unknown flag", "--bf8", ["--bf8", good, out])
    case_error("error: missing checkpoint", "nowhere.bin", [os.path.join(TMP, "nowhere.bin"), out], out)
    case_error("error: checkpoint shorter than its header", "truncated",
               [bad_checkpoint("short", lambda d: d[:1000]), out], out)
    case_error("error: bad magic", "not a model checkpoint",
               [bad_checkpoint("magic", set_header(0, 20240520)), out], out)
    case_error("error: unsupported version", "version 4", [bad_checkpoint("version", set_header(1, 4)), out], out)
    case_gpt2_in_version_6(bf16=False)
    case_gpt2_in_version_6(bf16=True)
    case_fields_without_effect()
    case_error("error: a model of the modern architecture (version 7)", "no transformers architecture computes it",
               [arch_checkpoint("modern", MODERN_ARCH, bf16=True)[0], out], out)
    case_error("error: a GPT-2 whose attention has documents (version 7)", "sees a key window per row",
               [arch_checkpoint("masked", dict(GPT2_ARCH, documents=1, document_token=129), bf16=True)[0], out], out)
    case_error("error: a GPT-2 with an embedding norm (version 9)", "a part of the 2026 recipe",
               [arch_checkpoint("parts", dict(GPT2_ARCH, embedding_norm=1), bf16=True)[0], out], out)
    case_error("error: a GPT-2 with residual lambdas (version 8)", "a part of the 2026 recipe",
               [arch_checkpoint("lambdas", dict(GPT2_ARCH, residual_lambdas=1), bf16=False)[0], out], out)
    case_error("error: a GPT-2 with value embeddings (version 9)", "a part of the 2026 recipe",
               [arch_checkpoint("values", dict(GPT2_ARCH, value_embeddings=1), bf16=True)[0], out], out)
    case_error("error: a GPT-2 with the smear (version 8)", "a part of the 2026 recipe",
               [arch_checkpoint("smear", dict(GPT2_ARCH, smear=1), bf16=False)[0], out], out)
    case_error("error: a GPT-2 with the backout (version 9)", "a part of the 2026 recipe",
               [arch_checkpoint("backout", dict(GPT2_ARCH, backout=1), bf16=True)[0], out], out)
    case_error("error: a modern model cut short (version 6): truncated, not another architecture", "truncated (",
               [arch_checkpoint("modern_cut", MODERN_ARCH, bf16=False, cut=2)[0], out], out)
    header_cut = arch_checkpoint("modern_header_cut", MODERN_ARCH, bf16=False)[0]
    os.truncate(header_cut, 600)
    case_error("error: a version 6 file cut in its header: truncated", "truncated (", [header_cut, out], out)
    case_error("error: heads do not divide channels", "corrupt header",
               [bad_checkpoint("heads", set_header(5, 5)), out], out)
    case_error("error: Vp is not V padded", "corrupt header",
               [bad_checkpoint("vp", set_header(7, 130)), out], out)
    case_error("error: truncated parameters", "truncated",
               [bad_checkpoint("truncated", lambda d: d[:-2]), out], out)
    case_error("error: trailing bytes", "trailing bytes",
               [bad_checkpoint("trailing", lambda d: d + b"\0\0\0\0"), out], out)
    case_error("error: a parameter not finite", "parameter 1000 is not finite",
               [bad_checkpoint("nan", lambda d: d[:1024 + 4 * 1000] + b"\0\0\xc0\x7f" + d[1024 + 4 * 1001:]), out], out)
    bf16 = os.path.join(TMP, "nan_bf16.bin")
    random_checkpoint(bf16, np.random.default_rng(6), bf16=True)
    with open(bf16, "r+b") as f:
        f.seek(1024 + 2 * 777)
        f.write(b"\x80\xff")  # -inf
    case_error("error: a bf16 parameter not finite", "parameter 777 is not finite", [bf16, out], out)
    case_error("error: the checkpoint a folder", "is a directory", [TMP, out], out)
    case_error("error: a header of 50000000 layers on a small file, at once", "truncated",
               [bad_checkpoint("layers", set_header(4, 50_000_000)), out], out, limit_s=30)

    full = os.path.join(TMP, "full_hf")
    os.makedirs(full)
    open(os.path.join(full, "keep.txt"), "w").write("mine")
    case_error("error: output folder not empty (kept as it was)", "not an empty folder", [good, full], full)
    case_error("error: output is a file", "not an empty folder", [good, good])
    case_error("error: output folder unwritable", "cannot write", [good, os.path.join(TMP, "nowhere", "hf")])
    return 1 if Case.failures else 0


if __name__ == "__main__":
    sys.exit(main())
