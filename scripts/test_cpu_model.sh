#!/usr/bin/env bash
# The CPU fast path's tests on another x86-64 processor than this one: the programs built as that
# processor's own -march=native would build them, then run under qemu-user with its CPUID, so that
# Highway's dispatch, oneDNN's ISA choice, OpenBLAS's kernels and the trainer's -pr auto see that
# processor (the programs the tests start run under the same qemu: TEST_EXEC_WRAPPER,
# test/run_command.h). Default: AMD EPYC Zen 3 (qemu's EPYC-Milan: AVX2 and FMA, no AVX-512), the
# processor of the project's machines that lack AVX-512.
#   bash scripts/test_cpu_model.sh                              every fast-path test (tens of minutes)
#   bash scripts/test_cpu_model.sh -tc="the targets*"           doctest's filters pass through
#   CPU=Haswell MARCH=haswell bash scripts/test_cpu_model.sh   another model (qemu-x86_64 -cpu help)
#   TESTS="test_attention_fast_cpu" bash scripts/test_cpu_model.sh
#   SUITE=1 bash scripts/test_cpu_model.sh                      the whole suite (make test) built for
#                                   that processor, run on this one's cores with the fast path and oneDNN
#                                   capped at its ISA (MAX_TARGET, default AVX2; ONEDNN_ISA, default AVX2)
# What it shows: the dispatch and both numerics of every target such a CPU runs (its programs
# count their assertions; a target the CPU lacks is never run). What it cannot show: speed (qemu
# translates every instruction), or a difference in how the real silicon rounds (none is expected:
# IEEE fp32/fp64 and the exact bf16 emulation). Not part of scripts/test.sh: under qemu the tests
# take longer than CI allows. Needs qemu-user (`apt-get install qemu-user`); it says so and exits
# 2 without it.
# SUITE=1 shows what qemu cannot afford to run: every test program compiled as that processor compiles
# it and run with the ISA such a CPU dispatches (FAST_CPU_MAX_TARGET, ONEDNN_MAX_CPU_ISA; its CPUID is
# not shown: the qemu runs above are the test of that). This CPU must run the -march=$MARCH code.
# Writes build/cpu-<CPU>/ (a copy of the tree and its build) and build/cpu-<CPU>/results.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
CPU=${CPU:-EPYC-Milan}
MARCH=${MARCH:-znver3}
TESTS=${TESTS:-test_attention_fast_cpu test_cpu_fast test_eval_bf16}
SUITE=${SUITE:-0}
MAX_TARGET=${MAX_TARGET:-AVX2}
ONEDNN_ISA=${ONEDNN_ISA:-AVX2}
[ "$SUITE" = 1 ] || command -v qemu-x86_64 >/dev/null ||
    { echo "test_cpu_model.sh: missing qemu-x86_64 (Debian's qemu-user: apt-get install qemu-user)" >&2; exit 2; }
[ "$(uname -m)" = x86_64 ] || { echo "test_cpu_model.sh: runs x86-64 processors' CPUIDs; this machine is $(uname -m)" >&2; exit 2; }
if [ "$SUITE" != 1 ]; then
    models=$(qemu-x86_64 -cpu help 2>&1 || true)  # (it exits 1 after the list)
    grep -q "^x86 $CPU " <<<"$models" ||
        { echo "test_cpu_model.sh: qemu-x86_64 has no CPU model '$CPU' (qemu-x86_64 -cpu help lists them)" >&2; exit 2; }
fi
g++ -march="$MARCH" -x c++ -fsyntax-only /dev/null 2>/dev/null ||
    { echo "test_cpu_model.sh: g++ does not know -march=$MARCH" >&2; exit 2; }
