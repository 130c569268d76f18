#!/usr/bin/env python3
"""
Multiple-choice eval files (llm.c's format, scripts/mc_evalfile.py) for zero-shot evaluation:

    /usr/bin/python3 scripts/prepare_mc.py hellaswag    # -> data/mc/hellaswag_val.bin   (10,042 examples)
    /usr/bin/python3 scripts/prepare_mc.py arc_easy     # -> data/mc/arc_easy_test.bin   (2,376)
    /usr/bin/python3 scripts/prepare_mc.py piqa         # -> data/mc/piqa_val.bin        (1,838)
    /usr/bin/python3 scripts/prepare_mc.py sciq         # -> data/mc/sciq_test.bin       (1,000)
    /usr/bin/python3 scripts/prepare_mc.py kjv_cloze    # -> data/mc/kjv_cloze_val.bin   (no internet)
    /usr/bin/python3 scripts/prepare_mc.py kjv_cloze_test  # -> data/mc/kjv_cloze_test.bin (the test books)

The four public tasks are downloaded from their public JSON/JSONL releases (or read from --input,
a local copy) and rendered as lm-evaluation-harness renders them, on the split it scores
(ARC-Easy and SciQ: test; HellaSwag and PIQA: validation), except HellaSwag, which follows llm.c's
hellaswag.py (context = the "ctx" field) so that the file is byte for byte llm.c's:
    hellaswag  context ctx                                            completions " " + ending
    arc_easy   context "Question: <question>\\nAnswer:"               completions " " + choice text
    piqa       context "Question: <goal>\\nAnswer:"                   completions " " + sol1, " " + sol2
    sciq       context "<support, left-stripped>\\nQuestion: <question>\\nAnswer:"
               completions " " + distractor1..3, " " + correct_answer (label 3)
kjv_cloze needs no internet: the verses of the King James Bible's validation books (Debian's
bible-kjv, the books scripts/prepare_kjv.sh holds out for validation: every 20th, Proverbs, Matthew,
1 Peter), for choosing settings; kjv_cloze_test the same of its test books (2 Samuel, Amos,
Philippians: the 10th of every 20), for the tables;
context = "chapter:verse" and the first half of the verse's words, completions = the true second
half and the second halves of three other verses of about the same length in tokens, in a
seeded random order; examples longer than --max-tokens (default 64, the demo's training length)
are dropped.

Tokens: GPT-2 BPE through build/tokenize (the trainer's tokenizer, byte-identical to GPT-2's
encoder), context and each completion encoded separately, as llm.c does. Standard library only.
"""
import argparse
import io
import json
import os
import random
import re
import subprocess
import sys
import urllib.request
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mc_evalfile import write_evalfile  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# the public releases (what --input can point to instead: the file named, or the zip)
SOURCES = {
    "hellaswag": ("https://raw.githubusercontent.com/rowanz/hellaswag/master/data/hellaswag_val.jsonl", None),
    "arc_easy": ("https://ai2-public-datasets.s3.amazonaws.com/arc/ARC-V1-Feb2018.zip", "ARC-Easy-Test.jsonl"),
    "piqa": ("https://yonatanbisk.com/piqa/data/valid.jsonl", None),
    "sciq": ("https://ai2-public-datasets.s3.amazonaws.com/sciq/SciQ.zip", "test.json"),
}
PIQA_LABELS_URL = "https://yonatanbisk.com/piqa/data/valid-labels.lst"
OUTPUT = {"hellaswag": "hellaswag_val", "arc_easy": "arc_easy_test", "piqa": "piqa_val", "sciq": "sciq_test",
          "kjv_cloze": "kjv_cloze_val", "kjv_cloze_test": "kjv_cloze_test"}


# ----------------------------------------------------------------------------
# rendering: each task's records -> (context text, [completion texts], label)

def render_hellaswag(rec):
    return rec["ctx"], [" " + e for e in rec["endings"]], int(rec["label"])


def render_arc(rec):
    # the AI2 release nests the choices in "question"; the Hugging Face copy has them beside it
    q = rec["question"]
    if isinstance(q, dict):
        stem, texts, labels = q["stem"], [c["text"] for c in q["choices"]], [c["label"] for c in q["choices"]]
    else:
        stem, texts, labels = q, rec["choices"]["text"], rec["choices"]["label"]
    return "Question: " + stem + "\nAnswer:", [" " + t for t in texts], labels.index(rec["answerKey"])


def render_piqa(rec, label):
    return "Question: " + rec["goal"] + "\nAnswer:", [" " + rec["sol1"], " " + rec["sol2"]], int(label)


