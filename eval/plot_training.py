"""
Training curves of one or more runs of train_gpt2 (their -o DIR/log.jsonl) in one PNG: train and
validation loss against the step and against the tokens seen, several runs overlaid with their
labels, and the learning rate in a panel of its own. Prints a summary line per run.

    /usr/bin/python3 eval/plot_training.py softmax=out/demo/softmax/log.jsonl \
        "lssar p=15"=out/demo/lssar/log.jsonl -o out/demo/training_curves.png

A log is one run: a first record {"step":0,"world_size":W[,"tokens_per_step":N,...]}, then step
records {"step":s,"loss":...,"lr":...} with s rising and {"step":s,"val_loss":...}. A log with no
step record, or with the records of several runs (a second step-0 header, steps going back), is
refused naming the file. Tokens per step come from the header (trainers that wrote none:
--tokens-per-step).
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def fail(msg):
    sys.exit(f"error: {msg}")


def read_log(path, tokens_per_step):
    """{'steps': [(step, loss, lr)], 'val': [(step, val_loss)], 'tokens_per_step': N or None}."""
    try:
        with open(path) as f:
            lines = f.readlines()
    except OSError as e:
        fail(f"{path}: cannot read ({e.strerror}); give LABEL=DIR/log.jsonl of a train_gpt2 run")
    run = {"steps": [], "val": [], "tokens_per_step": None}
    headers = 0
    last_step = 0
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            step = int(rec["step"])
        except (ValueError, KeyError, TypeError):
            fail(f"{path}:{n}: not a log.jsonl record of train_gpt2 (a JSON object with \"step\"): {line.strip()[:80]}")
        if "world_size" in rec:
            headers += 1
            if headers > 1:
                fail(f"{path}:{n}: a second run starts here (another step-0 header): this file mixes runs; "
                     "give each run's own log.jsonl")
            run["tokens_per_step"] = rec.get("tokens_per_step")
        elif "loss" in rec:
            if step <= last_step:
                fail(f"{path}:{n}: step {step} after step {last_step}: this file mixes runs (or was appended to); "
                     "give each run's own log.jsonl")
            last_step = step
            run["steps"].append((step, rec["loss"], rec.get("lr")))
        elif "val_loss" in rec:
            if run["val"] and step <= run["val"][-1][0]:
                fail(f"{path}:{n}: validation at step {step} after step {run['val'][-1][0]}: this file mixes runs; "
                     "give each run's own log.jsonl")
            run["val"].append((step, rec["val_loss"]))
    if not run["steps"]:
        fail(f"{path}: no training steps (no record with \"loss\"): nothing to plot")
    if run["tokens_per_step"] is None:
        run["tokens_per_step"] = tokens_per_step
    if not run["tokens_per_step"]:
        fail(f"{path}: the log does not say how many tokens a step has (its trainer wrote no tokens_per_step): "
             "pass --tokens-per-step N (the trainer's B x T x accumulation x ranks)")
    return run


def parse_runs(specs, tokens_per_step):
    runs = []
    for spec in specs:
        label, sep, path = spec.rpartition("=")
        if not sep:
            fail(f"'{spec}': give each run as LABEL=LOG, e.g. lssar=out/demo/lssar/log.jsonl")
        runs.append((label, path, read_log(path, tokens_per_step)))
    return runs


def summary(label, run):
    """One line: steps, tokens, train loss over the last 10% of steps, first and last validation loss."""
    steps = run["steps"]
    tail = [loss for _, loss, _ in steps[-max(1, len(steps) // 10):] if loss is not None]
    train = sum(tail) / len(tail) if tail else float("nan")
    val = [v for _, v in run["val"] if v is not None]
    last = steps[-1][0]
    line = (f"{label:>14}: {last:>6} steps, {last * run['tokens_per_step']:>11,} tokens, "
            f"train loss {train:.4f} (mean of the last {len(tail)} steps)")
    if val:
        line += f", val loss {val[0]:.4f} -> {val[-1]:.4f} (best {min(val):.4f})"
    return line


def plot(runs, title, out):
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    loss_step, loss_tokens, lr_ax = axes
    for i, (label, _, run) in enumerate(runs):
        color = f"C{i}"
        tps = run["tokens_per_step"]
        s = [r[0] for r in run["steps"]]
        loss = [r[1] for r in run["steps"]]
        vs = [v[0] for v in run["val"]]
        vl = [v[1] for v in run["val"]]
        for ax, scale in ((loss_step, 1), (loss_tokens, tps)):
            ax.plot([x * scale for x in s], loss, color=color, alpha=0.35, linewidth=0.8)
            if vs:
                ax.plot([x * scale for x in vs], vl, color=color, marker="o", markersize=3,
                        label=f"{label} (val)")
        lr_ax.plot(s, [r[2] for r in run["steps"]], color=color, label=label)
    for ax, xlabel in ((loss_step, "step"), (loss_tokens, "tokens")):
        ax.set_xlabel(xlabel)
        ax.set_ylabel("loss (faint: train, markers: validation)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    lr_ax.set_xlabel("step")
    lr_ax.set_ylabel("learning rate")
    lr_ax.grid(True, alpha=0.3)
    lr_ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="LABEL=LOG, one per run (LOG: a train_gpt2 -o DIR/log.jsonl)")
    ap.add_argument("-o", "--out", required=True, help="PNG to write")
    ap.add_argument("--title", default="Training curves")
    ap.add_argument("--tokens-per-step", type=int, default=0,
                    help="tokens per step for logs whose header does not say it")
    args = ap.parse_args()
    runs = parse_runs(args.runs, args.tokens_per_step)
    for label, _, run in runs:
        print(summary(label, run))
    plot(runs, args.title, args.out)


if __name__ == "__main__":
    main()
