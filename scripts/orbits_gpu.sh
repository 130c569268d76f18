#!/usr/bin/env bash
# Orbits to Newton's law at the reference's scale (Vafa et al. 2025: 10M two-body trajectories,
# bins of 0.014 AU, a GPT of ~100M parameters), trained with the CUDA trainer on the GPUs of one
# node; the simulation, the hidden states and the fits run on the node's CPUs.
#   bash scripts/orbits_gpu.sh                    8 GPUs (GPUS=4 ... on a smaller node)
#   SYSTEMS_TRAIN=1000000 bash scripts/orbits_gpu.sh   a tenth of the data, for a first look
# Sizes (any of them can be overridden from the environment, see scripts/orbits.sh):
#   10,000,000 training systems of 250 steps: sequences of T = 1001 tokens (500 points, the
#   reference has 1,000), 10.0B tokens; 560 bins per axis over [-4, 4] AU (0.0143 AU, the
#   reference's 7,000 bins over [-50, 50]); d12 (12 layers, 768 channels, 12 heads) with a
#   vocabulary of 1,122; 8 GPUs x 64 sequences = 512,512 tokens per step, 19,531 steps (one epoch),
#   the GPT-2 124M recipe's lr 6e-4; 1,000 probe systems.
# Simulation: about 15 CPU-hours for 10M systems (measured 4,000 systems x 63 steps in ~15 s on one
# core), run as 500 shards of 20,000 systems, JOBS (default: the number of cores) at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
export BACKEND=cu
export GPUS=${GPUS:-8}
export SYSTEMS_TRAIN=${SYSTEMS_TRAIN:-10000000} SYSTEMS_VAL=${SYSTEMS_VAL:-1000} SYSTEMS_PROBE=${SYSTEMS_PROBE:-1000}
export SIM_STEPS=${SIM_STEPS:-250} BINS=${BINS:-560} MODEL=${MODEL:-d12} BATCH=${BATCH:-64}
export STEPS=${STEPS:-$(( SYSTEMS_TRAIN * (1 + 4 * SIM_STEPS) / (BATCH * (1 + 4 * SIM_STEPS) * GPUS) ))}
export LR=${LR:-6e-4} WARMUP=${WARMUP:-700} CHUNK=${CHUNK:-20000} JOBS=${JOBS:-$(nproc)}
exec bash scripts/orbits.sh --threads "${THREADS:-$(nproc)}" --out "${OUT:-out/orbits_gpu}" "$@"
