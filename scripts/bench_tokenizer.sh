#!/usr/bin/env bash
# Encoder speed: the C++ GPT-2 encoder (1 thread, then all cores) and the JS reference
# (gpt-3-encoder under node) on the same text, in one run, and their ratio.
#   bash scripts/bench_tokenizer.sh [TEXT_FILE]      default: the KJV text (Debian's bible-kjv)
# The JS reference gets the text in pieces of about 4 KB cut after a newline: its encode()
# grows its output by copying, so whole megabytes at once would make it slower still.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s build/tokenize
bash scripts/install_gpt2_vocab.sh
file=${1:-}
if [ -z "$file" ]; then
    file=$(mktemp /tmp/kjv_XXXXXX.txt)
    trap 'rm -f "$file"' EXIT
    command -v bible >/dev/null || { echo "bench_tokenizer.sh: no text file given and no 'bible' (apt install bible-kjv)" >&2; exit 1; }
    bible -f gen1:1-rev22:21 >"$file"
fi
[ -r "$file" ] || { echo "bench_tokenizer.sh: $file: cannot read; pass a text file" >&2; exit 1; }
cpp=$(build/tokenize bench "$file" -j "$(nproc)")
js=$(node dataloader/tokenizer_ref.js bench "$file")
echo "$cpp"
echo "$js"
mbs() { sed -E 's/.*: ([0-9.]+) MB\/s$/\1/'; }
cpp1=$(echo "$cpp" | head -n 1 | mbs)
cppn=$(echo "$cpp" | tail -n 1 | mbs)
jsr=$(echo "$js" | mbs)
awk -v a="$cpp1" -v n="$cppn" -v j="$jsr" -v t="$(nproc)" 'BEGIN {
    printf "ratio c++/js: %.1fx single-threaded, %.1fx with %d threads\n", a / j, n / j, t }'
