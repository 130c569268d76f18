#!/usr/bin/python3
"""Tests of the orbits pipeline (make test runs them through build/test_orbits).
Every reference value is computed here independently of the code under test: Kepler's orbit by
root-finding and the true-anomaly formula, Newton's forces by a loop over pairs. Prints a
doctest-style summary line, which scripts/run_tests.sh counts."""
import math
import os
import subprocess
import sys
import tempfile
import traceback

import numpy as np
from scipy.optimize import brentq

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import analyse   # noqa: E402
import probe     # noqa: E402
import simulate  # noqa: E402
import symreg    # noqa: E402
import tokens    # noqa: E402

PY = "/usr/bin/python3"
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def run(cmd, **kw):
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, **kw)


def quiet(*a):
    pass


@test
def energy_conserved_to_tolerance():
    # two-body and three-body systems: every accepted trajectory's energy, recomputed here from
    # the saved positions and velocities, stays within the tolerance it was accepted under
    for planets in (1, 2):
        cfg = simulate.default_config()
        cfg.update(planets=planets, steps=20, box=20.0)
        sim = simulate.simulate(30, cfg, seed=planets, log=quiet)
        m, pos, vel = sim["masses"], sim["pos"], sim["vel"]
        E = 0.5 * (m[:, None, :] * (vel ** 2).sum(-1)).sum(-1)
        for i in range(m.shape[1]):
            for j in range(i + 1, m.shape[1]):
                r = np.sqrt(((pos[:, :, i] - pos[:, :, j]) ** 2).sum(-1))
                E -= simulate.G * m[:, None, i] * m[:, None, j] / r
        rel = np.abs(E - E[:, :1]) / np.abs(E[:, :1])
        assert rel.max() <= cfg["energy_tol"], (planets, rel.max())
        assert np.allclose(rel.max(1), sim["energy_err"], rtol=1e-6, atol=1e-15)
        assert sim["angmom_err"].max() <= cfg["angmom_tol"]


@test
def integrator_is_fourth_order():
    # halving the step divides the energy error by 2^4 = 16 for a 4th-order method (8..32 allowed:
    # the error constant varies a little along an eccentric orbit); leapfrog alone would give 4
    cfg = simulate.default_config()
    rng = np.random.default_rng(5)
    masses, pos, vel, dt, _, _ = simulate.draw_systems(20, cfg, rng)
    errs = [simulate.integrate(pos, vel, masses, dt, 10, s)[2] for s in (10, 20)]
    ratio = np.median(errs[0] / errs[1])
    assert 8 < ratio < 32, ratio


def kepler_reference(a, e, omega, sense, M0, mu, t):
    """Relative position on the Kepler orbit at times t, by bisection and the true anomaly."""
    n = math.sqrt(mu / a ** 3)
    out = []
    for tk in t:
        M = math.fmod(M0 + n * tk, 2 * math.pi)
        E = brentq(lambda E: E - e * math.sin(E) - M, -1.0, 2 * math.pi + 1.0, xtol=1e-15)
        nu = 2 * math.atan2(math.sqrt(1 + e) * math.sin(E / 2), math.sqrt(1 - e) * math.cos(E / 2))
        r = a * (1 - e * e) / (1 + e * math.cos(nu))
        ang = omega + sense * nu
        out.append((r * math.cos(ang), r * math.sin(ang)))
    return np.array(out)


@test
def two_body_matches_kepler():
    # the integrated relative orbit (planet - star) against Kepler's analytic one over 63 steps of
    # the long time step (12.4 years, 3-15 orbits here; worst 6e-6 AU): within 1e-5 AU, 1/6000 of a bin of the quick
    # run; the integrator's energy error of ~1e-7 allows phase errors of that order
    cfg = simulate.default_config()
    rng = np.random.default_rng(7)
    masses, pos, vel, dt, _, el = simulate.draw_systems(8, cfg, rng)
    dt = np.full(8, simulate.DTS[1])
    traj = simulate.integrate(pos, vel, masses, dt, cfg["steps"], cfg["substeps"])[0]
    worst = 0.0
    for k in range(8):
        ref = kepler_reference(el["a"][k, 0], el["e"][k, 0], el["omega"][k, 0], el["sense"][k, 0],
                               el["phase"][k, 0], simulate.G * masses[k].sum(), dt[k] * np.arange(cfg["steps"]))
        rel = traj[k, :, 1] - traj[k, :, 0]
        worst = max(worst, np.abs(rel - ref).max())
    assert worst < 1e-5, worst


