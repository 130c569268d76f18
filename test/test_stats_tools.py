"""
The comparisons' statistics: eval/stats_tests.py against SciPy's independent implementations
(Fisher's exact test, the exact binomial test McNemar's reduces to, the Wilson interval) on many
tables; eval/compare_mc.py on per-example CSVs written here (McNemar from counts computed here,
refusals of files that do not pair); eval/passkey_report.py's Fisher table on per-trial CSVs
written here; eval/extrapolation_report.py and eval/plot_positions.py on loss_vs_length-style
CSVs (the tables' values, a PNG, refusals); eval/gap_report.py's gap over seed pairs and
scripts/ablation_table.py's interval over seeds.
Run by `make test` (build/test_stats_tools); exits 1 on the first failure.
"""
import csv
import math
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
EVAL = os.path.join(HERE, "..", "eval")
sys.path.insert(0, EVAL)
from stats_tests import fisher_exact, mcnemar_exact, wilson  # noqa: E402
from scipy.stats import binomtest  # noqa: E402
from scipy.stats import fisher_exact as scipy_fisher  # noqa: E402

failures = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures += 1


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def run(*args):
    r = subprocess.run([sys.executable] + list(args), capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


# ---- the tests against SciPy
rng = random.Random(5)
worst = 0.0
for _ in range(300):
    n1, n2 = rng.randint(1, 120), rng.randint(1, 120)
    k1, k2 = rng.randint(0, n1), rng.randint(0, n2)
    ours = fisher_exact(k1, n1, k2, n2)
    theirs = scipy_fisher([[k1, n1 - k1], [k2, n2 - k2]])[1]
    worst = max(worst, abs(ours - theirs) / max(theirs, 1e-300))
check(worst < 1e-9, f"Fisher's exact test equals SciPy's on 300 random tables (largest relative difference {worst:.2g})")
check(close(fisher_exact(2, 25, 0, 25), 0.4897959183673469), "Fisher: 2/25 against 0/25, p = 0.49")
check(close(fisher_exact(22, 100, 42, 100), 0.003798208312953689), "Fisher: 22/100 against 42/100, p = 0.0038")
worst = 0.0
for _ in range(300):
    b, c = rng.randint(0, 80), rng.randint(0, 80)
    ours = mcnemar_exact(b, c)
    theirs = binomtest(b, b + c, 0.5).pvalue if b + c else 1.0
    worst = max(worst, abs(ours - theirs) / max(theirs, 1e-300))
check(worst < 1e-9, f"McNemar's exact test equals SciPy's binomial test on 300 discordant pairs (largest {worst:.2g})")
worst = 0.0
for k, n in [(622, 2073), (0, 25), (25, 25), (3, 10), (1, 1), (500, 1000)]:
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    lo, hi = wilson(k, n)
    worst = max(worst, abs(lo - ci.low), abs(hi - ci.high))
check(worst < 1e-9, f"the Wilson interval equals SciPy's (largest difference {worst:.2g})")

tmp = tempfile.mkdtemp()

# ---- compare_mc.py: two models' per-example CSVs
def write_mc(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["index", "label", "pred", "pred_norm", "sum_loss_0", "mean_loss_0"])
        for r in rows:
            w.writerow(list(r) + [1.0, 1.0])


labels = [rng.randint(0, 3) for _ in range(200)]
pa = [l if rng.random() < 0.45 else (l + 1) % 4 for l in labels]
pb = [l if rng.random() < 0.30 else (l + 2) % 4 for l in labels]
write_mc(f"{tmp}/a.csv", [(i, labels[i], pa[i], pa[i]) for i in range(200)])
write_mc(f"{tmp}/b.csv", [(i, labels[i], pb[i], pb[i]) for i in reversed(range(200))])  # any order
only_a = sum(1 for i in range(200) if pa[i] == labels[i] and pb[i] != labels[i])
only_b = sum(1 for i in range(200) if pb[i] == labels[i] and pa[i] != labels[i])
code, out = run(os.path.join(EVAL, "compare_mc.py"), f"{tmp}/a.csv", f"{tmp}/b.csv", "--names", "A", "B")
check(code == 0, "compare_mc.py runs")
check(f"right only in A: {only_a}, only in B: {only_b}" in out, f"compare_mc.py: discordant counts {only_a} and {only_b}")
check(f"McNemar p = {mcnemar_exact(only_a, only_b):.4g}" in out, "compare_mc.py: McNemar's p of those counts")
write_mc(f"{tmp}/c.csv", [(i, labels[i], pb[i], pb[i]) for i in range(199)])
code, out = run(os.path.join(EVAL, "compare_mc.py"), f"{tmp}/a.csv", f"{tmp}/c.csv")
check(code != 0 and "different examples" in out, "compare_mc.py refuses files of different examples")
write_mc(f"{tmp}/d.csv", [(i, (labels[i] + 1) % 4, pb[i], pb[i]) for i in range(200)])
code, out = run(os.path.join(EVAL, "compare_mc.py"), f"{tmp}/a.csv", f"{tmp}/d.csv")
check(code != 0 and "has label" in out, "compare_mc.py refuses files whose labels disagree")

# ---- passkey_report.py --baseline: Fisher's table
def write_trials(path, hits):  # hits: {length: [(distance, correct)]}
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["length", "trial", "key", "depth", "distance", "correct"])
        for L, trials in hits.items():
            for t, (d, c) in enumerate(trials):
                w.writerow([L, t, 10000 + t, 0.5, d, c])


