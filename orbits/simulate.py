#!/usr/bin/python3
"""Planetary systems: a star and planets under Newtonian gravity in the plane, integrated with a
4th-order symplectic integrator (Yoshida's composition of leapfrog), vectorised over systems.

Units: AU, years, solar masses, so G = 4 pi^2. Distributions (all independent, per system):
  star mass        M    log-uniform in [star_min, star_max]          (default 0.5 .. 2)
  planet mass      m_i  log-uniform in [planet_min, planet_max]      (default 0.05 .. 0.3)
                   heavy enough that the star's reflex motion spans bins: the planet's mass is in
                   the positions only through that motion (the mass ratio) and the period (M + m)
  semi-major axis  a_1  uniform in [a_min, a_max]; a_{i+1} = a_i x uniform [spacing_min, spacing_max]
  eccentricity     e_i  uniform in [0, e_max]
  orientation      argument of periapsis uniform in [0, 2 pi), sense of revolution +1 or -1 (p = 1/2)
  phase            mean anomaly uniform in [0, 2 pi)
  time step        dt   one of DTS (the reference's two time steps: a short and a long one), p = 1/2
Each planet starts on the Kepler orbit of its elements around the star (mu = G (M + m_i)); the
system is then moved to its centre-of-mass frame (total momentum zero, centre of mass at 0).

A trajectory is accepted when its largest relative energy error |E(t) - E(0)| / |E(0)| stays below
energy_tol and its largest relative angular-momentum error below angmom_tol, and every body stays
inside the box |x|, |y| < box. Rejected systems are redrawn; when more than max_reject of the
drawn systems fail the tolerances the run stops with the worst error and the limit.
"""
import argparse
import sys
import time

import numpy as np

G = 4.0 * np.pi ** 2          # AU^3 / (M_sun yr^2)
DTS = (0.05, 0.2)             # the two time steps (years): the token after the start tells which

# Yoshida (1990) 4th-order composition of the kick-drift-kick leapfrog
_CBRT2 = 2.0 ** (1.0 / 3.0)
YOSHIDA_W1 = 1.0 / (2.0 - _CBRT2)
YOSHIDA_W0 = -_CBRT2 / (2.0 - _CBRT2)


class SimError(Exception):
    """A refused setting or a failed tolerance: the message names the value and the limit."""


def default_config():
    return dict(planets=1, star_min=0.5, star_max=2.0, planet_min=0.05, planet_max=0.3,
                a_min=1.0, a_max=2.5, spacing_min=1.8, spacing_max=2.4, e_max=0.4,
                steps=63, substeps=100, box=4.0, energy_tol=1e-6, angmom_tol=1e-10, max_reject=0.2)


def check_config(cfg):
    """Raises SimError naming the first out-of-range setting, its value and the allowed range."""
    limits = dict(planets=(1, 8), star_min=(1e-3, 1e3), star_max=(1e-3, 1e3), planet_min=(1e-9, 1e3),
                  planet_max=(1e-9, 1e3), a_min=(1e-2, 1e3), a_max=(1e-2, 1e3), spacing_min=(1.0, 100.0),
                  spacing_max=(1.0, 100.0), e_max=(0.0, 0.95), steps=(2, 100000), substeps=(1, 100000),
                  box=(1e-2, 1e6), energy_tol=(1e-15, 1e-1), angmom_tol=(1e-15, 1e-1), max_reject=(0.0, 1.0))
    for name, (lo, hi) in limits.items():
        v = cfg[name]
        if not (lo <= v <= hi):
            raise SimError(f"--{name.replace('_', '-')} {v}: outside the allowed range [{lo:g}, {hi:g}]")
    for lo, hi in (("star_min", "star_max"), ("planet_min", "planet_max"), ("a_min", "a_max"),
                   ("spacing_min", "spacing_max")):
        if cfg[lo] > cfg[hi]:
            raise SimError(f"--{lo.replace('_', '-')} {cfg[lo]} is larger than --{hi.replace('_', '-')} {cfg[hi]}")


