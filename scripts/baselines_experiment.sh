#!/usr/bin/env bash
# The baselines a length-extrapolation result is measured against, on the extrapolation experiment's
# models, steps, data and protocol (scripts/extrapolation_experiment.sh with SET=baselines): softmax;
# softmax with log-length scaling at evaluation only (-ls 1: the scores of rows beyond the training
# length times ln(n)/ln(T), no retraining); SSMax (scores times s ln(n), s learned per layer and head
# from 0.43); LSSA; LSSAR p = 15; LSSAR p = 15 with p warmup. SEEDS seeds each, byte-level CORPUS,
# scored on the test split: the loss beyond the training length, each model against softmax and
# against LSSAR p = 15 token by token (block bootstrap over windows, t over seed pairs, Holm over
# each table), the loss against position (PNG).
#   bash scripts/baselines_experiment.sh            3 seeds, KJV bytes (about 35 minutes on 2 cores alone;
#                                                   it reuses the extrapolation experiment's runs in the same OUT)
#   QUICK=1 bash scripts/baselines_experiment.sh    1 seed
#   CORPUS=fortunes|pystdlib, SPLIT=val, and the other settings of scripts/extrapolation_experiment.sh
# Writes OUT (out/extrapolation_<corpus>[_quick]) as that script does, the tables and PNG in
# OUT/<split>_baselines/.
set -euo pipefail
cd "$(dirname "$0")/.."
SET=baselines exec bash scripts/extrapolation_experiment.sh "$@"
