#!/usr/bin/env bash
# The test command: installs what is missing, compiles every CUDA target with nvcc (where the
# CUDA toolkit is installed; compile and link only), builds and runs every test that needs no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
jobs=$(nproc)
if [ -x "${NVCC:-/usr/local/cuda/bin/nvcc}" ]; then
    start=$(date +%s)
    make -j"$jobs" cuda
    echo "nvcc build of every CUDA target: $(( $(date +%s) - start )) s"
else
    echo "no nvcc at ${NVCC:-/usr/local/cuda/bin/nvcc}: skipping the CUDA build (make cuda)"
fi
make -j"$jobs" test
