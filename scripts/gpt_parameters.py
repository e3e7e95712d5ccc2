"""scripts/gpt_parameters.py: the parameter table of gpt/param_table.h for the Python scripts
(python3 alone: no numpy, no torch): one row per kind of parameter tensor, in the order of the
model checkpoint, with what is computed from it: which tensors a model of a shape and an
architecture has, their shapes and sizes, the slices of each layer and the names the scripts
give them (Hugging Face GPT-2's), Muon's matrices.

A row (Kind): the name (gpt/param_table.h's field); one slice's rows and cols, each a Dim (times,
of) with of "1", "C", "HS", "Vp", "maxT" or "NH" (a vector has cols Dim(1, "1")); layers: None for a
tensor of the model, else the rule of the layers that hold a slice: its slice(l, L) is the slice
layer l of L holds or -1 for none (the layers that hold one take the slices 0, 1, ... in order),
its count(L) how many there are, without a walk over the layers; present(arch) (None: every
architecture; arch a gpt_architecture.Architecture); the init ("zero", "ones" or "normal" with
std, divided by sqrt(2L) when residual; zero under the architecture's zero_init where zero_init
says so; a vocabulary table's rows past V zero); the optimizer group ("matrix", "embedding",
"head", "vector") with lr_scale and decay_scale; muon_rows, the rows of each matrix Muon cuts a
slice of the matrix group into, and muon_rows_by_qkv, those under a --muon-qkv (MUON_QKV) where
they are others (qkvw's: q, k and v, or their head pairs). tests/mirrors/test_param_table.py
checks every row and what the functions below compute against the C table
(build/tests/mirrors/print_param_table), so the two cannot drift.

A tensor's shape here: (rows, cols) of a model tensor, (slices, rows, cols) of a per-layer one,
the cols left out of a vector: wte (Vp, C), ln1w (L, C), qkvw (L, 3C, C), lnfw (C,).
"""
import math
from typing import Callable, NamedTuple, Optional


# Each --model's (L, C, NH): gpt/config.h's presets.
MODEL_PRESETS = {"d2": (2, 128, 2), "d6": (6, 384, 6), "d12": (12, 768, 12), "d24": (24, 1024, 16),
                 "d36": (36, 1280, 20), "d48": (48, 1600, 25)}


def padded_vocab(V):
    return (V + 127) // 128 * 128


class Shape(NamedTuple):
    """A model's sizes: context, vocabulary, layers, heads, channels."""
    maxT: int
    V: int
    L: int
    NH: int
    C: int

    @property
    def Vp(self):
        return padded_vocab(self.V)


class Dim(NamedTuple):
    """times * of, of one of "1", "C", "HS", "Vp", "maxT", "NH"."""
    times: int
    of: str


class EveryLayer:
    """The layers rule of a slice in every layer: layer l holds slice l."""

    @staticmethod
    def slice(l, L):
        return l

    @staticmethod
    def count(L):
        return L


class ValueEmbeddingLayers:
    """The layers rule of the value embeddings (gpt/config.h's architecture_value_embedding_layer):
    every other layer, the last among them, in order."""

    @staticmethod
    def slice(l, L):
        return l // 2 if l % 2 == (L - 1) % 2 else -1

    @staticmethod
    def count(L):
        return (L + 1) // 2


class Kind(NamedTuple):
    name: str
    rows: Dim
    cols: Dim
    layers: Optional[type]  # a layers rule, as EveryLayer
    present: Optional[Callable[[object], bool]]
    init: str
    std: float = 0.0
    residual: bool = False
    zero_init: bool = False
    group: str = "vector"
    lr_scale: float = 1.0
    decay_scale: float = 0.0
    muon_rows: Dim = Dim(0, "1")
    muon_rows_by_qkv: tuple = ()  # (--muon-qkv name, Dim) pairs


ONE, C = Dim(1, "1"), Dim(1, "C")
# How Muon cuts qkvw (train_gpt --muon-qkv, gpt/param_table.h's MuonQkv): one (3C, C) matrix, q, k
# and v, or their pairs of heads.
MUON_QKV = ("fused", "split", "head-pairs")


def learned_positions(a):
    return not a.rotary


