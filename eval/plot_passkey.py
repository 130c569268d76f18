"""
Plots passkey retrieval accuracy versus prompt length for one or more runs (CSV files of
eval/passkey.cu: columns length,accuracy,trials,...) to a PNG, and prints them side by side as a table.

    /usr/bin/python3 eval/plot_passkey.py softmax=out/passkey_softmax.csv lssar=out/passkey_lssar.csv \
        --train-len 1024 -o out/passkey.png
"""
import argparse
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from plot_common import finish_length_axes, lengths_of, read_runs  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="LABEL=CSV, one per run")
    ap.add_argument("-o", "--out", required=True, help="PNG to write")
    ap.add_argument("--train-len", type=int, default=0, help="training length, marked on the plot")
    ap.add_argument("--title", default="Passkey retrieval versus prompt length")
    args = ap.parse_args()

    runs = read_runs(args.runs, ["length", "accuracy", "trials"], "eval/passkey.cu")
    lengths = lengths_of(runs)
    print(f"{'length':>8}" + "".join(f" {label:>12}" for label, _ in runs))
    for L in lengths:
        line = f"{L:>8}"
        for _, rows in runs:
            acc = {r[0]: r[1] for r in rows}.get(L)
            line += f" {100 * acc:>11.1f}%" if acc is not None else f" {'-':>12}"
        print(line)
    trials = {t for _, rows in runs for _, _, t in rows}
    print(f"(accuracy; {', '.join(str(t) for t in sorted(trials))} trials per length)")

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for label, rows in runs:
        # error bars: one binomial standard error, sqrt(a (1 - a) / n)
        err = [100 * math.sqrt(a * (1 - a) / n) for _, a, n in rows]
        ax.errorbar([r[0] for r in rows], [100 * r[1] for r in rows], yerr=err, marker="o", capsize=3, label=label)
    ax.set_ylim(-5, 105)
    finish_length_axes(ax, fig, lengths, args.train_len, "prompt length (tokens)", "passkey accuracy (%)", args.title,
                       args.out)


if __name__ == "__main__":
    main()
