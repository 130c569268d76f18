#!/usr/bin/env bash
# GPU check of the attention kernels (attention/attention.cuh), in a few minutes on one GPU:
#   1. builds with nvcc: the kernel test (test/test_attention_cuda.cu, the emulated test's cases)
#      and the dev benchmark of forward+backward (dev/attention_backward.cu)
#   2. runs the test on the GPU, then the benchmark at hd = 64, GPT-2 small's 12 heads, B*T = 16K
#      tokens, LSSAR p = 15, one sequence length at a time (T = 1K, 2K, 4K, 8K, 16K: the targets'
#      lengths first), and prints each length's line as soon as it is measured, so a run cut short
#      keeps what it measured:
#        fwd+bwd T=1024: lssar/softmax 1.43  softmax/cudnn 1.12
#      the forward+backward time ratios the targets are about: LSSAR vs the project's softmax, and
#      the softmax kernel vs cuDNN's flash attention where the build found cuDNN (the benchmark's
#      row "cudnn", timed only after its output matched the softmax kernel's; "-" where it did not)
#   3. validation only at hd = 32 and 128
# Usage: bash scripts/gpu_check_attention.sh     (log also in build/gpu_check_attention.log)
#        PREBUILT=DIR bash scripts/gpu_check_attention.sh   the benchmarks of DIR (make gpu-check-build),
#                                                           nothing built, the test left to scripts/gpu_check.sh
#        WORK=DIR    where the benchmark tables and the log go (default build)
#        LENGTHS="1024 2048"   the sequence lengths, in the order measured
set -uo pipefail
cd "$(dirname "$0")/.."

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_check_attention: no GPU visible (nvidia-smi -L failed); run this on a machine with one" >&2
    exit 1
fi
nvidia-smi -L

work=${WORK:-build}
mkdir -p "$work"
log=$work/gpu_check_attention.log
: > "$log"
start=$(date +%s)
status=0
bin=${PREBUILT:-build}
if [ -z "${PREBUILT:-}" ]; then
    make -j"$(nproc)" build/test_attention_cuda_gpu build/attention_backward 2>&1 | tee -a "$log" || exit 1
    echo "build: $(( $(date +%s) - start )) s"
    echo "=== test_attention_cuda on the GPU" | tee -a "$log"
    ./build/test_attention_cuda_gpu > "$work/gpu_check_attention_test.txt" 2>&1 || status=1
    grep -E 'MESSAGE|ERROR|values|doctest' "$work/gpu_check_attention_test.txt" | sed 's/^.*MESSAGE: //' | tee -a "$log"
fi

# The benchmark table's rows "T B kernel bwd_ms TFLOPs total_ms TFLOPs ratio" of one length ->
# "fwd+bwd T=...: lssar/softmax R  softmax/cudnn R" (forward+backward times; "-" for a missing row)
ratio_line() {
    awk -v T="$1" '
        $1 == T && NF == 8 { total[$3] = $6 }
        END {
            s = total["softmax"]; r = total["lssar"]; c = total["cudnn"]
            printf "fwd+bwd T=%d: lssar/softmax %s  softmax/cudnn %s\n", T,
                   (s && r) ? sprintf("%.2f", r / s) : "-", (s && c) ? sprintf("%.2f", s / c) : "-"
        }' "$2"
}

echo "=== attention_backward (forward+backward), one length at a time" | tee -a "$log"
for T in ${LENGTHS:-1024 2048 4096 8192 16384}; do
    table=$work/gpu_check_attention_T$T.txt
    "$bin/attention_backward" lssar -bench -p 15 -hd 64 -nh 12 -T "$T" > "$table" 2>&1 || status=1
    cat "$table" >> "$log"
    grep -h '^cudnn ' "$table" | tee -a "$log"
    ratio_line "$T" "$table" | tee -a "$log"
done
echo "targets: fwd+bwd lssar/softmax <= 1.5; fwd+bwd softmax/cudnn <= 1.3 at hd = 64, T = 1K-8K" | tee -a "$log"

echo "=== hd = 32 and 128: validation only" | tee -a "$log"
for hd in 32 128; do
    "$bin/attention_backward" all -p 15 -hd $hd -check 2>&1 | tee -a "$log" || status=1
done
echo "total: $(( $(date +%s) - start )) s, $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
