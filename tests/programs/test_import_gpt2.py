#!/usr/bin/env python3
"""tests/programs/test_import_gpt2.py: scripts/import_gpt2.py on tiny fake Hugging Face checkpoints.

Each case writes a config.json and a model.safetensors (L=2, NH=2, C=16, maxT=8, V=100, so
Vp=128) into $FLASHGPT_TMP, runs the importer with this interpreter and checks the checkpoint it
writes (header, every parameter in place: Conv1D transposes, wte padding, bf16 rounding), or,
for bad input, a one-line error and a non-zero exit. Prints PASS / FAIL / SKIPPED lines like
tests/lib/test.h.
"""
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from case import Case, run_script  # noqa: E402

IMPORTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                        "import_gpt2.py")
TMP = os.path.abspath(os.environ.get("FLASHGPT_TMP") or tempfile.mkdtemp())
L, NH, C, MAXT, V = 2, 2, 16, 8, 100
VP = 128

def hf_tensors(rng):
    """Random GPT-2 tensors by Hugging Face name (no prefix), Conv1D weights as (in, out)."""
    t = {"wte.weight": (V, C), "wpe.weight": (MAXT, C), "ln_f.weight": (C,), "ln_f.bias": (C,)}
    for l in range(L):
        t.update({f"h.{l}.ln_1.weight": (C,), f"h.{l}.ln_1.bias": (C,),
                  f"h.{l}.attn.c_attn.weight": (C, 3 * C), f"h.{l}.attn.c_attn.bias": (3 * C,),
                  f"h.{l}.attn.c_proj.weight": (C, C), f"h.{l}.attn.c_proj.bias": (C,),
                  f"h.{l}.ln_2.weight": (C,), f"h.{l}.ln_2.bias": (C,),
                  f"h.{l}.mlp.c_fc.weight": (C, 4 * C), f"h.{l}.mlp.c_fc.bias": (4 * C,),
                  f"h.{l}.mlp.c_proj.weight": (4 * C, C), f"h.{l}.mlp.c_proj.bias": (C,)})
    return {name: rng.normal(0, 1, shape).astype(np.float32) for name, shape in t.items()}


def stored(tensor, dtype):
    """(bytes as safetensors stores them, the float32 values they decode to)."""
    if dtype == "F32":
        return tensor.astype("<f4").tobytes(), tensor.astype(np.float32)
    if dtype == "F16":
        half = tensor.astype("<f2")
        return half.tobytes(), half.astype(np.float32)
    if dtype == "BF16":  # truncation: the test only needs some bf16 values
        top = (tensor.astype(np.float32).view(np.uint32) >> 16).astype("<u2")
        return top.tobytes(), (top.astype(np.uint32) << 16).view(np.float32)
    if dtype == "F64":
        return tensor.astype("<f8").tobytes(), None
    raise ValueError(dtype)