if [ "$SUITE" = 1 ]; then  # the instruction sets -march=$MARCH compiles in, each one this CPU must have
    macros=$(g++ -march="$MARCH" -dM -E -x c++ /dev/null)
    for pair in __AVX__:avx __AVX2__:avx2 __FMA__:fma __BMI2__:bmi2 __AVX512F__:avx512f __AVX512BW__:avx512bw \
                __AVX512VL__:avx512vl __AVX512BF16__:avx512_bf16 __AMX_TILE__:amx_tile __VAES__:vaes __SHA__:sha_ni; do
        if grep -q "define ${pair%%:*} " <<<"$macros" &&
                ! grep -qw "${pair#*:}" /proc/cpuinfo; then
            echo "test_cpu_model.sh: -march=$MARCH uses ${pair#*:}, which this CPU lacks: SUITE=1 runs the code natively" >&2
            exit 2
        fi
    done
fi

dir=build/cpu-$CPU
tree=$dir/tree
mkdir -p "$tree"
# the tree as git sees it (tracked files and untracked ones it does not ignore), with their times, so
# that make rebuilds only what changed since the last run
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$tree"
[ -d third_party ] && [ ! -e "$tree/third_party" ] && ln -s "$(pwd)/third_party" "$tree/third_party"
if [ "$SUITE" = 1 ]; then
    bash scripts/install_deps.sh  # what the suite needs (scripts/test.sh's first step): the packages, the GPT-2 files
    echo "== building every test program for -march=$MARCH in $tree"
    (cd "$tree" && make -s -j"$(nproc)" CXXFLAGS="-O2 -march=$MARCH" test-build)
    echo "== make test with FAST_CPU_MAX_TARGET=$MAX_TARGET ONEDNN_MAX_CPU_ISA=$ONEDNN_ISA (the ISA $CPU dispatches)"
    set +e
    (cd "$tree" && FAST_CPU_MAX_TARGET=$MAX_TARGET ONEDNN_MAX_CPU_ISA=$ONEDNN_ISA make test 2>&1) | tee "$dir/suite.log" |
        grep -E "^(SKIPPED|FAILED): |^[0-9]+ passed, " | tee "$dir/results.txt"
    rc=${PIPESTATUS[0]}
    echo "== the suite as $CPU builds it: exit $rc ($dir/suite.log)"
    exit "$rc"
fi
echo "== building $TESTS for -march=$MARCH in $tree"
targets=""
for t in $TESTS; do targets="$targets build/$t"; done
# the Makefile appends the standard, the include path and OpenMP to the CXXFLAGS given
(cd "$tree" && make -s -j2 CXXFLAGS="-O2 -march=$MARCH" $targets)

wrapper="qemu-x86_64 -cpu $CPU"
export TEST_EXEC_WRAPPER="$wrapper"
: >"$dir/results.txt"
failed=0
for t in $TESTS; do
    echo "== $wrapper build/$t $*" | tee -a "$dir/results.txt"
    # qemu warns once per CPUID feature its translator lacks (none the fast path uses): dropped
    (cd "$tree" && $wrapper "build/$t" "$@" 2>&1) | grep -v "^qemu-x86_64: warning: TCG doesn't support requested feature" |
        tee "$dir/$t.log" | grep -E "MESSAGE: targets:|fast path targets run here|\[doctest\] (test cases|assertions)|ERROR|FATAL" |
        uniq | tee -a "$dir/results.txt" || true
    # the cases marked doctest::skip on this CPU, by name: listed with --no-skip and not without it
    comm -13 <(cd "$tree" && $wrapper "build/$t" "$@" -ltc 2>/dev/null | grep -v '^\[doctest\]\|^====\|^qemu' | sort) \
             <(cd "$tree" && $wrapper "build/$t" "$@" -ltc -ns 2>/dev/null | grep -v '^\[doctest\]\|^====\|^qemu' | sort) |
        sed "s/^/SKIPPED: $t: /" | tee -a "$dir/results.txt"
    # a program whose cases pass with no assertion has tested nothing (scripts/run_tests.sh's rule)
    if ! grep -q "Status: SUCCESS" "$dir/$t.log" || grep -q "assertions: *0 |" "$dir/$t.log"; then
        failed=1; echo "FAILED: $t ($dir/$t.log)" | tee -a "$dir/results.txt"
    fi
done
[ "$failed" = 0 ] && echo "== every test passed under $CPU ($dir/results.txt)"
exit $failed
