#!/usr/bin/env python3
"""
The manifest (build/manifest.json, tools/print_manifest.cpp) against the specification: every
variant's parts as doc/attention.md's table 'Variants' writes them, every variant of that table in
the manifest and the reverse; the parameter tensors' shapes against the model's element counts at
a GPT-2 124M config (12 x 768, vocabulary 50304: llm.c's 124,475,904 parameters less its learned
positions, which RoPE replaces); and
scripts/manifest.py's name filter and scripts/attn_flags.sh's p_flag against a direct reading. The PyTorch twins take their variants
from the manifest, so this is what ties them to the document.

    /usr/bin/python3 test/test_manifest.py      (make test runs it as build/test_manifest)
"""
import json
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # test/ here, build/ when make test runs it
sys.path.insert(0, os.path.join(REPO, "scripts"))
import manifest  # noqa: E402

failures = []


def check(ok, what):
    print(("ok      " if ok else "FAILED  ") + what)
    if not ok:
        failures.append(what)


def doc_variants():
    """{ATTN= name: (score, phi, norm, reweight)} of doc/attention.md's table under '### Variants'"""
    text = open(os.path.join(REPO, "doc/attention.md")).read()
    section = text[text.index("### Variants"):]
    rows = {}
    for line in section.splitlines()[1:]:
        if line.startswith("###"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 6 or not cells[0].startswith("`") or cells[0] == "`ATTN=`":
            continue
        name, score, phi, norm, rw = cells[0].strip("`"), cells[2], cells[3], cells[4], cells[5]
        # the document's words for the parts: "dot + b_t, b_t = -ln(N_t)" is the bias of dot_logn,
        # "scale c_t = 1" no normalisation, "scale c_t = 1/N_t" the mean
        score = "dot_logn" if score.startswith("dot + b_t") else score
        norm = {"scale c_t = 1": "none", "scale c_t = 1/N_t": "mean"}.get(norm, norm)
        rows[name] = (score, phi, norm, rw == "rw(p)")
    return rows


m = manifest.load()
variants = manifest.variants(m)
doc = doc_variants()
check(len(doc) > 0, f"doc/attention.md's table 'Variants' read: {len(doc)} rows")
for name, v in variants.items():
    if name not in doc:
        check(False, f"{name}: in the manifest, not in doc/attention.md's table 'Variants'")
        continue
    got = (v["score"], v["phi"], v["norm"], v["reweight"])
    check(got == doc[name], f"{name}: manifest {got}, doc/attention.md {doc[name]}")
for name in doc:
    check(name in variants, f"{name}: in doc/attention.md's table, in the manifest")
check([v["kind"] for v in m["variants"]] == list(range(len(m["variants"]))), "variant kinds are 0, 1, ... in order")
for v in m["variants"]:
    want = "p" if v["reweight"] else "s" if v["score"] == "ssmax" else "none"
    check(v["head_param"] == want, f"{v['name']}: head parameter {v['head_param']} (re-weighting: p, ssmax: s)")
    check(v["reweight"] or v["test_p"] == 1, f"{v['name']}: test p {v['test_p']} (1 without re-weighting)")

# GPT-2 124M: 12 layers, 12 heads, 768 channels, vocabulary 50304 (llm.c's padded count)
L, NH, C, Vp = 12, 12, 768, 50304
total = 0
for t in m["params"]:
    shape = manifest.dims(t["shape"], C=C, Vp=Vp, NH=NH, NHP=0, NHS=0)
    n = 1
    for d in shape:
        n *= d
    total += n * (L if t["per_layer"] else 1)
# llm.c's GPT-2 124M has 124,475,904 with its learned positions wpe (1024 x 768); RoPE has none
check(total == 124475904 - 1024 * 768, f"GPT-2 124M from the manifest's shapes: {total} parameters "
      "(llm.c's 124475904 less wpe's 1024 x 768)")
check(sum(1 for t in m["params"] if t["decays"]) == 5, "five tensors decay (wte and the four matrices)")

# the shell scripts' filter against a direct reading
for query, want in [(["reweight=true"], [n for n, v in variants.items() if v["reweight"]]),
                    (["has_len=true", "log_len_scaling=false"],
                     [n for n, v in variants.items() if v["has_len"] and not v["log_len_scaling"]])]:
    out = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "manifest.py"), "names"] + query,
                         stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout.split()
    check(out == want, f"manifest.py names {' '.join(query)}: {out}")
# scripts/attn_flags.sh reads the same file with grep and sed (one variant per line): its p_flag
# gives -p to exactly the variants with re-weighting
script = "source scripts/attn_flags.sh; for v in " + " ".join(variants) + "; do echo \"$v:$(p_flag $v 3)\"; done"
flags = subprocess.run(["bash", "-c", script], cwd=REPO, stdout=subprocess.PIPE, universal_newlines=True,
                       check=True).stdout.split("\n")
want = [f"{n}:{'-p 3' if v['reweight'] else ''}" for n, v in variants.items()]
check(flags[:len(want)] == want, f"attn_flags.sh's p_flag: {flags[:len(want)]}")
bad = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "manifest.py"), "names", "nokey=1"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
check(bad.returncode == 2 and "not a key" in bad.stderr, "manifest.py names refuses an unknown key")

print(f"{len(failures)} failed" if failures else "the manifest agrees with doc/attention.md and the model's sizes")
sys.exit(1 if failures else 0)
