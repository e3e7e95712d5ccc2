#!/usr/bin/env python3
"""tests/reference/test_muon_reference.py: the float64 numpy reference of Muon's variants
(tests/reference/gen_muon_reference.py), which tests/unit/gpt/test_muon.cu holds the GPU to, against
computations of its own:
- Newton-Schulz, each coefficient set, wide, tall and square: the iterations act on the singular
  values alone, so the result is U f(S) V^T with f the set's polynomials composed, applied to each
  singular value (numpy's SVD); and Polar Express ends nearer the polar factor U V^T than the
  quintic does, its singular values within [0.85, 1.15] from a spread of 1e-2 to 1;
- NorMuon: each row's (a wide matrix's column's) moment and scale by plain loops over the
  entries; with beta2 0 every row ends equally long; the update's Frobenius norm kept;
- one matrix step: the cut of qkvw under each --muon-qkv (q, k and v; each head pair) against
  Newton-Schulz of the slices taken by hand; cautious decay against an element-by-element loop of
  the rule (decayed where update and weight agree in sign).
Prints PASS / FAIL lines like tests/lib/test.h.
"""
import os
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from case import Case  # noqa: E402
import gen_muon_reference as ref  # noqa: E402
import gpt_parameters  # noqa: E402


def composed(ns, x):
    """The coefficient set ns's polynomials composed, applied to the scalar x."""
    for a, b, c in ref.NS_COEFFICIENTS[ns][1]:
        x = a * x + b * x ** 3 + c * x ** 5
    return x


def spread_matrix(rng, rows, cols, lo):
    """A matrix (rows, cols) of singular values spread log-uniformly from lo to 1, random vectors."""
    s = min(rows, cols)
    u, _ = np.linalg.qr(rng.normal(size=(rows, s)))
    v, _ = np.linalg.qr(rng.normal(size=(cols, s)))
    return (u * np.logspace(np.log10(lo), 0, s)) @ v.T


def check_newton_schulz():
    case = Case("muon reference: Newton-Schulz is U f(S) V^T, Polar Express near the polar factor")
    rng = np.random.default_rng(7)
    for rows, cols in ((24, 40), (40, 24), (32, 32)):
        m = spread_matrix(rng, rows, cols, 1e-2)
        u, s, vt = np.linalg.svd(m, full_matrices=False)
        polar = u @ vt
        errors = {}
        for ns in ref.NS_KINDS:
            norm_scale = ref.NS_COEFFICIENTS[ns][0]
            x = s / (norm_scale * np.sqrt((s ** 2).sum()) + ref.NS_EPS)
            want = (u * composed(ns, x)) @ vt
            got = ref.newton_schulz(m, ns)
            err = np.abs(got - want).max() / np.abs(want).max()
            case.check(err < 1e-9, f"({rows}, {cols}) {ns}: {err:.1e} off U f(S) V^T")
            errors[ns] = np.linalg.norm(got - polar) / np.linalg.norm(polar)
            if ns == "polar":
                sv = np.linalg.svd(got, compute_uv=False)
                case.check(0.85 <= sv.min() and sv.max() <= 1.15, f"({rows}, {cols}) polar: singular values "
                                                                    f"{sv.min():.3f} to {sv.max():.3f}")
        case.check(errors["polar"] < errors["quintic"], f"({rows}, {cols}): polar {errors['polar']:.3f} from U V^T, "
                                                        f"the quintic {errors['quintic']:.3f}")
    case.end()


def normuon_by_loops(o, moments, beta2):
    """NorMuon written entry by entry: per row (per column when rows < cols) the mean square, the
    moment, its scale, the sums of squares before and after."""
    rows, cols = o.shape
    by_row = rows >= cols
    n, reduced = (rows, cols) if by_row else (cols, rows)
    at = (lambda i, j: (i, j)) if by_row else (lambda i, j: (j, i))
    scales, before, after = [], 0.0, 0.0
    for i in range(n):
        q = sum(o[at(i, j)] ** 2 for j in range(reduced)) / reduced
        moments[i] = beta2 * moments[i] + (1 - beta2) * q
        scales.append(1 / max(moments[i], ref.NORMUON_FLOOR) ** 0.5)
        before += q * reduced
        after += q * reduced * scales[-1] ** 2
    ratio = before ** 0.5 / max(after ** 0.5, ref.NORMUON_FLOOR)
    out = o.copy()
    for i in range(n):
        for j in range(reduced):
            out[at(i, j)] *= scales[i] * ratio
    return out


