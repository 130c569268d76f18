#!/usr/bin/env bash
# Runs the emulated build of every dev/ kernel named on the command line (dev/dev.mk passes its
# DEV_NAMES) once per version in validation mode, then the attention dev files: each checks its
# kernel versions against the CPU reference and exits non-zero on a mismatch. Part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: dev/validate.sh NAME... (the dev kernels of dev/dev.mk)" >&2; exit 2; }
for name in "$@"; do
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
# -T lists: empty, malformed and huge values are refused (runtime/cli.h's list parser)
for bad in "" "," "1024,,2048" "x" "0" "99999999999"; do
    if ./build/dev/attention_forward lssar -T "$bad" -check > /dev/null 2>&1; then
        echo "dev/attention_forward.cu accepted -T '$bad'" >&2
        exit 1
    fi
done
echo "dev/ validation: all versions match the CPU reference"