def kepler_E(M, e, iters=50):
    """Eccentric anomaly E solving Kepler's equation E - e sin E = M (Newton's method, e < 1)."""
    E = np.where(e < 0.8, M, np.pi * np.ones_like(M))
    for _ in range(iters):
        E = E - (E - e * np.sin(E) - M) / (1.0 - e * np.cos(E))
    return E


def kepler_state(a, e, omega, sense, mean_anomaly, mu):
    """Relative position and velocity (..., 2) on the Kepler orbit of the given elements."""
    E = kepler_E(np.mod(mean_anomaly, 2 * np.pi), e)
    cosE, sinE = np.cos(E), np.sin(E)
    b = a * np.sqrt(1.0 - e ** 2)
    x, y = a * (cosE - e), b * sinE                       # in the orbit's frame, periapsis on +x
    n = np.sqrt(mu / a ** 3)                              # mean motion
    Edot = n / (1.0 - e * cosE)
    vx, vy = -a * sinE * Edot, b * cosE * Edot
    y, vy = sense * y, sense * vy                         # sense -1: clockwise
    c, s = np.cos(omega), np.sin(omega)
    pos = np.stack([c * x - s * y, s * x + c * y], axis=-1)
    vel = np.stack([c * vx - s * vy, s * vx + c * vy], axis=-1)
    return pos, vel


def draw_systems(n, cfg, rng):
    """Masses (n, 1+P), positions and velocities (n, 1+P, 2) in the centre-of-mass frame, dt (n,),
    dt_index (n,) and the elements, drawn from the documented distributions."""
    P = cfg["planets"]
    logu = lambda lo, hi, size: np.exp(rng.uniform(np.log(lo), np.log(hi), size))
    M = logu(cfg["star_min"], cfg["star_max"], n)
    m = logu(cfg["planet_min"], cfg["planet_max"], (n, P))
    a = np.empty((n, P))
    a[:, 0] = rng.uniform(cfg["a_min"], cfg["a_max"], n)
    for i in range(1, P):
        a[:, i] = a[:, i - 1] * rng.uniform(cfg["spacing_min"], cfg["spacing_max"], n)
    e = rng.uniform(0.0, cfg["e_max"], (n, P))
    omega = rng.uniform(0.0, 2 * np.pi, (n, P))
    sense = np.where(rng.random((n, P)) < 0.5, 1.0, -1.0)
    phase = rng.uniform(0.0, 2 * np.pi, (n, P))
    dt_index = rng.integers(0, len(DTS), n)
    rel_pos, rel_vel = kepler_state(a, e, omega, sense, phase, G * (M[:, None] + m))
    masses = np.concatenate([M[:, None], m], axis=1)
    pos = np.concatenate([np.zeros((n, 1, 2)), rel_pos], axis=1)
    vel = np.concatenate([np.zeros((n, 1, 2)), rel_vel], axis=1)
    mtot = masses.sum(axis=1)[:, None, None]
    pos -= (masses[:, :, None] * pos).sum(axis=1, keepdims=True) / mtot
    vel -= (masses[:, :, None] * vel).sum(axis=1, keepdims=True) / mtot
    elements = dict(a=a, e=e, omega=omega, sense=sense, phase=phase)
    return masses, pos, vel, np.asarray(DTS)[dt_index], dt_index, elements


def accelerations(pos, masses):
    """Gravitational accelerations (n, B, 2) of every body: sum_j G m_j (x_j - x_i) / |x_j - x_i|^3
    (a loop over the pairs: B is small, n is large)."""
    n, B, _ = pos.shape
    acc = np.zeros_like(pos)
    for i in range(B):
        for j in range(i + 1, B):
            d = pos[:, j] - pos[:, i]                         # (n, 2)
            r2 = d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1]
            inv_r3 = (G / (r2 * np.sqrt(r2)))[:, None]
            acc[:, i] += (masses[:, j, None] * inv_r3) * d
            acc[:, j] -= (masses[:, i, None] * inv_r3) * d
    return acc


