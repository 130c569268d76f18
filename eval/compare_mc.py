"""
Two models on the same multiple-choice examples, from mc_eval's per-example CSVs (-o:
index,label,pred,pred_norm,...): each model's acc and acc_norm with their 95% Wilson intervals,
the examples one gets right and the other wrong, and McNemar's exact test of that difference (the
paired test: both models answered the same questions). The examples are matched by index; files
that do not hold the same examples are refused.

    /usr/bin/python3 eval/compare_mc.py out/demo_bpe/kjv_cloze_softmax.csv out/demo_bpe/kjv_cloze_lssar.csv
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_common import read_csv  # noqa: E402
from stats_tests import mcnemar_exact, wilson  # noqa: E402

COLUMNS = ["index", "label", "pred", "pred_norm"]


def read_examples(path):
    """{index: (label, pred, pred_norm)} of mc_eval -o's CSV."""
    rows = read_csv(path, COLUMNS, "build/mc_eval_cpu_<attn> -o",
                    f"expected mc_eval's per-example CSV (columns {','.join(COLUMNS)}, ...)")
    out = {}
    for r in rows:
        i = int(r["index"])
        if i in out:
            sys.exit(f"error: {path}: example {i} appears twice")
        out[i] = (int(r["label"]), int(r["pred"]), int(r["pred_norm"]))
    return out


def compare(a, b, metric):
    """(correct a, correct b, n, a right b wrong, a wrong b right, p) for metric 1 (pred) or 2 (pred_norm)."""
    ra = {i: a[i][metric] == a[i][0] for i in a}
    rb = {i: b[i][metric] == b[i][0] for i in b}
    only_a = sum(1 for i in a if ra[i] and not rb[i])
    only_b = sum(1 for i in a if rb[i] and not ra[i])
    return sum(ra.values()), sum(rb.values()), len(a), only_a, only_b, mcnemar_exact(only_a, only_b)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("first", help="mc_eval -o CSV of the first model")
    ap.add_argument("second", help="mc_eval -o CSV of the second model, on the same examples")
    ap.add_argument("--names", nargs=2, metavar=("FIRST", "SECOND"), help="labels (default: the file names)")
    args = ap.parse_args()
    a, b = read_examples(args.first), read_examples(args.second)
    if set(a) != set(b):
        missing = sorted(set(a) ^ set(b))[:5]
        sys.exit(f"error: the files hold different examples (e.g. index {missing}); score both models on the same file")
    for i in a:
        if a[i][0] != b[i][0]:
            sys.exit(f"error: example {i} has label {a[i][0]} in {args.first} and {b[i][0]} in {args.second}")
    na, nb = args.names or (os.path.basename(args.first), os.path.basename(args.second))
    print(f"{len(a)} examples scored by both; McNemar's exact test on the examples exactly one model gets right")
    for name, metric in (("acc", 1), ("acc_norm", 2)):
        ka, kb, n, only_a, only_b, p = compare(a, b, metric)
        (la, ha), (lb, hb) = wilson(ka, n), wilson(kb, n)
        print(f"{name:9s} {na}: {ka / n:.4f} [{la:.4f}, {ha:.4f}]   {nb}: {kb / n:.4f} [{lb:.4f}, {hb:.4f}]   "
              f"right only in {na}: {only_a}, only in {nb}: {only_b}   McNemar p = {p:.4g}")


if __name__ == "__main__":
    main()
