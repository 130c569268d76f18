#!/usr/bin/env bash
# The paper's question at CPU scale: does the loss stay flat beyond the training length? Byte-level
# models (vocabulary 256, so that they must rely on their attention), SEEDS seeds each:
#   softmax, LSSA, LSSAR p = 15, LSSAR p = 15 with p warming up from 1 (-pw), and LSSA evaluated with
#   the re-weighting at p = 15 (-rw 15, no training of its own: this project's reading of the
#   "fine-tuning-free" use that the paper's arXiv v2 abstract names),
# trained at T = 64 on CORPUS and scored by loss_vs_length at 1x-16x the training length on the
# same bytes of the SPLIT split (test by default: settings are chosen with SPLIT=val): the loss over the positions beyond the training length, the paired
# difference against 1x, every model against softmax token by token (block bootstrap over windows,
# t-intervals over seeds), and the loss against position (PNG).
#   bash scripts/extrapolation_experiment.sh              3 seeds, KJV bytes (about 25 minutes on 2 cores)
#   QUICK=1 bash scripts/extrapolation_experiment.sh      1 seed (a third of the training)
#   CORPUS=fortunes bash scripts/extrapolation_experiment.sh     (or CORPUS=pystdlib: Python source)
#   SPLIT=val bash scripts/extrapolation_experiment.sh   the validation split, for choosing settings
# Settings: SEEDS (3), STEPS (2000), MODEL (d4c128h2v256), B (32), LR (2e-3), EVAL_TOKENS (65536),
# PRECISION (the trainer's and the tools' -pr, default auto), JOBS (2 runs at a time, 1 thread each),
# SET (extrapolation; baselines: scripts/baselines_experiment.sh's models).
# Writes OUT (out/extrapolation_<corpus>[_quick]): <model>_s<seed>/ (log.jsonl, train.out, checkpoint),
# and per split OUT/<split>/: <model>.csv, <model>_buckets.csv, <model>_tokens.bin, <model>.out (the
# tool's output), results.txt, positions.png. Running it again reuses finished runs and evaluations.
set -euo pipefail
cd "$(dirname "$0")/.."
start_s=$(date +%s)
CORPUS=${CORPUS:-kjv}
case $CORPUS in kjv|fortunes|pystdlib) ;; *) echo "extrapolation_experiment.sh: CORPUS=$CORPUS is not known; use kjv, fortunes or pystdlib" >&2; exit 2 ;; esac
SET=${SET:-extrapolation}   # extrapolation: the models above; baselines: scripts/baselines_experiment.sh's
case $SET in extrapolation|baselines) ;; *) echo "extrapolation_experiment.sh: SET=$SET is not known; use extrapolation or baselines" >&2; exit 2 ;; esac
SPLIT=${SPLIT:-test}   # the split scored: test for the reported tables, val while choosing settings
case $SPLIT in val|test) ;; *) echo "extrapolation_experiment.sh: SPLIT=$SPLIT is not known; use test or val" >&2; exit 2 ;; esac
if [ "${QUICK:-0}" = 1 ]; then SEEDS=${SEEDS:-1}; OUT=${OUT:-out/extrapolation_${CORPUS}_quick}
else SEEDS=${SEEDS:-3}; OUT=${OUT:-out/extrapolation_${CORPUS}}; fi
STEPS=${STEPS:-2000}
MODEL=${MODEL:-d4c128h2v256}
B=${B:-32}
LR=${LR:-2e-3}
EVAL_TOKENS=${EVAL_TOKENS:-65536}
PRECISION=${PRECISION:-auto}
JOBS=${JOBS:-2}
T=64
P_WARMUP=$((STEPS / 4))
SEED_LIST=$(seq 1 "$SEEDS" | awk '{ printf "%d ", 1336 + $1 }')   # 1337 1338 ...
DATA=data/${CORPUS}_bytes
[[ $SEEDS =~ ^[1-9][0-9]*$ && $STEPS =~ ^[1-9][0-9]*$ ]] || { echo "extrapolation_experiment.sh: SEEDS and STEPS must be positive integers" >&2; exit 2; }

bash scripts/install_deps.sh >/dev/null
variants="softmax lssa lssar"; [ "$SET" = baselines ] && variants="$variants ssmax"
targets=""; for v in $variants; do targets="$targets train_gpt2cpu_$v build/loss_vs_length_cpu_$v"; done
make -s -j"$(nproc)" $targets
[ -s "$DATA/${CORPUS}_val_000000.bin" ] && [ -s "$DATA/${CORPUS}_test_000000.bin" ] || bash "scripts/prepare_$CORPUS.sh" --bytes
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=passive
mkdir -p "$OUT"
echo "== $CORPUS bytes, $MODEL, T $T, B $B, $STEPS steps ($((STEPS * B * T)) tokens), lr $LR cosine, seeds $SEED_LIST, -pr $PRECISION"

