#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test that needs no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
make -j"$(nproc)" test