@test
def failed_tolerance_refused():
    cfg = simulate.default_config()
    cfg.update(substeps=1, steps=10)
    try:
        simulate.simulate(20, cfg, seed=0, log=quiet)
        raise AssertionError("one substep per step passed a 1e-6 energy tolerance")
    except simulate.SimError as e:
        msg = str(e)
        assert "worst energy error" in msg and "limit --energy-tol 1e-06" in msg and "--substeps (now 1)" in msg, msg
    with tempfile.TemporaryDirectory() as d:
        r = run([PY, "orbits/simulate.py", "-n", "20", "--steps", "10", "--substeps", "1", "-o", f"{d}/s.npz"])
        assert r.returncode == 1 and "limit --energy-tol 1e-06" in r.stderr, r.stderr
        assert not os.path.exists(f"{d}/s.npz")


@test
def bad_flags_refused():
    with tempfile.TemporaryDirectory() as d:
        cases = [([PY, "orbits/simulate.py", "-n", "5", "--e-max", "1.5", "-o", f"{d}/s.npz"], "--e-max 1.5: outside the allowed range [0, 0.95]"),
                 ([PY, "orbits/simulate.py", "-n", "0", "-o", f"{d}/s.npz"], "--systems 0: outside"),
                 ([PY, "orbits/simulate.py", "-n", "5", "--planets", "0", "-o", f"{d}/s.npz"], "--planets 0: outside the allowed range [1, 8]"),
                 ([PY, "orbits/simulate.py", "-n", "5", "--a-min", "3", "--a-max", "2", "-o", f"{d}/s.npz"], "--a-min 3.0 is larger than --a-max 2.0"),
                 (["bash", "scripts/orbits.sh", "--threads", "0"], "--threads 0: expected an integer in [1, 256]"),
                 (["bash", "scripts/orbits.sh", "--steps", "5"], "unknown flag '--steps'")]
        for cmd, want in cases:
            r = run(cmd)
            assert r.returncode != 0 and want in r.stderr, (cmd, r.stderr)
        r = run(["bash", "scripts/orbits.sh", "--quick"], env=dict(os.environ, BINS="1"))
        assert r.returncode != 0 and "BINS 1: expected an integer in [2, 16000]" in r.stderr, r.stderr
        np.savez(f"{d}/dummy.npz", x=1)
        r = run([PY, "orbits/tokens.py", f"{d}/dummy.npz", "--bins", "1", "-o", f"{d}/t.bin"])
        assert r.returncode == 1 and "--bins 1: outside [2, 16000]" in r.stderr, r.stderr


@test
def tokens_round_trip_within_one_bin():
    box, bins = 4.0, 128
    rng = np.random.default_rng(1)
    pos = rng.uniform(-box, box, (50, 7, 3, 2))
    pos[0, 0, 0] = (-box, box * (1 - 1e-12))       # the edges land in the first and last bins
    dt_index = rng.integers(0, 2, 50)
    tok = tokens.encode(pos, dt_index, box, bins)
    assert tok.shape == (50, tokens.seq_len(3, 7)) and tok.max() < tokens.vocab_size(bins)
    assert (tok[:, 1::2] < bins).all() and (tok[:, 2::2] >= bins).all() and (tok[:, 2::2] < 2 * bins).all()
    back, dt_back = tokens.decode(tok, 3, box, bins)
    assert (dt_back == dt_index).all()
    assert np.abs(back - pos).max() <= 0.5 * 2 * box / bins + 1e-12
    with tempfile.TemporaryDirectory() as d:
        tokens.write_shard(f"{d}/s.bin", tok)
        raw = open(f"{d}/s.bin", "rb").read()
        head = np.frombuffer(raw[:1024], dtype="<i4")
        assert tuple(head[:3]) == (20240520, 1, tok.size) and not head[3:].any()
        assert (tokens.read_shard(f"{d}/s.bin").reshape(tok.shape) == tok).all()
    try:
        tokens.decode(np.roll(tok, 1, axis=1), 3, box, bins)
        raise AssertionError("a shifted sequence decoded")
    except ValueError:
        pass


def newton_forces(pos, masses, body, law_exponent=-2.0, G=simulate.G):
    """Force on `body` by a loop over the other bodies: G m_i m_j r^law_exponent along rhat."""
    F = np.zeros((len(pos), 2))
    for k in range(len(pos)):
        i = body[k]
        for j in range(pos.shape[1]):
            if j != i:
                d = pos[k, j] - pos[k, i]
                r = math.hypot(d[0], d[1])
                F[k] += G * masses[k, i] * masses[k, j] * r ** law_exponent * d / r
    return F


def synthetic(n, B, rng):
    pos = rng.uniform(-3, 3, (n, B, 2))
    masses = np.exp(rng.uniform(np.log(0.05), np.log(2.0), (n, B)))
    body = rng.integers(0, B, n)
    return pos, masses, body


