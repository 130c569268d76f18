#!/usr/bin/python3
"""Symbolic regression of pairwise force laws (numpy/scipy).

Formula space: the force on body i is a sum over the other bodies j of an attraction along the
separation,   F_i = G * sum_j f(m_i, m_j, r_ij) * rhat_ij,   rhat_ij = (x_j - x_i) / r_ij,
with one fitted constant G (closed form: the least-squares G of the relative error below).

Error: the relative RMS vector error  rel_err = sqrt(mean_k |F_model,k - F_k|^2 / |F_k|^2), so a
force 1000x smaller counts as much as a large one (the forces span decades).

1. Power law f = m_i^a m_j^b r^c, real a, b, c fitted by least squares on rel_err (scipy), started
   from the best integer-exponent candidate. Newton's law is a = 1, b = 1, c = -2.
2. Expression search: f from
     m_i^a m_j^b r^c                  a, b in {-1, 0, 1, 2}, c in {-4, ..., 1}
     (m_i + m_j)^a r^c, m_i (m_i + m_j) r^c, m_i m_j / (m_i + m_j) r^c    a in {1, 2}
   ranked by  score = ln(rel_err) + LAMBDA * complexity,  complexity = the nodes of the
   expression tree (G 1; a factor with exponent +-1: the variable and its operator, 2; any other
   exponent adds the power and its constant, 4; a sum m_i + m_j: 4). So each extra node has to cut
   the error by at least LAMBDA = 5%; on noise the constant (complexity 1) wins.
A fit explains the forces only if rel_err < MAX_REL_ERR; otherwise the row says "no law".
"""
import itertools

import numpy as np
from scipy.optimize import least_squares

LAMBDA = 0.05
MAX_REL_ERR = 0.5
EXP_TOL = 0.1             # a fitted exponent "recovers" Newton's within this


def pair_features(pos, masses, body):
    """The pairs of samples k: body (k,) of positions (k, B, 2), masses (k, B) against every other
    body: m_i, m_j, r (k, B-1) and the unit vectors rhat (k, B-1, 2) from i towards j."""
    k, B, _ = pos.shape
    rows = np.arange(k)
    others = np.array([[j for j in range(B) if j != i] for i in range(B)])[body]   # (k, B-1)
    d = pos[rows[:, None], others] - pos[rows, body][:, None, :]
    r = np.sqrt((d ** 2).sum(axis=-1))
    return dict(mi=np.repeat(masses[rows, body][:, None], B - 1, axis=1), mj=masses[rows[:, None], others],
                r=r, rhat=d / r[..., None])


def _fit_constant(S, F):
    """The G minimising sum |G S - F|^2 / |F|^2, and the relative RMS error."""
    w = 1.0 / (F ** 2).sum(axis=1)
    den = (w * (S ** 2).sum(axis=1)).sum()
    G = (w * (S * F).sum(axis=1)).sum() / den if den > 0 and np.isfinite(den) else 0.0
    err = np.sqrt(np.mean(w * ((G * S - F) ** 2).sum(axis=1)))
    return G, err


def _summed(feat, f):
    return (f[..., None] * feat["rhat"]).sum(axis=1)


def _power(feat, a, b, c):
    return np.exp(a * np.log(feat["mi"]) + b * np.log(feat["mj"]) + c * np.log(feat["r"]))


def _factor(name, e):
    if e == 0:
        return "", 0
    if e == 1:
        return name, 2
    return f"{name}^{e:g}", 4


def candidates(feat):
    """(expression, complexity, f (k, B-1)) of the search space."""
    mi, mj, r = feat["mi"], feat["mj"], feat["r"]
    out = []
    for a, b, c in itertools.product((-1, 0, 1, 2), (-1, 0, 1, 2), (-4, -3, -2, -1, 0, 1)):
        parts = [_factor("m1", a), _factor("m2", b), _factor("r", c)]
        expr = " * ".join(["G"] + [p for p, _ in parts if p])
        out.append((expr, 1 + sum(n for _, n in parts), _power(feat, a, b, c)))
    for c in (-4, -3, -2, -1, 0, 1):
        rp, rn = _factor("r", c)
        rs = (" * " + rp) if rp else ""
        for expr, cplx, f in (("G * (m1 + m2)", 1 + 4 + 1, mi + mj), ("G * (m1 + m2)^2", 1 + 4 + 3, (mi + mj) ** 2),
                              ("G * m1 * (m1 + m2)", 1 + 2 + 5, mi * (mi + mj)),
                              ("G * m1 * m2 / (m1 + m2)", 1 + 2 + 2 + 5, mi * mj / (mi + mj))):
            out.append((expr + rs, cplx + rn, f * r ** c))
    return out


def expression_search(feat, F, top=5):
    """The `top` best expressions by score: dicts expr, complexity, G, rel_err, score."""
    rows = []
    for expr, cplx, f in candidates(feat):
        G, err = _fit_constant(_summed(feat, f), F)
        score = np.log(max(err, 1e-300)) + LAMBDA * cplx
        rows.append(dict(expr=expr, complexity=cplx, G=G, rel_err=err, score=score))
    rows.sort(key=lambda d: d["score"])
    return rows[:top]


def fit_power_law(feat, F):
    """Real exponents a, b, c of f = m1^a m2^b r^c and G by least squares on the relative error."""
    w = 1.0 / np.sqrt((F ** 2).sum(axis=1))

    def residual(theta):
        S = _summed(feat, _power(feat, *theta))
        G, _ = _fit_constant(S, F)
        return ((G * S - F) * w[:, None]).ravel()

    grid = [(a, b, c) for a, b, c in itertools.product((0, 1, 2), (0, 1, 2), (-4, -3, -2, -1, 0, 1))]
    start = min(grid, key=lambda t: _fit_constant(_summed(feat, _power(feat, *t)), F)[1])
    sol = least_squares(residual, np.asarray(start, dtype=float), method="lm", xtol=1e-12, ftol=1e-12)
    a, b, c = sol.x
    G, err = _fit_constant(_summed(feat, _power(feat, a, b, c)), F)
    return dict(G=G, a=a, b=b, c=c, rel_err=err)


def is_newton(fit, tol=EXP_TOL):
    return (fit["rel_err"] < MAX_REL_ERR and abs(fit["a"] - 1) <= tol and abs(fit["b"] - 1) <= tol
            and abs(fit["c"] + 2) <= tol)


def law_row(label, feat, F):
    """One row of laws.csv: the power-law fit, the best expression and the verdict."""
    fit = fit_power_law(feat, F)
    best = expression_search(feat, F, top=1)[0]
    if fit["rel_err"] >= MAX_REL_ERR:
        verdict = f"no law (relative error {fit['rel_err']:.3g} >= {MAX_REL_ERR})"
    elif is_newton(fit):
        verdict = "Newton"
    else:
        verdict = "not Newton"
    return dict(source=label, samples=len(F), G=fit["G"], a=fit["a"], b=fit["b"], c=fit["c"],
                rel_err=fit["rel_err"], best_expr=best["expr"], best_complexity=best["complexity"],
                best_rel_err=best["rel_err"], best_G=best["G"], verdict=verdict)
