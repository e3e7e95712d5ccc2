#!/usr/bin/env python3
"""scripts/export_hf.py: turns a flashgpt model checkpoint into a Hugging Face GPT-2 folder.

usage: export_hf.py [--fp32] CHECKPOINT.bin OUT_DIR

CHECKPOINT.bin is a model checkpoint of version 3 (fp32) or 5 (bf16, what train_gpt writes for a
GPT-2), or of version 6 or 7 holding GPT-2's architecture exactly once its fields without effect
are dropped (a rotary base without rotary, windows that bound nothing), as every program reads
it; gpt2_checkpoint.py describes it. A model of another architecture (train_gpt --arch modern or any component changed: versions
6 and 7) is refused in one line, once the file checks out (one cut short is truncated, whatever
it holds): no transformers architecture computes it exactly (Llama's and Qwen's RMSNorm has
weights and their MLP is SwiGLU; the modern model's norms have none, its MLP is ReLU^2, its
queries and keys are normed and its logits soft-capped); so is a GPT-2 whose attention has a key
window per row (train_gpt --document-mask, --window, --window-pattern: also version 6 or 7), as
GPT-2 in transformers attends to every earlier token, and a model with a part of the 2026 recipe
(train_gpt --embedding-norm, --qk-scale, --residual-lambdas, --value-embeddings, --smear,
--backout: versions 8 and 9), which no transformers architecture has. OUT_DIR gets what
transformers' GPT2LMHeadModel.from_pretrained loads:
- config.json: GPT2LMHeadModel with the checkpoint's sizes (n_positions = n_ctx = maxT,
  vocab_size = V), GELU in its tanh form (gelu_new), layernorm eps 1e-5, no dropout (flashgpt
  trains without it), word embeddings tied to the output layer; bos/eos token 50256 when V is
  GPT-2's 50257, else none (the checkpoint does not say which id is <|endoftext|>);
- model.safetensors: the parameters under their Hugging Face names with the "transformer."
  prefix (lm_head.weight is left out: it is wte), in the checkpoint's precision: F32 for
  version 3, BF16 for version 5 (the stored bits, unchanged); --fp32 widens bf16 to F32 (exact).
The importer's steps are undone: wte's padding rows (V to Vp) are dropped and the Conv1D weights
are transposed back to (in, out), so import_gpt2.py on OUT_DIR gives back the same checkpoint
bytes, padding rows being zero (as train_gpt and the importer keep them).

OUT_DIR must not exist or be empty: it is built in a temporary folder beside it, then renamed
(a link at OUT_DIR is followed: the folder it names is the one made).
The tokenizer is not exported: a model on GPT-2's vocabulary uses Hugging Face's "gpt2" one.
"""
import json
import os
import sys

from gpt2_checkpoint import Checkpoint, from_bf16_bits, run_command_line, to_hf, write_safetensors
from gpt_architecture import GPT2, has_parts, masked
from output_file import atomic_folder, fail

USAGE = "usage: export_hf.py [--fp32] CHECKPOINT.bin OUT_DIR"
GPT2_VOCAB, GPT2_EOT = 50257, 50256


def hf_config(shape, torch_dtype):
    """What GPT2Config needs for this model: its sizes and the architecture flashgpt trains."""
    eot = GPT2_EOT if shape.V == GPT2_VOCAB else None
    return {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": shape.V,
        "n_positions": shape.maxT,
        "n_ctx": shape.maxT,
        "n_embd": shape.C,
        "n_layer": shape.L,
        "n_head": shape.NH,
        "n_inner": None,  # 4 * n_embd
        "activation_function": "gelu_new",
        "layer_norm_epsilon": 1e-5,
        "initializer_range": 0.02,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "tie_word_embeddings": True,
        "bos_token_id": eot,
        "eos_token_id": eot,
        "use_cache": True,
        "torch_dtype": torch_dtype,
    }


def write_folder(ckpt, folder, fp32):
    """Writes config.json and model.safetensors into folder."""
    bf16_out = ckpt.bf16 and not fp32
    dtype = "BF16" if bf16_out else "F32"
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(hf_config(ckpt.shape, "bfloat16" if bf16_out else "float32"), f, indent=2)
        f.write("\n")
    index = [("transformer." + sl.hf_name, dtype, sl.hf_shape) for sl, _ in ckpt.slices()]
    values = (to_hf(sl, from_bf16_bits(v) if ckpt.bf16 and fp32 else v) for sl, v in ckpt.slices())
    write_safetensors(os.path.join(folder, "model.safetensors"), index, values, {"format": "pt"})


def not_gpt2(arch):
    """None for GPT-2's architecture (which a checkpoint of version 6 or 7 may hold too), else why
    transformers' GPT-2 does not compute the model."""
    if arch == GPT2:
        return None
    if has_parts(arch):
        return ("a model with a part of the 2026 recipe (an embedding norm, a QK scale, residual lambdas, value "
                "embeddings, the smear, the backout): no transformers architecture computes it")
    if masked(arch):
        return ("a model whose attention sees a key window per row (documents or windows): GPT-2 in transformers "
                "attends to every earlier token")
    return ("a model of another architecture than GPT-2's: no transformers architecture computes it exactly "
            "(Llama's and Qwen's norms have weights, their MLP is SwiGLU)")


def export_hf(ckpt_path, out_dir, fp32):
    """Writes out_dir (built beside it, renamed at the end); returns a summary line."""
    ckpt = Checkpoint(ckpt_path, refuse=not_gpt2)
    with atomic_folder(out_dir) as tmp_dir:
        write_folder(ckpt, tmp_dir, fp32)
    s = ckpt.shape
    dtype = "bf16" if ckpt.bf16 and not fp32 else "fp32"
    return (f"{out_dir}: GPT-2 L={s.L} NH={s.NH} C={s.C} maxT={s.maxT} V={s.V}, "
            f"{len(ckpt.values) - (s.Vp - s.V) * s.C} parameters in {dtype}")


def main(argv):
    return run_command_line(argv, USAGE, "--fp32", "CHECKPOINT.bin and OUT_DIR", export_hf)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
