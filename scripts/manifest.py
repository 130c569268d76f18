#!/usr/bin/env python3
"""
The project's manifest: the attention variants, the parameter tensors and the activations, as the
C++ headers define them (attention/attention_kind.h's ATTN_VARIANTS, model/gpt2_config.h's
GPT2_PARAM_TENSORS, model/gpt2_sizes.h's GPT2_ACTIVATIONS), printed by tools/print_manifest.cpp
into build/manifest.json. The Python and shell scripts read it here instead of keeping copies.

    import manifest; m = manifest.load()        # the dict; make brings build/manifest.json up to date
    LSSAR_MANIFEST=FILE                          # read FILE instead (a build with other variants)

    /usr/bin/python3 scripts/manifest.py names [KEY=VALUE ...]
        the variants' names, one per line, those whose entries hold every KEY=VALUE given
        (e.g. reweight=true, head_param=s, has_len=true log_len_scaling=false): for the shell scripts
    /usr/bin/python3 scripts/manifest.py path    the file load() reads
"""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMAT = "lssar.cu manifest 1"


def path():
    return os.environ.get("LSSAR_MANIFEST") or os.path.join(REPO, "build", "manifest.json")


def load():
    """The manifest as a dict (keys: constants, shape_vars, variants, params, activations)."""
    file = path()
    if not os.environ.get("LSSAR_MANIFEST"):
        # make's own dependency check: a no-op when the file is newer than the headers it prints
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
        run = subprocess.run(["make", "-s", "-C", REPO, "build/manifest.json"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        if run.returncode != 0:
            sys.exit(f"error: `make build/manifest.json` in {REPO} failed:\n{run.stdout}")
    try:
        with open(file) as f:
            m = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"error: {file}: {e} (`make build/manifest.json` writes it)")
    if m.get("format") != FORMAT:
        sys.exit(f"error: {file}: format {m.get('format')!r}, expected {FORMAT!r}; rebuild it with "
                 "`make build/manifest.json`")
    return m


def variants(m):
    """{name: the variant's entry}, in AttnKind order"""
    return {v["name"]: v for v in m["variants"]}


def dims(shape, **values):
    """A shape's dimensions as integers: each expression of the manifest (e.g. "3 * C") evaluated
    with the shape variables given (C=..., NH=...)."""
    return tuple(int(eval(d, {"__builtins__": {}}, values)) for d in shape)


def main(argv):
    if len(argv) >= 1 and argv[0] == "path":
        print(path())
        return 0
    if len(argv) < 1 or argv[0] != "names":
        print(__doc__.strip(), file=sys.stderr)
        return 2
    want = {}
    for a in argv[1:]:
        key, eq, value = a.partition("=")
        if not eq:
            print(f"manifest.py names: {a!r}: give KEY=VALUE (e.g. reweight=true)", file=sys.stderr)
            return 2
        want[key] = value
    variants = load()["variants"]
    unknown = [k for k in want if k not in variants[0]]
    if unknown:
        print(f"manifest.py names: {', '.join(unknown)}: not a key of the variants' entries "
              f"({', '.join(variants[0])})", file=sys.stderr)
        return 2
    text = lambda x: json.dumps(x).strip('"')  # true, false, 3, dot
    for v in variants:
        if all(text(v[k]) == x for k, x in want.items()):
            print(v["name"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
