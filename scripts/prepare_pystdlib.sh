#!/usr/bin/env bash
# A corpus of another kind than prose: the Python standard library's top-level modules (Debian's
# libpython3.X-minimal and -stdlib, installed with python3), source code with its indentation,
# brackets and long-range names, as GPT-2 token shards or as bytes.
#   bash scripts/prepare_pystdlib.sh [--bytes] [OUT_DIR]   default data/pystdlib (--bytes: data/pystdlib_bytes)
# writes OUT_DIR/pystdlib_{train,val,test}_000000.bin. Each module (/usr/lib/python3.X/*.py, sorted
# by name) is one document; every 20th is the validation split, every 20th half a period earlier the
# test split (build/tokenize shard --val 0.05 --test 0.05). The modules are those of the Python
# that /usr/bin/python3 runs; the tool prints its version, which the corpus depends on.
set -euo pipefail
cd "$(dirname "$0")/.."
bytes=""
[ "${1:-}" = "--bytes" ] && { bytes="--bytes"; shift; }
out=${1:-data/pystdlib${bytes:+_bytes}}
[ -x /usr/bin/python3 ] || { echo "prepare_pystdlib.sh: /usr/bin/python3 is missing; install Debian's python3 (scripts/install_deps.sh does)" >&2; exit 1; }
src=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
version=$(/usr/bin/python3 -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
count=$(ls "$src"/*.py 2>/dev/null | wc -l)
[ "$count" -ge 100 ] || { echo "prepare_pystdlib.sh: found $count modules in $src, expected at least 100" >&2; exit 1; }
[ -n "$bytes" ] || bash scripts/install_gpt2_vocab.sh
make -s build/tokenize
echo "the standard library of Python $version: $count modules in $src"
mkdir -p "$out"
LC_ALL=C build/tokenize shard $bytes -o "$out/pystdlib" --val 0.05 --test 0.05 $(LC_ALL=C ls "$src"/*.py)
build/tokenize info $bytes "$out"/pystdlib_train_000000.bin "$out"/pystdlib_val_000000.bin "$out"/pystdlib_test_000000.bin
