#!/usr/bin/env python3
"""scripts/import_gpt2.py: turns a Hugging Face GPT-2 checkpoint into a flashgpt checkpoint.

usage: import_gpt2.py [--bf16] HF_DIR OUT.bin

HF_DIR holds config.json (n_embd, n_layer, n_head, n_positions, vocab_size) and
model.safetensors, whose tensors may be F32, F16 or BF16. Tensor names may carry a
"transformer." prefix; the attention mask buffers (attn.bias, attn.masked_bias) and
lm_head.weight (tied to wte) are not read. The config's fields that change what the model
computes must say GPT-2 (GPT2_FIELDS; a field left out takes GPT2Config's default, which does),
and the tensors' data_offsets must tile the data, one after another from its first byte to its
last, as the safetensors library requires: anything else is refused, not imported as another
model.

OUT.bin is the llm.c-compatible model checkpoint, version 3 (fp32 parameters) or, with --bf16,
5 (bf16, rounded to nearest even); gpt2_checkpoint.py describes it and how Hugging Face's
tensors map onto it (wte padded with zero rows to Vp, Conv1D weights transposed).
scripts/export_hf.py does the reverse.

OUT.bin is written by output_file.py's rules: through a temporary file renamed at the end, a
link at OUT.bin followed, and refused where it is one of the inputs.

Token ids: the model expects GPT-2's own ids, which the tokenizer gives when it loads GPT-2's
encoder.json and vocab.bpe (from the same Hugging Face repository or OpenAI's release).
"""
import json
import os
import sys

from gpt2_checkpoint import (MAX_SIZE, SAFETENSORS_DTYPES, VERSION_BF16, VERSION_FP32, SafeTensors,
                             Shape, check_regular_file, layout, parameter_count, run_command_line,
                             to_checkpoint, write_checkpoint)
from output_file import check_output, fail

USAGE = "usage: import_gpt2.py [--bf16] HF_DIR OUT.bin"
CONFIG_MAX_BYTES = 1 << 20  # a GPT-2 config.json is about a kilobyte
# Hugging Face's names of GELU's tanh form, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), which
# flashgpt computes ("gelu" is the erf form, another function).
TANH_GELU = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_accurate")


# The config fields that change what a GPT2LMHeadModel computes: (field, whether a value is what
# flashgpt's GPT-2 computes given n_embd, the values it is). reorder_and_upcast_attn is not among
# them: it changes the precision of attention's scores, not their value.
GPT2_FIELDS = [
    ("model_type", lambda v, C: v == "gpt2", '"gpt2"'),
    ("activation_function", lambda v, C: v in TANH_GELU, '"gelu_new" (GELU\'s tanh form, by any of its names)'),
    ("layer_norm_epsilon", lambda v, C: type(v) in (int, float) and v == 1e-5, "1e-05"),
    ("n_inner", lambda v, C: v is None or (type(v) is int and v == 4 * C), "null or 4 n_embd"),
    ("scale_attn_weights", lambda v, C: v is True, "true"),
    ("scale_attn_by_inverse_layer_idx", lambda v, C: v is False, "false"),
    ("add_cross_attention", lambda v, C: v is False, "false"),
    ("tie_word_embeddings", lambda v, C: v is True, "true (lm_head is wte, no head of its own)"),
]


def read_config(path):
    check_regular_file(path)
    try:
        with open(path, "rb") as f:
            text = f.read(CONFIG_MAX_BYTES + 1)
        if len(text) > CONFIG_MAX_BYTES:
            fail(f"{path}: more than {CONFIG_MAX_BYTES} bytes, too large for a config")
        config = json.loads(text)
    except OSError as e:
        fail(f"{path}: cannot read ({e.strerror})")
    except RecursionError:
        fail(f"{path}: not a JSON file (nested deeper than Python's stack)")
    except ValueError as e:
        fail(f"{path}: not a JSON file ({e})")
    if not isinstance(config, dict):
        fail(f"{path}: not a JSON object")
    sizes = {}
    for key, alternative in [("n_embd", None), ("n_layer", None), ("n_head", None),
                             ("n_positions", "n_ctx"), ("vocab_size", None)]:
        value = config.get(key, config.get(alternative))
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_SIZE:
            fail(f"{path}: '{key}' is missing or not an integer from 1 to {MAX_SIZE}")
        sizes[key] = value
    if sizes["n_embd"] % sizes["n_head"]:
        fail(f"{path}: n_embd {sizes['n_embd']} is not a multiple of n_head {sizes['n_head']}")
    for key, computed, what in GPT2_FIELDS:
        if key in config and not computed(config[key], sizes["n_embd"]):
            value = json.dumps(config[key])
            value = value if len(value) <= 40 else value[:40] + "..."
            fail(f"{path}: '{key}' is {value}, not {what}: a model that flashgpt's GPT-2 does not compute")
    return Shape(maxT=sizes["n_positions"], V=sizes["vocab_size"], L=sizes["n_layer"],
                 NH=sizes["n_head"], C=sizes["n_embd"])


def check_sizes(st, shape, config_path):
    """The safetensors file must be large enough for the config's sizes, checked by arithmetic
    before the 12 L tensors are looked up: two bytes a parameter at least (F16, BF16), and a
    header entry for each tensor."""
    least = parameter_count(shape, hf=True) * min(SAFETENSORS_DTYPES.values())
    if st.data_len < least:
        fail(f"{st.path}: {st.data_len} bytes of tensor data, fewer than the {least} that the "
             f"sizes in {config_path} need")
    tensors = 12 * shape.L + 4
    if len(st.entries) < tensors:
        fail(f"{st.path}: {len(st.entries)} tensors, fewer than the {tensors} that the sizes in "
             f"{config_path} need")


def import_gpt2(hf_dir, out_path, bf16):
    """Writes out_path (via a temporary file, renamed at the end); returns a summary line."""
    if not os.path.isdir(hf_dir):
        fail(f"{hf_dir}: {'not a directory' if os.path.exists(hf_dir) else 'no such directory'}")
    config_path = os.path.join(hf_dir, "config.json")
    st_path = os.path.join(hf_dir, "model.safetensors")
    inputs = [config_path, st_path]
    check_output(out_path, inputs)
    shape = read_config(config_path)
    st = SafeTensors(st_path)
    check_sizes(st, shape, config_path)
    # One slice in memory at a time: the generator reads each as the writer asks for it.
    count = write_checkpoint(out_path, shape, bf16,
                             (to_checkpoint(sl, st.get(sl.hf_name, sl.hf_shape)) for sl in layout(shape)),
                             inputs)
    return (f"{out_path}: GPT-2 L={shape.L} NH={shape.NH} C={shape.C} maxT={shape.maxT} "
            f"V={shape.V} (Vp={shape.Vp}), {count} parameters in {'bf16' if bf16 else 'fp32'} "
            f"(version {VERSION_BF16 if bf16 else VERSION_FP32})")


def main(argv):
    return run_command_line(argv, USAGE, "--bf16", "HF_DIR and OUT.bin", import_gpt2)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