# the trained models: name, attention, the trainer's extra flags
MODELS=("softmax softmax" "lssa lssa" "lssar lssar -p 15" "lssar_pw lssar -p 15 -pw $P_WARMUP")
[ "$SET" = baselines ] && MODELS+=("ssmax ssmax")
source scripts/train_run.sh
train_one() {  # name attn seed flags...
    local name=$1 attn=$2 seed=$3
    shift 3
    train_run "$OUT/${name}_s$seed" "$attn" "$seed" "$DATA/${CORPUS}_train_*.bin" "$DATA/${CORPUS}_val_*.bin" \
        "$name seed $seed" "$@"
}
running=0
for seed in $SEED_LIST; do
    for m in "${MODELS[@]}"; do
        read -r name attn flags <<<"$m"
        # shellcheck disable=SC2086
        train_one "$name" "$attn" "$seed" $flags &
        running=$((running + 1))
        if [ "$running" -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
    done
done
wait

# every model scored on the same bytes, all its seeds at once; softmax's token losses first, the
# others paired against them
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2
EVAL="$OUT/$SPLIT${SET/#extrapolation/}"; [ "$SET" = baselines ] && EVAL="$OUT/${SPLIT}_baselines"
mkdir -p "$EVAL"
ckpts() { for seed in $SEED_LIST; do printf "%s/%s_s%s/ckpt_%08d.bin," "$OUT" "$1" "$seed" "$STEPS"; done | sed 's/,$//'; }
evaluate() {  # label tool checkpoints-of flags...
    local label=$1 tool=$2 of=$3; shift 3
    [ -s "$EVAL/$label.csv" ] && return 0
    "build/loss_vs_length_cpu_$tool" -e "$(ckpts "$of")" -j "$DATA/${CORPUS}_${SPLIT}_*.bin" -t $T -l 1,2,4,8,16 \
        -n "$EVAL_TOKENS" -pr "$PRECISION" -o "$EVAL/$label.csv" -ob "$EVAL/${label}_buckets.csv" \
        -ot "$EVAL/${label}_tokens.bin" "$@" >"$EVAL/$label.out" 2>&1 ||
        { echo "evaluation failed: $EVAL/$label.out" >&2; tail -3 "$EVAL/$label.out" >&2; return 1; }
    echo "[$label] scored"
}
evaluate softmax softmax softmax
evaluate lssa lssa lssa -vs "$EVAL/softmax_tokens.bin"
evaluate lssar lssar lssar -vs "$EVAL/softmax_tokens.bin"
evaluate lssar_pw lssar lssar_pw -vs "$EVAL/softmax_tokens.bin"
if [ "$SET" = baselines ]; then
    evaluate softmax_ls softmax softmax -ls 1 -vs "$EVAL/softmax_tokens.bin"
    evaluate ssmax ssmax ssmax -vs "$EVAL/softmax_tokens.bin"
    # the same models against LSSAR p = 15's token losses (labels ending _vl)
    evaluate softmax_vl softmax softmax -vs "$EVAL/lssar_tokens.bin"
    evaluate softmax_ls_vl softmax softmax -ls 1 -vs "$EVAL/lssar_tokens.bin"
    evaluate ssmax_vl ssmax ssmax -vs "$EVAL/lssar_tokens.bin"
    evaluate lssa_vl lssa lssa -vs "$EVAL/lssar_tokens.bin"
    evaluate lssar_pw_vl lssar lssar_pw -vs "$EVAL/lssar_tokens.bin"
    labels=(softmax softmax_ls ssmax lssa lssar lssar_pw)
    names=("softmax" "softmax, log-length scaling at evaluation" "SSMax" "LSSA" "LSSAR p=15" "LSSAR p=15, p warmup")
else
    evaluate lssa_rw lssar lssa -rw 15 -vs "$EVAL/softmax_tokens.bin"
    labels=(softmax lssa lssar lssar_pw lssa_rw)
    names=("softmax" "LSSA" "LSSAR p=15" "LSSAR p=15, p warmup" "LSSA, re-weighted at evaluation (p=15)")
fi
specs=(); buckets=(); specs_vl=()
for i in "${!labels[@]}"; do
    specs+=("${names[$i]}=$EVAL/${labels[$i]}.csv")
    buckets+=("${names[$i]}=$EVAL/${labels[$i]}_buckets.csv")
    if [ "${labels[$i]}" = lssar ]; then specs_vl+=("${names[$i]}=$EVAL/lssar.csv")
    else specs_vl+=("${names[$i]}=$EVAL/${labels[$i]}_vl.csv"); fi
done
{
    echo "$CORPUS bytes, $MODEL, T $T, B $B, $STEPS steps ($((STEPS * B * T)) tokens per model), lr $LR cosine to 10%,"
    echo "warmup $((STEPS / 20)), p warmup $P_WARMUP steps, seeds $SEED_LIST, -pr $PRECISION; $EVAL_TOKENS bytes of the $SPLIT split scored at every length."
    echo
} >"$EVAL/results.txt"
/usr/bin/python3 eval/extrapolation_report.py --train-len $T --split "$SPLIT" --baseline softmax "${specs[@]}" | tee -a "$EVAL/results.txt"
if [ "$SET" = baselines ]; then
    echo | tee -a "$EVAL/results.txt"
    echo "Against LSSAR p=15:" | tee -a "$EVAL/results.txt"
    /usr/bin/python3 eval/extrapolation_report.py --train-len $T --split "$SPLIT" --baseline "LSSAR p=15" "${specs_vl[@]}" |
        sed -n '/^Against LSSAR/,$p' | tee -a "$EVAL/results.txt"
fi
/usr/bin/python3 eval/plot_positions.py "${buckets[@]}" --train-len $T --split "$SPLIT" -o "$EVAL/positions.png" \
    --title "$CORPUS bytes, trained at $T: loss against position (mean over $SEEDS seed(s))"
echo "== done in $(( ($(date +%s) - start_s) / 60 )) minutes (load: $(cut -d' ' -f1-3 /proc/loadavg)); $EVAL/results.txt, $EVAL/positions.png"