def forces(pos, masses):
    """Force vectors (n, B, 2) on every body: m_i times its acceleration."""
    return masses[:, :, None] * accelerations(pos, masses)


def energy(pos, vel, masses):
    """Total energy (n,): kinetic plus pairwise potential."""
    kin = 0.5 * (masses * (vel ** 2).sum(axis=-1)).sum(axis=1)
    d = pos[:, None, :, :] - pos[:, :, None, :]
    r = np.sqrt((d ** 2).sum(axis=-1))
    B = pos.shape[1]
    iu = np.triu_indices(B, 1)
    pot = -(G * masses[:, :, None] * masses[:, None, :] / np.where(r > 0, r, np.inf))[:, iu[0], iu[1]].sum(axis=1)
    return kin + pot


def angular_momentum(pos, vel, masses):
    """Total angular momentum (n,) about the origin (z component)."""
    return (masses * (pos[..., 0] * vel[..., 1] - pos[..., 1] * vel[..., 0])).sum(axis=1)


def yoshida_step(pos, vel, acc, masses, h):
    """One 4th-order Yoshida step of size h (n,): three kick-drift-kick leapfrogs of w1 h, w0 h, w1 h.
    acc holds the accelerations at pos; returns the new pos, vel and acc (3 force evaluations)."""
    for w in (YOSHIDA_W1, YOSHIDA_W0, YOSHIDA_W1):
        hw = (w * h)[:, None, None]
        vel = vel + 0.5 * hw * acc
        pos = pos + hw * vel
        acc = accelerations(pos, masses)
        vel = vel + 0.5 * hw * acc
    return pos, vel, acc


def integrate(pos, vel, masses, dt, steps, substeps):
    """Positions and velocities (n, steps, B, 2) at t = 0, dt, ..., (steps-1) dt, and the largest
    relative energy and angular-momentum errors (n,) over those times."""
    n, B, _ = pos.shape
    traj_pos = np.empty((n, steps, B, 2))
    traj_vel = np.empty((n, steps, B, 2))
    E0, L0 = energy(pos, vel, masses), angular_momentum(pos, vel, masses)
    e_err, l_err = np.zeros(n), np.zeros(n)
    h = dt / substeps
    acc = accelerations(pos, masses)
    for s in range(steps):
        if s > 0:
            for _ in range(substeps):
                pos, vel, acc = yoshida_step(pos, vel, acc, masses, h)
        traj_pos[:, s], traj_vel[:, s] = pos, vel
        e_err = np.maximum(e_err, np.abs(energy(pos, vel, masses) - E0) / np.abs(E0))
        l_err = np.maximum(l_err, np.abs(angular_momentum(pos, vel, masses) - L0) / np.abs(L0))
    return traj_pos, traj_vel, e_err, l_err


