"""
The extrapolation experiment's tables (scripts/extrapolation_experiment.sh), from each model's
loss_vs_length -o CSV (several checkpoints = seeds; the comparison columns from -vs against the
baseline model's token losses), as Markdown:
  1. per model: the loss at 1x (every position) and over the positions beyond the training length
     at each longer length, mean over seeds with a 95% t-interval over seeds;
  2. per model: the paired difference of those tokens against the 1x evaluation (how much more
     the longer context costs the same tokens), mean over seeds [95% t-interval over seeds];
  3. each model against the baseline, token by token on the same tokens: the paired difference
     over the positions beyond the training length (all positions at 1x), with the 95% interval of
     the block bootstrap over windows (seed-averaged losses) and the t-interval over seed pairs.

    /usr/bin/python3 eval/extrapolation_report.py --train-len 64 --baseline softmax \
        softmax=out/x/softmax.csv lssar=out/x/lssar.csv ... [-o RESULTS]
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_common import read_csv, split_spec  # noqa: E402

NEEDED = ["length", "loss", "loss_lo", "loss_hi", "checkpoints", "beyond_loss", "beyond_lo", "beyond_hi",
          "paired_1x", "paired_1x_lo", "paired_1x_hi", "interval", "vs_all", "vs_all_lo", "vs_all_hi", "vs_beyond",
          "vs_beyond_lo", "vs_beyond_hi", "vs_pairs_lo", "vs_pairs_hi", "vs_beyond_pairs_lo", "vs_beyond_pairs_hi"]


def read_model(spec):
    label, path = split_spec(spec)
    rows = read_csv(path, NEEDED, "loss_vs_length -o", "not a CSV of loss_vs_length -o with the statistics columns")
    out = {}
    for r in rows:
        out[int(r["length"])] = {k: (float(v) if k not in ("interval",) else v) for k, v in r.items()}
    return label, out


def num(x, sign=False):
    return "-" if x is None or math.isnan(x) else (f"{x:+.4f}" if sign else f"{x:.4f}")


def ci(lo, hi, sign=False):
    if math.isnan(lo):
        return ""
    return f" [{num(lo, sign)}, {num(hi, sign)}]"


def excludes_zero(lo, hi):
    return not math.isnan(lo) and (lo > 0 or hi < 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", help="LABEL=CSV, one per model")
    ap.add_argument("--train-len", type=int, required=True)
    ap.add_argument("--baseline", help="the label whose token losses the others' -vs columns were paired against")
    ap.add_argument("-o", "--out", help="also write the tables (Markdown) to this file")
    args = ap.parse_args()

    models = [read_model(s) for s in args.models]
    lengths = sorted({L for _, m in models for L in m})
    T = args.train_len
    lines = []
    say = lines.append

    seeds = {label: int(m[lengths[0]]["checkpoints"]) for label, m in models}
    one_seed = all(v == 1 for v in seeds.values())
    over_seeds = ("One seed per model: no interval over seeds (each model's block-bootstrap intervals over "
                  "windows are in loss_vs_length's output)." if one_seed else
                  "Mean over seeds [95% t-interval over seeds].")
    say("Validation loss: at 1x over every position; at 2x-16x over the positions at or beyond the training "
        f"length ({T}) only. {over_seeds} Seeds per model: "
        + ", ".join(f"{k} {v}" for k, v in seeds.items()) + ".")
    say("")
    say("| model | " + " | ".join(f"{L} ({L // T}x)" for L in lengths) + " |")
    say("|---|" + "---:|" * len(lengths))
    for label, m in models:
        cells = []
        for L in lengths:
            r = m[L]
            if L == T:
                cells.append(num(r["loss"]) + ci(r["loss_lo"], r["loss_hi"]))
            else:
                lo, hi = (r["beyond_lo"], r["beyond_hi"]) if r["interval"] == "seeds" else (math.nan, math.nan)
                cells.append(num(r["beyond_loss"]) + ci(lo, hi))
        say(f"| {label} | " + " | ".join(cells) + " |")
    say("")
    say("Paired difference against 1x: the loss of the tokens at or beyond the training length minus the same "
        f"tokens' loss in the 1x windows. {over_seeds}")
    say("")
    longer = [L for L in lengths if L > T]
    say("| model | " + " | ".join(f"{L // T}x" for L in longer) + " |")
    say("|---|" + "---:|" * len(longer))
    for label, m in models:
        cells = []
        for L in longer:
            r = m[L]
            lo, hi = (r["paired_1x_lo"], r["paired_1x_hi"]) if r["interval"] == "seeds" else (math.nan, math.nan)
            cells.append(num(r["paired_1x"], True) + ci(lo, hi, True))
        say(f"| {label} | " + " | ".join(cells) + " |")
    if args.baseline:
        say("")
        say(f"Against {args.baseline}, token by token on the same tokens (model minus {args.baseline}; at 1x every "
            "position, beyond it the positions at or beyond the training length): the mean difference of the "
            + ("losses and its 95% block-bootstrap interval over windows (one seed: no t-interval over seed pairs, "
               "and no *)."
               if one_seed else "seed-averaged losses, its 95% block-bootstrap interval over windows, and the 95% "
               "t-interval over seed pairs. * where both intervals exclude 0."))
        say("")
        say("| model | " + " | ".join(f"{L // T}x" for L in lengths) + " |")
        say("|---|" + "---:|" * len(lengths))
        for label, m in models:
            if label == args.baseline:
                continue
            cells = []
            for L in lengths:
                r = m[L]
                key = "vs_all" if L == T else "vs_beyond"
                pairs = ("vs_pairs_lo", "vs_pairs_hi") if L == T else ("vs_beyond_pairs_lo", "vs_beyond_pairs_hi")
                star = "*" if excludes_zero(r[key + "_lo"], r[key + "_hi"]) and excludes_zero(r[pairs[0]], r[pairs[1]]) else ""
                cell = num(r[key], True) + star + ci(r[key + "_lo"], r[key + "_hi"], True)
                if not math.isnan(r[pairs[0]]):
                    cell += " seeds" + ci(r[pairs[0]], r[pairs[1]], True)
                cells.append(cell)
            say(f"| {label} | " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
