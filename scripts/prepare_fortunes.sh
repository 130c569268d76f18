#!/usr/bin/env bash
# A second English corpus: Debian's fortunes (quotations, jokes, verse, definitions), as GPT-2
# token shards, for experiments that must not rest on the KJV alone.
#   bash scripts/prepare_fortunes.sh [--bytes] [OUT_DIR]   default data/fortunes (--bytes: data/fortunes_bytes)
# writes OUT_DIR/fortunes_{train,val,test}_000000.bin. Each category file is one document (fortunes
# separated by blank lines instead of "%" lines); ascii-art is left out (pictures, not text); every
# 20th category is the validation split, every 20th half a period earlier the test split (build/tokenize
# shard --val 0.05 --test 0.05). --bytes: byte-level shards
# (vocabulary 256, byte 0 before each document), as scripts/prepare_kjv.sh --bytes.
set -euo pipefail
cd "$(dirname "$0")/.."
bytes=""
[ "${1:-}" = "--bytes" ] && { bytes="--bytes"; shift; }
out=${1:-data/fortunes${bytes:+_bytes}}
src=/usr/share/games/fortunes
[ -s "$src/fortunes" ] || { echo "prepare_fortunes.sh: $src/fortunes is missing; install Debian's fortunes (scripts/install_deps.sh does)" >&2; exit 1; }
[ -n "$bytes" ] || bash scripts/install_gpt2_vocab.sh
make -s build/tokenize
docs=$(mktemp -d /tmp/fortunes_XXXXXX)
trap 'rm -rf "$docs"' EXIT
for f in "$src"/*; do
    name=$(basename "$f")
    case $name in *.dat|*.u8|ascii-art) continue ;; esac
    [ -f "$f" ] || continue
    sed 's/^%$//' "$f" | iconv -f utf-8 -t utf-8 -c > "$docs/$name.txt"
done
count=$(ls "$docs" | wc -l)
[ "$count" -ge 20 ] || { echo "prepare_fortunes.sh: found $count category files in $src, expected at least 20" >&2; exit 1; }
mkdir -p "$out"
build/tokenize shard $bytes -o "$out/fortunes" --val 0.05 --test 0.05 "$docs"/*.txt
build/tokenize info $bytes "$out"/fortunes_train_000000.bin "$out"/fortunes_val_000000.bin "$out"/fortunes_test_000000.bin
