#!/usr/bin/env bash
# The project's prepared GPU check, for a short loan of one GPU (an H200: the whole check in at most
# TOTAL_S = 360 s). Steps, in order of value; every step runs even if an earlier one failed, each
# under `timeout` (its own budget, cut to what is left of TOTAL_S), and each appends its result to
# the summary file as soon as it ends, so a run stopped from outside still reports what it did:
#   1. GPU twins of the emulated kernel tests (test_simt, vendor, layers, attention, model) and the
#      non-blocking NCCL path on a one-rank communicator
#   2. gradcheck_cu_lssar -e d12 -t 1024 -b 1: the CUDA back end against the float64 CPU reference
#   3. compute-sanitizer memcheck and racecheck on the attention and model tests (small shapes)
#   4. the attention benchmark at hd 64, T 1K-16K: LSSAR/softmax and softmax/cuDNN time ratios
#   5. the trainer, GPT-2 124M at T 1024: tokens/s and MFU, softmax and LSSAR
#   6. the bias gradients from cuBLASLt's epilogues against the column sums (dev/matmul 1 vs 2)
#   7. gradcheck_cu_softmax at d12 T 1024
#   8. with 2 or more GPUs: the data-parallel test and trainer runs
# Usage:
#   bash scripts/gpu_check.sh --prebuilt DIR   run the binaries of DIR (make gpu-check-build); nothing compiles
#   bash scripts/gpu_check.sh                  make gpu-check-build first (needs nvcc), then the same
#   options (environment): SUMMARY=file (default build/gpu_check_summary.txt), LOGS=dir (build/gpu_check_logs),
#                          TOTAL_S=360
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL_S=${TOTAL_S:-360}
SUMMARY=${SUMMARY:-build/gpu_check_summary.txt}
LOGS=${LOGS:-build/gpu_check_logs}
dir=""
if [ "${1:-}" = "--prebuilt" ]; then
    dir=${2:?"usage: $0 --prebuilt DIR (the folder make gpu-check-build wrote)"}
elif [ $# -gt 0 ]; then
    echo "usage: $0 [--prebuilt DIR]" >&2; exit 2
fi
start=$(date +%s)
mkdir -p "$(dirname "$SUMMARY")" "$LOGS"
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }

if ! nvidia-smi -L >/dev/null 2>&1; then
    note "gpu_check: no GPU visible (nvidia-smi -L failed); run this on a machine with one"
    exit 1
fi
if [ -z "$dir" ]; then
    make -j"$(nproc)" gpu-check-build > "$LOGS/build.log" 2>&1 || { note "gpu_check: build failed, see $LOGS/build.log"; exit 1; }
    dir=build/gpu_check
fi
dir=$(cd "$dir" && pwd)
note "gpu_check $(date -u +%FT%TZ), binaries of $dir (commit $(cat "$dir/COMMIT" 2>/dev/null || echo ?))"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a "$SUMMARY"
ngpu=$(nvidia-smi -L | grep -c '^GPU')
# the folder's own OpenBLAS (and its Fortran runtime), gzipped by make gpu-check-build
libdir=${TMPDIR:-/tmp}/gpu_check_lib
mkdir -p "$libdir"
for z in "$dir"/lib/*.gz; do [ -e "$z" ] && gunzip -c "$z" > "$libdir/$(basename "$z" .gz)"; done
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
missing_libs() { ldd "$dir"/test_* "$dir"/train_* "$dir"/gradcheck_* "$dir"/attention_* "$dir"/matmul_gpu 2>/dev/null | grep 'not found' | sort -u; }
if [ -n "$(missing_libs)" ]; then
    # CUDA's libraries (cuBLAS, NCCL, cuDNN) may be there only as Python wheels (nvidia/*/lib)
    for d in $(python3 -c 'import glob, os, site; print(" ".join(sorted(set(os.path.dirname(p) for s in site.getsitepackages()
               for p in glob.glob(os.path.join(s, "nvidia", "*", "lib", "lib*.so*"))))))' 2>/dev/null); do
        LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
    done
fi
[ -z "$(missing_libs)" ] || note "gpu_check: libraries not found: $(missing_libs | awk '{print $1}' | tr '\n' ' ')"
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -1)

failed=0
# step NAME BUDGET_S COMMAND...: runs COMMAND (output in $LOGS/NAME.log) for at most BUDGET_S seconds,
# fewer if TOTAL_S runs out; appends "NAME: passed|FAILED (exit N)|TIMEOUT|skipped, seconds" and the
# lines of the log that match $KEEP (an extended regex) to the summary.
step() {
    local name=$1 budget=$2; shift 2
    local left=$(( TOTAL_S - ($(date +%s) - start) ))
    if [ "$left" -lt 5 ]; then note "$name: skipped (no time left of TOTAL_S = $TOTAL_S s)"; failed=1; return; fi
    [ "$budget" -gt "$left" ] && budget=$left
    local t0=$(date +%s) rc
    timeout -k 5 "$budget" "$@" > "$LOGS/$name.log" 2>&1
    rc=$?
    local took=$(( $(date +%s) - t0 )) verdict
    case $rc in
        0) verdict="passed" ;;
        124|137) verdict="TIMEOUT after $budget s"; failed=1 ;;
        *) verdict="FAILED (exit $rc)"; failed=1 ;;
    esac
    note "$name: $verdict, $took s"
    if [ -n "${KEEP:-}" ]; then grep -E "$KEEP" "$LOGS/$name.log" | sed 's/^/    /' | tail -40 | tee -a "$SUMMARY"; fi
    if [ $rc != 0 ]; then grep -E 'ERROR|error|FAILED|fail' "$LOGS/$name.log" | head -8 | sed 's/^/    ! /' | tee -a "$SUMMARY"; fi
}

