"""
Passkey retrieval of several models from their per-trial CSVs (build/passkey_cpu_<attn> -ot:
length,trial,key,depth,distance,correct): a table of accuracy per length and model with its
binomial 95% interval (Clopper-Pearson, exact), the accuracy of needles within and beyond the
training length's distance of the question, a PNG of accuracy against length, and a PNG heatmap
of accuracy per length and needle depth for each model. With --baseline, every other model against
that one, Fisher's exact test (two-sided) at each length, and at each length over the trials
whose needle lies within the training length of the question (the distance-stratified table): a
difference is a claim only where p is small; small counts stay small counts.

    /usr/bin/python3 eval/passkey_report.py softmax=out/softmax/passkey_trials.csv \
        "lssar p=15"=out/lssar/passkey_trials.csv --train-len 128 -o acc.png --heatmap depth.png --baseline softmax
"""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy.stats import beta  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_common import finish_length_axes, lengths_of, read_runs  # noqa: E402
from stats_tests import fisher_exact  # noqa: E402

COLUMNS = ["length", "trial", "key", "depth", "distance", "correct"]
DEPTH_BINS = 4  # quarters of depth, as build/passkey_cpu_<attn>'s table


def clopper_pearson(k, n, level=0.95):
    """The exact binomial interval for k successes in n trials."""
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else beta.ppf(a, k, n - k + 1)
    hi = 1.0 if k == n else beta.ppf(1 - a, k + 1, n - k)
    return lo, hi


def by_length(rows):
    """{length: (correct, trials)}."""
    out = {}
    for r in rows:
        k, n = out.get(r[0], (0, 0))
        out[r[0]] = (k + r[5], n + 1)
    return out


def print_table(runs, lengths):
    print("accuracy, correct/trials [95% interval]")
    print(f"{'length':>7}" + "".join(f" {label:>24}" for label, _ in runs))
    for L in lengths:
        line = f"{L:>7}"
        for _, rows in runs:
            k, n = by_length(rows).get(L, (0, 0))
            if n == 0:
                line += f" {'-':>24}"
                continue
            lo, hi = clopper_pearson(k, n)
            line += f" {100 * k / n:5.1f}% {k:>3}/{n:<3} [{100 * lo:4.1f},{100 * hi:5.1f}]"
        print(line)


def print_distance(runs, train_len):
    """Needles the question can reach within the training length versus beyond it."""
    if not train_len:
        return
    print(f"accuracy by needle distance from the question (all lengths): <= {train_len} tokens | > {train_len}")
    for label, rows in runs:
        near = [r[5] for r in rows if r[4] <= train_len]
        far = [r[5] for r in rows if r[4] > train_len]
        part = [f"{100 * sum(v) / len(v):5.1f}% of {len(v):>4}" if v else "   -        " for v in (near, far)]
        print(f"{label:>14}: {part[0]} | {part[1]}")


def counts(rows, length, near=None):
    """(correct, trials) at length; near: only the trials whose needle is within near tokens of the question."""
    v = [r[5] for r in rows if r[0] == length and (near is None or r[4] <= near)]
    return sum(v), len(v)


def print_fisher(runs, lengths, baseline, train_len):
    """Each model against the baseline: Fisher's exact test at each length, all trials and (with
    --train-len) the trials whose needle is within the training length of the question."""
    base = dict(runs).get(baseline)
    if base is None:
        raise SystemExit(f"error: --baseline {baseline}: no model of that label (labels: {', '.join(l for l, _ in runs)})")
    tables = [("all trials", None)] + ([(f"needle within {train_len} tokens of the question", train_len)] if train_len else [])
    for title, near in tables:
        print(f"against {baseline}, Fisher's exact test (two-sided), {title}: correct/trials, p")
        print(f"{'length':>7} {baseline:>12}" + "".join(f" {label:>26}" for label, _ in runs if label != baseline))
        for L in lengths:
            kb, nb = counts(base, L, near)
            line = f"{L:>7} {f'{kb}/{nb}':>12}"
            for label, rows in runs:
                if label == baseline:
                    continue
                k, n = counts(rows, L, near)
                line += f" {f'{k}/{n}':>10} p = {fisher_exact(k, n, kb, nb):<9.3g}" if n and nb else f" {'-':>26}"
            print(line)


def plot_accuracy(runs, lengths, train_len, title, out):
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for label, rows in runs:
        acc = by_length(rows)
        xs = [L for L in lengths if L in acc]
        ys = [100 * acc[L][0] / acc[L][1] for L in xs]
        ci = [clopper_pearson(*acc[L]) for L in xs]
        err = [[y - 100 * lo for y, (lo, _) in zip(ys, ci)], [100 * hi - y for y, (_, hi) in zip(ys, ci)]]
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=label)
    ax.set_ylim(-5, 105)
    finish_length_axes(ax, fig, lengths, train_len, "prompt length (tokens)",
                       "passkey accuracy (%, 95% interval)", title, out)


def plot_heatmaps(runs, lengths, title, out):
    fig, axes = plt.subplots(1, len(runs), figsize=(3.2 * len(runs) + 1, 4.0), squeeze=False)
    fig.subplots_adjust(top=0.80, bottom=0.14, left=0.08, right=0.86)
    for j, (ax, (label, rows)) in enumerate(zip(axes[0], runs)):
        grid = np.full((len(lengths), DEPTH_BINS), np.nan)
        for i, L in enumerate(lengths):
            for b in range(DEPTH_BINS):
                v = [r[5] for r in rows if r[0] == L and min(DEPTH_BINS - 1, int(r[3] * DEPTH_BINS)) == b]
                if v:
                    grid[i, b] = 100 * sum(v) / len(v)
                    ax.text(b, i, f"{sum(v)}/{len(v)}", ha="center", va="center", fontsize=7)
        im = ax.imshow(grid, vmin=0, vmax=100, cmap="viridis", aspect="auto", origin="lower")
        ax.set_xticks(range(DEPTH_BINS))
        ax.set_xticklabels([f"{b / DEPTH_BINS:.2g}-{(b + 1) / DEPTH_BINS:.2g}" for b in range(DEPTH_BINS)], fontsize=7)
        ax.set_yticks(range(len(lengths)))
        ax.set_yticklabels([str(L) for L in lengths])
        ax.set_xlabel("needle depth")
        if j == 0:
            ax.set_ylabel("prompt length")
        ax.set_title(label)
    fig.colorbar(im, ax=axes[0].tolist(), label="accuracy (%)")
    fig.suptitle(title + "\n(depth 0: right after the instruction, 1: right before the question; correct/trials)",
                 fontsize=9)
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="LABEL=CSV, one per model (build/passkey_cpu_<attn> -ot)")
    ap.add_argument("-o", "--out", required=True, help="PNG of accuracy against length")
    ap.add_argument("--heatmap", help="PNG of accuracy per length and depth, one panel per model")
    ap.add_argument("--train-len", type=int, default=0, help="training length, marked on the plot")
    ap.add_argument("--title", default="Passkey retrieval")
    ap.add_argument("--baseline", help="label of the model the others are tested against (Fisher's exact test)")
    args = ap.parse_args()
    runs = read_runs(args.runs, COLUMNS, "build/passkey_cpu_<attn> -ot")
    lengths = lengths_of(runs)
    print_table(runs, lengths)
    print_distance(runs, args.train_len)
    if args.baseline:
        print_fisher(runs, lengths, args.baseline, args.train_len)
    plot_accuracy(runs, lengths, args.train_len, args.title, args.out)
    if args.heatmap:
        plot_heatmaps(runs, lengths, args.title, args.heatmap)


if __name__ == "__main__":
    main()
