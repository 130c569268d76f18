"""
Passkey retrieval of several models from their per-trial CSVs (build/passkey_cpu_<attn> -ot:
length,trial,key,depth,distance,correct): a table of accuracy per length and model with its
binomial 95% interval (Clopper-Pearson, exact), the accuracy of needles within and beyond the
training length's distance of the question, a PNG of accuracy against length, and a PNG heatmap
of accuracy per length and needle depth for each model. With --baseline, every other model against
that one at each length, and at each length over the trials whose needle lies within the training
length of the question (the distance-stratified table). The models of
scripts/passkey_experiment.sh answer the same prompts (the same -rs; eval/passkey.h restarts its
generator at every length), so their trials pair: McNemar's exact test (two-sided) on the trials
matched by length and trial index (the key, depth and distance must agree, or the files are
refused); --independent: Fisher's exact test, for models scored on different prompts only. Each
table's p-values are adjusted by Holm's step-down method over its comparisons and printed beside
the raw ones: a difference is a finding only where the adjusted p is below 0.05; small counts stay
small counts.

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
from plot_common import finish_length_axes, lengths_of, read_runs, split_spec  # noqa: E402
from stats_tests import fisher_exact, holm, mcnemar_exact  # noqa: E402

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


def paired_trials(base_path, base, path, rows):
    """{(length, trial): (baseline correct, model correct, distance)} of two models' per-trial CSVs that
    hold the same prompts: every trial matched by length and trial index, with the same key, depth
    and needle distance. Refused, naming both files, where they do not match."""
    def index(p, rs):
        out = {}
        for r in rs:
            if (r[0], r[1]) in out:
                sys.exit(f"error: {p}: trial {r[1]} at length {r[0]} appears twice")
            out[(r[0], r[1])] = r
        return out
    a, b = index(base_path, base), index(path, rows)
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))[:3]
        sys.exit(f"error: {base_path} and {path} do not hold the same trials (e.g. length, trial {only}): "
                 "the paired test (McNemar) needs both models scored on the same prompts (the same -l, -n and "
                 "-rs); for models scored on independently drawn prompts give --independent (Fisher's exact test)")
    for k in sorted(a):
        ra, rb = a[k], b[k]
        if ra[2] != rb[2] or abs(ra[3] - rb[3]) > 1e-6 or ra[4] != rb[4]:
            sys.exit(f"error: {base_path} and {path}: trial {k[1]} at length {k[0]} has key {ra[2]}, depth {ra[3]}, "
                     f"distance {ra[4]} in the first and key {rb[2]}, depth {rb[3]}, distance {rb[4]} in the second: "
                     "not the same prompt, so the trials do not pair (score both with the same -rs, or give "
                     "--independent for Fisher's exact test on independent samples)")
    return {k: (a[k][5], b[k][5], a[k][4]) for k in a}


def print_tests(runs, paths, lengths, baseline, train_len, independent):
    """Each model against the baseline at each length, all trials and (with --train-len) the trials whose
    needle is within the training length of the question. Paired trials (the default: the same prompts,
    matched trial by trial): McNemar's exact test on the trials exactly one of the two gets right.
    --independent: Fisher's exact test on the two proportions, for models scored on different prompts.
    Each table's p-values are adjusted by Holm's step-down method over the table's comparisons (its
    cells with a test; a cell where neither model has a discordant trial or a hit has none)."""
    labels = [label for label, _ in runs]
    if baseline not in labels:
        raise SystemExit(f"error: --baseline {baseline}: no model of that label (labels: {', '.join(labels)})")
    base = dict(runs)[baseline]
    pairs = {} if independent else {label: paired_trials(paths[baseline], base, paths[label], rows)
                                    for label, rows in runs if label != baseline}
    tables = [("all trials", None)] + ([(f"needle within {train_len} tokens of the question", train_len)] if train_len else [])
    for title, near in tables:
        cells = []  # [(length, label, text, p)]
        for L in lengths:
            for label, rows in runs:
                if label == baseline:
                    continue
                if independent:
                    k, n = counts(rows, L, near)
                    kb, nb = counts(base, L, near)
                    if not (n and nb):
                        cells.append((L, label, "-", None))
                        continue
                    p = fisher_exact(k, n, kb, nb) if k + kb else None
                    cells.append((L, label, f"{k}/{n}", p))
                else:
                    v = [(cb, cm) for (l, _), (cb, cm, d) in pairs[label].items() if l == L and (near is None or d <= near)]
                    if not v:
                        cells.append((L, label, "-", None))
                        continue
                    only_m = sum(1 for cb, cm in v if cm and not cb)
                    only_b = sum(1 for cb, cm in v if cb and not cm)
                    p = mcnemar_exact(only_m, only_b) if only_m + only_b else None
                    cells.append((L, label, f"{sum(cm for _, cm in v)}/{len(v)} ({only_m}:{only_b})", p))
        adjusted = holm([c[3] for c in cells])
        m = sum(1 for c in cells if c[3] is not None)
        if independent:
            print(f"against {baseline}, Fisher's exact test (two-sided; independent samples: the models were scored "
                  f"on different prompts), {title}: correct/trials, p, Holm-adjusted p over the table's {m} comparisons")
        else:
            print(f"against {baseline}, McNemar's exact test (two-sided; paired: both models answered the same "
                  f"prompts, matched trial by trial), {title}: correct/trials (right only in the model : right only "
                  f"in {baseline}), p, Holm-adjusted p over the table's {m} comparisons")
        width = 40
        print(f"{'length':>7} {baseline:>12}" + "".join(f" {label:>{width}}" for label in labels if label != baseline))
        for L in lengths:
            kb, nb = counts(base, L, near)
            line = f"{L:>7} {f'{kb}/{nb}' if nb else '-':>12}"
            for (l, label, text, p), q in zip(cells, adjusted):
                if l != L:
                    continue
                cell = text if p is None else f"{text} p = {p:.3g}, Holm {q:.3g}"
                line += f" {cell:>{width}}"
            print(line)
        print("(no test where neither model has a hit" + ("" if independent else " or the two never differ") +
              "; a difference is a finding only where the Holm-adjusted p is below 0.05)")


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
    ap.add_argument("--baseline", help="label of the model the others are tested against (McNemar's exact test on "
                    "the paired trials; Holm's correction over each table)")
    ap.add_argument("--independent", action="store_true",
                    help="the models were scored on different prompts: Fisher's exact test for independent samples "
                    "instead of McNemar's (default: the trials must pair, or they are refused)")
    args = ap.parse_args()
    runs = read_runs(args.runs, COLUMNS, "build/passkey_cpu_<attn> -ot")
    paths = {label: split_spec(spec)[1] for (label, _), spec in zip(runs, args.runs)}
    lengths = lengths_of(runs)
    print_table(runs, lengths)
    print_distance(runs, args.train_len)
    if args.baseline:
        print_tests(runs, paths, lengths, args.baseline, args.train_len, args.independent)
    plot_accuracy(runs, lengths, args.train_len, args.title, args.out)
    if args.heatmap:
        plot_heatmaps(runs, lengths, args.title, args.heatmap)


if __name__ == "__main__":
    main()
