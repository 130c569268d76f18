#!/usr/bin/env bash
# The extrapolation experiment on the three byte-level corpora (KJV, fortunes, the Python standard
# library: prose, short texts and source code), then every model against softmax pooled over them
# with equal weight (eval/pool_report.py: window and seed intervals, Holm over the table).
#   bash scripts/corpora_experiment.sh             3 seeds per model and corpus (about 25-45 minutes per
#                                                  corpus on 2 cores; finished runs are reused)
#   QUICK=1 bash scripts/corpora_experiment.sh     1 seed (no seed intervals in the pooled table)
#   SET=baselines bash scripts/corpora_experiment.sh   the baselines experiment's models instead
#   CORPORA="kjv fortunes" SPLIT=val ...           and the settings of scripts/extrapolation_experiment.sh
# Writes out/extrapolation_<corpus>[_quick]/ per corpus and out/corpora[_quick]_<split>[_baselines].txt.
set -euo pipefail
cd "$(dirname "$0")/.."
CORPORA=${CORPORA:-kjv fortunes pystdlib}
SPLIT=${SPLIT:-test}
SET=${SET:-extrapolation}
quick=""; [ "${QUICK:-0}" = 1 ] && quick=_quick
suffix=""; [ "$SET" = baselines ] && suffix=_baselines
[ -z "${OUT:-}" ] || { echo "corpora_experiment.sh: OUT is per corpus here (out/extrapolation_<corpus>); unset it" >&2; exit 2; }
for c in $CORPORA; do
    echo "== $c"
    CORPUS=$c SPLIT=$SPLIT SET=$SET bash scripts/extrapolation_experiment.sh
done
labels=(softmax lssa lssar lssar_pw lssa_rw)
names=("softmax" "LSSA" "LSSAR p=15" "LSSAR p=15, p warmup" "LSSA, re-weighted at evaluation (p=15)")
if [ "$SET" = baselines ]; then
    labels=(softmax softmax_ls ssmax lssa lssar lssar_pw)
    names=("softmax" "softmax, log-length scaling at evaluation" "SSMax" "LSSA" "LSSAR p=15" "LSSAR p=15, p warmup")
fi
specs=()
for c in $CORPORA; do
    for i in "${!labels[@]}"; do specs+=("$c:${names[$i]}=out/extrapolation_$c$quick/$SPLIT$suffix/${labels[$i]}.csv"); done
done
/usr/bin/python3 eval/pool_report.py --train-len 64 --baseline softmax "${specs[@]}" -o "out/corpora${quick}_$SPLIT$suffix.txt"
