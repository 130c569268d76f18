"""
The extrapolation experiment pooled over corpora (scripts/extrapolation_experiment.sh run once per
CORPUS): each model against the baseline, token by token, the paired difference over the positions
beyond the training length (every position at 1x) averaged over the corpora with equal weight, from
each corpus's loss_vs_length -o CSV (its -vs columns against the baseline's token losses).

The corpora are independent samples (other text, other training runs), so the pooled mean
M = (1/K) sum_c m_c has the standard error sqrt(sum_c se_c^2) / K:
  - over seed pairs: se_c from corpus c's 95% t-interval over its n_c seed pairs (half-width /
    t_975(n_c - 1), the quantile the C++ tools used), the interval M +- t_975(df) se with
    Welch-Satterthwaite's df = (sum se_c^2)^2 / sum (se_c^4 / (n_c - 1)), and the two-sided p of
    that t-test, Holm-adjusted over the table's cells;
  - over windows: se_c from corpus c's 95% block-bootstrap interval read as normal, (hi - lo) /
    (2 x 1.96), the interval M +- 1.96 se (the windows of different corpora are resampled
    independently).
* where both intervals exclude 0 and the Holm-adjusted p is below 0.05.

    /usr/bin/python3 eval/pool_report.py --train-len 64 --baseline softmax \
        kjv:softmax=out/extrapolation_kjv/test/softmax.csv kjv:lssar=... fortunes:softmax=... ... [-o OUT]
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extrapolation_report import ci, emit, num, read_model  # noqa: E402
from stats_tests import holm, student_t975, student_t975_cpp  # noqa: E402

Z975 = 1.959963984540054


def pool_seeds(parts):
    """parts: [(lo, hi, n)] one 95% t-interval over n seed pairs per corpus. Returns (mean, lo, hi, df, p)
    of the equal-weight mean over corpora (Welch-Satterthwaite), or None if a corpus has no interval."""
    from scipy.stats import t
    if any(n < 2 or math.isnan(lo) or math.isnan(hi) for lo, hi, n in parts):
        return None
    K = len(parts)
    means = [(lo + hi) / 2 for lo, hi, _ in parts]
    se2 = [((hi - lo) / 2 / student_t975_cpp(n - 1)) ** 2 for lo, hi, n in parts]
    mean = sum(means) / K
    var = sum(se2) / K ** 2
    if var <= 0:
        return mean, mean, mean, math.inf, (1.0 if mean == 0 else 0.0)
    df = sum(se2) ** 2 / sum(v * v / (n - 1) for v, (_, _, n) in zip(se2, parts))
    se = math.sqrt(var)
    half = student_t975(df) * se
    return mean, mean - half, mean + half, df, float(2 * t.sf(abs(mean) / se, df))


def pool_windows(parts):
    """parts: [(mean, lo, hi)] one block-bootstrap interval per corpus. Returns (mean, lo, hi) of the
    equal-weight mean over corpora, the intervals read as normal."""
    K = len(parts)
    mean = sum(m for m, _, _ in parts) / K
    se = math.sqrt(sum(((hi - lo) / (2 * Z975)) ** 2 for _, lo, hi in parts)) / K
    return mean, mean - Z975 * se, mean + Z975 * se


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", help="CORPUS:LABEL=CSV, every model on every corpus")
    ap.add_argument("--train-len", type=int, required=True)
    ap.add_argument("--baseline", required=True, help="the label the -vs columns were paired against")
    ap.add_argument("-o", "--out", help="also write the table (Markdown) to this file")
    args = ap.parse_args()

    data = {}  # corpus -> label -> {length: row}
    labels = []
    for spec in args.models:
        corpus, sep, rest = spec.partition(":")
        if not sep or "=" not in rest:
            sys.exit(f"error: {spec}: expected CORPUS:LABEL=CSV")
        label, rows = read_model(rest)
        if label in data.setdefault(corpus, {}):
            sys.exit(f"error: {spec}: {label} given twice for {corpus}")
        data[corpus][label] = rows
        if label not in labels:
            labels.append(label)
    corpora = list(data)
    for corpus in corpora:
        missing = [label for label in labels if label not in data[corpus]]
        if missing:
            sys.exit(f"error: corpus {corpus} has no CSV for {', '.join(missing)}: every model on every corpus")
    lengths = sorted(set.intersection(*[set(m) for c in corpora for m in data[c].values()]))
    T = args.train_len
    lines = []
    say = lines.append
    say(f"Pooled over {len(corpora)} corpora ({', '.join(corpora)}), equal weight: model minus {args.baseline}, token "
        "by token, at 1x over every position, beyond it over the positions at or beyond the training length "
        f"({T}). The mean over corpora of each corpus's mean difference, its 95% interval over windows (the "
        "corpora's block-bootstrap intervals combined as normal) and over seed pairs (Welch-Satterthwaite over "
        "the corpora's t-intervals), the two-sided p of that t-test and its Holm-adjusted p over the table's cells. "
        "* where both intervals exclude 0 and the Holm-adjusted p is below 0.05.")
    say("")
    say("| model | " + " | ".join(f"{L // T}x" for L in lengths) + " |")
    say("|---|" + "---:|" * len(lengths))
    cells = []
    for label in labels:
        if label == args.baseline:
            continue
        for L in lengths:
            key = "vs_all" if L == T else "vs_beyond"
            pairs = ("vs_pairs_lo", "vs_pairs_hi") if L == T else ("vs_beyond_pairs_lo", "vs_beyond_pairs_hi")
            rows = [data[c][label][L] for c in corpora]
            win = pool_windows([(r[key], r[key + "_lo"], r[key + "_hi"]) for r in rows])
            seeds = pool_seeds([(r[pairs[0]], r[pairs[1]], int(r["checkpoints"])) for r in rows])
            cells.append((label, L, win, seeds))
    adj = holm([s[4] if s else None for _, _, _, s in cells])
    for label in labels:
        if label == args.baseline:
            continue
        out = []
        for (l, L, win, seeds), q in zip(cells, adj):
            if l != label:
                continue
            star = ("*" if seeds and q is not None and q < 0.05 and (win[1] > 0 or win[2] < 0)
                    and (seeds[1] > 0 or seeds[2] < 0) else "")
            text = num(win[0], True) + star + ci(win[1], win[2], True)
            if seeds:
                text += f" seeds{ci(seeds[1], seeds[2], True)} p = {seeds[4]:.2g}, Holm {q:.2g}"
            out.append(text)
        say(f"| {label} | " + " | ".join(out) + " |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