base = {128: [(50, 1)] * 42 + [(50, 0)] * 58, 256: [(100, 1)] * 5 + [(200, 0)] * 95}
other = {128: [(50, 1)] * 22 + [(50, 0)] * 78, 256: [(100, 1)] * 7 + [(100, 0)] * 10 + [(200, 0)] * 83}
write_trials(f"{tmp}/softmax.csv", base)
write_trials(f"{tmp}/lssar.csv", other)
code, out = run(os.path.join(EVAL, "passkey_report.py"), f"softmax={tmp}/softmax.csv", f"lssar={tmp}/lssar.csv",
                "--train-len", "128", "--baseline", "softmax", "-o", f"{tmp}/acc.png")
check(code == 0, "passkey_report.py --baseline runs")
check(f"p = {fisher_exact(22, 100, 42, 100):<9.3g}" in out, "passkey_report.py: Fisher at 128 (22/100 against 42/100)")
check(f"p = {fisher_exact(7, 100, 5, 100):<9.3g}" in out, "passkey_report.py: Fisher at 256, all trials")
check(f"7/17 p = {fisher_exact(7, 17, 5, 5):<9.3g}" in out, "passkey_report.py: Fisher at 256, needles within 128")
code, out = run(os.path.join(EVAL, "passkey_report.py"), f"softmax={tmp}/softmax.csv", "--baseline", "none",
                "-o", f"{tmp}/acc.png")
check(code != 0 and "no model of that label" in out, "passkey_report.py refuses an unknown baseline")

# ---- extrapolation_report.py and plot_positions.py
COLS = ["length", "loss", "tokens", "checkpoints", "loss_lo", "loss_hi", "beyond_loss", "beyond_lo", "beyond_hi",
        "beyond_tokens", "paired_1x", "paired_1x_lo", "paired_1x_hi", "interval", "vs_all", "vs_all_lo", "vs_all_hi",
        "vs_beyond", "vs_beyond_lo", "vs_beyond_hi", "vs_pairs_lo", "vs_pairs_hi", "vs_beyond_pairs_lo",
        "vs_beyond_pairs_hi"]


def write_lvl(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLS)
        for r in rows:
            w.writerow([r.get(c, "nan") for c in COLS])


nan = "nan"
write_lvl(f"{tmp}/sm.csv", [dict(length=64, loss=1.5, loss_lo=1.4, loss_hi=1.6, checkpoints=3, interval="seeds",
                                 beyond_loss=nan, paired_1x=nan),
                            dict(length=128, loss=1.7, checkpoints=3, interval="seeds", beyond_loss=1.9, beyond_lo=1.8,
                                 beyond_hi=2.0, paired_1x=0.3, paired_1x_lo=0.2, paired_1x_hi=0.4)])
write_lvl(f"{tmp}/ls.csv", [dict(length=64, loss=1.52, checkpoints=3, interval="seeds", vs_all=0.02, vs_all_lo=0.01,
                                 vs_all_hi=0.03, vs_pairs_lo=-0.01, vs_pairs_hi=0.05),
                            dict(length=128, loss=1.55, checkpoints=3, interval="seeds", beyond_loss=1.56, beyond_lo=1.5,
                                 beyond_hi=1.6, paired_1x=0.01, paired_1x_lo=0.0, paired_1x_hi=0.02, vs_beyond=-0.34,
                                 vs_beyond_lo=-0.4, vs_beyond_hi=-0.3, vs_beyond_pairs_lo=-0.5,
                                 vs_beyond_pairs_hi=-0.2)])
code, out = run(os.path.join(EVAL, "extrapolation_report.py"), "--train-len", "64", "--baseline", "sm",
                f"sm={tmp}/sm.csv", f"ls={tmp}/ls.csv", "-o", f"{tmp}/r.txt")
check(code == 0, "extrapolation_report.py runs")
check("| sm | 1.5000 [1.4000, 1.6000] | 1.9000 [1.8000, 2.0000] |" in out, "extrapolation_report.py: per-model row")
check("| ls | +0.0200 [+0.0100, +0.0300] seeds [-0.0100, +0.0500] | -0.3400* [-0.4000, -0.3000] seeds "
      "[-0.5000, -0.2000] |" in out,
      "extrapolation_report.py: the paired row, * only where both intervals exclude 0")
