"""
Unit tests of scripts/prepare_mc.py on hand-written records (no internet): each task's rendering
(context text, completion texts, label), the tokens through build/tokenize, the HellaSwag file
byte for byte as llm.c's writer makes it (rebuilt here with numpy the way its write_evalfile
does), the KJV cloze construction, and the command line on local copies (--input, a zip).
Run from the repository root: /usr/bin/python3 test/test_prepare_mc.py
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest
import zipfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import mc_evalfile  # noqa: E402
import prepare_mc  # noqa: E402

TOKENIZE = os.path.join(ROOT, "build", "tokenize")
encode = prepare_mc.make_encoder(TOKENIZE)

HELLASWAG = [
    {"ind": 24, "activity_label": "Roof shingle removal", "ctx_a": "A man is sitting on a roof.", "ctx_b": "he",
     "ctx": "A man is sitting on a roof. he", "split": "val", "split_type": "indomain", "label": 3,
     "endings": ["is using wrap to wrap a pair of skis.", "is ripping level tiles off.",
                 "is holding a rubik's cube.", "starts pulling up roofing on a roof."], "source_id": "x"},
    {"ind": 92, "activity_label": "Clean and jerk", "ctx_a": "A lady walks to a barbell.", "ctx_b": "she",
     "ctx": "A lady walks to a barbell. she", "split": "val", "split_type": "zeroshot", "label": 0,
     "endings": ["bends down and grabs the pole.", "swings and lands in her arms.",
                 "pulls a rope attached to the barbell.", "stands and lifts the weight over her head."],
     "source_id": "y"},
]


def llmc_style_file(datas):
    """The bytes llm.c's write_evalfile produces, rebuilt with numpy from its description:
    int32 header [magic, version, count, longest bytes, 0...], uint16 example streams."""
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240522, 1, len(datas)
    full, longest = [], 0
    for idx, d in enumerate(datas):
        s = [2 ** 16 - 1, 0, idx, d["label"], len(d["ending_tokens"]), len(d["ctx_tokens"])] + d["ctx_tokens"]
        for e in d["ending_tokens"]:
            s += [len(e)] + e
        s[1] = 2 * len(s)
        longest = max(longest, s[1])
        full += s
    header[3] = longest
    return header.tobytes() + np.array(full, dtype=np.uint16).tobytes()


class Tokens(unittest.TestCase):
    def test_known_gpt2_ids(self):
        # GPT-2's own ids for these strings
        self.assertEqual(encode(["Hello world", " Hello world", ""]), [[15496, 995], [18435, 995], []])

    def test_many_texts_keep_their_order(self):
        texts = [f" word{i}" for i in range(300)] + ["multi\nline text", "  two spaces"]
        ids = encode(texts)
        self.assertEqual(len(ids), len(texts))
        for t, i in zip(texts[-2:], ids[-2:]):
            self.assertEqual(i, encode([t])[0])


class Rendering(unittest.TestCase):
    def test_hellaswag_as_llmc(self):
        recs = prepare_mc.records("hellaswag", "\n".join(json.dumps(r) for r in HELLASWAG) + "\n")
        self.assertEqual(recs[0], ("A man is sitting on a roof. he",
                                   [" is using wrap to wrap a pair of skis.", " is ripping level tiles off.",
                                    " is holding a rubik's cube.", " starts pulling up roofing on a roof."], 3))
        self.assertEqual(recs[1][2], 0)

    def test_arc_easy_both_shapes(self):
        ai2 = {"id": "q1", "question": {"stem": "Which is a gas?", "choices": [
            {"text": "ice", "label": "A"}, {"text": "steam", "label": "B"}, {"text": "rock", "label": "C"}]},
            "answerKey": "B"}
        numeric = {"id": "q2", "question": {"stem": "2+2?", "choices": [
            {"text": "3", "label": "1"}, {"text": "4", "label": "2"}, {"text": "5", "label": "3"},
            {"text": "6", "label": "4"}, {"text": "7", "label": "5"}]}, "answerKey": "2"}
        hf = {"id": "q3", "question": "Which is a metal?", "choices": {"text": ["iron", "wood"], "label": ["A", "B"]},
              "answerKey": "A"}
        recs = prepare_mc.records("arc_easy", "\n".join(json.dumps(r) for r in (ai2, numeric, hf)))
        self.assertEqual(recs[0], ("Question: Which is a gas?\nAnswer:", [" ice", " steam", " rock"], 1))
        self.assertEqual(recs[1], ("Question: 2+2?\nAnswer:", [" 3", " 4", " 5", " 6", " 7"], 1))
        self.assertEqual(recs[2], ("Question: Which is a metal?\nAnswer:", [" iron", " wood"], 0))

    def test_piqa_labels_file_and_inline(self):
        lines = "\n".join(json.dumps({"id": str(i), "goal": g, "sol1": a, "sol2": b}) for i, (g, a, b) in enumerate(
            [("Open a jar.", "Twist the lid.", "Hit the lid."), ("Dry hair.", "Use a towel.", "Use a pan.")]))
        recs = prepare_mc.records("piqa", lines, [0, 1])
        self.assertEqual(recs[0], ("Question: Open a jar.\nAnswer:", [" Twist the lid.", " Hit the lid."], 0))
        self.assertEqual(recs[1][2], 1)
        inline = json.dumps({"goal": "g", "sol1": "a", "sol2": "b", "label": 1})
        self.assertEqual(prepare_mc.records("piqa", inline)[0][2], 1)
        with self.assertRaises(SystemExit):
            prepare_mc.records("piqa", lines, [0])

    def test_sciq_support_and_label(self):
        data = [{"question": "What gas do plants absorb?", "distractor1": "oxygen", "distractor2": "helium",
                 "distractor3": "neon", "correct_answer": "carbon dioxide", "support": "  Plants absorb CO2."},
                {"question": "Q?", "distractor1": "a", "distractor2": "b", "distractor3": "c",
                 "correct_answer": "d", "support": ""}]
        recs = prepare_mc.records("sciq", json.dumps(data))
        self.assertEqual(recs[0], ("Plants absorb CO2.\nQuestion: What gas do plants absorb?\nAnswer:",
                                   [" oxygen", " helium", " neon", " carbon dioxide"], 3))
        self.assertEqual(recs[1][0], "\nQuestion: Q?\nAnswer:")


class Files(unittest.TestCase):
    def test_hellaswag_file_is_llmc_bytes(self):
        recs = prepare_mc.records("hellaswag", "\n".join(json.dumps(r) for r in HELLASWAG))
        examples = prepare_mc.tokenize_records(recs, encode)
        # llm.c: ctx_tokens = enc.encode(ctx), ending tokens = enc.encode(" " + ending)
        for ex, r in zip(examples, HELLASWAG):
            self.assertEqual(ex["ctx_tokens"], encode([r["ctx"]])[0])
            self.assertEqual(ex["ending_tokens"], encode([" " + e for e in r["endings"]]))
        self.assertEqual(mc_evalfile.encode_evalfile(examples), llmc_style_file(examples))
        self.assertEqual(mc_evalfile.read_evalfile_bytes(mc_evalfile.encode_evalfile(examples)), examples)

    def test_writer_refuses(self):
        for bad in ({"label": 2, "ctx_tokens": [1], "ending_tokens": [[2], [3]]},
                    {"label": 0, "ctx_tokens": [], "ending_tokens": [[2], [3]]},
                    {"label": 0, "ctx_tokens": [1], "ending_tokens": [[2]]},
                    {"label": 0, "ctx_tokens": [65535], "ending_tokens": [[2], [3]]}):
            with self.assertRaises(ValueError):
                mc_evalfile.encode_evalfile([bad])

    def run_script(self, *args):
        res = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "prepare_mc.py")] + list(args),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.assertEqual(res.returncode, 0, res.stdout.decode())
        return res.stdout.decode()

    def test_command_line_on_local_copies(self):
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "hellaswag_val.jsonl")
            with open(src, "w") as f:
                f.write("\n".join(json.dumps(r) for r in HELLASWAG) + "\n")
            out = os.path.join(d, "hs.bin")
            self.assertIn("2 examples", self.run_script("hellaswag", "--input", src, "--out", out))
            examples = prepare_mc.tokenize_records(prepare_mc.records("hellaswag", prepare_mc.read_source(src, None)), encode)
            with open(out, "rb") as f:
                self.assertEqual(f.read(), llmc_style_file(examples))
            # ARC from the release zip; PIQA with its labels file beside the records
            z = os.path.join(d, "ARC-V1-Feb2018.zip")
            with zipfile.ZipFile(z, "w") as zf:
                zf.writestr("ARC-V1-Feb2018-2/ARC-Easy/ARC-Easy-Test.jsonl", json.dumps(
                    {"id": "q", "question": {"stem": "S", "choices": [{"text": "a", "label": "A"},
                                                                      {"text": "b", "label": "B"}]},
                     "answerKey": "B"}) + "\n")
                zf.writestr("ARC-V1-Feb2018-2/ARC-Easy/ARC-Easy-Dev.jsonl", "")
            self.assertIn("1 examples", self.run_script("arc_easy", "--input", z, "--out", os.path.join(d, "a.bin")))
            self.assertEqual(mc_evalfile.read_evalfile(os.path.join(d, "a.bin"))[0]["label"], 1)
            p = os.path.join(d, "valid.jsonl")
            with open(p, "w") as f:
                f.write(json.dumps({"goal": "g", "sol1": "a", "sol2": "b"}) + "\n")
            with open(os.path.join(d, "valid-labels.lst"), "w") as f:
                f.write("1\n")
            self.run_script("piqa", "--input", p, "--out", os.path.join(d, "p.bin"))
            self.assertEqual(mc_evalfile.read_evalfile(os.path.join(d, "p.bin"))[0]["label"], 1)
            # --max-tokens drops the longer examples
            longest = [len(e["ctx_tokens"]) + max(map(len, e["ending_tokens"])) for e in examples]
            self.assertNotEqual(longest[0], longest[1])
            msg = self.run_script("hellaswag", "--input", src, "--out", out, "--max-tokens", str(min(longest)))
            kept = [e for e, n in zip(examples, longest) if n <= min(longest)]
            self.assertIn(f"dropped {2 - len(kept)} of 2", msg)
            self.assertEqual(mc_evalfile.read_evalfile(out), kept)


class KjvCloze(unittest.TestCase):
    VERSES = [(f"1:{i}", " ".join(f"w{i}x{k}" for k in range(8 + i % 5))) for i in range(1, 41)]

    def test_construction(self):
        ex = prepare_mc.kjv_cloze(self.VERSES, encode, max_tokens=200, seed=5)
        self.assertEqual(len(ex), 40)
        texts = []
        for ref, text in self.VERSES:
            words = text.split()
            k = len(words) // 2
            texts += [ref + " " + " ".join(words[:k]), " " + " ".join(words[k:])]
        toks = encode(texts)
        for i, e in enumerate(ex):
            self.assertEqual(e["ctx_tokens"], toks[2 * i])
            self.assertEqual(e["ending_tokens"][e["label"]], toks[2 * i + 1])
            self.assertEqual(len(e["ending_tokens"]), 4)
            others = [t for j, t in enumerate(e["ending_tokens"]) if j != e["label"]]
            self.assertEqual(len({tuple(t) for t in e["ending_tokens"]}), 4)  # four different endings
            self.assertTrue(all(abs(len(t) - len(e["ending_tokens"][e["label"]])) <= 12 for t in others))
        self.assertEqual(ex, prepare_mc.kjv_cloze(self.VERSES, encode, max_tokens=200, seed=5))  # seeded
        self.assertNotEqual(ex, prepare_mc.kjv_cloze(self.VERSES, encode, max_tokens=200, seed=6))
        self.assertGreater(len({e["label"] for e in ex}), 2)

    def test_short_verses_and_long_examples_left_out(self):
        verses = self.VERSES + [("2:1", "too short a verse")]
        self.assertEqual(len(prepare_mc.kjv_cloze(verses, encode, max_tokens=200)), 40)
        short = prepare_mc.kjv_cloze(self.VERSES, encode, max_tokens=30)
        self.assertTrue(all(len(e["ctx_tokens"]) + max(map(len, e["ending_tokens"])) <= 30 for e in short))
        self.assertLess(len(short), 40)

    def test_books_parsed_as_prepare_kjv(self):
        text = "Gen1:1 In the beginning.\nGen1:2 And the earth.\nExo1:1 Now these.\n1Sa1:1 There was.\nnoise\n"
        books = prepare_mc.kjv_books(text)
        self.assertEqual([b for b, _ in books], ["Gen", "Exo", "1Sa"])
        self.assertEqual(books[0][1], [("1:1", "In the beginning."), ("1:2", "And the earth.")])


if __name__ == "__main__":
    unittest.main(verbosity=1)
