#!/usr/bin/env bash
# A variant added by one line runs through every back end's tests and the export without another
# edit: test/test.mk builds the tests of every variant in build/scratch with one more line of the
# variant list (SCRATCH_VARIANT there, "scratch"), and this runs each for that variant alone
# (TEST_VARIANTS=scratch: a program built without the line stops at the unknown name) with that
# build's manifest for the Python side (LSSAR_MANIFEST: PyTorch's model, the export and its module).
# Run from the repository root (make test does; build/test_scratch_variant is this file).
set -uo pipefail
dir=build/scratch
export TEST_VARIANTS=scratch LSSAR_MANIFEST=$dir/manifest.json OMP_WAIT_POLICY=passive
grep -q '"name": "scratch"' "$LSSAR_MANIFEST" || { echo "$LSSAR_MANIFEST has no variant 'scratch'"; exit 1; }
failed=0
# test program and the doctest filter of its cases that loop over every variant (the others check
# named variants, which the build's other tests run)
runs=(
    "test_attention_cpu:"
    "test_attention_fast_cpu:"
    "test_attention_cuda:-tce=*launch bounds were measured*"  # a new variant is named there until measured
    "test_model_cpu:-tc=*every variant*"
    "test_export:"
    "test_pytorch:-tc=*every variant*"
)
for run in "${runs[@]}"; do
    bin=${run%%:*}; filter=${run#*:}
    if [ "$bin" = test_pytorch ] && ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
        echo "=== $dir/$bin skipped: no PyTorch for /usr/bin/python3, and no stored state of the scratch variant"
        continue
    fi
    log=$(mktemp)
    echo "=== $dir/$bin (TEST_VARIANTS=scratch${filter:+ $filter})"
    "./$dir/$bin" ${filter:+"$filter"} > "$log" 2>&1
    rc=$?
    grep -E '^\[doctest\] (test cases|assertions):' "$log"
    asserts=$(grep -E '^\[doctest\] assertions:' "$log" | sed -E 's/^\[doctest\] assertions:\s*([0-9]+).*/\1/')
    if [ "$rc" -ne 0 ] || [ -z "$asserts" ] || [ "$asserts" -eq 0 ]; then
        echo "FAILED: $dir/$bin (exit $rc, ${asserts:-no} assertions)"; tail -40 "$log"; failed=1
    fi
    rm -f "$log"
done
[ "$failed" -eq 0 ] && echo "the scratch variant passed every back end's tests and the export"
exit "$failed"
