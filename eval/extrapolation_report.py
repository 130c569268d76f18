"""
The extrapolation experiment's tables (scripts/extrapolation_experiment.sh), from each model's
loss_vs_length -o CSV (several checkpoints = seeds; the comparison columns from -vs against the
baseline model's token losses), as Markdown:
  1. per model: the loss at 1x (every position) and over the positions beyond the training length
     at each longer length, mean over seeds with a 95% t-interval over seeds;
  2. per model: the paired difference of those tokens against the 1x evaluation (how much more
     the longer context costs the same tokens), mean over seeds [95% t-interval over seeds], with
     the two-sided p of the t-test over seeds and its Holm-adjusted p over the table's cells;
  3. each model against the baseline, token by token on the same tokens: the paired difference
     over the positions beyond the training length (all positions at 1x), with the 95% interval of
     the block bootstrap over windows (seed-averaged losses; the number of windows it resamples in
     each column's header) and the t-interval over seed pairs, the two-sided p of the paired t-test
     over the seed pairs (recovered from that interval) and its Holm-adjusted p over the table's
     cells (every model and length with a p is one comparison). * where the bootstrap interval
     rests on at least MIN_WINDOWS windows and excludes 0 and the Holm-adjusted p is below 0.05.
A block-bootstrap interval over fewer than MIN_WINDOWS (50) windows is printed with a loud warning
(--strict: refused): the percentile interval under-covers with few windows (test/test_stats_tools.py
simulates the C++ rule's coverage at 16, 50 and 64 windows).

    /usr/bin/python3 eval/extrapolation_report.py --train-len 64 --baseline softmax \
        softmax=out/x/softmax.csv lssar=out/x/lssar.csv ... [-o RESULTS]
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_common import read_csv, split_spec  # noqa: E402
from stats_tests import holm, t_test_from_interval  # noqa: E402

MIN_WINDOWS = 50  # the fewest windows a block-bootstrap interval may rest on without a warning

NEEDED = ["length", "loss", "loss_lo", "loss_hi", "checkpoints", "beyond_loss", "beyond_lo", "beyond_hi",
          "paired_1x", "paired_1x_lo", "paired_1x_hi", "interval", "vs_all", "vs_all_lo", "vs_all_hi", "vs_beyond",
          "vs_beyond_lo", "vs_beyond_hi", "vs_pairs_lo", "vs_pairs_hi", "vs_beyond_pairs_lo", "vs_beyond_pairs_hi"]


def read_model(spec):
    label, path = split_spec(spec)
    rows = read_csv(path, NEEDED, "loss_vs_length -o", "not a CSV of loss_vs_length -o with the statistics columns")
    out = {}
    for r in rows:
        out[int(r["length"])] = {k: (float(v) if k not in ("interval", "window_rule") else v) for k, v in r.items()}
    return label, out


def num(x, sign=False):
    return "-" if x is None or math.isnan(x) else (f"{x:+.4f}" if sign else f"{x:.4f}")


def ci(lo, hi, sign=False):
    if math.isnan(lo):
        return ""
    return f" [{num(lo, sign)}, {num(hi, sign)}]"


def excludes_zero(lo, hi):
    return not math.isnan(lo) and (lo > 0 or hi < 0)


def p_text(p, q):
    return "" if p is None else f" p = {p:.2g}, Holm {q:.2g}"


def seeds_p(lo, hi, n):
    """Two-sided p of the t-test over n seeds (or seed pairs) from their 95% t-interval; None without one."""
    _, p = t_test_from_interval(lo, hi, n)
    return None if math.isnan(p) else p


def emit(lines, out):
    """Prints a report's lines, and writes them to out (-o) when given."""
    text = "\n".join(lines)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
        print(f"wrote {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", help="LABEL=CSV, one per model")
    ap.add_argument("--train-len", type=int, required=True)
    ap.add_argument("--baseline", help="the label whose token losses the others' -vs columns were paired against")
    ap.add_argument("-o", "--out", help="also write the tables (Markdown) to this file")
    ap.add_argument("--split", default="val", help="the split the CSVs scored, named in the tables' text (default val)")
    ap.add_argument("--strict", action="store_true",
                    help=f"refuse block-bootstrap intervals over fewer than {MIN_WINDOWS} windows (default: a warning)")
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
    say(f"Loss on the {args.split} split: at 1x over every position; at 2x-16x over the positions at or beyond the training "
        f"length ({T}) only. {over_seeds} Seeds per model: "
        + ", ".join(f"{k} {v}" for k, v in seeds.items()) + ".")
    # the windows the figures rest on (CSVs of loss_vs_length before it recorded them have no such columns)
    spread = {label: m[lengths[0]] for label, m in models if "windows" in m[lengths[0]]}
    if spread:
        say("Windows scored (of the longest length; window rule): " + ", ".join(
            f"{label} {int(r['windows'])} windows in {int(r['documents'])} distinct documents ({r['window_rule']})"
            for label, r in spread.items()) + ".")
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
    rows2 = []
    for label, m in models:
        for L in longer:
            r = m[L]
            lo, hi = (r["paired_1x_lo"], r["paired_1x_hi"]) if r["interval"] == "seeds" else (math.nan, math.nan)
            rows2.append((label, L, num(r["paired_1x"], True) + ci(lo, hi, True), seeds_p(lo, hi, seeds[label])))
    adj2 = holm([c[3] for c in rows2])
    for label, _ in models:
        say(f"| {label} | " + " | ".join(text + p_text(p, q) for (l, _, text, p), q in zip(rows2, adj2) if l == label)
            + " |")
    if any(c[3] is not None for c in rows2):
        say("")
        say(f"p: two-sided t-test over seeds; Holm: adjusted over the table's {sum(c[3] is not None for c in rows2)} "
            "comparisons.")
    if args.baseline:
        tokens = models[0][1][lengths[0]]["tokens"]
        windows = {L: 0 if math.isnan(tokens) else int(tokens) // L for L in lengths}
        few = [L for L in lengths if windows[L] < MIN_WINDOWS]
        if few and args.strict:
            sys.exit(f"error: the block-bootstrap intervals at {', '.join(f'{L // T}x' for L in few)} would rest on "
                     f"{', '.join(str(windows[L]) for L in few)} windows, fewer than {MIN_WINDOWS}: score more tokens "
                     f"(loss_vs_length -n at least {MIN_WINDOWS * max(few)})")
        say("")
        say(f"Against {args.baseline}, token by token on the same tokens (model minus {args.baseline}; at 1x every "
            "position, beyond it the positions at or beyond the training length): the mean difference of the "
            + ("losses and its 95% block-bootstrap interval over windows (one seed: no t-interval over seed pairs, "
               "and no *)."
               if one_seed else "seed-averaged losses, its 95% block-bootstrap interval over windows, the 95% "
               "t-interval over seed pairs, the two-sided p of the paired t-test over the seed pairs and its Holm-"
               f"adjusted p over the table's comparisons. * where the bootstrap interval (at least {MIN_WINDOWS} "
               "windows) excludes 0 and the Holm-adjusted p is below 0.05.")
            + " Each column's header gives the windows its bootstrap resamples.")
        say("")
        say("| model | " + " | ".join(f"{L // T}x ({windows[L]} windows{'!' if L in few else ''})" for L in lengths) + " |")
        say("|---|" + "---:|" * len(lengths))
        rows3 = []
        for label, m in models:
            if label == args.baseline:
                continue
            for L in lengths:
                r = m[L]
                key = "vs_all" if L == T else "vs_beyond"
                pairs = ("vs_pairs_lo", "vs_pairs_hi") if L == T else ("vs_beyond_pairs_lo", "vs_beyond_pairs_hi")
                p = seeds_p(r[pairs[0]], r[pairs[1]], seeds[label])
                rows3.append((label, L, r, key, pairs, p))
        adj3 = holm([c[5] for c in rows3])
        for label, _ in models:
            if label == args.baseline:
                continue
            cells = []
            for (l, L, r, key, pairs, p), q in zip(rows3, adj3):
                if l != label:
                    continue
                star = "*" if (excludes_zero(r[key + "_lo"], r[key + "_hi"]) and L not in few and q is not None
                               and q < 0.05) else ""
                cell = num(r[key], True) + star + ci(r[key + "_lo"], r[key + "_hi"], True)
                if not math.isnan(r[pairs[0]]):
                    cell += " seeds" + ci(r[pairs[0]], r[pairs[1]], True) + p_text(p, q)
                cells.append(cell)
            say(f"| {label} | " + " | ".join(cells) + " |")
        if few:
            warning = (f"WARNING: the block-bootstrap intervals at {', '.join(f'{L // T}x' for L in few)} rest on "
                       f"{', '.join(str(windows[L]) for L in few)} windows, fewer than {MIN_WINDOWS}: the percentile "
                       "interval under-covers there (it is narrower than a 95% interval), so those columns carry no *; "
                       f"score at least {MIN_WINDOWS * max(few)} tokens (loss_vs_length -n) for intervals to rely on.")
            say("")
            say(warning)
            print(warning, file=sys.stderr)
    emit(lines, args.out)


if __name__ == "__main__":
    main()