def layernorm(a):  # RMSNorm has no weights
    return not a.rms_norm


def biases(a):
    return bool(a.bias)


def untied_head(a):
    return bool(a.untied_head)


def residual_lambdas(a):
    return bool(a.residual_lambdas)


def value_embeddings(a):
    return bool(a.value_embeddings)


VALUE_GATE_CHANNELS = 12  # gpt/config.h's: the channels of the attention's input a value gate reads
SMEAR_GATE_CHANNELS = 24  # gpt/config.h's: the channels of a token's embedding the smear's gate reads


def smear(a):
    return bool(a.smear)


def backout(a):
    return bool(a.backout)


# gpt/param_table.c's rows, in its order.
TABLE = (
    Kind("wte", Dim(1, "Vp"), C, None, None, "normal", 0.02, group="embedding", decay_scale=1.0),
    Kind("wpe", Dim(1, "maxT"), C, None, learned_positions, "normal", 0.02, group="embedding", decay_scale=1.0),
    Kind("ln1w", C, ONE, EveryLayer, layernorm, "ones"),
    Kind("ln1b", C, ONE, EveryLayer, layernorm, "zero"),
    Kind("qkvw", Dim(3, "C"), C, EveryLayer, None, "normal", 0.02, group="matrix", decay_scale=1.0,
         muon_rows=Dim(3, "C"), muon_rows_by_qkv=(("split", C), ("head-pairs", Dim(2, "HS")))),
    Kind("qkvb", Dim(3, "C"), ONE, EveryLayer, biases, "zero"),
    Kind("attprojw", C, C, EveryLayer, None, "normal", 0.02, residual=True, zero_init=True, group="matrix",
         decay_scale=1.0, muon_rows=C),
    Kind("attprojb", C, ONE, EveryLayer, biases, "zero"),
    Kind("ln2w", C, ONE, EveryLayer, layernorm, "ones"),
    Kind("ln2b", C, ONE, EveryLayer, layernorm, "zero"),
    Kind("fcw", Dim(4, "C"), C, EveryLayer, None, "normal", 0.02, group="matrix", decay_scale=1.0,
         muon_rows=Dim(4, "C")),
    Kind("fcb", Dim(4, "C"), ONE, EveryLayer, biases, "zero"),
    Kind("fcprojw", C, Dim(4, "C"), EveryLayer, None, "normal", 0.02, residual=True, zero_init=True,
         group="matrix", decay_scale=1.0, muon_rows=C),
    Kind("fcprojb", C, ONE, EveryLayer, biases, "zero"),
    Kind("lnfw", C, ONE, None, layernorm, "ones"),
    Kind("lnfb", C, ONE, None, layernorm, "zero"),
    Kind("lm_head", Dim(1, "Vp"), C, None, untied_head, "normal", 0.02, zero_init=True, group="head",
         decay_scale=1.0),
    Kind("resid_lambda", ONE, ONE, EveryLayer, residual_lambdas, "ones", lr_scale=2.5),
    Kind("x0_lambda", ONE, ONE, EveryLayer, residual_lambdas, "zero", lr_scale=250.0),
    Kind("value_embedding", Dim(1, "Vp"), C, ValueEmbeddingLayers, value_embeddings, "normal", 0.02,
         group="embedding", lr_scale=0.5, decay_scale=1.0),
    Kind("value_gate", Dim(1, "NH"), Dim(VALUE_GATE_CHANNELS, "1"), ValueEmbeddingLayers, value_embeddings, "zero"),
    Kind("smear_gate", ONE, Dim(SMEAR_GATE_CHANNELS, "1"), None, smear, "zero", lr_scale=100.0),
    Kind("smear_lambda", ONE, ONE, None, smear, "zero", lr_scale=100.0),
    Kind("backout_lambda", ONE, ONE, None, backout, "zero", lr_scale=100.0),
)
KINDS = {k.name: k for k in TABLE}


def dim(d, s, vocab_rows=None):
    """d in elements for the shape s; vocab_rows: what "Vp" counts (Hugging Face's tables have V
    rows), s.Vp without it."""
    return d.times * {"1": 1, "C": s.C, "HS": s.C // s.NH, "Vp": s.Vp if vocab_rows is None else vocab_rows,
                      "maxT": s.maxT, "NH": s.NH}[d.of]


