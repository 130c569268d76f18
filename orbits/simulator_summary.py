#!/usr/bin/python3
"""The simulator's errors per shard of a data directory (systems_*.npz) as one CSV, and a line."""
import argparse
import glob
import os

import numpy as np


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("data", help="directory of systems_*.npz (orbits/simulate.py)")
    p.add_argument("-o", "--out", required=True, help="output CSV")
    a = p.parse_args()
    files = sorted(glob.glob(os.path.join(a.data, "systems_*.npz")))
    if not files:
        raise SystemExit(f"error: no systems_*.npz in {a.data}")
    rows, worst = [], {}
    for f in files:
        z = np.load(f)
        e, l = z["energy_err"], z["angmom_err"]
        name = os.path.basename(f)[len("systems_"):-len(".npz")]
        rows.append(f"{name},{len(e)},{e.max():.3g},{np.median(e):.3g},{z['config_energy_tol'].item():g},"
                    f"{l.max():.3g},{z['config_angmom_tol'].item():g},{int(z['rejected_tol'])},"
                    f"{int(z['rejected_box'])},{int(z['drawn'])}")
        split = name.split("_")[0]
        worst[split] = max(worst.get(split, (0, 0, 0.0)), (float(e.max()), float(l.max()), z["config_energy_tol"].item()))
    with open(a.out, "w") as f:
        f.write("shard,systems,energy_err_max,energy_err_median,energy_tol,angmom_err_max,angmom_tol,"
                "rejected_tol,rejected_box,drawn\n" + "\n".join(rows) + "\n")
    print("simulator (largest relative error per trajectory): " + "; ".join(
        f"{s} energy {e:.3g} (limit {tol:g}), angular momentum {l:.3g}" for s, (e, l, tol) in worst.items()))


if __name__ == "__main__":
    main()
