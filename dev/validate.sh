#!/usr/bin/env bash
# Runs every dev/ file's emulated build once in validation mode (each checks its kernel versions
# against the CPU reference and exits non-zero on a mismatch). Part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
for name in encoder rope layernorm matmul gelu classifier adamw global_norm; do
    for version in 1 2; do
        echo "=== dev/$name.cu version $version"
        ./build/dev/$name $version
    done
done
for hd in 32 64; do
    echo "=== dev/attention_forward.cu, dev/attention_backward.cu hd=$hd"
    ./build/dev/attention_forward all -p 15 -hd $hd -check
    ./build/dev/attention_backward all -p 15 -hd $hd -check
done
echo "dev/ validation: all versions match the CPU reference"
