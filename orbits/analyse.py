#!/usr/bin/python3
"""Probe and laws for each model: fits the force probe (orbits/probe.py) on each model's hidden
states, then symbolic regression (orbits/symreg.py) on the held-out systems' true forces (the
sanity row) and on each model's predicted forces, and plots true vs predicted forces.
  analyse.py SYSTEMS.npz softmax=hidden_softmax.npy lssar=hidden_lssar.npy -o out/orbits
Writes probe.csv, laws.csv, expressions.csv (the best five expressions per source), forces.png.
"""
import argparse
import csv
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe            # noqa: E402
import simulate         # noqa: E402
import symreg           # noqa: E402

TRUE_TOL = 1e-3   # the sanity row's exponents: the true forces are exact Newton in float64


def heldout_samples(sim, labelled, skip, forces):
    """Symbolic-regression samples of the held-out systems: positions (k, B, 2), masses (k, B),
    the body index (k,) and its force (k, 2), every planet at every step >= skip."""
    n, S, B, _ = sim["pos"].shape
    steps = np.arange(skip, S)
    pos, m, body, F = [], [], [], []
    for p in range(1, B):
        pos.append(sim["pos"][labelled:, skip:].reshape(-1, B, 2))
        m.append(np.repeat(sim["masses"][labelled:], len(steps), axis=0))
        body.append(np.full(pos[-1].shape[0], p))
        F.append(forces[labelled:, skip:, p - 1].reshape(-1, 2))
    return np.concatenate(pos), np.concatenate(m), np.concatenate(body), np.concatenate(F)


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("systems", help="probe systems (.npz of orbits/simulate.py), in the order of the hidden states")
    p.add_argument("models", nargs="+", help="LABEL=hidden.npy (orbits/hidden_states.cu output)")
    p.add_argument("-o", "--out", required=True, help="output directory")
    p.add_argument("--labelled", type=float, default=0.75, help="fraction of the systems the probe is fitted on")
    p.add_argument("--skip", type=int, default=4, help="first steps of every system left out")
    p.add_argument("--plot", default="", help="comma-separated labels of the models in forces.png (default: all)")
    return p.parse_args(argv)


def main(argv=None):
    a = parse_args(argv)
    sim, cfg = simulate.load(a.systems)
    n, S = sim["pos"].shape[:2]
    labelled = int(round(a.labelled * n))
    if not 0 < a.labelled < 1 or labelled < 2 or labelled > n - 2:
        sys.exit(f"error: --labelled {a.labelled}: needs 0 < fraction < 1 leaving at least 2 systems on each "
                 f"side ({n} systems)")
    if not 0 <= a.skip < S - 1:
        sys.exit(f"error: --skip {a.skip}: outside [0, {S - 2}] for {S} steps")
    models = []
    for spec in a.models:
        if "=" not in spec:
            sys.exit(f"error: '{spec}': expected LABEL=hidden.npy")
        label, path = spec.split("=", 1)
        models.append((label, path))
    labels = [label for label, _ in models]
    shown = a.plot.split(",") if a.plot else labels
    missing = [s for s in shown if s not in labels]
    if missing:
        sys.exit(f"error: --plot {a.plot}: no model labelled {', '.join(missing)} (have {', '.join(labels)})")
    os.makedirs(a.out, exist_ok=True)
    pos, m, body, F_true = heldout_samples(sim, labelled, a.skip, sim["forces"][:, :, 1:])
    feat = symreg.pair_features(pos, m, body)
    law_rows = [symreg.law_row("true", feat, F_true)]
    expr_rows = [dict(source="true", rank=i + 1, **e) for i, e in enumerate(symreg.expression_search(feat, F_true))]
    t = law_rows[0]
    sane = abs(t["a"] - 1) <= TRUE_TOL and abs(t["b"] - 1) <= TRUE_TOL and abs(t["c"] + 2) <= TRUE_TOL
    probe_rows, preds = [], {}
    for label, path in models:
        hidden = np.load(path, mmap_mode="r")
        if hidden.shape[0] != n:
            sys.exit(f"error: {path} holds {hidden.shape[0]} sequences, {a.systems} holds {n} systems: "
                     "give the hidden states of these systems")
        pred, met = probe.fit_probe(np.asarray(hidden), sim, labelled, a.skip)
        preds[label] = pred
        probe_rows.append(dict(model=label, **met))
        F_pred = heldout_samples(sim, labelled, a.skip, pred)[3]
        law_rows.append(symreg.law_row(label, feat, F_pred))
        expr_rows += [dict(source=label, rank=i + 1, **e) for i, e in enumerate(symreg.expression_search(feat, F_pred))]
        np.savez(os.path.join(a.out, f"pred_{label}.npz"), pred=pred, labelled=labelled, skip=a.skip)
    write_csv(os.path.join(a.out, "probe.csv"), probe_rows)
    write_csv(os.path.join(a.out, "laws.csv"), law_rows)
    write_csv(os.path.join(a.out, "expressions.csv"), expr_rows)
    print(f"force probe (ridge on frozen final hidden states): {labelled} labelled systems, {n - labelled} held out")
    print(f"{'model':>10} {'R2 vector':>10} {'R2 ln|F|':>9} {'mean cos':>9} {'alpha':>8}")
    for r in probe_rows:
        print(f"{r['model']:>10} {r['r2_vector']:10.4f} {r['r2_logmag']:9.4f} {r['mean_cos']:9.4f} {r['alpha']:8.3g}")
    print("laws F = G m1^a m2^b r^c along the separation (held-out systems; 'true' is the sanity row)")
    print(f"{'source':>10} {'a':>8} {'b':>8} {'c':>8} {'rel err':>8}  best expression (search)          verdict")
    for r in law_rows:
        print(f"{r['source']:>10} {r['a']:8.3f} {r['b']:8.3f} {r['c']:8.3f} {r['rel_err']:8.3g}  "
              f"{r['best_expr']:<32} {r['verdict']}")
    import plot_forces
    plot_forces.plot(sim, {s: preds[s] for s in shown}, labelled, a.skip, os.path.join(a.out, "forces.png"))
    print(f"wrote {a.out}/probe.csv, laws.csv, expressions.csv, forces.png")
    if not sane:
        print(f"error: the fit on the TRUE forces gave a = {t['a']:.6f}, b = {t['b']:.6f}, c = {t['c']:.6f}, "
              f"not 1, 1, -2 within {TRUE_TOL}: the pipeline is wrong", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