def write_safetensors(path, tensors, dtypes):
    """tensors: name -> array; dtypes: name -> safetensors dtype. Returns name -> decoded values."""
    header, blobs, decoded, offset = {"__metadata__": {"format": "pt"}}, [], {}, 0
    for name, tensor in tensors.items():
        data, decoded[name] = stored(tensor, dtypes.get(name, "F32"))
        header[name] = {"dtype": dtypes.get(name, "F32"), "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))
    return decoded


def make_checkpoint(name, rng, prefix="", dtype="F32", config=None, edit=None, extras=True):
    """Writes TMP/name/{config.json, model.safetensors}; edit(tensors, dtypes) may alter them.
    Returns (dir, decoded float32 tensors by unprefixed name)."""
    d = os.path.join(TMP, name)
    os.makedirs(d, exist_ok=True)
    cfg = {"n_embd": C, "n_layer": L, "n_head": NH, "n_positions": MAXT, "vocab_size": V,
           "model_type": "gpt2"} if config is None else config
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    tensors = hf_tensors(rng)
    if extras:  # buffers and the tied head, all to be skipped
        for l in range(L):
            tensors[f"h.{l}.attn.bias"] = np.tril(np.ones((1, 1, MAXT, MAXT), np.float32))
            tensors[f"h.{l}.attn.masked_bias"] = np.array(-1e4, np.float32)
        tensors["lm_head.weight"] = tensors["wte.weight"] + 1
    dtypes = {n: dtype for n in tensors}
    if edit:
        edit(tensors, dtypes)
    tensors = {(n if n == "lm_head.weight" else prefix + n): t for n, t in tensors.items()}
    dtypes = {(n if n == "lm_head.weight" else prefix + n): t for n, t in dtypes.items()}
    decoded = write_safetensors(os.path.join(d, "model.safetensors"), tensors, dtypes)
    return d, {n[len(prefix):] if n.startswith(prefix) else n: t for n, t in decoded.items()}


def expected_params(hf):
    """The checkpoint's parameters in order, as float32, built from the HF tensors."""
    wte = np.zeros((VP, C), np.float32)
    wte[:V] = hf["wte.weight"]
    out = [wte, hf["wpe.weight"]]
    for name, transpose in [("ln_1.weight", 0), ("ln_1.bias", 0),
                            ("attn.c_attn.weight", 1), ("attn.c_attn.bias", 0),
                            ("attn.c_proj.weight", 1), ("attn.c_proj.bias", 0),
                            ("ln_2.weight", 0), ("ln_2.bias", 0),
                            ("mlp.c_fc.weight", 1), ("mlp.c_fc.bias", 0),
                            ("mlp.c_proj.weight", 1), ("mlp.c_proj.bias", 0)]:
        out.append(np.stack([hf[f"h.{l}.{name}"].T if transpose else hf[f"h.{l}.{name}"]
                             for l in range(L)]))
    out += [hf["ln_f.weight"], hf["ln_f.bias"]]
    return out


PARAM_NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
               "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]


def nearest_bf16_bits(x):
    """bf16 bits nearest to each float32, ties to the even one, found by comparing the two
    bf16 neighbours in float64 (independent of the importer's bit trick)."""
    low = x.astype(np.float32).view(np.uint32) >> 16
    below = (low.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    above = ((low + 1).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    above = np.where(np.isinf(above), np.copysign(2.0 ** 128, above), above)  # past bf16's largest
    xd = x.astype(np.float64)
    to_above, to_below = abs(above - xd), abs(xd - below)
    up = (to_above < to_below) | ((to_above == to_below) & (low % 2 == 1))
    return (low + up).astype(np.uint16)


def run_importer(*args, **kwargs):
    return run_script(IMPORTER, *args, **kwargs)


def check_import(case, hf_dir, hf, bf16):
    out = os.path.join(hf_dir, "out.bin")
    result = run_importer(*(["--bf16"] if bf16 else []), hf_dir, out)
    case.check(result.returncode == 0, f"exit {result.returncode}: {result.stderr.strip()}")
    if result.returncode != 0:
        return None
    case.check(result.stderr == "", f"unexpected stderr: {result.stderr.strip()}")
    case.check(len(result.stdout.splitlines()) == 1,
               f"want one line on stdout, got {result.stdout!r}")
    data = open(out, "rb").read()
    params = expected_params(hf)
    width = 2 if bf16 else 4
    want_size = 1024 + width * sum(p.size for p in params)
    case.check(len(data) == want_size, f"file is {len(data)} bytes, expected {want_size}")
    if len(data) != want_size:
        return None
    header = np.frombuffer(data[:1024], "<i4")
    want_header = [20240326, 5 if bf16 else 3, MAXT, V, L, NH, C, VP]
    case.check(list(header[:8]) == want_header and not header[8:].any(),
               f"header {list(header[:8])}, expected {want_header} then zeros")
    case.check(not os.path.exists(out + ".tmp"), "temporary file left behind")
    offset = 1024
    got_all = []
    for name, want in zip(PARAM_NAMES, params):
        got = np.frombuffer(data[offset:offset + width * want.size], "<u2" if bf16 else "<f4")
        got = got.reshape(want.shape)
        offset += width * want.size
        got_all.append(got)
        bad = np.argwhere(got != (nearest_bf16_bits(want) if bf16 else want))
        case.check(len(bad) == 0, f"{name} differs at {len(bad)} places, first {bad[:1].tolist()}")
    return got_all


def case_import(name, rng, prefix, dtype, bf16):
    case = Case(name)
    hf_dir, hf = make_checkpoint(f"import_{dtype}_{'bf16' if bf16 else 'fp32'}", rng,
                                 prefix=prefix, dtype=dtype)
    got = check_import(case, hf_dir, hf, bf16)
    if got is not None:
        case.check(not got[0][V:].any(), "wte padding rows are not zero")
    case.end()


def case_bf16_rounding(rng):
    """F32 values on and off the halfway points between bf16 numbers (and one past the largest
    bf16's, which rounds to infinity), imported with --bf16."""
    case = Case("import --bf16 rounds to nearest even")
    ties = np.array([0x3F808000, 0x3F818000, 0xBF808000, 0x3F808001, 0x3F807FFF, 0x7F7FFFFF],
                    np.uint32).view(np.float32)
    want = np.array([0x3F80, 0x3F82, 0xBF80, 0x3F81, 0x3F80, 0x7F80], np.uint16)

    def put_ties(tensors, dtypes):
        tensors["wte.weight"][0, :len(ties)] = ties

    hf_dir, hf = make_checkpoint("bf16_rounding", rng, edit=put_ties)
    got = check_import(case, hf_dir, hf, bf16=True)
    if got is not None:
        case.check(np.array_equal(got[0][0, :len(ties)], want),
                   f"wte[0, :6] bits {[hex(b) for b in got[0][0, :len(ties)]]}, "
                   f"expected {[hex(b) for b in want]}")
    case.end()


def case_error(name, hf_dir, must_mention, args=None, limit_s=120):
    """The importer must fail within limit_s seconds with one stderr line naming must_mention,
    and write nothing."""
    case = Case(name)
    out = os.path.join(TMP, "error_out.bin")
    if os.path.exists(out):
        os.remove(out)
    result = run_importer(*(args if args is not None else [hf_dir, out]), limit_s=limit_s)
    lines = result.stderr.splitlines()
    case.check(result.returncode not in (0, None), f"exit status {result.returncode}")
    case.check(len(lines) == 1, f"want one line on stderr, got {result.stderr!r}")
    case.check(must_mention in result.stderr,
               f"message {result.stderr.strip()!r} lacks {must_mention!r}")
    case.check(not os.path.exists(out) and not os.path.exists(out + ".tmp"),
               "an output file was written")
    case.end()


def drop(name):
    return lambda tensors, dtypes: tensors.pop(name)


def config_with(**sizes):
    config = {"n_embd": C, "n_layer": L, "n_head": NH, "n_positions": MAXT, "vocab_size": V}
    config.update(sizes)
    return config


def nested(depth):
    """JSON nested deeper than Python's recursion limit."""
    return "[" * depth + "]" * depth


def bound_cases(rng):
    """Config numbers and safetensors headers far beyond any real model: refused at once, by
    arithmetic, before anything of their size is built."""
    d, _ = make_checkpoint("huge_layers", rng, config=config_with(n_layer=50_000_000))
    case_error("error: n_layer 50000000 against a small safetensors, at once", d, "fewer than",
               limit_s=30)
    d, _ = make_checkpoint("more_layers", rng, config=config_with(n_layer=L + 1))
    case_error("error: more layers than the safetensors header has tensors", d,
               "tensors, fewer than")
    d, _ = make_checkpoint("huge_vocab", rng, config=config_with(vocab_size=10 ** 40))
    case_error("error: vocab_size 10**40", d, "'vocab_size'")
    d, _ = make_checkpoint("int32_vocab", rng, config=config_with(vocab_size=2 ** 31 - 127))
    case_error("error: vocab_size whose padding passes int32", d, "'vocab_size'")

    d, _ = make_checkpoint("nested_config", rng)
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(nested(100_000))
    case_error("error: config.json nested 100000 deep", d, "config.json")
    d, _ = make_checkpoint("large_config", rng)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(dict(config_with(), padding="x" * (2 << 20)), f)
    case_error("error: config.json of 2 MiB", d, "too large")

    d, _ = make_checkpoint("nested_header", rng)
    text = nested(100_000).encode()
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
    case_error("error: safetensors header nested 100000 deep", d, "model.safetensors")
    d, _ = make_checkpoint("long_header", rng)
    path = os.path.join(d, "model.safetensors")
    with open(path, "wb") as f:
        f.write((150_000_000).to_bytes(8, "little"))
    os.truncate(path, 150_000_100)  # sparse: no disk written
    case_error("error: safetensors header of 150 MB", d, "more than safetensors'")
    os.remove(path)


def gpt2_config(**fields):
    """config_with's sizes, the fields GPT2Config sets for GPT-2 itself, then fields."""
    config = config_with(model_type="gpt2", activation_function="gelu_new", layer_norm_epsilon=1e-5, n_inner=None,
                         scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False,
                         reorder_and_upcast_attn=False, add_cross_attention=False, tie_word_embeddings=True)
    config.update(fields)
    return config


def config_cases(rng):
    """Config fields that change what the model computes: GPT-2's values (or names of the same
    function) import as GPT-2; any other value is refused naming the field, since the checkpoint
    is GPT-2 and nothing else."""
    same = [{}, dict(n_inner=4 * C), dict(activation_function="gelu_pytorch_tanh"),
            dict(activation_function="gelu_fast"), dict(activation_function="gelu_accurate"),
            dict(reorder_and_upcast_attn=True), dict(layer_norm_epsilon=1e-05)]
    for i, fields in enumerate(same):
        case = Case(f"import: a GPT-2 config with {fields or 'every field stated'}")
        hf_dir, hf = make_checkpoint(f"config_same_{i}", rng, config=gpt2_config(**fields))
        check_import(case, hf_dir, hf, bf16=False)
        case.end()
    other = [("tie_word_embeddings", False), ("tie_word_embeddings", "yes"), ("activation_function", "relu"),
             ("activation_function", "gelu"), ("activation_function", "quick_gelu"),
             ("layer_norm_epsilon", 1e-6), ("layer_norm_epsilon", float("nan")), ("layer_norm_epsilon", True),
             ("n_inner", 3 * C), ("n_inner", float(4 * C)), ("scale_attn_weights", False),
             ("scale_attn_by_inverse_layer_idx", True), ("add_cross_attention", True), ("model_type", "gpt_neo")]
    for i, (field, value) in enumerate(other):
        d, _ = make_checkpoint(f"config_other_{i}", rng, config=gpt2_config(**{field: value}))
        case_error(f"error: config.json with {field} {json.dumps(value)}", d, f"config.json: '{field}' is")


def relayout(hf_dir, edit):
    """Rewrites hf_dir/model.safetensors with its header (a dict) and data (bytes) passed through
    edit(header, data), which returns the new data."""
    path = os.path.join(hf_dir, "model.safetensors")
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    data = edit(header, raw[8 + n:])
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + data)


def move_data(header, at, by):
    """Moves the data of every tensor that starts at or past byte `at` by `by` bytes."""
    for name, entry in header.items():
        if name != "__metadata__" and entry["data_offsets"][0] >= at:
            entry["data_offsets"] = [v + by for v in entry["data_offsets"]]


def layout_cases(rng):
    """Data offsets that do not tile the data, each tensor's bytes one after the other from the
    first to the last (as the safetensors library requires), are refused naming the tensor, also
    when it is one the import does not read (a mask buffer)."""
    def shared(header, data):  # ln_f.weight's bytes cut out, its entry pointing at ln_f.bias's
        begin, end = header["ln_f.weight"]["data_offsets"]
        data = data[:begin] + data[end:]
        header["ln_f.weight"]["data_offsets"] = [-1, -1]
        move_data(header, end, begin - end)
        header["ln_f.weight"]["data_offsets"] = list(header["ln_f.bias"]["data_offsets"])
        return data

    def gap(header, data):  # eight bytes of no tensor after wte
        end = header["wte.weight"]["data_offsets"][1]
        move_data(header, end, 8)
        return data[:end] + bytes(8) + data[end:]

    def backwards(header, data):
        header["h.0.attn.masked_bias"]["data_offsets"].reverse()
        return data

    def mask_overlaps(header, data):  # the mask buffer's entry at wte's bytes, its own cut out
        begin, end = header["h.1.attn.bias"]["data_offsets"]
        header["h.1.attn.bias"]["data_offsets"] = [-1, -1]
        move_data(header, end, begin - end)
        header["h.1.attn.bias"]["data_offsets"] = [0, end - begin]
        return data[:begin] + data[end:]

    def trailing(header, data):
        return data + bytes(8)

    def malformed(header, data):
        header["h.0.attn.masked_bias"]["data_offsets"] = [True, 4]
        return data

    for name, edit, mention in [("two tensors sharing their bytes", shared, "ln_f."),
                                ("bytes of no tensor between two", gap, "wte.weight"),
                                ("bytes past the last tensor", trailing, "past the last tensor"),
                                ("a buffer's offsets backwards", backwards, "h.0.attn.masked_bias"),
                                ("a buffer overlapping wte", mask_overlaps, "h.1.attn.bias"),
                                ("a buffer's offsets not integers", malformed, "h.0.attn.masked_bias")]:
        d, _ = make_checkpoint("layout_" + edit.__name__, rng)
        relayout(d, edit)
        case_error(f"error: model.safetensors with {name}", d, mention)


def main():
    rng = np.random.default_rng(5)
    case_import("import F32 to fp32 (buffers and lm_head skipped)", rng, "", "F32", bf16=False)
    case_import("import F16 with transformer. prefix to fp32", rng, "transformer.", "F16",
                bf16=False)
    case_import("import BF16 with transformer. prefix to bf16", rng, "transformer.", "BF16",
                bf16=True)
    case_bf16_rounding(rng)

    case = Case("import --help prints the usage")
    result = run_importer("--help")
    case.check(result.returncode == 0 and result.stdout.startswith("usage: "), f"got {result!r}")
    case.end()

    good_dir, _ = make_checkpoint("good", rng)
    case_error("error: no arguments", None, "usage", args=[])
    case_error("error: unknown flag", None, "--fp8", args=["--fp8", good_dir, "x.bin"])
    case_error("error: missing directory", os.path.join(TMP, "nowhere"), "nowhere")

    d, _ = make_checkpoint("no_config", rng)
    os.remove(os.path.join(d, "config.json"))
    case_error("error: missing config.json", d, "config.json")

    config = {"n_embd": C, "n_layer": L, "n_positions": MAXT, "vocab_size": V}
    d, _ = make_checkpoint("no_head", rng, config=config)
    case_error("error: config.json without n_head", d, "n_head")

    d, _ = make_checkpoint("no_safetensors", rng)
    os.remove(os.path.join(d, "model.safetensors"))
    case_error("error: missing model.safetensors", d, "model.safetensors")

    d, _ = make_checkpoint("missing_tensor", rng, prefix="transformer.",
                           edit=drop("h.1.mlp.c_fc.bias"))
    case_error("error: missing tensor", d, "h.1.mlp.c_fc.bias")

    def untransposed(tensors, dtypes):
        name = "h.0.attn.c_attn.weight"
        tensors[name] = np.ascontiguousarray(tensors[name].T)
    d, _ = make_checkpoint("shape_mismatch", rng, edit=untransposed)
    case_error("error: shape mismatch", d, "h.0.attn.c_attn.weight")

    def f64(tensors, dtypes):
        dtypes["ln_f.bias"] = "F64"
    d, _ = make_checkpoint("f64", rng, edit=f64)
    case_error("error: unsupported dtype", d, "F64")

    d, _ = make_checkpoint("truncated", rng, extras=False)
    path = os.path.join(d, "model.safetensors")
    os.truncate(path, os.path.getsize(path) - 10)
    case_error("error: truncated data", d, "truncated")

    d, _ = make_checkpoint("truncated_header", rng)
    os.truncate(os.path.join(d, "model.safetensors"), 100)
    case_error("error: truncated header", d, "truncated")

    d, _ = make_checkpoint("not_json", rng)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write((16).to_bytes(8, "little") + b"\xff" * 16)
    case_error("error: header not JSON", d, "model.safetensors")

    for dtype, value in (("F32", np.nan), ("F16", np.inf), ("BF16", -np.inf)):
        def not_finite(tensors, dtypes):
            tensors["h.1.mlp.c_proj.weight"][5, 3] = value
            dtypes["h.1.mlp.c_proj.weight"] = dtype
        d, _ = make_checkpoint("not_finite_" + dtype, rng, edit=not_finite)
        case_error(f"error: a {dtype} tensor holding {value}", d, "'h.1.mlp.c_proj.weight': value 83 is not finite")

    d, _ = make_checkpoint("safetensors_folder", rng)
    os.remove(os.path.join(d, "model.safetensors"))
    os.mkdir(os.path.join(d, "model.safetensors"))
    case_error("error: model.safetensors a folder", d, "model.safetensors: is a directory")
    case_error("error: HF_DIR a file", os.path.join(d, "config.json"), "config.json: not a directory")

    case_error("error: unwritable output", good_dir, "cannot write",
               args=[good_dir, os.path.join(TMP, "nowhere", "out.bin")])
    bound_cases(rng)
    config_cases(rng)
    layout_cases(rng)
    return 1 if Case.failures else 0


if __name__ == "__main__":
    sys.exit(main())