def render_sciq(rec):
    ctx = rec["support"].lstrip() + "\nQuestion: " + rec["question"] + "\nAnswer:"
    choices = [rec["distractor1"], rec["distractor2"], rec["distractor3"], rec["correct_answer"]]
    return ctx, [" " + c for c in choices], 3


def jsonl(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def records(task, text, piqa_labels=None):
    """The rendered examples of a task from its release file's text."""
    if task == "hellaswag":
        return [render_hellaswag(r) for r in jsonl(text)]
    if task == "arc_easy":
        return [render_arc(r) for r in jsonl(text)]
    if task == "piqa":
        recs = jsonl(text)
        if piqa_labels is None:  # the Hugging Face copy carries the label in each record
            piqa_labels = [r["label"] for r in recs]
        if len(piqa_labels) != len(recs):
            raise SystemExit(f"piqa: {len(recs)} records but {len(piqa_labels)} labels; give the labels file of the same split")
        return [render_piqa(r, l) for r, l in zip(recs, piqa_labels)]
    if task == "sciq":
        data = json.loads(text)
        return [render_sciq(r) for r in data]
    raise ValueError(task)


# ----------------------------------------------------------------------------
# kjv_cloze

VERSE = re.compile(r"^([1-3]?[A-Za-z]+)(\d+:\d+) (.*)$")


def kjv_books(bible_text):
    """[(book name, [(\"c:v\", text)])] in canonical order, parsed as scripts/prepare_kjv.sh does."""
    books = []
    for line in bible_text.splitlines():
        m = VERSE.match(line)
        if not m:
            continue
        if not books or books[-1][0] != m.group(1):
            books.append((m.group(1), []))
        books[-1][1].append((m.group(2), m.group(3)))
    return books


def kjv_cloze(verses, encode, max_tokens=64, seed=1337, pool=12):
    """Cloze examples from [("c:v", text)]: context "c:v" + the first half of the words, the true
    second half and three others of the closest token lengths (a random 3 of the `pool`
    nearest), in a random order. Verses of fewer than 8 words, examples longer than max_tokens
    and endings that repeat another's text are left out."""
    parts = []
    for ref, text in verses:
        words = text.split()
        if len(words) < 8:
            continue
        k = len(words) // 2
        parts.append((ref + " " + " ".join(words[:k]), " " + " ".join(words[k:])))
    toks = encode([p for pair in parts for p in pair])
    ctx_toks, end_toks = toks[0::2], toks[1::2]
    rng = random.Random(seed)
    by_len = sorted(range(len(parts)), key=lambda i: (len(end_toks[i]), i))
    rank = {i: r for r, i in enumerate(by_len)}
    out = []
    for i, (ctx, end) in enumerate(parts):
        r = rank[i]
        near = [j for j in by_len[max(0, r - pool):r + pool + 1] if parts[j][1] != end]
        near.sort(key=lambda j: (abs(len(end_toks[j]) - len(end_toks[i])), j))
        cands = []
        for j in near:
            if parts[j][1] not in [parts[c][1] for c in cands]:
                cands.append(j)
        cands = rng.sample(cands[:pool], 3)
        label = rng.randrange(4)
        endings = [end_toks[j] for j in cands]
        endings.insert(label, end_toks[i])
        if len(ctx_toks[i]) + max(len(e) for e in endings) > max_tokens:
            continue
        out.append({"label": label, "ctx_tokens": ctx_toks[i], "ending_tokens": endings})
    return out


# ----------------------------------------------------------------------------
# tokens, download, main

def make_encoder(tokenize):
    def encode(texts):
        """GPT-2 token ids of each text, through build/tokenize (one call for all)."""
        if not texts:
            return []
        if any("\0" in t for t in texts):
            raise SystemExit("a text holds a NUL byte, which separates texts for build/tokenize")
        if not os.access(tokenize, os.X_OK):
            raise SystemExit(f"{tokenize} is missing: build it with `make build/tokenize` (or pass --tokenize)")
        res = subprocess.run([tokenize, "encode", "--sep", "\\0"], input="\0".join(texts).encode("utf-8"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if res.returncode != 0:
            raise SystemExit(f"{tokenize} encode failed: {res.stderr.decode(errors='replace').strip()}")
        lines = res.stdout.decode().split("\n")[:-1]
        if len(lines) != len(texts):
            raise SystemExit(f"{tokenize} returned {len(lines)} token lists for {len(texts)} texts")
        return [[int(t) for t in line.split()] for line in lines]
    return encode


def tokenize_records(recs, encode):
    texts = []
    for ctx, comps, _ in recs:
        texts.append(ctx)
        texts.extend(comps)
    toks = encode(texts)
    out, at = [], 0
    for ctx, comps, label in recs:
        out.append({"label": label, "ctx_tokens": toks[at], "ending_tokens": toks[at + 1:at + 1 + len(comps)]})
        at += 1 + len(comps)
    return out


def fetch(url, cache_dir):
    os.makedirs(cache_dir, exist_ok=True)
    path = os.path.join(cache_dir, os.path.basename(url))
    if not os.path.exists(path):
        print(f"downloading {url} -> {path}")
        try:
            with urllib.request.urlopen(url, timeout=120) as r, open(path + ".tmp", "wb") as f:
                f.write(r.read())
        except OSError as e:
            raise SystemExit(f"cannot download {url} ({e}); on a machine without internet, fetch it elsewhere and pass --input")
        os.replace(path + ".tmp", path)
    return path


def read_source(path, member):
    """The text of a release file, or of the zip member whose name ends with `member`."""
    if path.endswith(".zip"):
        with zipfile.ZipFile(path) as z:
            names = [n for n in z.namelist() if n.endswith(member) and not os.path.basename(n).startswith(".")]
            if not names:
                raise SystemExit(f"{path}: no member ending in {member}")
            return z.read(sorted(names, key=len)[0]).decode("utf-8")
    with io.open(path, encoding="utf-8") as f:
        return f.read()


def task_examples(task, args, encode):
    if task in ("kjv_cloze", "kjv_cloze_test"):
        res = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], stdout=subprocess.PIPE)
        if res.returncode != 0:
            raise SystemExit("the 'bible' program failed; install Debian's bible-kjv (scripts/install_deps.sh does)")
        books = kjv_books(res.stdout.decode("utf-8", errors="replace"))
        if len(books) != 66:
            raise SystemExit(f"found {len(books)} books in the output of 'bible', expected 66")
        # scripts/prepare_kjv.sh's split of 20 (build/tokenize's split_of): book n is validation
        # where n % 20 == 19, test where n % 20 == 9
        held = 19 if task == "kjv_cloze" else 9
        verses = [v for n, (_, vs) in enumerate(books) if n % 20 == held for v in vs]
        return kjv_cloze(verses, encode, args.max_tokens or 64, args.seed)
    url, member = SOURCES[task]
    path = args.input or fetch(url, os.path.join(ROOT, "data", "mc", "raw"))
    labels = None
    if task == "piqa":
        lpath = args.labels
        if lpath is None and args.input is None:
            lpath = fetch(PIQA_LABELS_URL, os.path.join(ROOT, "data", "mc", "raw"))
        if lpath is None and args.input and args.input.endswith(".jsonl"):
            guess = args.input[:-len(".jsonl")] + "-labels.lst"
            lpath = guess if os.path.exists(guess) else None
        if lpath:
            labels = [int(x) for x in read_source(lpath, None).split()]
    recs = records(task, read_source(path, member), labels)
    return tokenize_records(recs, encode)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("task", choices=sorted(OUTPUT))
    ap.add_argument("--input", help="a local copy of the release file (.jsonl/.json or the .zip) instead of downloading")
    ap.add_argument("--labels", help="piqa: the labels file (default: beside --input, or downloaded)")
    ap.add_argument("--out", help="output file (default data/mc/<task>_<split>.bin)")
    ap.add_argument("--max-tokens", type=int, default=0,
                    help="drop examples whose context + longest completion exceed this many tokens "
                         "(default: keep all; kjv_cloze: 64)")
    ap.add_argument("--seed", type=int, default=1337, help="kjv_cloze: the distractors and the order")
    ap.add_argument("--tokenize", default=os.path.join(ROOT, "build", "tokenize"), help="the tokenizer program")
    args = ap.parse_args()
    encode = make_encoder(args.tokenize)
    examples = task_examples(args.task, args, encode)
    if args.max_tokens > 0 and not args.task.startswith("kjv_cloze"):
        n = len(examples)
        examples = [e for e in examples if len(e["ctx_tokens"]) + max(map(len, e["ending_tokens"])) <= args.max_tokens]
        print(f"dropped {n - len(examples)} of {n} examples longer than {args.max_tokens} tokens")
    if not examples:
        raise SystemExit(f"{args.task}: no example left to write (check --input and --max-tokens)")
    out = args.out or os.path.join(ROOT, "data", "mc", OUTPUT[args.task] + ".bin")
    nbytes = write_evalfile(out, examples)
    chance = sum(1 / len(e["ending_tokens"]) for e in examples) / len(examples)
    longest = max(len(e["ctx_tokens"]) + max(map(len, e["ending_tokens"])) for e in examples)
    print(f"wrote {out}: {len(examples)} examples, {nbytes} bytes, longest row {longest} tokens, chance {chance:.4f}")


if __name__ == "__main__":
    main()