@test
def symreg_recovers_newton():
    rng = np.random.default_rng(2)
    for B in (2, 3):
        pos, m, body = synthetic(1500, B, rng)
        feat = symreg.pair_features(pos, m, body)
        F = newton_forces(pos, m, body)
        exact = symreg.fit_power_law(feat, F)
        assert abs(exact["a"] - 1) < 1e-6 and abs(exact["b"] - 1) < 1e-6 and abs(exact["c"] + 2) < 1e-6, exact
        assert abs(exact["G"] / simulate.G - 1) < 1e-6
        # 5% multiplicative noise: exponents within 0.05 (the noise's standard error is ~0.005)
        noisy = F * np.exp(0.05 * rng.normal(size=(len(F), 1)))
        row = symreg.law_row("newton", feat, noisy)
        assert row["verdict"] == "Newton" and row["best_expr"] == "G * m1 * m2 * r^-2", row
        assert abs(row["a"] - 1) < 0.05 and abs(row["b"] - 1) < 0.05 and abs(row["c"] + 2) < 0.05, row


@test
def symreg_recovers_inverse_cube():
    rng = np.random.default_rng(3)
    pos, m, body = synthetic(1500, 2, rng)
    feat = symreg.pair_features(pos, m, body)
    F = newton_forces(pos, m, body, law_exponent=-3.0, G=2.5) * np.exp(0.05 * rng.normal(size=(1500, 1)))
    row = symreg.law_row("cube", feat, F)
    assert abs(row["c"] + 3) < 0.05 and abs(row["a"] - 1) < 0.05 and abs(row["b"] - 1) < 0.05, row
    assert row["best_expr"] == "G * m1 * m2 * r^-3" and row["verdict"] == "not Newton", row


@test
def symreg_rejects_noise():
    rng = np.random.default_rng(4)
    pos, m, body = synthetic(1500, 2, rng)
    feat = symreg.pair_features(pos, m, body)
    F = rng.normal(size=(1500, 2)) * np.exp(rng.normal(size=(1500, 1)))
    row = symreg.law_row("noise", feat, F)
    assert row["verdict"].startswith("no law") and row["best_expr"] == "G", row


@test
def probe_finds_only_what_is_there():
    # hidden states that hold the targets linearly (plus noise) give a high held-out R^2; states of
    # pure noise give none: the probe cannot invent the forces
    cfg = simulate.default_config()
    cfg.update(steps=8)
    sim = simulate.simulate(40, cfg, seed=9, log=quiet)
    n, S = 40, 8
    y = probe.targets(sim["forces"][:, :, 1:]).reshape(n, S, 3)
    rng = np.random.default_rng(0)
    mix = rng.normal(size=(3, 32))
    hidden = np.zeros((n, 1 + 4 * S, 32))
    hidden[:, 1:] = np.repeat(y @ mix, 4, axis=1) + 0.01 * rng.normal(size=(n, 4 * S, 32))
    _, good = probe.fit_probe(hidden, sim, 30, 0)
    assert good["r2_vector"] > 0.99 and good["r2_logmag"] > 0.99, good
    _, bad = probe.fit_probe(rng.normal(size=hidden.shape), sim, 30, 0)
    assert bad["r2_logmag"] < 0.2, bad


def tiny_checkpoint(d):
    """A 1-layer model after one step of lr 1e-6 (its final layernorm still the identity to ~1e-6)."""
    cfg = simulate.default_config()
    cfg.update(steps=10)
    sim = simulate.simulate(6, cfg, seed=11, log=quiet)
    tok = tokens.encode(sim["pos"], sim["dt_index"], cfg["box"], 16)
    tokens.write_shard(f"{d}/train.bin", tok)
    r = run(["./train_gpt2cpu_lssar", "-i", f"{d}/train.bin", "-j", "", "-o", f"{d}/run", "-e", "d1c64h1v34",
             "-b", "2", "-t", str(tok.shape[1]), "-x", "1", "-l", "1e-6", "-v", "0", "-s", "0", "-n", "1"])
    assert r.returncode == 0, r.stdout + r.stderr
    return tok, f"{d}/run/ckpt_00000001.bin"