check(os.path.exists(f"{tmp}/r.txt"), "extrapolation_report.py writes -o")
code, out = run(os.path.join(EVAL, "extrapolation_report.py"), "--train-len", "64", f"sm={tmp}/a.csv")
check(code != 0 and "not a CSV of loss_vs_length -o" in out, "extrapolation_report.py refuses another CSV")

with open(f"{tmp}/b1.csv", "w") as f:
    f.write("checkpoint,length,bucket_lo,bucket_hi,loss,tokens\n")
    for c in range(2):
        for L in (64, 128):
            for lo, hi in ((0, 1), (1, 2), (2, 4), (4, 8), (8, 16), (16, 32), (32, 64), (64, 128))[: 7 if L == 64 else 8]:
                f.write(f"{c},{L},{lo},{hi},{2.0 - 0.1 * math.log2(hi) + 0.01 * c},{L}\n")
code, out = run(os.path.join(EVAL, "plot_positions.py"), f"m={tmp}/b1.csv", "--train-len", "64", "-o", f"{tmp}/p.png")
check(code == 0 and os.path.getsize(f"{tmp}/p.png") > 10000, "plot_positions.py writes a PNG")
with open(f"{tmp}/p.png", "rb") as f:
    check(f.read(8) == b"\x89PNG\r\n\x1a\n", "plot_positions.py: the file is a PNG")
code, out = run(os.path.join(EVAL, "plot_positions.py"), f"m={tmp}/a.csv", "--train-len", "64", "-o", f"{tmp}/q.png")
check(code != 0 and "loss_vs_length -ob" in out, "plot_positions.py refuses a CSV of other columns")

# ---- gap_report.py: the gap over seed pairs and its t-interval
import json  # noqa: E402


def write_log(path, vals):  # {step: val_loss}
    with open(path, "w") as f:
        f.write(json.dumps({"step": 0, "world_size": 1, "tokens_per_step": 1024, "B": 16, "T": 64}) + "\n")
        for step, v in sorted(vals.items()):
            f.write(json.dumps({"step": step, "loss": v + 0.1, "grad_norm": 1.0, "lr": 1e-3}) + "\n")
            f.write(json.dumps({"step": step, "val_loss": v}) + "\n")


gaps = []
logs = []
for i, (soft, lssar) in enumerate([(5.0, 5.15), (5.1, 5.20), (4.9, 5.10)]):
    write_log(f"{tmp}/soft{i}.jsonl", {50: soft + 0.5, 100: soft})
    write_log(f"{tmp}/lssar{i}.jsonl", {50: lssar + 0.5, 100: lssar})
    logs += [f"{tmp}/soft{i}.jsonl", f"{tmp}/lssar{i}.jsonl"]
    gaps.append(100 * (lssar - soft) / soft)
m = sum(gaps) / 3
half = 4.303 * (sum((g - m) ** 2 for g in gaps) / 2) ** 0.5 / 3 ** 0.5
code, out = run(os.path.join(EVAL, "gap_report.py"), "three=" + ",".join(logs), "-o", f"{tmp}/gap.png")
check(code == 0 and f"{m:+6.2f}% {f'[{m - half:+.2f}, {m + half:+.2f}]':>19}" in out,
      f"gap_report.py: the mean gap over 3 seed pairs ({m:.2f}%) and its t-interval (+-{half:.2f})")
code, out = run(os.path.join(EVAL, "gap_report.py"), "odd=" + ",".join(logs[:3]), "-o", f"{tmp}/gap.png")
check(code != 0 and "SOFTMAX_LOG,LSSAR_LOG" in out, "gap_report.py refuses an odd number of logs")

# ---- ablation_table.py: the mean over seeds and the interval's half-width
code, out = run(os.path.join(HERE, "..", "scripts", "ablation_table.py"), f"softmax={tmp}/sm.csv", "--train-len", "64",
                "-o", f"{tmp}/abl.png")
check(code == 0 and "1.500 +-0.100" in out, "ablation_table.py: mean +- the half-width over seeds")
# sigmoid and relu in both length forms: the paper's row beside each, and what each form is
code, out = run(os.path.join(HERE, "..", "scripts", "ablation_table.py"), f"sigmoid={tmp}/sm.csv",
                f"sigmoid_tl={tmp}/sm.csv", f"relu_tl={tmp}/sm.csv", "--train-len", "64", "-o", f"{tmp}/abl.png")
check(code == 0 and out.count("14.50") == 2 and out.count("10.35") == 1 and "at the row's n_t" in out
      and "at the training length T (-tl 1)" in out,
      "ablation_table.py: sigmoid_tl and relu_tl labelled, beside the paper's sigmoid and relu rows")

print(f"{failures} failure(s)")
sys.exit(1 if failures else 0)
