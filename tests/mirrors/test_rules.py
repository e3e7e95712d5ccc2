#!/usr/bin/env python3
"""tests/mirrors/test_rules.py: the scripts' rules are train_gpt's, so that a PyTorch run and a train_gpt
run of one command line take the same settings. What build/tests/mirrors/print_rules prints from
gpt/config.h and gpt/optimizer.h, case by case, against scripts/gpt_architecture.py and
scripts/torch_optimizers.py:
- each optimizer setting's flag, bounds and the runs it belongs to (SETTINGS);
- the defaults of each optimizer for each preset (defaults, variant_defaults), each preset's
  optimizer (PRESET_DEFAULTS) and its architecture at a few contexts and layers, its key windows
  following the context, or the line refusing it (preset_architecture); the words each preset,
  and each with a part or its windows changed, is described in at its shape and at others
  (describe); the preset nearest every combination of the seven switches and a cap, and of the
  six parts on gpt2 and modern (nearest_preset);
- which rotary bases, soft caps and QK scales are taken (rotary_base_invalid, softcap_invalid,
  qk_scale_invalid), over zero, negative, tiny, near 1, near the bounds, huge and non-finite values;
- which architectures are refused field by field (invalid), and the fields without effect each
  one that is taken holds: the architecture it is read as and why (drop_without_effect);
- each setting of both optimizers' defaults set to each of those values, and the weight decay
  against each rate it is applied with, and Muon's variants in every combination under either
  optimizer: the line refusing it, word for word, or none (invalid);
- the Newton-Schulz coefficient sets (layers/newton_schulz.h, torch_optimizers.NS_COEFFICIENTS),
  each number as a float32, and which head counts each --muon-qkv takes (muon_qkv_unfit).
The comparison is seen to fail on a rule changed on one side. Prints PASS / FAIL lines like
tests/lib/test.h.
"""
import json
import os
import struct
import subprocess
import sys
from types import SimpleNamespace

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from case import Case  # noqa: E402
import gpt_architecture  # noqa: E402
import gpt_parameters  # noqa: E402
import torch_optimizers  # noqa: E402
from gpt_architecture import Architecture  # noqa: E402
from gpt_parameters import Shape  # noqa: E402

PRINT_RULES = os.path.join(ROOT, os.environ.get("BUILD", "build"), "tests", "mirrors", "print_rules")


