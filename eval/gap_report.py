"""
The in-distribution gap between LSSAR and softmax: validation loss at the training length of pairs
of runs trained alike (train_gpt2 -o DIR/log.jsonl, validated every few steps), one or more pairs
per setting (one per seed, each pair sharing its seed). Prints a table (final validation losses
and the gap, absolute and relative: the mean over the pairs, with the 95% t-interval over pairs
where there are several, Student's t quantile at n - 1 degrees of freedom for every number n of pairs) and writes a PNG: both runs' validation loss and the gap against the step
along the runs (means over the pairs), and the final gap per setting with its interval.

    /usr/bin/python3 eval/gap_report.py "200 steps, lr 2e-3, warmup 20"=out/gap/a_softmax_1337/log.jsonl,out/gap/a_lssar_1337/log.jsonl,... \
        ... -o out/gap/gap.png
"""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_training import read_log  # noqa: E402
from stats_tests import student_t975  # noqa: E402


def mean_interval(values):
    """Mean and the half-width of its 95% t-interval, Student's t quantile at n - 1 degrees of freedom
    for every n (None with one value)."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, None
    sd = (sum((v - m) ** 2 for v in values) / (n - 1)) ** 0.5
    return m, student_t975(n - 1) * sd / n ** 0.5


def val_curve(path):
    run = read_log(path, 1)
    val = {s: v for s, v in run["val"] if v is not None}
    if not val:
        sys.exit(f"error: {path}: no validation loss in the log (train with -v N and -j VAL)")
    return val


def parse(specs):
    """[(label, [(softmax curve, lssar curve) per seed pair])]"""
    settings = []
    for spec in specs:
        label, sep, paths = spec.rpartition("=")
        logs = paths.split(",")
        if not sep or len(logs) < 2 or len(logs) % 2:
            sys.exit(f"error: '{spec}': give each setting as LABEL=SOFTMAX_LOG,LSSAR_LOG[,SOFTMAX_LOG,LSSAR_LOG...]")
        settings.append((label, [(val_curve(logs[i]), val_curve(logs[i + 1])) for i in range(0, len(logs), 2)]))
    return settings


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pairs", nargs="+", help="LABEL=SOFTMAX_LOG,LSSAR_LOG, one per setting")
    ap.add_argument("-o", "--out", required=True, help="PNG to write")
    ap.add_argument("--title", default="LSSAR versus softmax at the training length")
    args = ap.parse_args()
    settings = parse(args.pairs)

    print(f"{'setting':>34} {'pairs':>5} {'softmax':>8} {'lssar':>8} {'gap':>8} {'gap %':>7} {'95% CI over pairs':>19}"
          f"   gap % along the run (step: mean gap)")
    finals = []
    fig, (curves, along, final) = plt.subplots(1, 3, figsize=(16, 4.4))
    for i, (label, pairs) in enumerate(settings):
        steps = sorted(set.intersection(*[set(s) & set(l) for s, l in pairs]) - {0})
        if not steps:
            sys.exit(f"error: {label}: the runs share no validated step after step 0")
        soft = {s: sum(p[0][s] for p in pairs) / len(pairs) for s in steps}
        lssar = {s: sum(p[1][s] for p in pairs) / len(pairs) for s in steps}
        gaps = [sum(100 * (p[1][s] - p[0][s]) / p[0][s] for p in pairs) / len(pairs) for s in steps]
        last = steps[-1]
        gap, half = mean_interval([100 * (p[1][last] - p[0][last]) / p[0][last] for p in pairs])
        finals.append((label, gap, half))
        interval = f"[{gap - half:+.2f}, {gap + half:+.2f}]" if half is not None else "-"
        trail = " ".join(f"{s}:{g:+.1f}" for s, g in zip(steps, gaps))
        print(f"{label:>34} {len(pairs):>5} {soft[last]:8.4f} {lssar[last]:8.4f} {lssar[last] - soft[last]:+8.4f} "
              f"{gap:+6.2f}% {interval:>19}   {trail}")
        along.plot(steps, gaps, marker="o", markersize=3, color=f"C{i}", label=label)
        curves.plot(steps, [soft[s] for s in steps], color=f"C{i}", marker="o", markersize=3, label=f"{label}: softmax")
        curves.plot(steps, [lssar[s] for s in steps], color=f"C{i}", marker="s", markersize=3, linestyle="--",
                    label=f"{label}: lssar")
    curves.set_xlabel("step")
    curves.set_ylabel("validation loss at the training length")
    curves.grid(True, alpha=0.3)
    curves.legend(fontsize=6)
    along.axhline(0, color="gray", linewidth=0.8)
    along.set_xlabel("step")
    along.set_ylabel("(LSSAR - softmax) / softmax validation loss (%)")
    along.grid(True, alpha=0.3)
    along.legend(fontsize=7)
    final.barh([f for f, _, _ in finals], [g for _, g, _ in finals], height=0.5,
               xerr=[h if h is not None else 0 for _, _, h in finals], capsize=3,
               color=[f"C{i}" for i in range(len(finals))])
    final.axvline(0, color="gray", linewidth=0.8)
    final.set_xlabel("gap at the last step (%, 95% interval over seed pairs)")
    final.invert_yaxis()
    final.tick_params(axis="y", labelsize=7)
    fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