@test
def hidden_states_tool_end_to_end():
    with tempfile.TemporaryDirectory() as d:
        tok, ckpt = tiny_checkpoint(d)
        T = tok.shape[1]
        changed = tok.copy()
        changed[1, 25:] = np.where(changed[1, 25:] < 16, 15 - changed[1, 25:], changed[1, 25:])  # mirror x bins
        tokens.write_shard(f"{d}/probe.bin", np.concatenate([tok, changed]))
        tool = "build/hidden_states_cpu_lssar"
        r = run([tool, "-pr", "fp32", "-e", ckpt, "-i", f"{d}/probe.bin", "-t", str(T), "-b", "4", "-o", f"{d}/h.npy"])
        assert r.returncode == 0, r.stderr
        h = np.load(f"{d}/h.npy")
        assert h.shape == (12, T, 64) and h.dtype == np.float32
        # the final layernorm's output: per row mean 0 (its weights moved by ~1e-6) and variance
        # var / (var + eps) <= 1, eps = 1e-5 against the ~4e-4 residual variance of a 0.02-std init
        v = h.var(-1)
        assert np.abs(h.mean(-1)).max() < 1e-4 and v.max() <= 1 + 1e-4 and v.min() > 0.9, (h.mean(-1), v)
        # causal and per sequence: sequence 7 equals sequence 1 before position 25, differs after
        assert np.abs(h[7, :25] - h[1, :25]).max() < 1e-5
        assert np.abs(h[7, 25:] - h[1, 25:]).max() > 1e-2
        assert np.abs(h[6] - h[0]).max() < 1e-5
        # -p: the p = 15 checkpoint evaluated at p = 3 (another attention, other states)
        r = run([tool, "-e", ckpt, "-i", f"{d}/probe.bin", "-t", str(T), "-p", "3", "-o", f"{d}/h3.npy"])
        assert r.returncode == 0 and "evaluating at p 3 (the checkpoint was trained at p 15)" in r.stdout, r.stderr
        h3 = np.load(f"{d}/h3.npy")
        # (an ignored -p would give the p = 15 states bit for bit)
        assert h3.shape == h.shape and np.abs(h3 - h).max() > 0, np.abs(h3 - h).max()
        bad = [([tool, "-e", ckpt, "-i", f"{d}/probe.bin", "-t", str(T - 1), "-o", f"{d}/x.npy"], "not a multiple of -t"),
               ([tool, "-e", ckpt, "-i", f"{d}/probe.bin", "-t", "0", "-o", f"{d}/x.npy"], "-t 0: expected an integer in [1,"),
               ([tool, "-e", ckpt, "-i", f"{d}/probe.bin", "-t", str(T)], "are required"),
               ([tool, "-e", ckpt, "-i", f"{d}/probe.bin", "-t", str(T), "-p", "0.5", "-o", f"{d}/x.npy"],
                "-p 0.5: the re-weighting power must be >= 1"),
               ([tool, "-e", f"{d}/none.bin", "-i", f"{d}/probe.bin", "-t", str(T), "-o", f"{d}/x.npy"], "none.bin")]
        tokens.write_shard(f"{d}/big.bin", np.full(T, 40, dtype=np.uint16))
        bad.append(([tool, "-e", ckpt, "-i", f"{d}/big.bin", "-t", str(T), "-o", f"{d}/x.npy"], "big.bin"))
        for cmd, want in bad:
            r = run(cmd)
            assert r.returncode != 0 and want in r.stderr, (cmd, r.stderr)
            assert not os.path.exists(f"{d}/x.npy")


@test
def analyse_sanity_row_and_outputs():
    # the whole analysis on states that encode nothing: the true forces' row is Newton to 1e-3, the
    # noise model's row is not, and the CSVs and the PNG are written
    cfg = simulate.default_config()
    cfg.update(steps=12)
    with tempfile.TemporaryDirectory() as d:
        sim = simulate.simulate(24, cfg, seed=12, log=quiet)
        simulate.save(f"{d}/sys.npz", sim, cfg)
        np.save(f"{d}/h.npy", np.random.default_rng(0).normal(size=(24, 1 + 4 * 12, 16)).astype(np.float32))
        r = run([PY, "orbits/analyse.py", f"{d}/sys.npz", f"noise={d}/h.npy", "-o", f"{d}/out", "--skip", "2"])
        assert r.returncode == 0, r.stdout + r.stderr
        rows = [line.split(",") for line in open(f"{d}/out/laws.csv").read().split("\n")[1:] if line]
        true, noise = rows
        assert true[0] == "true" and true[-1] == "Newton" and abs(float(true[3]) - 1) < analyse.TRUE_TOL
        assert noise[0] == "noise" and noise[-1] != "Newton"
        for f in ("probe.csv", "expressions.csv", "forces.png"):
            assert os.path.getsize(f"{d}/out/{f}") > 0
        r = run([PY, "orbits/analyse.py", f"{d}/sys.npz", f"noise={d}/h.npy", "-o", f"{d}/out", "--labelled", "1.5"])
        assert r.returncode != 0 and "--labelled 1.5" in r.stderr, r.stderr


def main():
    failed = 0
    for fn in TESTS:
        try:
            fn()
            print(f"[orbits] {fn.__name__}: ok")
        except Exception:
            failed += 1
            print(f"[orbits] {fn.__name__}: FAILED")
            traceback.print_exc()
    n = len(TESTS)
    # the summary line scripts/run_tests.sh counts (doctest's format)
    print(f"[doctest] test cases: {n} | {n - failed} passed | {failed} failed | 0 skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