# 1. the GPU twins of the kernel tests (doctest: the last lines say what passed)
KEEP='^\[doctest\] (test cases|assertions)|SKIPPED|skipped'
step test_simt 20 "$dir/test_simt_cu"
step test_vendor_host 25 "$dir/test_vendor_host_cu"
step test_layers_cuda 30 "$dir/test_layers_cuda_gpu"
step test_attention_cuda 40 "$dir/test_attention_cuda_gpu"
step test_model_cuda 40 "$dir/test_model_cuda_gpu"
step nccl_one_rank 20 "$dir/test_distributed_gpu" -tc='*one-rank*'

# 2. the gradient check at GPT-2 124M's size
KEEP='^(gradcheck|cuda back end|cpu |passed|FAILED)|FAILED$'
step gradcheck_lssar_d12 90 "$dir/gradcheck_cu_lssar" -e d12 -t 1024 -b 1 -p 15  # B 1: the float64 CPU runs dominate

# 3. compute-sanitizer on small shapes (the attention test's random-input case, the model's first step)
KEEP='ERROR SUMMARY|^\[doctest\] test cases'
if [ -n "$sanitizer" ]; then
    step memcheck_attention 40 "$sanitizer" --tool memcheck --error-exitcode 3 "$dir/test_attention_cuda_gpu" \
        -tc='attention kernels match*'
fi
# compute-sanitizer refuses the GPU under some container runtimes (gVisor): the first step says so
if [ -n "$sanitizer" ] && grep -q 'Device not supported' "$LOGS/memcheck_attention.log" 2>/dev/null; then
    note "compute-sanitizer: 'Device not supported' on this machine (its runtime): the other three checks skipped"
elif [ -n "$sanitizer" ]; then
    step racecheck_attention 40 "$sanitizer" --tool racecheck --error-exitcode 3 "$dir/test_attention_cuda_gpu" \
        -tc='head size 128*,LSSAR with a non-integer*,zero queries*'
    step memcheck_model 40 "$sanitizer" --tool memcheck --error-exitcode 3 "$dir/test_model_cuda_gpu" -tc='first step*'
    step racecheck_model 40 "$sanitizer" --tool racecheck --error-exitcode 3 "$dir/test_model_cuda_gpu" -tc='first step*'
else
    note "compute-sanitizer: not found (PATH, /usr/local/cuda*/bin): memcheck and racecheck skipped"
fi

# 4. attention benchmark (validation, then timing; cuDNN's flash attention where the build had it)
KEEP='^(fwd\+bwd|forward) |^cudnn |targets'
step attention_bench 75 env PREBUILT="$dir" bash scripts/gpu_check_attention.sh

# 5. trainer speed, softmax and LSSAR
KEEP='^(attn|softmax|lssar) |^lssar / softmax|stopped|FAILED'
step trainer_speed 90 env PREBUILT="$dir" STEPS=30 LIMIT_S=40 bash scripts/gpu_train_check.sh

# 6. bias gradients at GPT-2 124M's fc/fcproj shapes (N 8192, C 768, 4C): from cuBLASLt's epilogues
# (matmul_gpu 1, the product: BGRADB, DGELU_BGRAD; a missing algorithm is printed as "[matmul]
# cuBLASLt has no algorithm") against the column sums (2, as MATMUL_BGRAD=0), each validated
KEEP='^kernel version|^(forward|backward) |no algorithm|VALIDATION FAILED'
step matmul_bgrad 30 bash -c '"$1" 1 && "$1" 2' _ "$dir/matmul_gpu"

# 7. the softmax gradient check
KEEP='^(gradcheck|cuda back end|cpu |passed|FAILED)|FAILED$'
step gradcheck_softmax_d12 60 "$dir/gradcheck_cu_softmax" -e d12 -t 1024 -b 1

# 8. data parallel
if [ "$ngpu" -ge 2 ]; then
    KEEP='^\[doctest\] (test cases|assertions)'
    step test_distributed 60 "$dir/test_distributed_gpu"
else
    note "data parallel: skipped (1 GPU; the 2-rank checks need 2 or more; the trainer step ran them where there were)"
fi

note "gpu_check total: $(( $(date +%s) - start )) s, $([ $failed = 0 ] && echo PASSED || echo FAILED); logs in $LOGS"
exit $failed