def present(kind, arch):
    return kind.present is None or bool(kind.present(arch))


def layer_slices(kind, s, arch):
    """The slice each layer holds (-1: none), for a per-layer kind the architecture has; [] else."""
    if kind.layers is None or not present(kind, arch):
        return []
    return [kind.layers.slice(l, s.L) for l in range(s.L)]


def slice_shape(kind, s, vocab_rows=None):
    """One slice's shape: (rows, cols), or (rows,) for a vector."""
    rows, cols = dim(kind.rows, s, vocab_rows), dim(kind.cols, s, vocab_rows)
    return (rows,) if kind.cols == ONE else (rows, cols)


def tensor_shape(kind, s, arch, vocab_rows=None):
    """The tensor's shape: its slices first for a per-layer kind."""
    if kind.layers is None:
        return slice_shape(kind, s, vocab_rows)
    return (kind.layers.count(s.L),) + slice_shape(kind, s, vocab_rows)


def layout(s, arch):
    """(Kind, tensor shape) of each tensor a model of shape s and architecture arch has, in
    checkpoint order."""
    return [(kind, tensor_shape(kind, s, arch)) for kind in TABLE if present(kind, arch)]


def count(s, arch, vocab_rows=None):
    """The parameters of a model of shape s and architecture arch (vocab_rows: see dim)."""
    return sum(math.prod(tensor_shape(kind, s, arch, vocab_rows)) for kind in TABLE if present(kind, arch))


# The Hugging Face name of each kind GPT-2 has (a per-layer one's after "h.{l}."), and whether
# Hugging Face stores it as a Conv1D weight, (in, out): the transpose of the table's (out, in).
HF_NAMES = {"wte": ("wte.weight", False), "wpe": ("wpe.weight", False),
            "ln1w": ("ln_1.weight", False), "ln1b": ("ln_1.bias", False),
            "qkvw": ("attn.c_attn.weight", True), "qkvb": ("attn.c_attn.bias", False),
            "attprojw": ("attn.c_proj.weight", True), "attprojb": ("attn.c_proj.bias", False),
            "ln2w": ("ln_2.weight", False), "ln2b": ("ln_2.bias", False),
            "fcw": ("mlp.c_fc.weight", True), "fcb": ("mlp.c_fc.bias", False),
            "fcprojw": ("mlp.c_proj.weight", True), "fcprojb": ("mlp.c_proj.bias", False),
            "lnfw": ("ln_f.weight", False), "lnfb": ("ln_f.bias", False), "lm_head": ("lm_head.weight", False)}


def slice_names(kind, s, arch):
    """The names of the slices of kind in a model of shape s and architecture arch, in order, as
    the checkpoint's scripts call them: Hugging Face's ("h.3.attn.c_attn.weight"), "{kind}.weight"
    for a kind GPT-2 has not."""
    name = HF_NAMES.get(kind.name, (kind.name + ".weight", False))[0]
    if kind.layers is None:
        return [name] if present(kind, arch) else []
    return [f"h.{l}.{name}" for l, sl in enumerate(layer_slices(kind, s, arch)) if sl >= 0]


def conv1d(kind):
    """Whether Hugging Face stores kind transposed (a Conv1D weight)."""
    return HF_NAMES.get(kind.name, ("", False))[1]


def muon_rows(kind, qkv="fused"):
    """The rows (a Dim) of each block Muon cuts a slice of kind into under the --muon-qkv qkv."""
    return dict(kind.muon_rows_by_qkv).get(qkv, kind.muon_rows)


def muon_matrix(kind, s, qkv="fused"):
    """(rows, cols) of each matrix Muon cuts a slice of kind (the matrix group) into under the
    --muon-qkv qkv."""
    return dim(muon_rows(kind, qkv), s), dim(kind.cols, s)


def muon_qkv_unfit(qkv, NH):
    """None when Muon can cut a model of NH heads as qkv says, else why not (gpt/param_table.h's
    muon_qkv_unfit): head pairs need an even head count."""
    if qkv == "head-pairs" and NH % 2:
        return "--muon-qkv head-pairs: the model's heads are an odd count, which does not pair"
    return None
