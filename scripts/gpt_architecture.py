"""scripts/gpt_architecture.py: the architecture of a flashgpt model (gpt/config.h's Architecture),
its three presets and the training defaults each gives, and train_gpt's options for it, for the
Python scripts (python3 alone: no numpy, no torch, so a script checks its options before it loads
either).

The fields, in the order of gpt/config.h and of the model checkpoint's header slots 8 on:
rotary (0/1: rotary positions on q and k, no learned wpe), rotary_base (frequencies
base^(-2i/HS)), rms_norm (0/1: RMSNorm without weights, else LayerNorm), qk_norm (0/1: RMSNorm of
each head's q and k), relu2 (0/1: the MLP's activation relu(x)^2, else tanh GELU), bias (0/1:
biases in the four linear layers), untied_head (0/1: an lm_head of its own, else wte), zero_init
(0/1: attproj, fcproj and lm_head start at zero), softcap (logits z -> softcap * tanh(z /
softcap); 0: none) in slots 8-16; then attention's key window per row (attention/mask.h):
documents (0/1: a row sees its own document alone), document_token (the token that starts a
document, 0 without documents), window_count and windows (64 slots: layer l sees at most
windows[l % window_count] keys, 0 for no bound; 0 past the pattern), train_gpt's
--document-mask, --window and --window-pattern (masked(); the PyTorch model computes the windows);
then the parts of the 2026 recipe, off in gpt2 and modern, from slot 84 on (checkpoint versions 8
and 9 hold them, 6 and 7 none): embedding_norm (0/1: an RMSNorm of the stem's output), qk_scale
(q and k each times it after QK-norm, which it needs: the attention's scale qk_scale^2 / sqrt(HS);
0: none), residual_lambdas (0/1: before each block x = resid_lambda x + x0_lambda x0, learned
scalars of the parameter table, x0 the stem's output), value_embeddings (0/1: every other layer,
the last among them, adds a gated token embedding of its own to the attention's values), smear
(0/1: the stem's output takes in the row's token before, x_t += lambda sigmoid(x_t[:24] . w) x_{t-1}),
backout (0/1: before the final norm x -= lambda x_mid, x_mid the stream leaving block L // 2).
The presets (PRESETS): gpt2, modern and 2026, modern with every part and nanochat's key windows,
which follow the context (PRESET_WINDOWS, preset_architecture: a quarter of it in three layers of
four, the last layer full); each with the defaults of a run trained as it (PRESET_DEFAULTS:
2026's Muon, its variants, weight decay and schedule; modern's rates), which
scripts/torch_optimizers.py and scripts/gpt_schedule.py take.
The options are train_gpt's: --arch gpt2|modern|2026 picks a preset, then --rotary 0|1,
--rotary-base X, --norm layer|rms, --qk-norm 0|1, --mlp gelu|relu2, --bias 0|1,
--head tied|untied, --zero-init 0|1, --softcap X, --embedding-norm 0|1, --qk-scale X,
--residual-lambdas 0|1, --value-embeddings 0|1, --smear 0|1 and --backout 0|1 each replace one field,
and --window-pattern LIST (keys, or full, separated by commas; full alone: none) the windows.
The rules are gpt/config.h's, held to it by tests/mirrors/test_rules.py: each field's values (invalid),
the fields without effect (drop_without_effect: refused in an option, dropped as a checkpoint is
read, so that it reads as the model it computes), each preset's architecture at a context and
layers (preset_architecture) and its defaults, and the preset nearest an architecture, whose
defaults a run takes without --arch (nearest_preset).
"""
import math
import struct
from typing import NamedTuple

MAX_WINDOWS = 64
PARTS_SLOT = 12 + MAX_WINDOWS  # the first slot of the parts, past those of checkpoint versions 6 and 7
PARTS = ("embedding_norm", "qk_scale", "residual_lambdas", "value_embeddings", "smear", "backout")
SLOTS = PARTS_SLOT + len(PARTS)  # the header slots an architecture takes


class Architecture(NamedTuple):
    rotary: int
    rotary_base: float
    rms_norm: int
    qk_norm: int
    relu2: int
    bias: int
    untied_head: int
    zero_init: int
    softcap: float
    documents: int = 0
    document_token: int = 0
    window_count: int = 0
    windows: tuple = (0,) * MAX_WINDOWS
    embedding_norm: int = 0
    qk_scale: float = 0.0
    residual_lambdas: int = 0
    value_embeddings: int = 0
    smear: int = 0
    backout: int = 0


