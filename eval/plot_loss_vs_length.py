"""
Plots loss versus length for one or more runs (CSV files of eval/loss_vs_length.cu: columns
length,loss,tokens) to a PNG, and prints them side by side as a table.

    /usr/bin/python3 eval/plot_loss_vs_length.py softmax=out/softmax.csv lssar=out/lssar.csv \
        --train-len 64 -o out/loss_vs_length.png
"""
import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from plot_common import finish_length_axes, lengths_of, read_runs  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="LABEL=CSV, one per run")
    ap.add_argument("-o", "--out", required=True, help="PNG to write")
    ap.add_argument("--train-len", type=int, default=0, help="training length: marked on the plot, and the x-fold column")
    ap.add_argument("--title", default="Loss versus sequence length")
    ap.add_argument("--split", default="validation", help="the split the CSVs scored, as the table and plot name it")
    args = ap.parse_args()

    runs = read_runs(args.runs, ["length", "loss", "tokens"], "eval/loss_vs_length.cu")
    lengths = lengths_of(runs)
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
    print(f"({args.split} loss; {', '.join(str(t) for t in sorted(tokens))} tokens scored at every length)")

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for label, rows in runs:
        ax.plot([r[0] for r in rows], [r[1] for r in rows], marker="o", label=label)
    finish_length_axes(ax, fig, lengths, args.train_len, "sequence length (tokens)", f"{args.split} loss", args.title,
                       args.out)


if __name__ == "__main__":
    main()