def f32(x):
    """x rounded to a float32, as train_gpt holds a setting."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def arch_of(printed):
    return Architecture(**dict(printed, windows=tuple(printed["windows"])))


def settings_differences(printed, settings):
    if [s["flag"] for s in printed] != [s.flag for s in settings]:
        return [f"the settings are {[s['flag'] for s in printed]} in C, {[s.flag for s in settings]} here"]
    return [f"{s.flag}: {field} {c[field]!r} in C, {getattr(s, field)!r} here" for c, s in zip(printed, settings)
            for field in ("lo", "hi", "lo_open", "hi_open", "use") if c[field] != getattr(s, field)]


def defaults_differences(printed, defaults, settings, variant_defaults=torch_optimizers.variant_defaults):
    out = []
    for d in printed:
        variants = variant_defaults(d["optimizer"], d["preset"])
        variants = dict(variants, normuon_beta2=torch_optimizers.NORMUON_BETA2_DEFAULT if variants["normuon"] else 0.0)
        c_variants = dict(d["variants"], cautious_weight_decay=bool(d["variants"]["cautious_weight_decay"]),
                          normuon=bool(d["variants"]["normuon"]))
        if {key: f32(v) if isinstance(v, float) else v for key, v in variants.items()} != c_variants:
            out.append(f"{d['optimizer']} {d['preset']}: Muon's variants {c_variants} in C, {variants} here")
        mine = defaults(d["optimizer"], d["preset"])
        for s in settings:
            applies = s.use == "every run" or d["optimizer"] == "muon"
            if not applies:
                if s.key in mine:
                    out.append(f"{d['optimizer']} {d['preset']}: {s.key} has a default here, no setting in C")
            elif s.key not in mine or f32(mine[s.key]) != d["settings"][s.flag]:
                out.append(f"{d['optimizer']} {d['preset']}: {s.flag} {d['settings'][s.flag]:g} in C, "
                           f"{mine.get(s.key)} here")
        if f32(torch_optimizers.ADAM_EPS) != d["eps"]:
            out.append(f"eps {d['eps']:g} in C, {torch_optimizers.ADAM_EPS:g} here")
    return out


def preset_differences(printed, preset_architecture):
    out = []
    for p in printed:
        if gpt_architecture.PRESET_DEFAULTS[p["name"]].optimizer != p["optimizer"]:
            out.append(f"{p['name']}: --optimizer {p['optimizer']} in C, "
                       f"{gpt_architecture.PRESET_DEFAULTS[p['name']].optimizer} here")
        for a in p["architectures"]:
            what = f"{p['name']} at context {a['maxT']}, {a['L']} layers"
            try:
                mine, why = preset_architecture(p["name"], Shape(a["maxT"], 300, a["L"], 2, 128)), None
            except ValueError as e:
                mine, why = None, str(e)
            want = f"--arch {what}: {a['error']}" if a["error"] else None
            if (mine, why) != (arch_of(a["arch"]) if a["arch"] else None, want):
                out.append(f"{what}: {gpt_architecture.describe(arch_of(a['arch'])) if a['arch'] else want} in C, "
                           f"{gpt_architecture.describe(mine) if mine else why} here")
    return out


def describe_differences(printed, describe):
    return [f"{d['text']!r} in C, {describe(arch_of(d['arch']), Shape(d['maxT'], 300, d['L'], 2, 128))!r} here "
            f"(context {d['maxT']}, {d['L']} layers)" for d in printed
            if describe(arch_of(d["arch"]), Shape(d["maxT"], 300, d["L"], 2, 128)) != d["text"]]


def nearest_differences(printed, nearest):
    return [f"{gpt_architecture.describe(arch_of(n['arch']))}: nearest {n['preset']} in C, "
            f"{nearest(arch_of(n['arch']))} here" for n in printed if nearest(arch_of(n["arch"])) != n["preset"]]


def value_differences(printed, rule, name):
    return [f"{name} {v}: {'taken' if taken else 'refused'} in C, not here" for v, taken in printed
            if (rule(v) is None) != taken]


def architecture_differences(printed, invalid, drop):
    out = []
    for a in printed:
        arch = arch_of(a["arch"])
        what = f"{gpt_architecture.describe(arch)} at context {a['maxT']}, {a['L']} layers"
        if (invalid(arch) is not None) != a["invalid"]:
            out.append(f"{what}: {'refused' if a['invalid'] else 'taken'} in C, not here")
        elif not a["invalid"]:
            dropped, why = drop(arch, Shape(a["maxT"], 300, a["L"], 2, 128))
            if (dropped, why) != (arch_of(a["dropped"]), a["why"]):
                out.append(f"{what}: read as {gpt_architecture.describe(arch_of(a['dropped']))} ({a['why']}) in C, "
                           f"as {gpt_architecture.describe(dropped)} ({why}) here")
    return out


def optimizer_differences(printed, settings, invalid):
    out = []
    for o in printed:
        variants = dict(o["variants"], cautious_weight_decay=bool(o["variants"]["cautious_weight_decay"]),
                        normuon=bool(o["variants"]["normuon"]))
        s = SimpleNamespace(**{setting.key: o["settings"][setting.flag] for setting in settings}, **variants)
        why = invalid(o["optimizer"], s, o["untied_head"])
        if why != o["why"]:
            out.append(f"{o['optimizer']} {o['settings']} {o['variants']} (untied head {o['untied_head']}): "
                       f"{o['why']!r} in C, {why!r} here")
    return out


def coefficient_differences(printed, coefficients):
    if sorted(printed) != sorted(coefficients):
        return [f"the sets are {sorted(printed)} in C, {sorted(coefficients)} here"]
    out = []
    for name, (norm_scale, steps) in coefficients.items():
        mine = [f32(norm_scale), [[f32(x) for x in abc] for abc in steps]]
        if mine != [printed[name]["norm_scale"], printed[name]["steps"]]:
            out.append(f"{name}: {printed[name]} in C, {mine} here")
    return out


def unfit_differences(printed, unfit):
    return [f"{NH} heads, --muon-qkv {qkv}: {why!r} in C, {unfit(qkv, NH)!r} here" for NH, qkv, why in printed
            if unfit(qkv, NH) != why]


def main():
    case = Case("rules: the C rules are printed")
    printed = None
    if case.check(os.access(PRINT_RULES, os.X_OK), f"{PRINT_RULES} is not built (make test builds it)"):
        result = subprocess.run([PRINT_RULES], capture_output=True, text=True, timeout=60)
        if case.check(result.returncode == 0, f"print_rules exited {result.returncode}: {result.stderr}"):
            printed = json.loads(result.stdout)
    case.end()
    if printed is None:
        return 1
    settings, defaults = torch_optimizers.SETTINGS, torch_optimizers.defaults
    checks = (
        ("each optimizer setting's flag, bounds and runs are gpt/optimizer.h's",
         lambda: settings_differences(printed["settings"], settings)),
        ("the optimizers' defaults of each preset, Muon's variants among them, are gpt/optimizer.h's",
         lambda: defaults_differences(printed["defaults"], defaults, settings)),
        ("each preset's optimizer, and its architecture at each context and layers (or the line refusing "
         "it), are gpt/config.h's",
         lambda: preset_differences(printed["presets"], gpt_architecture.preset_architecture)),
        ("each preset, and each with a part or its windows changed, is described in gpt/config.h's words",
         lambda: describe_differences(printed["describe"], gpt_architecture.describe)),
        (f"the preset nearest each of {len(printed['nearest'])} architectures is gpt/config.h's",
         lambda: nearest_differences(printed["nearest"], gpt_architecture.nearest_preset)),
        ("the rotary bases, soft caps and QK scales taken are gpt/config.h's",
         lambda: value_differences(printed["rotary_base"], gpt_architecture.rotary_base_invalid, "rotary base") +
         value_differences(printed["softcap"], gpt_architecture.softcap_invalid, "softcap") +
         value_differences(printed["qk_scale"], gpt_architecture.qk_scale_invalid, "qk scale")),
        ("the architectures refused, and the fields without effect dropped, are gpt/config.h's",
         lambda: architecture_differences(printed["architectures"], gpt_architecture.invalid,
                                          gpt_architecture.drop_without_effect)),
        ("each optimizer setting out of its bounds, the weight decay and Muon's variants, refused as "
         "gpt/optimizer.h refuses them",
         lambda: optimizer_differences(printed["optimizers"], settings, torch_optimizers.invalid)),
        ("the Newton-Schulz coefficient sets are layers/newton_schulz.h's",
         lambda: coefficient_differences(printed["newton_schulz"], torch_optimizers.NS_COEFFICIENTS)),
        ("the head counts each --muon-qkv takes are gpt/param_table.h's",
         lambda: unfit_differences(printed["muon_qkv_unfit"], gpt_parameters.muon_qkv_unfit)),
    )
    for name, differences in checks:
        case = Case(f"rules: {name}")
        for why in differences():
            case.check(False, why)
        case.end()

    # A rule changed here alone is seen by the comparisons.
    case = Case("rules: a rule changed on one side is found")
    lr_closed = tuple(s._replace(lo_open=False) if s.flag == "--lr" else s for s in settings)
    case.check(settings_differences(printed["settings"], lr_closed), "--lr of 0 taken goes unseen in the settings")
    case.check(optimizer_differences(printed["optimizers"], settings,
                                     lambda kind, s, untied: torch_optimizers.invalid(kind, s, untied) if s.lr else None),
               "--lr of 0 taken goes unseen in the optimizers")
    case.check(defaults_differences(printed["defaults"], lambda kind, preset: defaults(kind, "gpt2"), settings),
               "the modern preset's defaults as GPT-2's go unseen")
    case.check(defaults_differences(printed["defaults"], defaults, settings,
                                    lambda kind, preset: torch_optimizers.variant_defaults(kind, "gpt2")),
               "2026's variants off go unseen")

    def half_windows(name, shape):
        return gpt_architecture.preset_architecture(name, shape._replace(maxT=shape.maxT // 2))
    case.check(preset_differences(printed["presets"], half_windows), "2026's windows at an eighth go unseen")
    case.check(describe_differences(printed["describe"], lambda arch, shape: gpt_architecture.describe(arch)),
               "a description that never names 2026 goes unseen")
    case.check(nearest_differences(printed["nearest"], gpt_architecture.preset_of),
               "the preset an architecture is, in place of the nearest, goes unseen")
    parts_uncounted = dict(gpt_architecture.PRESETS, **{"2026": gpt_architecture.PRESETS["modern"]})
    case.check(nearest_differences(printed["nearest"], lambda arch: min(
        parts_uncounted, key=lambda name: sum(getattr(arch, f) != getattr(parts_uncounted[name], f)
                                              for f in gpt_architecture.COMPONENT_SWITCHES))),
               "the parts counted for nothing go unseen")
    case.check(value_differences(printed["softcap"], lambda cap: None if cap >= 0 else "negative", "softcap"),
               "a soft cap of 1e-40 taken goes unseen")
    case.check(architecture_differences(printed["architectures"], gpt_architecture.invalid,
                                        lambda arch, shape: (arch, None)), "no field dropped goes unseen")
    uncautious = SimpleNamespace(cautious_weight_decay=False)
    case.check(optimizer_differences(printed["optimizers"], settings, lambda kind, s, untied: torch_optimizers.invalid(
        kind, SimpleNamespace(**dict(vars(s), **vars(uncautious))), untied)),
               "cautious weight decay without a decay taken goes unseen")
    polar = torch_optimizers.NS_COEFFICIENTS["polar"]
    case.check(coefficient_differences(printed["newton_schulz"], dict(torch_optimizers.NS_COEFFICIENTS,
                                                                       polar=(1.0, polar[1]))),
               "Polar Express's norm taken whole goes unseen")
    case.check(unfit_differences(printed["muon_qkv_unfit"], lambda qkv, NH: None), "head pairs of 3 heads taken goes "
                                                                                   "unseen")
    case.end()
    return 1 if Case.failures else 0


if __name__ == "__main__":
    sys.exit(main())
