#!/usr/bin/env python3
"""scripts/import_gpt2.py: turns a Hugging Face GPT-2 checkpoint into a flashgpt checkpoint.

usage: import_gpt2.py [--bf16] HF_DIR OUT.bin

HF_DIR holds config.json (n_embd, n_layer, n_head, n_positions, vocab_size) and
model.safetensors, whose tensors may be F32, F16 or BF16. Tensor names may carry a
"transformer." prefix; the attention mask buffers (attn.bias, attn.masked_bias) and
lm_head.weight (tied to wte) are not read.

OUT.bin is the llm.c-compatible model checkpoint, version 3 (fp32 parameters) or, with --bf16,
5 (bf16, rounded to nearest even); gpt2_checkpoint.py describes it and how Hugging Face's
tensors map onto it (wte padded with zero rows to Vp, Conv1D weights transposed).
scripts/export_hf.py does the reverse.

Token ids: the model expects GPT-2's own ids, which the tokenizer gives when it loads GPT-2's
encoder.json and vocab.bpe (from the same Hugging Face repository or OpenAI's release).
"""
import json
import os
import sys

from gpt2_checkpoint import (VERSION_BF16, VERSION_FP32, SafeTensors, Shape, fail, layout, run_command_line,
                             to_checkpoint, write_checkpoint)

USAGE = "usage: import_gpt2.py [--bf16] HF_DIR OUT.bin"


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
    return Shape(maxT=sizes["n_positions"], V=sizes["vocab_size"], L=sizes["n_layer"],
                 NH=sizes["n_head"], C=sizes["n_embd"])


def import_gpt2(hf_dir, out_path, bf16):
    """Writes out_path (via a temporary file, renamed at the end); returns a summary line."""
    if not os.path.isdir(hf_dir):
        fail(f"{hf_dir}: no such directory")
    shape = read_config(os.path.join(hf_dir, "config.json"))
    st = SafeTensors(os.path.join(hf_dir, "model.safetensors"))
    # One slice in memory at a time: the generator reads each as the writer asks for it.
    count = write_checkpoint(out_path, shape, bf16,
                             (to_checkpoint(sl, st.get(sl.hf_name, sl.hf_shape)) for sl in layout(shape)))
    return (f"{out_path}: GPT-2 L={shape.L} NH={shape.NH} C={shape.C} maxT={shape.maxT} "
            f"V={shape.V} (Vp={shape.Vp}), {count} parameters in {'bf16' if bf16 else 'fp32'} "
            f"(version {VERSION_BF16 if bf16 else VERSION_FP32})")


def main(argv):
    return run_command_line(argv, USAGE, "--bf16", "HF_DIR and OUT.bin", import_gpt2)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