def check_normuon():
    case = Case("muon reference: NorMuon's moments and scales, entry by entry; equal rows at beta2 0; the norm kept")
    rng = np.random.default_rng(11)
    for rows, cols in ((12, 5), (5, 12), (7, 7)):
        o = rng.normal(size=(rows, cols)) * rng.uniform(0.1, 2.0, size=(rows, 1))
        moments = rng.uniform(0.0, 1.0, max(rows, cols))
        mine = moments.copy()
        got, want = ref.normuon(o, moments, 0.9), normuon_by_loops(o, mine, 0.9)
        case.check(np.allclose(got, want, rtol=1e-12) and np.allclose(moments, mine, rtol=1e-12),
                   f"({rows}, {cols}): the update or the moments differ from the loops'")
        case.check(abs(np.linalg.norm(got) / np.linalg.norm(o) - 1) < 1e-12, f"({rows}, {cols}): the norm changed")
        even = ref.normuon(o, np.zeros(max(rows, cols)), 0.0)
        lengths = np.linalg.norm(even, axis=1 if rows >= cols else 0)
        case.check(np.ptp(lengths) < 1e-12 * lengths.max(), f"({rows}, {cols}) beta2 0: rows of lengths {lengths}")
    case.end()


def check_matrix_step():
    case = Case("muon reference: qkvw cut by --muon-qkv as the slices taken by hand; cautious decay by the rule")
    rng = np.random.default_rng(13)
    shape = ref.UPDATE_SHAPE
    C, HS = shape.C, shape.C // shape.NH
    kind = gpt_parameters.KINDS["qkvw"]
    p0, g = rng.normal(0, 0.02, (1, 3 * C, C)), rng.normal(0, 0.02, (1, 3 * C, C))
    m0 = rng.normal(0, 0.01, (1, 3 * C, C))
    lr = 0.01
    u = ((1 - ref.MOMENTUM) * g + ref.MOMENTUM * (ref.MOMENTUM * m0 + (1 - ref.MOMENTUM) * g))[0]
    for qkv, block in (("fused", 3 * C), ("split", C), ("head-pairs", 2 * HS)):
        rows, cols = gpt_parameters.muon_matrix(kind, shape, qkv)
        case.check((rows, cols) == (block, C), f"{qkv}: matrices of ({rows}, {cols}), expected ({block}, {C})")
        p, m, v = p0.copy(), m0.copy(), np.zeros_like(p0)
        ref.muon_matrix_step(p, g, m, v, lr, 0.0, rows, cols, ref.Variant(qkv=qkv))
        want = np.concatenate([ref.newton_schulz(u[i:i + block]) for i in range(0, 3 * C, block)])
        want *= lr * max(1.0, block / C) ** 0.5
        err = np.abs((p0 - p)[0] - want).max() / np.abs(want).max()
        case.check(err < 1e-12, f"{qkv}: the change is {err:.1e} off Newton-Schulz of the slices")
        # Cautious decay: each weight decayed where the undecayed change and it agree in sign.
        change = p0 - p
        decay = 0.5
        p, m = p0.copy(), m0.copy()
        ref.muon_matrix_step(p, g, m, v, lr, decay, rows, cols, ref.Variant(qkv=qkv, cautious=True))
        flat_p0, flat_change, flat_p = p0.ravel(), change.ravel(), p.ravel()
        wrong = sum(1 for i in range(flat_p0.size)
                    if abs(flat_p[i] - (flat_p0[i] - flat_change[i]
                                        - (lr * decay * flat_p0[i] if flat_change[i] * flat_p0[i] >= 0 else 0.0)))
                    > 1e-15)
        case.check(wrong == 0, f"{qkv}: {wrong} weights decayed otherwise than the rule says")
    case.end()


def main():
    check_newton_schulz()
    check_normuon()
    check_matrix_step()
    return 1 if Case.failures else 0


if __name__ == "__main__":
    sys.exit(main())
