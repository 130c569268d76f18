#!/usr/bin/env bash
# Demo data: the King James Bible (Debian's bible-kjv) as GPT-2 token shards, or as bytes.
#   bash scripts/prepare_kjv.sh [--bytes] [OUT_DIR]   default data/kjv (--bytes: data/kjv_bytes)
# writes OUT_DIR/kjv_train_000000.bin, OUT_DIR/kjv_val_000000.bin and OUT_DIR/kjv_test_000000.bin.
# Each of the 66 books is one document (verses as "chapter:verse text" lines, <|endoftext|> before
# each book); every 20th book (Proverbs, Matthew, 1 Peter) is the validation split (settings are
# chosen on it), and every 20th half a period earlier (2 Samuel, Amos, Philippians) the test split
# (the reported tables are scored on it); about 5% and 3.5% of the bytes.
# --bytes: the same split as byte-level shards (vocabulary 256, byte 0 before each book), for
# models small enough to train on a CPU that still rely on their attention (train with -v 256).
set -euo pipefail
cd "$(dirname "$0")/.."
bytes=""
[ "${1:-}" = "--bytes" ] && { bytes="--bytes"; shift; }
out=${1:-data/kjv${bytes:+_bytes}}
command -v bible >/dev/null || { echo "prepare_kjv.sh: the 'bible' program is missing; install Debian's bible-kjv (scripts/install_deps.sh does)" >&2; exit 1; }
[ -n "$bytes" ] || bash scripts/install_gpt2_vocab.sh
make -s build/tokenize
books=$(mktemp -d /tmp/kjv_books_XXXXXX)
trap 'rm -rf "$books"' EXIT
# "Ge1:1 In the beginning ..." -> books/01_Ge.txt: "1:1 In the beginning ..."
bible -f gen1:1-rev22:21 | awk -v dir="$books" '
    match($0, /^[1-3]?[A-Za-z]+/) {
        book = substr($0, 1, RLENGTH)
        if (book != last) { n++; last = book; if (file) close(file); file = sprintf("%s/%02d_%s.txt", dir, n, book) }
        print substr($0, RLENGTH + 1) > file
    }'
count=$(ls "$books" | wc -l)
[ "$count" -eq 66 ] || { echo "prepare_kjv.sh: found $count books in the output of 'bible', expected 66" >&2; exit 1; }
mkdir -p "$out"
build/tokenize shard $bytes -o "$out/kjv" --val 0.05 --test 0.05 "$books"/*.txt
build/tokenize info $bytes "$out"/kjv_train_000000.bin "$out"/kjv_val_000000.bin "$out"/kjv_test_000000.bin
