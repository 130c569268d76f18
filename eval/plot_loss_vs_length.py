"""
Plots loss versus length for one or more runs (CSV files of eval/loss_vs_length.cu: columns
length,loss,tokens) to a PNG, and prints them side by side as a table.

    /usr/bin/python3 eval/plot_loss_vs_length.py softmax=out/softmax.csv lssar=out/lssar.csv \
        --train-len 64 -o out/loss_vs_length.png
"""
import argparse
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_run(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or not {"length", "loss", "tokens"} <= set(rows[0]):
        sys.exit(f"error: {path}: expected a CSV with columns length,loss,tokens (eval/loss_vs_length.cu -o)")
    return [(int(r["length"]), float(r["loss"]), int(r["tokens"])) for r in rows]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="LABEL=CSV, one per run")
    ap.add_argument("-o", "--out", required=True, help="PNG to write")
    ap.add_argument("--train-len", type=int, default=0, help="training length: marked on the plot, and the x-fold column")
    ap.add_argument("--title", default="Validation loss versus sequence length")
    args = ap.parse_args()

    runs = []
    for spec in args.runs:
        label, sep, path = spec.rpartition("=")
        if not sep:
            sys.exit(f"error: '{spec}': give each run as LABEL=CSV, e.g. lssar=out/lssar.csv")
        runs.append((label, read_run(path)))

    lengths = sorted({L for _, rows in runs for L, _, _ in rows})
    header = f"{'length':>8}" + (f" {'x train':>8}" if args.train_len else "")
    header += "".join(f" {label:>12}" for label, _ in runs)
    print(header)
    for L in lengths:
        line = f"{L:>8}" + (f" {L / args.train_len:>8.3g}" if args.train_len else "")
        for _, rows in runs:
            loss = {r[0]: r[1] for r in rows}.get(L)
            line += f" {loss:>12.4f}" if loss is not None else f" {'-':>12}"
        print(line)
    tokens = {t for _, rows in runs for _, _, t in rows}
    print(f"(validation loss; {', '.join(str(t) for t in sorted(tokens))} tokens scored at every length)")

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for label, rows in runs:
        ax.plot([r[0] for r in rows], [r[1] for r in rows], marker="o", label=label)
    if args.train_len:
        ax.axvline(args.train_len, color="gray", linestyle=":", label=f"training length {args.train_len}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths)
    ax.set_xticklabels([str(L) for L in lengths])
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("validation loss")
    ax.set_title(args.title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
