"""
The attention ablation as one table and one PNG: each run's measured loss (--split) at 1x..16x
its training length (CSVs of eval/loss_vs_length.cu) beside the paper's row for that variant
(GPT-2 124M + RoPE on FineWeb, trained at 1K: its 1K/2K/4K/8K are the 1x/2x/4x/8x columns). Where a
CSV holds several checkpoints (seeds), the loss is their mean and +- the half-width of its 95%
t-interval over seeds; with one seed there is no interval, and no row is a claim against another.
With several seeds, a second table: each run against the baseline (--baseline, default softmax) at
each length, the difference of the means, the two-sided p of Welch's t-test over the two runs'
seeds (from each CSV's mean and t-interval; the runs' seeds treated as independent samples, since
the CSVs hold no per-seed token losses to pair), and its Holm-adjusted p over the table's
comparisons (every run and length is one): a difference is a finding only where that is below 0.05.

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
from stats_tests import holm, student_t975_cpp  # noqa: E402

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


def welch_p(m1, h1, n1, m2, h2, n2):
    """Two-sided p of Welch's t-test from two means and the half-widths of their 95% t-intervals over
    n1 and n2 seeds (the C++ tools' t quantile, eval/loss_vs_length.h)."""
    from scipy.stats import ttest_ind_from_stats
    sd1 = h1 * math.sqrt(n1) / student_t975_cpp(n1 - 1)
    sd2 = h2 * math.sqrt(n2) / student_t975_cpp(n2 - 1)
    if sd1 == 0 and sd2 == 0:
        return 1.0 if m1 == m2 else 0.0
    return float(ttest_ind_from_stats(m1, sd1, n1, m2, sd2, n2, equal_var=False).pvalue)


def print_tests(runs, spread, baseline, lengths):
    """Each run against the baseline at each length: difference, Welch's p over seeds, Holm's adjusted p."""
    loss = {label: {r[0]: r[1] for r in rows} for label, rows in runs}
    if baseline not in loss:
        if baseline != "softmax":
            sys.exit(f"error: --baseline {baseline}: no run of that label (runs: {', '.join(loss)})")
        return
    hb, nb = spread[baseline]
    cells = []  # (label, L, difference, p)
    for label, _ in runs:
        if label == baseline:
            continue
        h, n = spread[label]
        for L in lengths:
            if L not in loss[label] or L not in loss[baseline]:
                continue
            d = loss[label][L] - loss[baseline][L]
            p = welch_p(loss[label][L], h[L], n, loss[baseline][L], hb[L], nb) if (
                L in h and L in hb and n > 1 and nb > 1) else None
            cells.append((label, L, d, p))
    tested = sum(1 for c in cells if c[3] is not None)
    if not tested:
        print(f"(against {baseline}: no test, one seed per run)")
        return
    adjusted = holm([c[3] for c in cells])
    width = 27
    print(f"against {baseline}: run minus {baseline}, p of Welch's t-test over seeds (independent samples), "
          f"Holm-adjusted p over the table's {tested} comparisons")
    print(f"{'run':<18}" + "".join(f" {f'{L // lengths[0]}x':>{width}}" for L in lengths))
    for label, _ in runs:
        if label == baseline:
            continue
        line = f"{label:<18}"
        for L in lengths:
            c = [(d, p, q) for (l, LL, d, p), q in zip(cells, adjusted) if l == label and LL == L]
            if not c:
                line += f" {'-':>{width}}"
                continue
            d, p, q = c[0]
            text = f"{d:+.3f}" + ("" if p is None else f" p={p:.2g} Holm {q:.2g}")
            line += f" {text:>{width}}"
        print(line)
    print("(a difference is a finding only where the Holm-adjusted p is below 0.05)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="LABEL=CSV, one per run")
    ap.add_argument("-o", "--out", required=True, help="PNG to write")
    ap.add_argument("--train-len", type=int, required=True, help="the training length of every run")
    ap.add_argument("--title", default="Attention ablation: loss versus length")
    ap.add_argument("--split", default="validation", help="the split the CSVs scored, as the table names it")
    ap.add_argument("--baseline", default="softmax",
                    help="the run the others are tested against (default softmax); none: no Welch table "
                         "(the comparisons are made on paired token losses, eval/extrapolation_report.py)")
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
    print(f"(measured: {args.split} loss, {', '.join(str(t) for t in sorted(tokens))} tokens scored at every "
          f"length, trained at {args.train_len}, mean over the seeds +- the 95% t-interval's half-width; paper: "
          f"GPT-2 124M on FineWeb, trained at 1K)")
    forms = []
    for label, _ in runs:
        if label in LENGTH_FORMS and LENGTH_FORMS[label] not in forms:
            forms.append(LENGTH_FORMS[label])
    for form in forms:
        print(f"({form})")

    if args.baseline != "none":
        print_tests(runs, spread, args.baseline, [m * args.train_len for m in mults])

    # one colour per run (tab20 has 20; the default cycle's 10 would repeat within the 12 runs of the
    # ablation), the re-weighted runs dashed
    fig, ax = plt.subplots(figsize=(8.4, 5.0))
    colours = plt.get_cmap("tab20").colors
    for i, (label, rows) in enumerate(runs):
        ax.plot([r[0] for r in rows], [r[1] for r in rows], marker="o", label=label, color=colours[(2 * i) % 20 + (2 * i) // 20],
                linestyle="--" if "_p" in label else "-")
    finish_length_axes(ax, fig, lengths_of(runs), args.train_len, "sequence length (tokens)",
                       f"{args.split} loss", args.title, args.out)


if __name__ == "__main__":
    main()
