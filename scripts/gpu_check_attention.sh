#!/usr/bin/env bash
# GPU check of the attention kernels (attention/attention.cuh), in a few minutes on one GPU:
#   1. builds with nvcc: the kernel test (test/test_attention_cuda.cu, the emulated test's cases)
#      and the dev benchmarks (dev/attention_forward.cu, dev/attention_backward.cu)
#   2. runs the test on the GPU, then validation + benchmark (hd = 64, GPT-2 small's 12 heads,
#      B*T = 16K tokens, T = 1K..16K, LSSAR p = 15)
#   3. prints the ratios the targets are about: LSSAR (and LSSA) fwd+bwd time vs softmax, and the
#      softmax kernel vs cuDNN's flash attention where the build found cuDNN (the benchmarks' row
#      "cudnn", timed only after its output matched the softmax kernel's; "-" where it did not run)
# Usage: bash scripts/gpu_check_attention.sh     (log also in build/gpu_check_attention.log)
#        PREBUILT=DIR bash scripts/gpu_check_attention.sh   the benchmarks of DIR (make gpu-check-build),
#                                                           nothing built, the test left to scripts/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_check_attention: no GPU visible (nvidia-smi -L failed); run this on a machine with one" >&2
    exit 1
fi
nvidia-smi -L


mkdir -p build
log=build/gpu_check_attention.log
: > "$log"
start=$(date +%s)
status=0
bin=${PREBUILT:-build}
if [ -z "${PREBUILT:-}" ]; then
    make -j"$(nproc)" build/test_attention_cuda_gpu build/attention_forward build/attention_backward \
        2>&1 | tee -a "$log"
    echo "build: $(( $(date +%s) - start )) s"
    echo "=== test_attention_cuda on the GPU" | tee -a "$log"
    ./build/test_attention_cuda_gpu > build/gpu_check_attention_test.txt 2>&1 || status=1
    grep -E 'MESSAGE|ERROR|values|doctest' build/gpu_check_attention_test.txt | sed 's/^.*MESSAGE: //' | tee -a "$log"
fi
: > build/gpu_check_attention_fwd.txt
: > build/gpu_check_attention_bwd.txt

echo "=== attention_forward" | tee -a "$log"
"$bin/attention_forward" all -p 15 -hd 64 -nh 12 2>&1 | tee -a "$log" build/gpu_check_attention_fwd.txt || status=1
echo "=== attention_backward" | tee -a "$log"
"$bin/attention_backward" all -p 15 -hd 64 -nh 12 2>&1 | tee -a "$log" build/gpu_check_attention_bwd.txt || status=1

# Ratios from the benchmark tables: rows "T B kernel ms TFLOPs ratio" (forward) and
# "T B kernel bwd_ms TFLOPs total_ms TFLOPs ratio" (backward); T ascending as printed.
echo "=== ratios of times" | tee -a "$log"
awk '
    $1 ~ /^[0-9]+$/ && NF == 8 { if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } total[$1 " " $3] = $6 }
    END {
        printf "fwd+bwd %6s  %16s  %16s  %16s\n", "T", "lssar / softmax", "lssa / softmax", "softmax / cudnn"
        for (i = 1; i <= n; i++) {
            T = order[i]; s = total[T " softmax"]; r = total[T " lssar"]; a = total[T " lssa"]; c = total[T " cudnn"]
            printf "fwd+bwd %6d  %16s  %16s  %16s\n", T, (s && r) ? sprintf("%.2f", r / s) : "-",
                   (s && a) ? sprintf("%.2f", a / s) : "-", (s && c) ? sprintf("%.2f", s / c) : "-"
        }
    }' build/gpu_check_attention_bwd.txt | tee -a "$log"
awk '
    $1 ~ /^[0-9]+$/ && NF == 6 { if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } ms[$1 " " $3] = $4 }
    END {
        for (i = 1; i <= n; i++) {
            T = order[i]; s = ms[T " softmax"]; r = ms[T " lssar"]; a = ms[T " lssa"]; c = ms[T " cudnn"]
            printf "forward %6d  %16s  %16s  %16s\n", T, (s && r) ? sprintf("%.2f", r / s) : "-",
                   (s && a) ? sprintf("%.2f", a / s) : "-", (s && c) ? sprintf("%.2f", s / c) : "-"
        }
    }' build/gpu_check_attention_fwd.txt | tee -a "$log"
grep -h '^cudnn ' build/gpu_check_attention_fwd.txt build/gpu_check_attention_bwd.txt | tee -a "$log" || true
echo "targets: fwd+bwd lssar / softmax <= 1.5; fwd+bwd softmax / cudnn <= 1.3 at hd = 64, T = 1K-8K" | tee -a "$log"

echo "=== hd = 32 and 128: validation only" | tee -a "$log"
for hd in 32 128; do
    "$bin/attention_backward" all -p 15 -hd $hd -check 2>&1 | tee -a "$log" || status=1
done
echo "total: $(( $(date +%s) - start )) s, $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
