"""
The in-distribution gap between LSSAR and softmax: validation loss at the training length of pairs
of runs trained alike (train_gpt2 -o DIR/log.jsonl, validated every few steps), one pair per
setting. Prints a table (final validation losses and the gap, absolute and relative) and writes a
PNG: both runs' validation loss and the gap against the step along each pair's runs, and the final
gap per setting.

    /usr/bin/python3 eval/gap_report.py "200 steps, lr 2e-3, warmup 20"=out/gap/a_softmax/log.jsonl,out/gap/a_lssar/log.jsonl \
        ... -o out/gap/gap.png
"""
import argparse
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from plot_training import read_log  # noqa: E402


def val_curve(path):
    run = read_log(path, 1)
    val = {s: v for s, v in run["val"] if v is not None}
    if not val:
        sys.exit(f"error: {path}: no validation loss in the log (train with -v N and -j VAL)")
    return val


def parse(specs):
    pairs = []
    for spec in specs:
        label, sep, paths = spec.rpartition("=")
        logs = paths.split(",")
        if not sep or len(logs) != 2:
            sys.exit(f"error: '{spec}': give each setting as LABEL=SOFTMAX_LOG,LSSAR_LOG")
        pairs.append((label, val_curve(logs[0]), val_curve(logs[1])))
    return pairs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pairs", nargs="+", help="LABEL=SOFTMAX_LOG,LSSAR_LOG, one per setting")
    ap.add_argument("-o", "--out", required=True, help="PNG to write")
    ap.add_argument("--title", default="LSSAR versus softmax at the training length")
    args = ap.parse_args()
    pairs = parse(args.pairs)

    print(f"{'setting':>34} {'softmax':>8} {'lssar':>8} {'gap':>8} {'gap %':>7}   gap % along the run (step: gap)")
    finals = []
    fig, (curves, along, final) = plt.subplots(1, 3, figsize=(16, 4.4))
    for i, (label, soft, lssar) in enumerate(pairs):
        steps = sorted(set(soft) & set(lssar) - {0})
        if not steps:
            sys.exit(f"error: {label}: the two runs share no validated step after step 0")
        gaps = [100 * (lssar[s] - soft[s]) / soft[s] for s in steps]
        last = steps[-1]
        finals.append((label, gaps[-1]))
        trail = " ".join(f"{s}:{g:+.1f}" for s, g in zip(steps, gaps))
        print(f"{label:>34} {soft[last]:8.4f} {lssar[last]:8.4f} {lssar[last] - soft[last]:+8.4f} {gaps[-1]:+6.2f}%   {trail}")
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
    final.barh([f for f, _ in finals], [g for _, g in finals], height=0.5,
               color=[f"C{i}" for i in range(len(finals))])
    final.axvline(0, color="gray", linewidth=0.8)
    final.set_xlabel("gap at the last step (%)")
    final.invert_yaxis()
    final.tick_params(axis="y", labelsize=7)
    fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
