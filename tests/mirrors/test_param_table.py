#!/usr/bin/env python3
"""tests/mirrors/test_param_table.py: scripts/gpt_parameters.py's table is gpt/param_table.h's. Every row
(name, order, per layer or not, shape terms, init, group, multipliers, Muon's rows under each
--muon-qkv) against the one build/tests/mirrors/print_param_table prints, and what the Python
functions compute against what the C ones do for the presets at d12 and every combination of
the switches that change the tensors at two shapes: which tensors a model has, their sizes,
offsets, slices per layer, Muon's matrices and ZeRO-1's units under each cut. The comparison is
seen to fail on a row changed in one place. Prints PASS / FAIL lines
like tests/lib/test.h.
"""
import json
import math
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from case import Case  # noqa: E402
import gpt_parameters as table  # noqa: E402
from gpt_architecture import Architecture, describe  # noqa: E402

PRINT_PARAM_TABLE = os.path.join(ROOT, os.environ.get("BUILD", "build"), "tests", "mirrors", "print_param_table")


class OddLayers:
    """A layers rule for the check that a change is seen: the odd layers."""

    @staticmethod
    def slice(l, L):
        return l // 2 if l % 2 else -1

    @staticmethod
    def count(L):
        return L // 2


def row_differences(c_kinds, kinds):
    """How the rows printed by the C table differ from kinds (Python's), one line each."""
    if [k["name"] for k in c_kinds] != [k.name for k in kinds]:
        return [f"the kinds are {[k['name'] for k in c_kinds]} in C, {[k.name for k in kinds]} here"]
    out = []
    for c, k in zip(c_kinds, kinds):
        mine = {"per_layer": k.layers is not None, "rows": list(k.rows), "cols": list(k.cols), "init": k.init,
                "std": k.std, "residual": int(k.residual), "zero_init": int(k.zero_init), "group": k.group,
                "lr_scale": k.lr_scale, "decay_scale": k.decay_scale,
                "muon_rows": {qkv: list(table.muon_rows(k, qkv)) for qkv in table.MUON_QKV}}
        out += [f"{k.name}: {field} {c[field]!r} in C, {value!r} here" for field, value in mine.items()
                if c[field] != value]
    return out


def model_differences(model, kinds):
    """How what the C table computed for one model differs from what gpt_parameters computes."""
    shape = table.Shape(model["maxT"], model["V"], model["L"], model["NH"], model["C"])
    arch = Architecture(**model["arch"])
    what = f"L {shape.L} C {shape.C} V {shape.V} {describe(arch)}"
    out, offset = [], 0
    for c, kind in zip(model["tensors"], kinds):
        has = table.present(kind, arch)
        size = math.prod(table.tensor_shape(kind, shape, arch)) if has else 0
        mine = {"size": size, "offset": offset,
                "slice_size": math.prod(table.slice_shape(kind, shape)) if has else 0,
                "muon": {qkv: list(table.muon_matrix(kind, shape, qkv)) if kind.group == "matrix" else [0, 0]
                         for qkv in table.MUON_QKV},
                "zero_unit": {qkv: math.prod(table.muon_matrix(kind, shape, qkv)) if kind.group == "matrix" else 128
                              for qkv in table.MUON_QKV},
                "layer_slices": table.layer_slices(kind, shape, arch)}
        out += [f"{what}: {kind.name}: {field} {c[field]} in C, {value} here" for field, value in mine.items()
                if c[field] != value]
        offset += size
    if offset != table.count(shape, arch):
        out.append(f"{what}: count {table.count(shape, arch)}, the tensors add up to {offset}")
    return out


def main():
    case = Case("param_table: the C table is printed")
    printed = None
    if case.check(os.access(PRINT_PARAM_TABLE, os.X_OK), f"{PRINT_PARAM_TABLE} is not built (make test builds it)"):
        result = subprocess.run([PRINT_PARAM_TABLE], capture_output=True, text=True, timeout=60)
        if case.check(result.returncode == 0, f"print_param_table exited {result.returncode}: {result.stderr}"):
            printed = json.loads(result.stdout)
    case.end()
    if printed is None:
        return 1

    case = Case("param_table: scripts/gpt_parameters.py's rows are gpt/param_table.c's")
    for why in row_differences(printed["kinds"], table.TABLE):
        case.check(False, why)
    case.end()

    case = Case("param_table: each layers rule counts the slices it gives, packed in layer order")
    for kind in table.TABLE:
        for L in range(1, 20) if kind.layers else ():
            slices = [kind.layers.slice(l, L) for l in range(L)]
            held = [sl for sl in slices if sl >= 0]
            case.check(held == list(range(len(held))) and all(sl >= -1 for sl in slices),
                       f"{kind.name}, L {L}: the slices {slices} are not packed in layer order")
            case.check(kind.layers.count(L) == len(held), f"{kind.name}, L {L}: count {kind.layers.count(L)}, "
                                                          f"{len(held)} slices")
    case.end()

    case = Case("param_table: the tensors, sizes, offsets, layer slices, Muon's matrices and ZeRO-1's units under "
                "each --muon-qkv agree with C's")
    case.check(len(printed["models"]) >= 66, f"{len(printed['models'])} models printed")
    for model in printed["models"]:
        for why in model_differences(model, table.TABLE):
            case.check(False, why)
    case.end()

    # A row changed here alone (the Muon cut, a presence, a shape) is seen by the comparisons.
    case = Case("param_table: a row changed on one side is found")
    kinds = list(table.TABLE)
    qkvw = kinds.index(table.KINDS["qkvw"])
    kinds[qkvw] = kinds[qkvw]._replace(muon_rows=table.Dim(1, "C"))
    case.check(row_differences(printed["kinds"], kinds), "qkvw cut into (C, C) matrices goes unseen in the rows")
    modern_d12 = printed["models"][1]
    case.check(model_differences(modern_d12, kinds), "qkvw cut into (C, C) matrices goes unseen in the models")
    kinds[qkvw] = table.KINDS["qkvw"]._replace(muon_rows_by_qkv=(("split", table.C),))
    case.check(row_differences(printed["kinds"], kinds), "qkvw's head pairs as its whole goes unseen in the rows")
    case.check(model_differences(modern_d12, kinds), "qkvw's head pairs as its whole goes unseen in the models")
    kinds = list(table.TABLE)
    kinds[1] = kinds[1]._replace(present=None)
    case.check(any(model_differences(m, kinds) for m in printed["models"]), "wpe in every model goes unseen")
    kinds = list(table.TABLE)
    kinds[2] = kinds[2]._replace(layers=OddLayers)
    case.check(any(model_differences(m, kinds) for m in printed["models"]), "ln1w on odd layers goes unseen")
    case.end()
    return 1 if Case.failures else 0


if __name__ == "__main__":
    sys.exit(main())
