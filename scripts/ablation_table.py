"""
The attention ablation as one table and one PNG: each run's measured validation loss at 1x..16x
its training length (CSVs of eval/loss_vs_length.cu) beside the paper's row for that variant
(GPT-2 124M + RoPE on FineWeb, trained at 1K: its 1K/2K/4K/8K are the 1x/2x/4x/8x columns). Where a
CSV holds several checkpoints (seeds), the loss is their mean and +- the half-width of its 95%
t-interval over seeds; with one seed there is no interval, and no row is a claim against another.

    /usr/bin/python3 scripts/ablation_table.py softmax=out/a/softmax.csv lssar_p15=out/a/lssar_p15.csv \
        --train-len 64 -o out/a/ablations.png

A run's label names its variant as make's ATTN= does, with _p<P> for the re-weighted ones and _tl
for sigmoid and relu trained with their length terms at the training length (the trainer's -tl 1);
plain sigmoid and relu take the row's n_t (doc/attention.md,
section 'Choices the cited papers leave open'). The paper's sigmoid and relu rows stand beside both forms.
"""
import argparse
import csv
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "eval"))
from plot_common import finish_length_axes, lengths_of, read_runs  # noqa: E402

# The paper's validation losses at 1K, 2K, 4K, 8K (None: not reported); doc/attention.md,
# section 'The paper's numbers'. Of the re-weighting ablations only the 8K loss is reported.
PAPER = {
    "softmax": (3.19, 4.17, 5.45, 6.28),
    "sigmoid": (3.19, 7.46, 11.84, 14.50),
    "relu": (3.21, 6.27, 8.50, 10.35),
    "lssa": (3.19, 4.13, 5.30, 5.94),
    "lssar_p3": (3.18, 4.24, 5.41, 6.30),
    "lssar_p15": (3.19, 3.19, 3.23, 3.32),
    "softmax_rw_p15": (None, None, None, 7.02),
    "sigmoid_l1_rw_p15": (None, None, None, 3.86),
    "relu_l1_rw_p15": (None, None, None, "> 10"),
}
# sigmoid and relu with the training-length constant (-tl 1): the same paper rows, which most
# likely use that form
PAPER["sigmoid_tl"] = PAPER["sigmoid"]
PAPER["relu_tl"] = PAPER["relu"]
# What a label's length terms are, printed under the table for the runs present
LENGTH_FORMS = {
    "sigmoid": "sigmoid, relu: bias -ln(n_t), scale 1/n_t at the row's n_t = t + 1",
    "sigmoid_tl": "sigmoid_tl, relu_tl: bias -ln(T), scale 1/T at the training length T (-tl 1)",
}
LENGTH_FORMS["relu"] = LENGTH_FORMS["sigmoid"]
LENGTH_FORMS["relu_tl"] = LENGTH_FORMS["sigmoid_tl"]


def cell(v, width=6):
    if v is None:
        return f"{'-':>{width}}"
    return f"{v:>{width}.2f}" if isinstance(v, float) else f"{v:>{width}}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="LABEL=CSV, one per run")
    ap.add_argument("-o", "--out", required=True, help="PNG to write")
    ap.add_argument("--train-len", type=int, required=True, help="the training length of every run")
    ap.add_argument("--title", default="Attention ablation: validation loss versus length")
    args = ap.parse_args()

    runs = read_runs(args.runs, ["length", "loss", "tokens"], "eval/loss_vs_length.cu")
    spread = {}  # label: {length: half-width of the 95% interval over seeds}, seeds
    for spec in args.runs:
        label, _, path = spec.rpartition("=")
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        seeds = int(rows[0].get("checkpoints", 1))
        half = {int(r["length"]): (float(r["loss_hi"]) - float(r["loss_lo"])) / 2 for r in rows
                if "loss_hi" in r and not math.isnan(float(r["loss_hi"]))}
        spread[label] = (half, seeds)
    mults = [1, 2, 4, 8, 16]
    width = 15 if any(h for h, _ in spread.values()) else 7
    print(f"{'run':<18} {'seeds':>5}" + "".join(f" {f'{m}x':>{width}}" for m in mults) + "   | paper " +
          "".join(f" {k:>6}" for k in ("1K", "2K", "4K", "8K")))
    for label, rows in runs:
        loss = {r[0]: r[1] for r in rows}
        half, seeds = spread[label]

        def measured_cell(L):
            if L not in loss:
                return f" {'-':>{width}}"
            text = f"{loss[L]:.3f}" + (f" +-{half[L]:.3f}" if L in half else "")
            return f" {text:>{width}}"
        measured = f" {seeds:>5}" + "".join(measured_cell(m * args.train_len) for m in mults)
        paper = PAPER.get(label, (None,) * 4)
        print(f"{label:<18}{measured}   |       " + "".join(f" {cell(v)}" for v in paper))
    tokens = {t for _, rows in runs for _, _, t in rows}
    print(f"(measured: validation loss, {', '.join(str(t) for t in sorted(tokens))} tokens scored at every "
          f"length, trained at {args.train_len}, mean over the seeds +- the 95% t-interval's half-width; paper: "
          f"GPT-2 124M on FineWeb, trained at 1K)")
    forms = []
    for label, _ in runs:
        if label in LENGTH_FORMS and LENGTH_FORMS[label] not in forms:
            forms.append(LENGTH_FORMS[label])
    for form in forms:
        print(f"({form})")

    fig, ax = plt.subplots(figsize=(7.2, 4.6))
    for label, rows in runs:
        ax.plot([r[0] for r in rows], [r[1] for r in rows], marker="o", label=label)
    finish_length_axes(ax, fig, lengths_of(runs), args.train_len, "sequence length (tokens)",
                       "validation loss", args.title, args.out)


if __name__ == "__main__":
    main()
