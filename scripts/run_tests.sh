#!/usr/bin/env bash
# Runs each test binary given, streams its output, lists the slowest programs, and prints one closing line
# "N passed, M failed, K skipped" over all doctest test cases (a binary that crashes counts as failed; a
# test program that is not doctest counts as one test case, passed when it exits 0). A doctest program
# whose test cases pass with 0 assertions fails: it checked nothing. A test case that cannot run on this
# machine is marked skipped in its program (doctest::skip) and named here; a run of a program under an
# OpenBLAS kernel this CPU cannot run counts as one skipped case.
#
# An argument blas=<kernel>:<binary>[:<test cases>] runs the binary (only the doctest test cases named,
# doctest's -tc, with %20 for a space, where given) with OpenBLAS's kernel chosen: `default` with
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (OpenBLAS picks the kernels for this CPU), another
# name with OPENBLAS_CORETYPE=<kernel> and OPENBLAS_L2_SIZE=512, as some machines set them. Only this
# runner sets them, for the tests that vary them; a kernel the CPU cannot run is skipped, saying so.
set -u
passed=0; failed=0; skipped=0; broken=(); skipped_names=(); seconds=()
cpu_runs_kernel() {  # the instruction set the OpenBLAS kernel needs
    case "$1" in
        default) return 0 ;;
        Haswell|Zen) grep -qw avx2 /proc/cpuinfo ;;
        SkylakeX|Cooperlake) grep -qw avx512f /proc/cpuinfo ;;
        *) return 0 ;;
    esac
}
for entry in "$@"; do
    bin=$entry; run=(); kernel=""; filter=()
    if [[ $entry == blas=*:* ]]; then
        kernel=${entry#blas=}; kernel=${kernel%%:*}; bin=${entry#*:}
        if [[ $bin == *:* ]]; then  # a doctest filter of test cases, spaces written as %20
            filter=("-tc=${bin#*:}"); filter[0]=${filter[0]//%20/ }; bin=${bin%%:*}
        fi
        if [ "$kernel" = default ]; then run=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
        else run=(env OPENBLAS_CORETYPE="$kernel" OPENBLAS_L2_SIZE=512); fi
    fi
    echo "=== $bin${kernel:+ (OpenBLAS kernel: $kernel)}${filter[0]:+ ${filter[0]}}"
    if ! cpu_runs_kernel "$kernel"; then
        echo "skipped: this CPU cannot run OpenBLAS's $kernel kernels"
        skipped=$((skipped + 1)); skipped_names+=("$bin (OpenBLAS kernel $kernel: this CPU cannot run it)")
        continue
    fi
    log=$(mktemp)
    t0=$(date +%s)
    "${run[@]}" "./$bin" "${filter[@]+"${filter[@]}"}" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    seconds+=("$(( $(date +%s) - t0 )) s  $bin${kernel:+ ($kernel)}")
    line=$(grep -E '^\[doctest\] test cases:' "$log" | tail -n 1)
    asserts=$(grep -E '^\[doctest\] assertions:' "$log" | tail -n 1 | sed -E 's/^\[doctest\] assertions:\s*([0-9]+).*/\1/')
    rm -f "$log"
    if [ -n "$line" ]; then
        p=$(echo "$line" | sed -E 's/.*\|\s*([0-9]+) passed.*/\1/')
        f=$(echo "$line" | sed -E 's/.*\|\s*([0-9]+) failed.*/\1/')
        s=$(echo "$line" | sed -E 's/.*\|\s*([0-9]+) skipped.*/\1/')
        passed=$((passed + p)); failed=$((failed + f))
        # doctest's skipped count includes the cases a -tc filter leaves out: the skipped cases are
        # those marked doctest::skip, named as the cases listed with --no-skip and not without it
        if [ "$s" -gt 0 ]; then
            while IFS= read -r name; do skipped_names+=("$bin: $name"); skipped=$((skipped + 1)); done < <(comm -13 \
                <("${run[@]}" "./$bin" "${filter[@]+"${filter[@]}"}" -ltc 2>/dev/null | grep -v '^\[doctest\]\|^====' | sort) \
                <("${run[@]}" "./$bin" "${filter[@]+"${filter[@]}"}" -ltc -ns 2>/dev/null | grep -v '^\[doctest\]\|^====' | sort))
        fi
        # a doctest program (its assertions line) whose cases passed having checked nothing
        if [ "$rc" -eq 0 ] && [ "$p" -gt 0 ] && [ -n "$asserts" ] && [ "$asserts" -eq 0 ]; then
            broken+=("$bin${kernel:+ (OpenBLAS kernel: $kernel)} ($p test cases passed with 0 assertions: nothing was checked)")
            passed=$((passed - p)); failed=$((failed + p))
        fi
    fi
    if [ "$rc" -ne 0 ]; then
        broken+=("$bin${kernel:+ (OpenBLAS kernel: $kernel)} (exit $rc)")
        [ -z "$line" ] && failed=$((failed + 1))
    elif [ -z "$line" ]; then
        passed=$((passed + 1))
    fi
done
echo
echo "the slowest test programs (wall seconds):"
printf '%s\n' "${seconds[@]+"${seconds[@]}"}" | sort -rn | head -8 | sed 's/^/  /'
for n in "${skipped_names[@]+"${skipped_names[@]}"}"; do echo "SKIPPED: $n"; done
for b in "${broken[@]+"${broken[@]}"}"; do echo "FAILED: $b"; done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ ${#broken[@]} -eq 0 ]