def f32(x):
    """x rounded to a float32, as a model's header holds a float field."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def as_stored(arch):
    """arch as a model's header holds it: its float fields rounded to float32 (an option's value
    is a double here, a float in train_gpt and the file)."""
    return arch._replace(**{field: f32(getattr(arch, field)) for field in FLOAT_FIELDS})


ROTARY_BASE = 10000.0  # every preset's, and the one a model without rotary holds
# Each preset's components and parts, without key windows (PRESET_WINDOWS').
PRESETS = {
    "gpt2": Architecture(rotary=0, rotary_base=ROTARY_BASE, rms_norm=0, qk_norm=0, relu2=0, bias=1, untied_head=0,
                         zero_init=0, softcap=0.0),
    "modern": Architecture(rotary=1, rotary_base=ROTARY_BASE, rms_norm=1, qk_norm=1, relu2=1, bias=0, untied_head=1,
                           zero_init=1, softcap=30.0),
    "2026": Architecture(rotary=1, rotary_base=ROTARY_BASE, rms_norm=1, qk_norm=1, relu2=1, bias=0, untied_head=1,
                         zero_init=1, softcap=30.0, embedding_norm=1, qk_scale=f32(1.2), residual_lambdas=1,
                         value_embeddings=1, smear=1, backout=1),
}
GPT2 = PRESETS["gpt2"]
# The key windows that follow the context: (divisor, every), each layer seeing maxT // divisor
# keys but every every-th layer and the last, which see the whole context (nanochat's).
PRESET_WINDOWS = {"2026": (4, 4)}


class PresetDefaults(NamedTuple):
    """What a preset sets besides the architecture: the defaults of a run trained as it, each where
    the run does not give its option (gpt/config.h's PresetDefaults). 0 leaves the optimizer's or
    the schedule's own default; the optimizer's settings apply under that optimizer alone."""
    optimizer: str = "adamw"
    adamw_lr: float = 0.0
    embedding_lr: float = 0.0
    weight_decay: float = 0.0
    muon_qkv: str = "fused"
    normuon: bool = False
    lr_schedule: str = "cosine"
    warmdown_frac: float = 0.0
    min_lr_frac: float = 0.0
    momentum_warmup_steps: int = 0
    momentum_start: float = 0.0


PRESET_DEFAULTS = {
    "gpt2": PresetDefaults(),
    "modern": PresetDefaults(adamw_lr=2e-3, embedding_lr=0.05),
    "2026": PresetDefaults(optimizer="muon", adamw_lr=2e-3, embedding_lr=0.05, weight_decay=0.1, muon_qkv="head-pairs",
                           normuon=True, lr_schedule="wsd", warmdown_frac=0.65, min_lr_frac=0.05,
                           momentum_warmup_steps=300, momentum_start=0.85),
}
FLOAT_FIELDS = ("rotary_base", "softcap", "qk_scale")
SWITCHES = ("rotary", "rms_norm", "qk_norm", "relu2", "bias", "untied_head", "zero_init", "documents",
            "embedding_norm", "residual_lambdas", "value_embeddings", "smear", "backout")
COMPONENT_SWITCHES = SWITCHES[:7]  # the switches of gpt2's and modern's components
PART_SWITCHES = SWITCHES[8:]  # the switches of the 2026 recipe's parts (its QK scale apart)

# Each component option: (flag, the field it sets, its choices as {word: value}, or None for a
# number).
COMPONENTS = (("--rotary", "rotary", {"0": 0, "1": 1}), ("--rotary-base", "rotary_base", None),
              ("--norm", "rms_norm", {"layer": 0, "rms": 1}), ("--qk-norm", "qk_norm", {"0": 0, "1": 1}),
              ("--mlp", "relu2", {"gelu": 0, "relu2": 1}), ("--bias", "bias", {"0": 0, "1": 1}),
              ("--head", "untied_head", {"tied": 0, "untied": 1}), ("--zero-init", "zero_init", {"0": 0, "1": 1}),
              ("--softcap", "softcap", None), ("--embedding-norm", "embedding_norm", {"0": 0, "1": 1}),
              ("--qk-scale", "qk_scale", None), ("--residual-lambdas", "residual_lambdas", {"0": 0, "1": 1}),
              ("--value-embeddings", "value_embeddings", {"0": 0, "1": 1}), ("--smear", "smear", {"0": 0, "1": 1}),
              ("--backout", "backout", {"0": 0, "1": 1}))


def rotary_base_invalid(base):
    """None when base may be rotary's base, else the rule it breaks (gpt/config.h's)."""
    return None if math.isfinite(base) and base > 1 else "the rotary base must be a finite number above 1"


def softcap_invalid(cap):
    """None when cap may be the logits' soft cap, else the rule it breaks (gpt/config.h's: a cap
    below 1 flattens every distribution the model could draw)."""
    return None if cap == 0 or (math.isfinite(cap) and cap >= 1) else \
        "the softcap must be 0 (none) or a finite number of at least 1"


def qk_scale_invalid(scale):
    """None when scale may be the QK scale, else the rule it breaks (gpt/config.h's: from 1/8 to
    8, the logits of normed q and k from 1/64 to 64 times the plain scale's)."""
    return None if scale == 0 or 0.125 <= scale <= 8 else "the QK scale must be 0 (none) or a number from 0.125 to 8"


def attention_scale(arch, HS):
    """The attention's softmax scale at head size HS: 1/sqrt(HS), times qk_scale^2 with a QK scale."""
    return (arch.qk_scale ** 2 if arch.qk_scale > 0 else 1.0) / math.sqrt(HS)


def invalid(arch):
    """None when every field holds a value it may (gpt/config.h's architecture_invalid), else
    what does not."""
    for field in SWITCHES:
        if getattr(arch, field) not in (0, 1):
            return f"{field} {getattr(arch, field)} is neither 0 nor 1"
    why = rotary_base_invalid(arch.rotary_base) or softcap_invalid(arch.softcap) or qk_scale_invalid(arch.qk_scale)
    if why:
        return why
    if arch.qk_scale != 0 and not arch.qk_norm:
        return "a QK scale without QK-norm (the scale of q and k not normed is their weights': --qk-norm 1)"
    if arch.document_token < 0 or (not arch.documents and arch.document_token):
        return f"the document token {arch.document_token} is negative, or set without documents"
    if not 0 <= arch.window_count <= MAX_WINDOWS or len(arch.windows) != MAX_WINDOWS:
        return f"the window pattern has {arch.window_count} windows, not 0 to {MAX_WINDOWS}"
    if min(arch.windows) < 0 or any(arch.windows[arch.window_count:]):
        return "a window is negative, or set past the pattern"
    return None


def drop_without_effect(arch, shape=None):
    """(arch without its fields that change nothing the model computes, why the first of them has
    no effect or None when it holds none): gpt/config.h's gpt_config_drop_without_effect, for an
    architecture whose fields are each valid (invalid; a value invalid in itself is left as it
    is). A rotary base without rotary becomes the presets', a QK scale of 1 none, a window of the
    context or more no bound, the pattern's entries past the layers go, and a pattern that then bounds no layer
    becomes none. shape: the model's (its maxT and L), which the windows are checked against;
    None for an architecture without windows."""
    why = None
    if not arch.rotary and arch.rotary_base != ROTARY_BASE and not rotary_base_invalid(arch.rotary_base):
        arch = arch._replace(rotary_base=ROTARY_BASE)
        why = "a rotary base without rotary, where it has no effect (--rotary 1 gives the model rotary)"
    if arch.qk_scale == 1:
        arch = arch._replace(qk_scale=0.0)
        why = why or "a QK scale of 1, which scales nothing (leave it out)"
    if not 0 < arch.window_count <= MAX_WINDOWS:
        return arch, why
    pattern = list(arch.windows[:arch.window_count])
    if any(w >= shape.maxT for w in pattern):
        pattern = [0 if w >= shape.maxT else w for w in pattern]
        why = why or "a window is no narrower than the context, so it bounds nothing (leave it out; in a pattern, full)"
    if len(pattern) > shape.L:
        pattern = pattern[:shape.L]
        why = why or "the window pattern is longer than the layers, which take no more of it"
    if not any(w > 0 for w in pattern):
        pattern = []
        why = why or "the window pattern bounds no layer"
    windows = tuple(pattern) + (0,) * (arch.window_count - len(pattern)) + arch.windows[arch.window_count:]
    return arch._replace(window_count=len(pattern), windows=windows), why


def masked(arch):
    """Whether attention sees less than every earlier key in some layer: documents or windows."""
    return bool(arch.documents or arch.window_count)


def has_parts(arch):
    """Whether arch has a part of the 2026 recipe: a slot from PARTS_SLOT on not 0 (by its bits),
    which a checkpoint of version 8 or 9 holds (gpt/config.h's architecture_has_parts)."""
    return any(struct.unpack("<i", struct.pack("<f", v))[0] if isinstance(v, float) else v
               for v in (getattr(arch, field) for field in PARTS))


def base(arch):
    """arch without its key windows and its parts: the preset or components its description
    starts with."""
    return arch._replace(documents=0, document_token=0, window_count=0, windows=(0,) * MAX_WINDOWS,
                         **{field: type(getattr(GPT2, field))(0) for field in PARTS})


def preset_architecture(name, shape):
    """The architecture of preset name in a model of shape's context maxT and L layers: its
    components and parts, and where it has them (PRESET_WINDOWS) its key windows at that
    context as the shortest pattern that gives each layer its window (2026's at context 1024 and
    12 layers: 256,256,256,full); ValueError, in train_gpt's words, where the model cannot hold
    them (gpt/config.h's architecture_of_preset)."""
    arch = PRESETS[name]
    if name not in PRESET_WINDOWS:
        return arch
    divisor, every = PRESET_WINDOWS[name]
    window = shape.maxT // divisor
    windowed = [layer % every != every - 1 and layer != shape.L - 1 for layer in range(shape.L)]
    if not any(windowed):
        return arch
    if window < 1:
        raise ValueError(f"--arch {name} at context {shape.maxT}, {shape.L} layers: its key windows are the context / "
                         f"{divisor}, rounded down: a context of {shape.maxT} leaves them no key (give {divisor} or "
                         "more)")
    layers = [window if w else 0 for w in windowed]
    period = next((p for p in range(1, min(shape.L, MAX_WINDOWS) + 1)
                   if all(layers[layer] == layers[layer % p] for layer in range(shape.L))), None)
    if period is None:
        raise ValueError(f"--arch {name} at context {shape.maxT}, {shape.L} layers: its key windows on {shape.L} "
                         f"layers repeat over more layers than a pattern holds ({MAX_WINDOWS})")
    return arch._replace(window_count=period, windows=tuple(layers[:period]) + (0,) * (MAX_WINDOWS - period))


def preset_of(arch, shape=None):
    """The name of the preset arch is in a model of shape (its maxT and L; None: at no context,
    where a preset of key windows is none), or None (an ablation)."""
    def at_shape(name):
        if not shape:
            return None if name in PRESET_WINDOWS else PRESETS[name]
        try:
            return preset_architecture(name, shape)
        except ValueError:
            return None
    return next((name for name in PRESETS if at_shape(name) == arch), None)


def nearest_preset(arch):
    """The name of the preset nearest arch (gpt/config.h's architecture_nearest_preset): the one
    whose components and parts differ from arch's in the fewest (the seven switches, the soft cap
    and the six parts, each on or off; the rotary base, the cap's and the QK scale's values and the
    key windows count for nothing), the first (gpt2, then modern) on a tie."""
    def differ(preset):
        return sum(getattr(arch, f) != getattr(preset, f) for f in COMPONENT_SWITCHES + PART_SWITCHES) + \
            ((arch.softcap > 0) != (preset.softcap > 0)) + ((arch.qk_scale > 0) != (preset.qk_scale > 0))
    return min(PRESETS, key=lambda name: differ(PRESETS[name]))  # min keeps the first of a tie


def describe(arch, shape=None):
    """The preset arch is in a model of shape (its maxT and L; None: no context), then its
    documents, if any: "2026, documents (token 50256)". Else "gpt2", "modern", or the components:
    "rotary (base 10000), rms norm, qk-norm, ..."; then the parts it has: ", embedding norm, qk
    scale 1.2, residual lambdas, value embeddings, smear, backout"; then the key windows, if any:
    ", documents (token 50256), windows 2048,512" (gpt/config.h's architecture_describe)."""
    whole = preset_of(arch._replace(documents=0, document_token=0), shape)
    if whole:
        return whole + (f", documents (token {arch.document_token})" if arch.documents else "")
    text = preset_of(base(arch), shape) or ", ".join([
        f"rotary (base {arch.rotary_base:g})" if arch.rotary else
        f"learned positions (rotary base {arch.rotary_base:g})" if arch.rotary_base != ROTARY_BASE else
        "learned positions",
        "rms norm" if arch.rms_norm else "layernorm", "qk-norm" if arch.qk_norm else "no qk-norm",
        "relu2" if arch.relu2 else "gelu", "bias" if arch.bias else "no bias",
        "untied head" if arch.untied_head else "tied head", "zero init" if arch.zero_init else "no zero init",
        f"softcap {arch.softcap:g}" if arch.softcap else "no softcap"])
    if arch.embedding_norm:
        text += ", embedding norm"
    if arch.qk_scale > 0:
        text += f", qk scale {arch.qk_scale:g}"
    if arch.residual_lambdas:
        text += ", residual lambdas"
    if arch.value_embeddings:
        text += ", value embeddings"
    if arch.smear:
        text += ", smear"
    if arch.backout:
        text += ", backout"
    if arch.documents:
        text += f", documents (token {arch.document_token})"
    if arch.window_count:
        text += ", windows " + ",".join(str(w) if w else "full" for w in arch.windows[:arch.window_count])
    return text


def window_pattern(text):
    """(window_count, windows) of train_gpt's --window-pattern text: windows of keys, or full for
    none, separated by commas, all full none (window_count 0: a preset's off) (train/options.cu's
    parse_window_pattern); ValueError saying why it is not one."""
    items = text.split(",")
    if len(items) > MAX_WINDOWS:
        raise ValueError(f"--window-pattern '{text}': more than {MAX_WINDOWS} windows")
    windows = []
    for item in items:
        if item != "full" and not (item.isascii() and item.isdigit() and 1 <= int(item) <= 2**31 - 1):
            raise ValueError(f"--window-pattern '{text}': '{item}' is neither a number of keys (1 or more) nor full")
        windows.append(0 if item == "full" else int(item))
    if not any(windows):
        return 0, (0,) * MAX_WINDOWS
    return len(windows), tuple(windows) + (0,) * (MAX_WINDOWS - len(windows))


def add_options(ap):
    """The architecture options on the argparse parser ap, each None unless given."""
    ap.add_argument("--arch", choices=list(PRESETS),
                    help="the preset: gpt2 (GPT-2 of 2019), modern (--rotary 1, --norm rms, --qk-norm 1, "
                         "--mlp relu2, --bias 0, --head untied, --zero-init 1, --softcap 30) or 2026 (modern with "
                         "--embedding-norm 1, --qk-scale 1.2, --residual-lambdas 1, --value-embeddings 1, --smear 1, "
                         "--backout 1 and key windows of a quarter of the context in three layers of four, the last "
                         "full; its defaults: --optimizer muon, --muon-qkv head-pairs, --normuon, --weight-decay 0.1, "
                         "--lr-schedule wsd --warmdown-frac 0.65 --min-lr-frac 0.05, --momentum-warmup-steps 300 "
                         "--momentum-start 0.85) [gpt2; with a checkpoint, its own]")
    for flag, field, choices in COMPONENTS:
        if choices:
            ap.add_argument(flag, choices=list(choices), help=f"the architecture's {field}")
        else:
            ap.add_argument(flag, type=float, metavar="X", help=f"the architecture's {field}")
    ap.add_argument("--window-pattern", metavar="LIST",
                    help="layer l's attention sees at most the l mod N-th of these N windows of keys (full: no "
                         "bound; full alone: none) [--arch 2026's, else none]")


def from_options(a, init=None, shape=None):
    """(the architecture the parsed options a ask for, the preset whose defaults the run takes:
    --arch's, else the one nearest the architecture, as train_gpt's). It starts from --arch's
    preset at the model's shape (preset_architecture: its key windows follow the context), or
    without --arch from init's (a gpt2_checkpoint.Checkpoint the run starts from) or gpt2; each
    component given replaces its field, --window-pattern the windows. shape: the model's (init's
    when given), which windows are checked against. ValueError saying why when the result is not a
    valid architecture or holds a field without effect (an option that changes nothing is refused,
    as train_gpt refuses it)."""
    shape = init.shape if init else shape
    fields = (preset_architecture(a.arch, shape) if a.arch else init.arch if init else GPT2)._asdict()
    for flag, field, choices in COMPONENTS:
        value = getattr(a, field_attribute(flag))
        if value is not None:
            fields[field] = choices[value] if choices else float(value)
    if a.window_pattern is not None:
        fields["window_count"], fields["windows"] = window_pattern(a.window_pattern)
    arch = Architecture(**fields)
    why = invalid(arch) or drop_without_effect(arch, shape)[1]
    if why:
        raise ValueError(f"the architecture ({describe(arch, shape)}): {why}")
    return arch, a.arch or nearest_preset(arch)


def field_attribute(flag):
    """The attribute argparse gives a flag: "--rotary-base" -> "rotary_base"."""
    return flag.lstrip("-").replace("-", "_")

