#!/usr/bin/python3
"""Checks the repository's references to its own documents (part of `make test`):
every .md file named in a source file, script or document exists in the repository, and every
"<file>.md, section 'Name'" (or "sections 'A' to 'B'") names headings that file has; in a .md
file, "section 'Name'" without a file name refers to its own headings.

    doc/check_refs.py [ROOT]      ROOT: the repository (default: the current directory)

A name resolves relative to the repository root or to the directory of the file that names it.
Web addresses are not checked. Before the repository, the check runs on a small tree with one
dangling name and one missing section and must report both, so that it cannot pass by finding
nothing. Exit status 0 when every reference resolves, 1 otherwise.
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


def resolve(root, citing, name):
    for base in (root, os.path.join(root, os.path.dirname(citing))):
        path = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(path) and os.path.realpath(path).startswith(os.path.realpath(root) + os.sep):
            return path
    return None


def check_sections(problems, where, target, target_name, quoted):
    have = headings(target)
    for section in re.findall(r"'([^']+)'", quoted):
        if section not in have:
            problems.append(f"{where}: {target_name} has no section '{section}'")


def check_file(root, rel, problems, counts):
    text = read_text(os.path.join(root, rel))
    if text is None:
        return
    for lineno, line in enumerate(text.splitlines(), 1):
        line = URL.sub("", line)
        where = f"{rel}:{lineno}"
        used = []  # spans of section lists that belong to a named file
        for m in MD_NAME.finditer(line):
            name = m.group(1)
            counts["refs"] += 1
            target = resolve(root, rel, name)
            if target is None:
                problems.append(f"{where}: names {name}, which is not in the repository")
                continue
            s = SECTIONS.match(line, m.end())
            if s:
                used.append(s.span())
                check_sections(problems, where, target, name, s.group(1))
        if rel.endswith(".md"):
            for s in OWN_SECTIONS.finditer(line):
                if not any(a <= s.start() < b for a, b in used):
                    check_sections(problems, where, os.path.join(root, rel), rel, s.group(1))


def check(root):
    problems, counts = [], {"refs": 0}
    files = repo_files(root)
    for rel in files:
        check_file(root, rel, problems, counts)
    return problems, counts["refs"], len(files)


def self_test():
    """The check must find a dangling name and a missing section in a tree made to have them.
    (The names below are written as NAME.{md} so that this file itself names no document.)"""
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "doc"))
        with open(os.path.join(tmp, "doc", "spec.{md}".format(md="md")), "w") as f:
            f.write("# Spec\n## Backward\nsee section 'Backward'\n")
        with open(os.path.join(tmp, "a.h"), "w") as f:
            f.write("// doc/spec.{md}, section 'Backward' and ../x/missing.{md}\n"
                    "// doc/spec.{md}, sections 'Backward' to 'Forward'; *.{md}; https://example.org/r.{md}\n"
                    .format(md="md"))
        problems, refs, _ = check(tmp)
    expected = ["a.h:1: names ../x/missing.{md}, which is not in the repository".format(md="md"),
                "a.h:2: doc/spec.{md} has no section 'Forward'".format(md="md")]
    if sorted(problems) != expected or refs != 3:
        print("check_refs self-test FAILED: expected", expected, "(3 references), got", problems, refs)
        return False
    return True


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    if not os.path.isfile(os.path.join(root, "Makefile")):
        print(f"[ERROR] check_refs: {root} is not the repository root (no Makefile there); "
              "run it from the root or pass the root as the first argument")
        return 1
    if not self_test():
        return 1
    problems, refs, files = check(root)
    for p in problems:
        print(p)
    print(f"document references: {refs} names of .md files in {files} files checked, {len(problems)} broken")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
