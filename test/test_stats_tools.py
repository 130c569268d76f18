"""
The comparisons' statistics: eval/stats_tests.py against SciPy's independent implementations
(Fisher's exact test, the exact binomial test McNemar's reduces to, the Wilson interval, the t-test
recovered from a t-interval) on many tables, and Holm's adjustment against a direct computation
of the step-down procedure; eval/compare_mc.py on per-example CSVs written here (McNemar from
counts computed here, refusals of files that do not pair); eval/passkey_report.py's McNemar and
Fisher tables with Holm's adjustment on per-trial CSVs written here (refusals of trials that do not
pair); eval/extrapolation_report.py and eval/plot_positions.py on loss_vs_length-style CSVs (the
tables' values, p over seed pairs and Holm, window counts and the warning under 50 windows, a PNG,
refusals); a seeded simulation of the coverage of the block bootstrap's percentile rule
(eval/loss_vs_length.h) at 16, 50 and 64 windows; eval/gap_report.py's gap over seed pairs with
Student's t at 3, 12 and 30 pairs; scripts/ablation_table.py's interval over seeds and Welch's test
against the baseline with Holm's adjustment.
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
import numpy as np  # noqa: E402
from stats_tests import fisher_exact, holm, mcnemar_exact, t_test_from_interval, wilson  # noqa: E402
from scipy.stats import binomtest, ttest_1samp, ttest_ind  # noqa: E402
from scipy.stats import fisher_exact as scipy_fisher  # noqa: E402
from scipy.stats import t as student_t  # noqa: E402

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


# Holm: the step-down procedure run directly (sorted ascending, reject while p_(k) <= alpha / (m - k + 1),
# stop at the first that is not); a hypothesis's adjusted p must be <= alpha exactly where the
# procedure rejects it at alpha, for every alpha just above and just below each adjusted value (not at
# it: alpha / (m - k + 1) against (m - k + 1) p rounds either way) and below 1 (the cap at 1)
def holm_rejects(ps, alpha):
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out = set()
    for k, i in enumerate(order):
        if ps[i] > alpha / (len(ps) - k):
            break
        out.add(i)
    return out


bad = 0
for _ in range(300):
    m = rng.randint(1, 15)
    ps = [rng.choice([rng.random(), rng.random() * 0.05, 0.01, 1.0]) for _ in range(m)]
    adj = holm(ps)
    for alpha in [a * f for a in adj for f in (1 - 1e-9, 1 + 1e-9) if a * f < 1] + [0.05, 0.01]:
        if {i for i in range(m) if adj[i] <= alpha} != holm_rejects(ps, alpha):
            bad += 1
check(bad == 0, "Holm's adjusted p-values reject exactly where the step-down procedure does (300 random families)")
check(all(close(a, b) for a, b in zip(holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02])),
      "Holm by hand: 0.01, 0.04, 0.03, 0.005 -> 0.03, 0.06, 0.06, 0.02")
check(holm([0.2, None, 0.01]) == [0.2, None, 0.02], "Holm: cells without a test are not comparisons")
# the docs' passkey table: 12 comparisons; 22 vs 42 of 100 (p = 0.0038) survives, 17 vs 5 (p = 0.0115) does not
doc = [0.47, 0.31, fisher_exact(22, 100, 42, 100), 0.39, 0.06, 0.06, 0.77, fisher_exact(17, 100, 5, 100), 0.50, 0.12,
       0.25, 1.0]
adj = holm(doc)
check(close(adj[2], 12 * doc[2]) and adj[2] < 0.05 and close(adj[7], 11 * doc[7]) and adj[7] > 0.05,
      f"Holm over the passkey table's 12 comparisons: p = {doc[2]:.4f} -> {adj[2]:.4f} survives, "
      f"p = {doc[7]:.4f} -> {adj[7]:.4f} does not")
# the t-test recovered from a 95% t-interval as the C++ prints it (its 3-decimal t quantile)
T975_CPP = {2: 4.303, 11: 2.201, 29: 1.96 + 2.4 / 29}  # eval/loss_vs_length.h, student_t975
worst = 0.0
for n in (3, 12, 30):
    for _ in range(20):
        d = [rng.gauss(0.1, 0.2) for _ in range(n)]
        mean = sum(d) / n
        half = T975_CPP[n - 1] * (sum((x - mean) ** 2 for x in d) / (n - 1)) ** 0.5 / n ** 0.5
        _, p = t_test_from_interval(mean - half, mean + half, n)
        worst = max(worst, abs(p - ttest_1samp(d, 0).pvalue) / ttest_1samp(d, 0).pvalue)
check(worst < 1e-3, f"the t-test from a t-interval equals SciPy's one-sample t-test at 3, 12, 30 values (largest "
      f"relative difference {worst:.2g}, from the C++'s 3-decimal t quantile)")

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

# ---- passkey_report.py --baseline: McNemar on paired trials, Fisher with --independent, Holm
def write_trials(path, correct, key0=10000):  # correct: {length: set of the trials right}; 100 trials per length
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["length", "trial", "key", "depth", "distance", "correct"])
        for L, right in correct.items():
            for t in range(100):
                w.writerow([L, t, key0 + 7 * t, f"{t / 100:.6f}", 50 if L == 128 else (100 if t < 56 else 200),
                            int(t in right)])


write_trials(f"{tmp}/softmax.csv", {128: set(range(42)), 256: set(range(5))})
write_trials(f"{tmp}/lssar.csv", {128: set(range(30, 52)), 256: set(range(3, 20))})
# discordant counts: 128: right only in lssar 42..51 = 10, only in softmax 0..29 = 30; 256: 5..19 = 15 and 0..2 = 3
p128, p256 = binomtest(10, 40, 0.5).pvalue, binomtest(15, 18, 0.5).pvalue
q128, q256 = (2 * p128, max(2 * p128, p256)) if p128 < p256 else (max(2 * p256, p128), 2 * p256)
q128, q256 = min(1, q128), min(1, q256)
code, out = run(os.path.join(EVAL, "passkey_report.py"), f"softmax={tmp}/softmax.csv", f"lssar={tmp}/lssar.csv",
                "--train-len", "128", "--baseline", "softmax", "-o", f"{tmp}/acc.png")
check(code == 0 and "McNemar's exact test" in out and "paired" in out, "passkey_report.py --baseline: McNemar on the paired trials")
check(f"22/100 (10:30) p = {p128:.3g}, Holm {q128:.3g}" in out,
      f"passkey_report.py: McNemar at 128 (10 against 30 discordant, p = {p128:.3g}), Holm over 2 ({q128:.3g})")
check(f"17/100 (15:3) p = {p256:.3g}, Holm {q256:.3g}" in out,
      f"passkey_report.py: McNemar at 256 (15 against 3, p = {p256:.3g}), Holm ({q256:.3g})")
check(f"17/56 (15:3) p = {p256:.3g}" in out, "passkey_report.py: McNemar at 256 over the needles within 128 tokens")
check("Fisher" not in out, "passkey_report.py: no Fisher's test on paired trials")
code, out = run(os.path.join(EVAL, "passkey_report.py"), f"softmax={tmp}/softmax.csv", f"lssar={tmp}/lssar.csv",
                "--train-len", "128", "--baseline", "softmax", "--independent", "-o", f"{tmp}/acc.png")
f128, f256 = scipy_fisher([[22, 78], [42, 58]])[1], scipy_fisher([[17, 83], [5, 95]])[1]
g128, g256 = holm([f128, f256])
check(code == 0 and "independent samples" in out and f"22/100 p = {f128:.3g}, Holm {g128:.3g}" in out
      and f"17/100 p = {f256:.3g}, Holm {g256:.3g}" in out and f"17/56 p = {scipy_fisher([[17, 39], [5, 51]])[1]:.3g}" in out,
      "passkey_report.py --independent: Fisher's exact test, said to be for independent samples, with Holm")
write_trials(f"{tmp}/other_keys.csv", {128: set(range(30, 52)), 256: set(range(3, 20))}, key0=20000)
code, out = run(os.path.join(EVAL, "passkey_report.py"), f"softmax={tmp}/softmax.csv", f"lssar={tmp}/other_keys.csv",
                "--baseline", "softmax", "-o", f"{tmp}/acc.png")
check(code != 0 and f"{tmp}/softmax.csv" in out and f"{tmp}/other_keys.csv" in out and "do not pair" in out,
      "passkey_report.py refuses trials of other prompts, naming both files")
write_trials(f"{tmp}/short.csv", {128: set(range(30, 52))})
code, out = run(os.path.join(EVAL, "passkey_report.py"), f"softmax={tmp}/softmax.csv", f"lssar={tmp}/short.csv",
                "--baseline", "softmax", "-o", f"{tmp}/acc.png")
check(code != 0 and f"{tmp}/short.csv" in out and "do not hold the same trials" in out,
      "passkey_report.py refuses files of different trials, naming both")
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


def t_interval(d):  # the C++'s 95% t-interval over seeds (eval/loss_vs_length.h: across_seeds, 3-decimal t at 2 df)
    m = sum(d) / len(d)
    half = 4.303 * (sum((x - m) ** 2 for x in d) / (len(d) - 1)) ** 0.5 / len(d) ** 0.5
    return m - half, m + half


d1, d2 = [0.00, 0.05, 0.01], [-0.33, -0.36, -0.33]  # the seed pairs' differences at 1x and 2x
(l1, h1), (l2, h2) = t_interval(d1), t_interval(d2)
pd1, pd2 = ttest_1samp(d1, 0).pvalue, ttest_1samp(d2, 0).pvalue
qd1, qd2 = max(pd1, 2 * pd2), 2 * pd2  # Holm over the two: pd2 < pd1
# the rises against 1x: sm +0.3 [0.2, 0.4] and ls +0.01 [0, 0.02] over 3 seeds; t = 0.1 / (interval's half / 4.303)
pr_sm, pr_ls = 2 * student_t.sf(0.3 / (0.1 / 4.303), 2), 2 * student_t.sf(0.01 / (0.01 / 4.303), 2)


def write_pair(tokens):
    write_lvl(f"{tmp}/sm.csv", [dict(length=64, tokens=tokens, loss=1.5, loss_lo=1.4, loss_hi=1.6, checkpoints=3,
                                     interval="seeds", beyond_loss=nan, paired_1x=nan),
                                dict(length=128, tokens=tokens, loss=1.7, checkpoints=3, interval="seeds",
                                     beyond_loss=1.9, beyond_lo=1.8, beyond_hi=2.0, paired_1x=0.3, paired_1x_lo=0.2,
                                     paired_1x_hi=0.4)])
    write_lvl(f"{tmp}/ls.csv", [dict(length=64, tokens=tokens, loss=1.52, checkpoints=3, interval="seeds",
                                     vs_all=sum(d1) / 3, vs_all_lo=0.01, vs_all_hi=0.03, vs_pairs_lo=l1, vs_pairs_hi=h1),
                                dict(length=128, tokens=tokens, loss=1.55, checkpoints=3, interval="seeds",
                                     beyond_loss=1.56, beyond_lo=1.5, beyond_hi=1.6, paired_1x=0.01, paired_1x_lo=0.0,
                                     paired_1x_hi=0.02, vs_beyond=-0.34, vs_beyond_lo=-0.4, vs_beyond_hi=-0.3,
                                     vs_beyond_pairs_lo=l2, vs_beyond_pairs_hi=h2)])


write_pair(8192)  # 128 windows at 1x, 64 at 2x
code, out = run(os.path.join(EVAL, "extrapolation_report.py"), "--train-len", "64", "--baseline", "sm",
                f"sm={tmp}/sm.csv", f"ls={tmp}/ls.csv", "-o", f"{tmp}/r.txt")
check(code == 0, "extrapolation_report.py runs")
check("| sm | 1.5000 [1.4000, 1.6000] | 1.9000 [1.8000, 2.0000] |" in out, "extrapolation_report.py: per-model row")
check(f"| sm | +0.3000 [+0.2000, +0.4000] p = {pr_sm:.2g}, Holm {min(1, 2 * pr_sm):.2g} |" in out
      and f"| ls | +0.0100 [+0.0000, +0.0200] p = {pr_ls:.2g}, Holm {max(pr_ls, 2 * pr_sm):.2g} |" in out,
      f"extrapolation_report.py: the rise against 1x with its p over seeds ({pr_sm:.2g}, {pr_ls:.2g}) and Holm's")
check("| model | 1x (128 windows) | 2x (64 windows) |" in out, "extrapolation_report.py: the windows beside the intervals")
check(f"| ls | +0.0200 [+0.0100, +0.0300] seeds [{l1:+.4f}, {h1:+.4f}] p = {pd1:.2g}, Holm {qd1:.2g} | "
      f"-0.3400* [-0.4000, -0.3000] seeds [{l2:+.4f}, {h2:+.4f}] p = {pd2:.2g}, Holm {qd2:.2g} |" in out,
      f"extrapolation_report.py: p of the paired t over seed pairs equals SciPy's ({pd1:.2g}, {pd2:.2g}), Holm over "
      "the cells, * where the bootstrap interval excludes 0 and Holm's p is below 0.05")
check("WARNING" not in out, "extrapolation_report.py: no warning at 64 windows and more")

# a CSV that records its windows (loss_vs_length's windows, documents and window_rule columns): the
# report says what the figures rest on, the rule read as text
with open(f"{tmp}/w.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(COLS + ["windows", "documents", "window_rule"])
    for L in (64, 128):
        w.writerow([dict(length=L, tokens=8192, loss=1.5, checkpoints=1, interval="bootstrap").get(c, "nan")
                    for c in COLS] + [8, 5, "stride"])
code, out = run(os.path.join(EVAL, "extrapolation_report.py"), "--train-len", "64", f"sm={tmp}/w.csv")
check(code == 0 and "Windows scored (of the longest length; window rule): sm 8 windows in 5 distinct documents "
      "(stride)." in out, "extrapolation_report.py: the windows and documents of a CSV that records them")
check(os.path.exists(f"{tmp}/r.txt"), "extrapolation_report.py writes -o")
write_pair(4096)  # 32 windows at 2x
code, out = run(os.path.join(EVAL, "extrapolation_report.py"), "--train-len", "64", "--baseline", "sm",
                f"sm={tmp}/sm.csv", f"ls={tmp}/ls.csv")
check(code == 0 and "2x (32 windows!)" in out and "WARNING: the block-bootstrap intervals at 2x rest on 32 windows, "
      "fewer than 50" in out and "-0.3400 [-0.4000, -0.3000]" in out,
      "extrapolation_report.py: under 50 windows a warning, the count marked, and no *")
code, out = run(os.path.join(EVAL, "extrapolation_report.py"), "--train-len", "64", "--baseline", "sm",
                f"sm={tmp}/sm.csv", f"ls={tmp}/ls.csv", "--strict")
check(code != 0 and "fewer than 50" in out, "extrapolation_report.py --strict refuses intervals over fewer than 50 windows")
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


def gap_case(n, name):  # n seed pairs; the interval's half-width from SciPy's t quantile at n - 1 degrees of freedom
    gaps, logs = [], []
    for i in range(n):
        soft = 5.0 + 0.05 * ((i * 7) % 5)
        lssar = soft * (1 + 0.03 + 0.01 * ((i * 3) % 4 - 1.5))
        write_log(f"{tmp}/{name}_soft{i}.jsonl", {50: soft + 0.5, 100: soft})
        write_log(f"{tmp}/{name}_lssar{i}.jsonl", {50: lssar + 0.5, 100: lssar})
        logs += [f"{tmp}/{name}_soft{i}.jsonl", f"{tmp}/{name}_lssar{i}.jsonl"]
        gaps.append(100 * (lssar - soft) / soft)
    m = sum(gaps) / n
    se = (sum((g - m) ** 2 for g in gaps) / (n - 1)) ** 0.5 / n ** 0.5
    half = student_t.ppf(0.975, n - 1) * se
    code, out = run(os.path.join(EVAL, "gap_report.py"), f"{name}=" + ",".join(logs), "-o", f"{tmp}/gap.png")
    ok = code == 0 and f"{m:+6.2f}% {f'[{m - half:+.2f}, {m + half:+.2f}]':>19}" in out
    old = f"[{m - 1.96 * se:+.2f}, {m + 1.96 * se:+.2f}]"  # the normal quantile, which the t replaces
    check(ok and (n < 12 or old not in out),
          f"gap_report.py: the mean gap over {n} seed pairs ({m:.2f}%) and its t-interval (+-{half:.2f}, "
          f"t = {student_t.ppf(0.975, n - 1):.3f} at {n - 1} degrees of freedom; 1.96 would give +-{1.96 * se:.2f})")
    return logs


logs = gap_case(3, "three")
gap_case(12, "twelve")
gap_case(30, "thirty")
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

# Welch's test against the baseline from two runs' means and t-intervals over 3 seeds, Holm over the cells
def write_seeds(path, per_length):  # {length: [loss per seed]}: the mean and the C++'s t-interval over them
    rows = []
    for L, v in per_length.items():
        lo, hi = t_interval(v)
        rows.append(dict(length=L, tokens=8192, loss=sum(v) / len(v), loss_lo=lo, loss_hi=hi, checkpoints=len(v),
                         interval="seeds"))
    write_lvl(path, rows)


base_s = {64: [4.83, 4.85, 4.81], 128: [4.85, 4.88, 4.84]}
run_s = {64: [5.02, 5.05, 5.01], 128: [4.86, 4.90, 4.83]}
write_seeds(f"{tmp}/abl_softmax.csv", base_s)
write_seeds(f"{tmp}/abl_lssar.csv", run_s)
pw = [ttest_ind(run_s[L], base_s[L], equal_var=False).pvalue for L in (64, 128)]
qw = holm(pw)
code, out = run(os.path.join(HERE, "..", "scripts", "ablation_table.py"), f"softmax={tmp}/abl_softmax.csv",
                f"lssar_p15={tmp}/abl_lssar.csv", "--train-len", "64", "-o", f"{tmp}/abl.png")
check(code == 0 and "Welch's t-test" in out and f"p={pw[0]:.2g} Holm {qw[0]:.2g}" in out
      and f"p={pw[1]:.2g} Holm {qw[1]:.2g}" in out,
      f"ablation_table.py: Welch's p over seeds equals SciPy's ({pw[0]:.2g}, {pw[1]:.2g}), Holm over the table "
      f"({qw[0]:.2g}, {qw[1]:.2g})")

# ---- pool_report.py: the paired difference pooled over corpora. Expected values from the per-seed
# differences directly (NumPy, SciPy): the mean of the corpus means, its standard error from each corpus's
# sample variance, sqrt(sum_c var_c / n_c) / K, Welch-Satterthwaite's df, SciPy's t quantile and p; the
# report sees only each corpus's C++ t-interval (3-decimal quantile), so its figures agree to rounding of
# the 4-decimal print.
pool_d = {"a": [-0.30, -0.35, -0.28], "b": [-0.10, -0.05, -0.12], "c": [-0.20, -0.26, -0.21]}  # seed pairs, 2x
pool_boot = {"a": (-0.40, -0.25), "b": (-0.12, -0.03), "c": (-0.30, -0.15)}  # block-bootstrap intervals
for c, d in pool_d.items():
    lo, hi = t_interval(d)
    write_lvl(f"{tmp}/pool_{c}_sm.csv", [dict(length=L, tokens=8192, loss=1.5, checkpoints=3, interval="seeds")
                                         for L in (64, 128)])
    write_lvl(f"{tmp}/pool_{c}_ls.csv", [dict(length=64, tokens=8192, loss=1.5, checkpoints=3, interval="seeds"),
                                         dict(length=128, tokens=8192, loss=1.5, checkpoints=3, interval="seeds",
                                              vs_beyond=sum(d) / 3, vs_beyond_lo=pool_boot[c][0],
                                              vs_beyond_hi=pool_boot[c][1], vs_beyond_pairs_lo=lo,
                                              vs_beyond_pairs_hi=hi)])
var_c = [np.var(d, ddof=1) / 3 for d in pool_d.values()]
pool_mean = float(np.mean([np.mean(d) for d in pool_d.values()]))
pool_se = math.sqrt(sum(var_c)) / 3
pool_df = sum(var_c) ** 2 / sum(v * v / 2 for v in var_c)
pool_half = student_t.ppf(0.975, pool_df) * pool_se
pool_p = 2 * student_t.sf(abs(pool_mean) / pool_se, pool_df)
boot_se = math.sqrt(sum(((hi - lo) / (2 * 1.959963984540054)) ** 2 for lo, hi in pool_boot.values())) / 3
code, out = run(os.path.join(EVAL, "pool_report.py"), "--train-len", "64", "--baseline", "sm",
                *[f"{c}:{m}={tmp}/pool_{c}_{m}.csv" for c in pool_d for m in ("sm", "ls")])
row = [line for line in out.splitlines() if line.startswith("| ls |")]
check(code == 0 and len(row) == 1, "pool_report.py runs and prints a row per model")
if row:
    cell = row[0].split("|")[3]
    want_mean, want_lo, want_hi = pool_mean, pool_mean - pool_half, pool_mean + pool_half
    got = [float(x) for x in cell.replace("[", " ").replace("]", " ").replace(",", " ").replace("*", " ").split()
           if x[0] in "+-" and x[1:2].isdigit()]
    check(len(got) >= 5 and abs(got[0] - want_mean) < 1e-4 and abs(got[3] - want_lo) < 2e-4
          and abs(got[4] - want_hi) < 2e-4,
          f"pool_report.py: the pooled mean and seed interval ({want_mean:+.4f} [{want_lo:+.4f}, {want_hi:+.4f}], "
          f"df {pool_df:.2f}) equal the direct computation from the seeds: {cell.strip()}")
    check(len(got) >= 3 and abs(got[1] - (pool_mean - 1.959963984540054 * boot_se)) < 1e-4
          and abs(got[2] - (pool_mean + 1.959963984540054 * boot_se)) < 1e-4,
          "pool_report.py: the window interval combines the corpora's bootstrap intervals as normal")
    check(f"p = {pool_p:.2g}," in cell, f"pool_report.py: p of the pooled t-test equals SciPy's ({pool_p:.2g})")
code, out = run(os.path.join(EVAL, "pool_report.py"), "--train-len", "64", "--baseline", "sm",
                f"a:sm={tmp}/pool_a_sm.csv", f"a:ls={tmp}/pool_a_ls.csv", f"b:sm={tmp}/pool_b_sm.csv")
check(code != 0 and "corpus b has no CSV for ls" in out, "pool_report.py refuses a model missing on a corpus")

# ---- the block bootstrap's coverage: eval/loss_vs_length.h's rule (the mean over W windows; 2000 replicates
# resampling the windows with replacement; the interval between the sorted replicates' entries
# (size_t)(0.025 * 1999 + 0.5) = 50 and (size_t)(0.975 * 1999 + 0.5) = 1949), on R data sets of W normal window
# means with known mean 0, seeded. Tolerance at W >= 50: three binomial standard errors of a coverage of 95%
# estimated from R data sets, 3 sqrt(0.95 * 0.05 / R) (a rule that covers 95% falls outside it with
# probability 0.27%), plus the percentile interval's known normal-theory shortfall at W windows,
# 0.95 - P(|t_(W-1)| <= 1.96 sqrt((W - 1) / W)) (its width is 1.96 plug-in standard errors, where a 95% interval
# for the mean of W normal values needs the t quantile and the unbiased standard deviation): 0.8% at 50,
# 0.6% at 64.
def bootstrap_coverage(W, R, seed, B=2000, chunk=50):
    g = np.random.default_rng(seed)
    lo_k, hi_k = int(0.025 * (B - 1) + 0.5), int(0.975 * (B - 1) + 0.5)
    hits = 0
    for c0 in range(0, R, chunk):
        c = min(chunk, R - c0)
        x = g.standard_normal((c, W))
        idx = g.integers(0, W, size=(c, B, W), dtype=np.int32)
        means = np.take_along_axis(x[:, None, :], idx, axis=2).mean(axis=2)
        part = np.partition(means, [lo_k, hi_k], axis=1)
        hits += int(np.sum((part[:, lo_k] <= 0) & (part[:, hi_k] >= 0)))
    return hits / R


R = 2000
binomial = 3 * (0.95 * 0.05 / R) ** 0.5
cover = {W: bootstrap_coverage(W, R, 36 + W) for W in (16, 50, 64)}
for W in (50, 64):
    shortfall = 0.95 - (2 * student_t.cdf(1.959963984540054 * ((W - 1) / W) ** 0.5, W - 1) - 1)
    check(abs(cover[W] - 0.95) <= binomial + shortfall,
          f"the block bootstrap's percentile interval over {W} windows covers {100 * cover[W]:.1f}% of {R} simulated "
          f"data sets, within {100 * (binomial + shortfall):.1f} points of 95% (3 binomial SE {100 * binomial:.1f} + "
          f"normal-theory shortfall {100 * shortfall:.1f})")
check(cover[16] < 0.95 - binomial,
      f"over 16 windows it under-covers: {100 * cover[16]:.1f}% (more than 3 binomial SE below 95%; the reports warn "
      "under 50 windows)")

print(f"{failures} failure(s)")
sys.exit(1 if failures else 0)
