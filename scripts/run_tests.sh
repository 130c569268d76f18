#!/usr/bin/env bash
# Runs each test binary given, streams its output, and prints one closing line
# "N passed, M failed" over all doctest test cases (a binary that crashes counts as failed; a
# test program that is not doctest counts as one test case, passed when it exits 0).
set -u
passed=0; failed=0; broken=()
for bin in "$@"; do
    echo "=== $bin"
    log=$(mktemp)
    "./$bin" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    line=$(grep -E '^\[doctest\] test cases:' "$log" | tail -n 1)
    rm -f "$log"
    if [ -n "$line" ]; then
        p=$(echo "$line" | sed -E 's/.*\|\s*([0-9]+) passed.*/\1/')
        f=$(echo "$line" | sed -E 's/.*\|\s*([0-9]+) failed.*/\1/')
        passed=$((passed + p)); failed=$((failed + f))
    fi
    if [ "$rc" -ne 0 ]; then
        broken+=("$bin (exit $rc)")
        [ -z "$line" ] && failed=$((failed + 1))
    elif [ -z "$line" ]; then
        passed=$((passed + 1))
    fi
done
echo
for b in "${broken[@]+"${broken[@]}"}"; do echo "FAILED: $b"; done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ ${#broken[@]} -eq 0 ]
