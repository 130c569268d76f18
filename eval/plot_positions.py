"""
Loss against position in the window, one panel per model and one curve per evaluation length,
from loss_vs_length's -ob CSVs (checkpoint,length,bucket_lo,bucket_hi,loss,tokens; the mean over a
file's checkpoints is plotted), the training length marked: a degradation beyond the training
length shows as curves rising past the mark.

    /usr/bin/python3 eval/plot_positions.py softmax=out/softmax_buckets.csv lssar=out/lssar_buckets.csv \
        --train-len 64 -o out/positions.png
"""
import argparse
import collections
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_common import read_csv, split_spec  # noqa: E402

COLUMNS = ["checkpoint", "length", "bucket_lo", "bucket_hi", "loss", "tokens"]


def read_buckets(spec):
    """(label, {length: [(lo, hi, mean loss over checkpoints)]}) from LABEL=CSV."""
    label, path = split_spec(spec, "lssar=out/lssar_buckets.csv")
    rows = read_csv(path, COLUMNS, "loss_vs_length -ob")
    sums = collections.defaultdict(list)
    for r in rows:
        sums[(int(r["length"]), int(r["bucket_lo"]), int(r["bucket_hi"]))].append(float(r["loss"]))
    curves = collections.defaultdict(list)
    for (length, lo, hi), losses in sorted(sums.items()):
        curves[length].append((lo, hi, sum(losses) / len(losses)))
    return label, dict(curves)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", help="LABEL=CSV, one per model (loss_vs_length -ob)")
    ap.add_argument("-o", "--out", required=True, help="PNG to write")
    ap.add_argument("--train-len", type=int, required=True, help="training length, marked on every panel")
    ap.add_argument("--title", default="Loss against position in the window")
    ap.add_argument("--split", default="validation", help="the split the CSVs scored, as the axis names it")
    args = ap.parse_args()

    models = [read_buckets(spec) for spec in args.models]
    lengths = sorted({L for _, curves in models for L in curves})
    colors = {L: plt.cm.viridis(i / max(1, len(lengths) - 1)) for i, L in enumerate(lengths)}
    lo_y = min(loss for _, c in models for pts in c.values() for _, _, loss in pts)
    hi_y = max(loss for _, c in models for pts in c.values() for _, _, loss in pts)
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.8), sharey=True, squeeze=False)
    for ax, (label, curves) in zip(axes[0], models):
        for L in lengths:
            if L not in curves:
                continue
            # a bucket [lo, hi) at its geometric middle; [0, 1) at 0.5
            xs = [((lo * hi) ** 0.5 if lo > 0 else 0.5) for lo, hi, _ in curves[L]]
            ax.plot(xs, [loss for _, _, loss in curves[L]], marker=".", color=colors[L],
                    label=f"{L} ({L / args.train_len:g}x)")
        ax.axvline(args.train_len, color="gray", linestyle=":", label=f"training length {args.train_len}")
        ax.set_xscale("log", base=2)
        ax.set_ylim(lo_y - 0.02 * (hi_y - lo_y), hi_y + 0.02 * (hi_y - lo_y))
        ax.set_xlabel("position in the window (tokens, log2)")
        ax.set_title(label)
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel(f"{args.split} loss (mean per position bucket)")
    axes[0][-1].legend(fontsize=7, title="window length", title_fontsize=7)
    fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
