#!/usr/bin/python3
"""Checks the repository's references to its own files (part of `make test`):

- every repository path named in a source file, script or document exists (a file or a directory);
- every .md file named exists, and every "<file>.md, section 'Name'" (or "sections 'A' to 'B'")
  names headings that file has; in a .md file, "section 'Name'" without a file name refers to its
  own headings.

    doc/check_refs.py [--no-self-test] [ROOT]   ROOT: the repository (default: the current directory)

The files scanned are those git lists (tracked, and untracked but not ignored), text only (a file
with a NUL byte is skipped). A token is a run of characters other than space, quotes, backticks,
commas and semicolons, with brackets and end punctuation stripped and a ":<line>" suffix dropped.
It is a repository path when it contains a '/' and
- its first component (after a leading ./, dropped: commands here run from the root) is a
  top-level directory of the repository (attention/, layers/, model/, test/, ...) or a directory
  beside the file that names it, or
- it begins with ../ and leads into a top-level directory from the file's directory (../simt.h in
  simt/include/).
It resolves relative to the root or to the directory of the file that names it. Not checked:
- web addresses;
- absolute paths (/usr/..., /tmp/...) and ~/...: outside the repository;
- paths git ignores (build/, out/, data/, third_party/, the trainers): written at run time;
- tokens with < > { } [ ] ( ) * ? $ % = | or \ in them: placeholders (layers/<layer>.cuh),
  globs (layers/*.cuh), variables ($(BUILD)/x, $OUT/x) and format strings ("out/%s.csv");
- in a Makefile or .mk file, everything but comments: make names targets there as well as files
  (the dev/ binaries of scripts/scripts.mk), and a missing prerequisite stops the build anyway.
Any other a/b is not a repository path by this rule (a placeholder such as OUT_DIR/config.json, a
system header such as hwy/highway.h); so a path of another project is written with that project's
name first (llm.c/dev/data/fineweb.py), never as a bare path that would be read as one of ours.

Output: one line per broken reference, "file:line: 'path' does not exist" (or "file:line:
<file>.md has no section 'Name'"). Before the repository, the check runs on a small tree with a
dangling path, a dangling .md name and a missing section, and exits 1 unless it reports exactly
those, so that it cannot pass by finding nothing. Exit status 0 when every reference resolves,
1 otherwise.
"""
import os
import re
import subprocess
import sys
import tempfile

