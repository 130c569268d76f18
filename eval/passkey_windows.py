"""
Passkey retrieval on the training mix's own windows: for the first N prompts of a passkey mix
(build/passkey_mix's PREFIX_train_000000.bin and PREFIX_needles.csv), does a checkpoint reproduce
the key after the question, in the format it was trained on (corpus filler, one or more prompts per
window)? Teacher-forced over the answer tokens, in float64 with the PyTorch reference model
(test/gpt2_torch.py), so it also checks the C++ back ends' evaluation from outside.

    /usr/bin/python3 eval/passkey_windows.py CKPT --mix data/passkey_mix/kjv_T128_f1.0_pm2_s1337 -t 128 -n 200

Prints: whole key right (every answer token the argmax), first key token right, mean answer NLL.
"""
import argparse
import csv
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test"))
import gpt2_torch  # noqa: E402

PERIOD = 13        # GPT-2's "." : the key in the needle " The pass key is 68231. Remember it. ..." ends there
OPENING = 4        # " The pass key is"
QUESTION = 10      # " What is the pass key? The pass key is"


def answer_span(window, needle_pos, question_pos):
    """(start, key tokens) of the answer after the question; the key is read from the needle."""
    key = []
    i = needle_pos + OPENING
    while i < len(window) and window[i] != PERIOD:
        key.append(int(window[i]))
        i += 1
    opening = list(window[needle_pos:needle_pos + OPENING])
    if i == len(window) or not key:
        sys.exit(f"needle at {needle_pos}: no key before the window's end: not a passkey mix window (check -t)")
    if list(window[question_pos + QUESTION - OPENING:question_pos + QUESTION]) != opening:
        sys.exit(f"question at {question_pos} does not end with the needle's opening: not a passkey mix window")
    return question_pos + QUESTION, key


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--mix", required=True, help="build/passkey_mix's -o PREFIX")
    ap.add_argument("-n", type=int, default=200, help="prompts to score (default 200)")
    ap.add_argument("-t", type=int, default=128, help="the mix's training length, its -t (default 128)")
    args = ap.parse_args()
    if args.n < 1:
        sys.exit(f"-n {args.n}: expected at least 1 prompt")
    shard, needles_csv = args.mix + "_train_000000.bin", args.mix + "_needles.csv"
    for path in (args.checkpoint, shard, needles_csv):
        if not os.path.isfile(path):
            sys.exit(f"{path}: no such file")
    cfg, flat = gpt2_torch.load_checkpoint(args.checkpoint)
    model = gpt2_torch.GPT(cfg).double()
    gpt2_torch.set_flat_params(model, flat)
    model.eval()
    tokens = np.fromfile(shard, dtype=np.uint16, offset=1024).astype(np.int64)
    rows = list(csv.DictReader(open(needles_csv)))[:args.n]
    T = args.t
    whole = first = 0
    nll = []
    cache = {}
    for r in rows:
        w = int(r["window"])
        if w not in cache:
            x = torch.tensor(tokens[w * T:(w + 1) * T + 1])
            with torch.no_grad():
                logits, _ = model(x[None, :T], x[None, 1:T + 1])
            cache = {w: (x, torch.log_softmax(logits[0, :, :cfg.vocab_size], -1))}
        x, logp = cache[w]
        start, key = answer_span(x.numpy(), int(r["needle_pos"]), int(r["question_pos"]))
        target = torch.tensor(key)
        pred = logp[start - 1:start - 1 + len(key)]
        whole += int(torch.equal(pred.argmax(-1), target))
        first += int(pred[0].argmax().item() == key[0])
        nll.append(-pred.gather(1, target[:, None]).mean().item())
    n = len(rows)
    print(f"{args.checkpoint}: {n} prompts of {args.mix}: whole key {whole}/{n} ({100.0 * whole / n:.1f}%), "
          f"first key token {first}/{n} ({100.0 * first / n:.1f}%), answer NLL {np.mean(nll):.3f}")


if __name__ == "__main__":
    main()