def simulate(n, cfg, seed, log=print):
    """n accepted systems: a dict of arrays (see save()). Raises SimError when more than max_reject
    of the systems drawn fail the energy or angular-momentum tolerance."""
    check_config(cfg)
    rng = np.random.default_rng(seed)
    parts, drawn, failed_tol, failed_box, worst_e, worst_l = [], 0, 0, 0, 0.0, 0.0
    have, t0 = 0, time.time()
    while have < n:
        want = n - have
        k = want + max(8, want // 10)                     # a few spare for the rejected ones
        masses, pos, vel, dt, dt_index, el = draw_systems(k, cfg, rng)
        traj_pos, traj_vel, e_err, l_err = integrate(pos, vel, masses, dt, cfg["steps"], cfg["substeps"])
        bad_tol = (e_err > cfg["energy_tol"]) | (l_err > cfg["angmom_tol"])
        bad_box = np.abs(traj_pos).max(axis=(1, 2, 3)) >= cfg["box"]
        drawn += k
        failed_tol += int(bad_tol.sum())
        failed_box += int((bad_box & ~bad_tol).sum())
        worst_e, worst_l = max(worst_e, float(e_err.max())), max(worst_l, float(l_err.max()))
        if failed_tol > cfg["max_reject"] * drawn:
            raise SimError(f"{failed_tol} of {drawn} trajectories exceed the tolerances (worst energy error "
                           f"{worst_e:.3g}, limit --energy-tol {cfg['energy_tol']:g}; worst angular-momentum "
                           f"error {worst_l:.3g}, limit --angmom-tol {cfg['angmom_tol']:g}), more than "
                           f"--max-reject {cfg['max_reject']:g} of them: raise --substeps (now {cfg['substeps']})")
        ok = np.flatnonzero(~bad_tol & ~bad_box)[:want]
        if drawn > 20 * n + 100:
            raise SimError(f"only {have} of {n} systems stay inside the box |x|,|y| < {cfg['box']:g} AU after "
                           f"{drawn} draws: raise --box or lower --a-max / --e-max")
        parts.append(dict(masses=masses[ok], pos=traj_pos[ok], vel=traj_vel[ok], dt=dt[ok],
                          dt_index=dt_index[ok], energy_err=e_err[ok], angmom_err=l_err[ok],
                          **{k2: v[ok] for k2, v in el.items()}))
        have += len(ok)
        log(f"  simulated {have}/{n} systems ({drawn} drawn, {failed_tol} over the tolerances, "
            f"{failed_box} leaving the box), {time.time() - t0:.1f} s")
    out = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    out["forces"] = np.stack([forces(out["pos"][:, s], out["masses"]) for s in range(cfg["steps"])], axis=1)
    out["rejected_tol"], out["rejected_box"], out["drawn"] = failed_tol, failed_box, drawn
    return out


def save(path, sim, cfg):
    """One .npz: masses (n,B) [star first], pos/vel/forces (n,S,B,2), dt, dt_index, energy_err,
    angmom_err (n,), the elements, and the settings (config_<name>)."""
    extra = {f"config_{k}": np.asarray(v) for k, v in cfg.items()}
    np.savez(path, **sim, **extra)


def load(path):
    z = np.load(path)
    sim = {k: z[k] for k in z.files if not k.startswith("config_")}
    cfg = {k[len("config_"):]: z[k].item() for k in z.files if k.startswith("config_")}
    return sim, cfg


def parse_args(argv):
    d = default_config()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", "--systems", type=int, required=True, help="accepted systems to write")
    p.add_argument("-o", "--out", required=True, help="output .npz")
    p.add_argument("--seed", type=int, default=0)
    for k, v in d.items():
        p.add_argument("--" + k.replace("_", "-"), type=type(v), default=v, help=f"(default {v})")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    cfg = {k: getattr(args, k) for k in default_config()}
    try:
        if not 1 <= args.systems <= 10_000_000:
            raise SimError(f"--systems {args.systems}: outside the allowed range [1, 10000000]")
        sim = simulate(args.systems, cfg, args.seed)
    except SimError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    save(args.out, sim, cfg)
    print(f"wrote {args.out}: {args.systems} systems, {cfg['planets']} planet(s), {cfg['steps']} steps; "
          f"energy error max {sim['energy_err'].max():.3g} median {np.median(sim['energy_err']):.3g} "
          f"(limit {cfg['energy_tol']:g}), angular-momentum error max {sim['angmom_err'].max():.3g} "
          f"(limit {cfg['angmom_tol']:g}); rejected {sim['rejected_tol']} over the tolerances, "
          f"{sim['rejected_box']} leaving the box")
    return 0


if __name__ == "__main__":
    sys.exit(main())
