"""
eval/plot_training.py on small synthetic logs in train_gpt2's log.jsonl format: two runs overlaid
in one PNG (a real PNG of the expected size), the summary numbers equal to those computed here
from the records, tokens from the header or --tokens-per-step; refusals that name the file: a log
with no steps, two runs in one file (a second header, steps going back), a log that is not JSON,
one that does not say its tokens per step.
Run by `make test` (build/test_plot_training); exits 1 on the first failure.
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "eval", "plot_training.py")
failures = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures += 1


def write_log(path, records):
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def run_log(steps, tokens_per_step, lr0, loss0, header=True):
    """A log of `steps` steps: loss falling as loss0 / sqrt(step), validation every 10 steps."""
    recs = []
    if header:
        recs.append({"step": 0, "world_size": 1, "tokens_per_step": tokens_per_step, "B": 4, "T": 64})
    recs.append({"step": 0, "val_loss": loss0 + 1.0})
    for s in range(1, steps + 1):
        recs.append({"step": s, "loss": loss0 / s ** 0.5, "grad_norm": 1.0, "lr": lr0 * (1 - s / (steps + 1)),
                     "ms": 10.0, "tokens_per_s": 1000.0})
        if s % 10 == 0:
            recs.append({"step": s, "val_loss": loss0 / s ** 0.5 + 0.1})
    return recs


def tool(*args):
    p = subprocess.run(["/usr/bin/python3", TOOL, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return struct.unpack(">II", head[16:24])


def main():
    with tempfile.TemporaryDirectory(prefix="plot_training_") as d:
        a, b = os.path.join(d, "a.jsonl"), os.path.join(d, "b.jsonl")
        write_log(a, run_log(40, 1024, 2e-3, 6.0))
        write_log(b, run_log(30, 2048, 1e-3, 5.0))
        png = os.path.join(d, "curves.png")
        rc, out = tool(f"softmax={a}", f"lssar p=15={b}", "-o", png, "--title", "synthetic")
        check(rc == 0, f"two runs plotted (exit {rc}): {out.strip()}")
        size = png_size(png) if os.path.exists(png) else None
        check(size is not None and size[0] > 1000 and size[1] > 300, f"a PNG of three panels was written ({size})")
        # the summary, recomputed here: last 10% of steps' mean train loss, first/last/best val loss
        tail_a = [6.0 / s ** 0.5 for s in range(37, 41)]
        line_a = next((ln for ln in out.splitlines() if ln.strip().startswith("softmax:")), "")
        check("40 steps" in line_a and "40,960 tokens" in line_a, f"steps and tokens of run a: {line_a}")
        m = re.search(r"train loss ([0-9.]+)", line_a)
        check(m is not None and abs(float(m.group(1)) - sum(tail_a) / 4) < 5e-5, "run a's train loss: mean of its last 4 steps")
        m = re.search(r"val loss ([0-9.]+) -> ([0-9.]+) \(best ([0-9.]+)\)", line_a)
        want_last = 6.0 / 40 ** 0.5 + 0.1
        check(m is not None and abs(float(m.group(1)) - 7.0) < 5e-5 and abs(float(m.group(2)) - want_last) < 5e-5
              and abs(float(m.group(3)) - want_last) < 5e-5, "run a's validation: first, last, best")
        line_b = next((ln for ln in out.splitlines() if "lssar p=15:" in ln), "")
        check("30 steps" in line_b and "61,440 tokens" in line_b, f"run b's tokens from its own header: {line_b}")

        # a log from a trainer that wrote no tokens_per_step: refused, then accepted with the flag
        old = os.path.join(d, "old.jsonl")
        write_log(old, [{"step": 0, "world_size": 1}] + run_log(20, 0, 1e-3, 5.0, header=False))
        rc, out = tool(f"old={old}", "-o", png)
        check(rc != 0 and old in out and "--tokens-per-step" in out, f"no tokens per step: refused naming it: {out.strip()}")
        rc, out = tool(f"old={old}", "-o", png, "--tokens-per-step", "512")
        check(rc == 0 and "10,240 tokens" in out, f"--tokens-per-step 512: {out.strip().splitlines()[0] if out else ''}")

        # refusals naming the file
        empty = os.path.join(d, "nosteps.jsonl")
        write_log(empty, [{"step": 0, "world_size": 1, "tokens_per_step": 64}, {"step": 0, "val_loss": 10.0}])
        rc, out = tool(f"x={empty}", "-o", png)
        check(rc != 0 and f"{empty}: no training steps" in out, f"a log with no steps: {out.strip()}")
        mixed = os.path.join(d, "mixed.jsonl")
        write_log(mixed, run_log(20, 64, 1e-3, 5.0) + run_log(20, 64, 1e-3, 5.0))
        rc, out = tool(f"x={mixed}", "-o", png)
        check(rc != 0 and f"{mixed}:" in out and "mixes runs" in out, f"two runs in one log: {out.strip()}")
        back = os.path.join(d, "back.jsonl")
        write_log(back, run_log(20, 64, 1e-3, 5.0) + [{"step": 5, "loss": 3.0, "lr": 1e-3}])
        rc, out = tool(f"x={back}", "-o", png)
        check(rc != 0 and f"{back}:" in out and "step 5 after step 20" in out, f"steps going back: {out.strip()}")
        junk = os.path.join(d, "junk.jsonl")
        with open(junk, "w") as f:
            f.write("step,loss\n1,2.0\n")
        rc, out = tool(f"x={junk}", "-o", png)
        check(rc != 0 and f"{junk}:1:" in out, f"not a log: {out.strip()}")
        rc, out = tool(a, "-o", png)
        check(rc != 0 and "LABEL=LOG" in out, f"a run without a label: {out.strip()}")
    print(f"{failures} failed" if failures else "all passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
