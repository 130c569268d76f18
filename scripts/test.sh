#!/usr/bin/env bash
# The test command: installs what is missing, compiles the CUDA programs and GPU test twins with
# nvcc (where the CUDA toolkit is installed; compile and link only) and every test program in one
# make (so that neither core waits for the other's last long compile), then runs every test that
# needs no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
jobs=$(nproc)
targets=(test-build)
if [ -x "${NVCC:-/usr/local/cuda/bin/nvcc}" ]; then
    targets=(cuda test-build)
else
    echo "no nvcc at ${NVCC:-/usr/local/cuda/bin/nvcc}: skipping the CUDA build (make cuda)"
fi
start=$(date +%s)
make -j"$jobs" "${targets[@]}"
echo "build of ${targets[*]}: $(( $(date +%s) - start )) s"
start=$(date +%s)
make test
echo "tests run in $(( $(date +%s) - start )) s"
