#!/usr/bin/env bash
# The CPU fast path on aarch64 (NEON), from an x86-64 machine: cross-compiles its Highway kernels and
# test/test_attention_fast_cpu.cpp with g++-aarch64-linux-gnu and runs the test under qemu-user.
# Not part of scripts/test.sh: it needs the cross toolchain and qemu-user, which CI does not install.
#   bash scripts/test_aarch64.sh                    every test case, each one's time printed as it
#                                                   ends, on one thread
#   bash scripts/test_aarch64.sh -tc="ln and*"      doctest's filters pass through
# Needs g++-aarch64-linux-gnu, qemu-user and Highway for arm64 (Debian multiarch:
# `dpkg --add-architecture arm64 && apt-get update && apt-get install libhwy-dev:arm64`); it says
# which is missing and exits 2 without them.
set -euo pipefail
cd "$(dirname "$0")/.."
CXX=aarch64-linux-gnu-g++
missing=()
command -v $CXX >/dev/null || missing+=("g++-aarch64-linux-gnu (the cross compiler)")
command -v qemu-aarch64 >/dev/null || missing+=("qemu-user (qemu-aarch64)")
[ -e /usr/lib/aarch64-linux-gnu/libhwy.so ] ||
    missing+=("libhwy-dev:arm64 (dpkg --add-architecture arm64 && apt-get update && apt-get install libhwy-dev:arm64)")
if [ ${#missing[@]} -gt 0 ]; then
    printf 'test_aarch64.sh: missing %s\n' "${missing[@]}" >&2
    exit 2
fi
out=build/aarch64
mkdir -p "$out"
flags=(-O2 -march=armv8-a -std=c++17 -fopenmp -I. -Wall -Wextra -Wno-unused-parameter)
for src in layers/fast_cpu.cpp layers/layers_fast_cpu.cpp attention/attention_fast_cpu.cpp test/doctest_main.cpp; do
    obj=$out/$(basename "${src%.cpp}").o
    [ "$obj" -nt "$src" ] || { echo "$CXX $src"; $CXX "${flags[@]}" -c "$src" -o "$obj"; }
done
echo "$CXX test/test_attention_fast_cpu.cpp"
$CXX "${flags[@]}" test/test_attention_fast_cpu.cpp "$out"/doctest_main.o "$out"/attention_fast_cpu.o \
    "$out"/layers_fast_cpu.o "$out"/fast_cpu.o -o "$out"/test_attention_fast_cpu -L/usr/lib/aarch64-linux-gnu -lhwy
# One thread: an OpenMP team of 2 under qemu-user hangs (Debian's qemu 7.2, libgomp, any -cpu, any
# OMP_WAIT_POLICY), so the case that compares 1 and 2 threads is left out and named (THREADS=2 runs it).
THREADS=${THREADS:-1}
skip=()
if [ "$THREADS" = 1 ]; then
    skip=("-tce=the same bits for 1 and 2 threads*")
    echo "SKIPPED: the same bits for 1 and 2 threads (under qemu-user an OpenMP team of 2 hangs; THREADS=2 runs it)"
fi
cmd=(env OMP_NUM_THREADS="$THREADS" QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
     LD_LIBRARY_PATH=/usr/lib/aarch64-linux-gnu:/usr/aarch64-linux-gnu/lib
     qemu-aarch64 "$out"/test_attention_fast_cpu --duration=true --no-colors=true "${skip[@]+"${skip[@]}"}" "$@")
# each case's time as it ends (--duration): through a terminal (util-linux's script) where there is
# one, as the program's output into a pipe or file is written only at its exit
if command -v script >/dev/null; then
    script -qefc "$(printf '%q ' "${cmd[@]}")" /dev/null | tr -d '\r'
else
    "${cmd[@]}"
fi