SKIP_DIRS = {".git", "build", "third_party", "data", "out", "node_modules"}
URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
MD_NAME = re.compile(r"(?<![A-Za-z0-9_./-])([A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md)(?![A-Za-z0-9_])")
SECTIONS = re.compile(r",?\s*sections?\s+('[^']+'(?:\s*(?:,|and|to|or)\s*'[^']+')*)")
OWN_SECTIONS = re.compile(r"\bsections?\s+('[^']+'(?:\s*(?:,|and|to|or)\s*'[^']+')*)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
TOKEN_SPLIT = re.compile(r"[\s'\"`,;]+")
PLACEHOLDER = re.compile(r"[<>{}\[\]()*?$%=|\\]")
LINE_SUFFIX = re.compile(r":\d.*$")


def repo_files(root):
    """Paths (relative to root) of the files to scan: git's view where root is a checkout."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True).stdout
        files = [f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS]
            files += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return sorted(f for f in files if f.split("/")[0] not in SKIP_DIRS and os.path.isfile(os.path.join(root, f)))


def read_text(path):
    with open(path, "rb") as f:
        data = f.read()
    return None if b"\0" in data else data.decode("utf-8", errors="replace")


def headings(path):
    text = read_text(path) or ""
    return {m.group(1) for m in map(HEADING.match, text.splitlines()) if m}


def inside(root, path):
    return os.path.realpath(path).startswith(os.path.realpath(root) + os.sep) or \
        os.path.realpath(path) == os.path.realpath(root)


def resolve(root, citing, name, dirs_too=False):
    for base in (root, os.path.join(root, os.path.dirname(citing))):
        path = os.path.normpath(os.path.join(base, name))
        if (os.path.isfile(path) or (dirs_too and os.path.isdir(path))) and inside(root, path):
            return path
    return None


def ignored(root, citing, name):
    """Whether git ignores the path (relative to the root or to the citing file's directory)."""
    for base in (root, os.path.join(root, os.path.dirname(citing))):
        path = os.path.normpath(os.path.join(base, name))
        if not inside(root, path):
            continue
        try:
            r = subprocess.run(["git", "-C", root, "check-ignore", "-q", os.path.relpath(path, root)],
                               capture_output=True)
        except OSError:
            return False
        if r.returncode == 0:
            return True
    return False


def path_tokens(text, citing, top_dirs, near_dirs):
    """The repository paths a line of text names (see the header comment for the rule)."""
    for t in TOKEN_SPLIT.split(text):
        t = LINE_SUFFIX.sub("", t.lstrip("([{<").rstrip(")]}>.:!?"))
        if t.startswith("*") and t.endswith("*"):  # **bold** in Markdown
            t = t.strip("*")
        if "/" not in t or t.startswith(("/", "~")) or PLACEHOLDER.search(t) or t.endswith(".md"):
            continue
        if t.startswith("../"):
            norm = os.path.normpath(os.path.join(os.path.dirname(citing), t))
            if norm.split("/")[0] in top_dirs:
                yield t
            continue
        first = re.sub(r"^(\./)+", "", t).split("/")[0]
        if first in top_dirs or first in near_dirs:
            yield t


def check_sections(problems, where, target, target_name, quoted):
    have = headings(target)
    for section in re.findall(r"'([^']+)'", quoted):
        if section not in have:
            problems.append(f"{where}: {target_name} has no section '{section}'")


def check_file(root, rel, problems, counts, top_dirs, dirs_of):
    text = read_text(os.path.join(root, rel))
    if text is None:
        return
    make = os.path.basename(rel) == "Makefile" or rel.endswith(".mk")
    near_dirs = dirs_of.get(os.path.dirname(rel), set())
    for lineno, line in enumerate(text.splitlines(), 1):
        line = URL.sub("", line)
        where = f"{rel}:{lineno}"
        used = []  # spans of section lists that belong to a named file
        for m in MD_NAME.finditer(line):
            name = m.group(1)
            counts["md"] += 1
            target = resolve(root, rel, name)
            if target is None:
                problems.append(f"{where}: '{name}' does not exist")
                continue
            s = SECTIONS.match(line, m.end())
            if s:
                used.append(s.span())
                check_sections(problems, where, target, name, s.group(1))
        if rel.endswith(".md"):
            for s in OWN_SECTIONS.finditer(line):
                if not any(a <= s.start() < b for a, b in used):
                    check_sections(problems, where, os.path.join(root, rel), rel, s.group(1))
        if make and "#" not in line:
            continue
        scanned = line.split("#", 1)[1] if make else line
        seen = set()
        for name in path_tokens(scanned, rel, top_dirs, near_dirs):
            if name in seen:
                continue
            seen.add(name)
            counts["paths"] += 1
            if resolve(root, rel, name, dirs_too=True) is None and not ignored(root, rel, name):
                problems.append(f"{where}: '{name}' does not exist")


def check(root):
    problems, counts = [], {"md": 0, "paths": 0}
    files = repo_files(root)
    top_dirs = {f.split("/")[0] for f in files if "/" in f}
    dirs_of = {}  # directory -> the names of its subdirectories that hold scanned files
    for f in files:
        parts = f.split("/")[:-1]
        for i in range(len(parts)):
            dirs_of.setdefault("/".join(parts[:i]), set()).add(parts[i])
    for rel in files:
        check_file(root, rel, problems, counts, top_dirs, dirs_of)
    return problems, counts, len(files)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def self_test():
    """The check must find a dangling path, a dangling .md name and a missing section in a tree
    made to have them, and the script must exit 1 there. (The names below are written with
    {h} and {md} for their extensions so that this file itself names none of them.)"""
    with tempfile.TemporaryDirectory() as tmp:
        try:  # a checkout, so that .gitignore applies as in the repository
            subprocess.run(["git", "init", "-q", tmp], capture_output=True)
        except OSError:
            pass
        write(os.path.join(tmp, ".gitignore"), "/out/\nlayers/*.{o}\n".format(o="o"))
        write(os.path.join(tmp, "Makefile"), "# layers/x.{h} and layers/nope.{h}\nX := layers/notafile\n"
              .format(h="h"))
        write(os.path.join(tmp, "doc", "spec.{md}".format(md="md")), "# Spec\n## Backward\nsee section 'Backward'\n")
        write(os.path.join(tmp, "layers", "x.{h}".format(h="h")), "// ../doc/ and ../layers/gone.{h}\n"
              .format(h="h"))
        write(os.path.join(tmp, "a.{h}".format(h="h")),
              "// doc/spec.{md}, section 'Backward' and ../x/missing.{md}\n"
              "// doc/spec.{md}, sections 'Backward' to 'Forward'; *.{md}; https://example.org/r.{md}\n"
              "// layers/x.{h}:12 (`layers/`, ./layers/x.{h}) and **layers/gone.{h}**.\n"
              "// out/run/log.txt layers/x.{o} layers/<layer>.{h} layers/*.{h} $(BUILD)/layers/y.{h} /usr/include/z.{h}\n"
              "// OUT_DIR/config.json https://example.org/layers/q.{h} \"layers/%s.{h}\" llm.c/layers/w.{h} ./prog ../etc\n"
              .format(md="md", h="h", o="o"))
        problems, counts, _ = check(tmp)
        run = subprocess.run([sys.executable, os.path.abspath(__file__), "--no-self-test", tmp],
                             capture_output=True, text=True)
    expected = ["Makefile:1: 'layers/nope.{h}' does not exist",
                "a.{h}:1: '../x/missing.{md}' does not exist",
                "a.{h}:2: doc/spec.{md} has no section 'Forward'",
                "a.{h}:3: 'layers/gone.{h}' does not exist",
                "layers/x.{h}:1: '../layers/gone.{h}' does not exist"]
    expected = [e.format(md="md", h="h") for e in expected]
    want = {"md": 3, "paths": 9}
    if sorted(problems) != expected or counts != want:
        print("check_refs self-test FAILED: expected", expected, want, "got", sorted(problems), counts)
        return False
    if run.returncode != 1 or not all(e in run.stdout.splitlines() for e in expected):
        print("check_refs self-test FAILED: the script on the test tree exited", run.returncode,
              "(expected 1, with the lines", expected, "); it printed:\n" + run.stdout + run.stderr)
        return False
    return True


def main():
    args = sys.argv[1:]
    with_self_test = "--no-self-test" not in args
    args = [a for a in args if a != "--no-self-test"]
    root = os.path.abspath(args[0] if args else ".")
    if not os.path.isfile(os.path.join(root, "Makefile")):
        print(f"[ERROR] check_refs: {root} is not the repository root (no Makefile there); "
              "run it from the root or pass the root as the first argument")
        return 1
    if with_self_test and not self_test():
        return 1
    problems, counts, files = check(root)
    for p in problems:
        print(p)
    print(f"references: {counts['paths']} repository paths and {counts['md']} names of .md files "
          f"in {files} files checked, {len(problems)} broken")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
