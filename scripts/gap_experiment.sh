#!/usr/bin/env bash
# The in-distribution gap: how far LSSAR (p = 15) stays behind softmax in validation loss at the
# training length, and how that moves with the number of steps, the learning rate and the warmup.
# Every setting trains the BPE demo's model (d4c128h2, T = 64, B = 16, cosine schedule) on CORPUS,
# softmax and LSSAR, once per seed (SEEDS, default 3: the pair of a seed shares it); the loss of the
# SPLIT shards (default test, the table's; val while choosing settings) every 50 steps on the same
# tokens (the trainer's -j, logged as its val_loss); the gap is the mean over the seed pairs with a
# 95% t-interval.
#   CORPUS=kjv (default: scripts/prepare_kjv.sh) or CORPUS=fortunes (scripts/prepare_fortunes.sh)
#   bash scripts/gap_experiment.sh                       the settings below, JOBS runs at a time
#   SETTINGS="400:2e-3:20 400:4e-3:20" bash scripts/gap_experiment.sh
# A setting is STEPS:LR:WARMUP. Writes OUT/<setting>_<attn>_<seed>/ (log.jsonl, train.out),
# OUT/gap_table.txt and OUT/gap.png (OUT: out/gap_<split> for KJV, out/gap_<corpus>_<split> otherwise). Running it again reuses finished runs.
# PRECISION: the trainer's -pr (default auto, the fastest CPU path; ref for the reference).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/attn_flags.sh
SETTINGS=${SETTINGS:-"200:2e-3:20 600:2e-3:20 200:6e-3:20 200:1e-3:20 200:2e-3:100"}
THREADS=${THREADS:-2}
JOBS=${JOBS:-2}
CORPUS=${CORPUS:-kjv}
case $CORPUS in kjv) OUT=${OUT:-out/gap_${SPLIT:-test}} ;; fortunes) OUT=${OUT:-out/gap_fortunes_${SPLIT:-test}} ;;
    *) echo "gap_experiment.sh: CORPUS=$CORPUS is not known; use kjv or fortunes" >&2; exit 2 ;; esac
MODEL=${MODEL:-d4c128h2}
SEEDS=${SEEDS:-3}
SPLIT=${SPLIT:-test}
[[ $SPLIT == val || $SPLIT == test ]] || { echo "gap_experiment.sh: SPLIT=$SPLIT: val or test" >&2; exit 2; }
[[ $SEEDS =~ ^[1-9][0-9]*$ ]] || { echo "gap_experiment.sh: SEEDS=$SEEDS: give a positive integer" >&2; exit 2; }
SEED_LIST=$(seq 1337 $((1336 + SEEDS)))
T=64
start_s=$(date +%s)

bash scripts/install_deps.sh >/dev/null
make -s -j"$(nproc)" train_gpt2cpu_softmax train_gpt2cpu_lssar
[ -s data/$CORPUS/${CORPUS}_train_000000.bin ] || bash scripts/prepare_$CORPUS.sh
per_job=$((THREADS / JOBS)); [ "$per_job" -ge 1 ] || per_job=1
export OMP_NUM_THREADS=$per_job OPENBLAS_NUM_THREADS=$per_job OMP_WAIT_POLICY=passive
mkdir -p "$OUT"

train_one() {  # steps lr warmup attn seed
    local steps=$1 lr=$2 warmup=$3 attn=$4 seed=$5 dir="$OUT/s$1_lr$2_u$3_$4_$5"
    if grep -q "\"step\":$steps,\"val_loss\"" "$dir/log.jsonl" 2>/dev/null; then return 0; fi
    mkdir -p "$dir"
    ./train_gpt2cpu_$attn -i "data/$CORPUS/${CORPUS}_train_*.bin" -j "data/$CORPUS/${CORPUS}_${SPLIT}_*.bin" -o "$dir" -e "$MODEL" $(p_flag $attn 15) \
        -b 16 -t $T -x "$steps" -l "$lr" -u "$warmup" -k cosine -q 0.1 -c 0.1 -gc 1.0 -v 50 -m 20 -s 0 -n 0 \
        -rs "$seed" -pr "${PRECISION:-auto}" >"$dir/train.out" 2>&1 || { echo "training failed: $dir/train.out" >&2; tail -3 "$dir/train.out" >&2; return 1; }
    echo "[$(basename "$dir")] $(grep '^val loss' "$dir/train.out" | tail -1)"
}

# every (setting, attention) run, JOBS at a time
jobs_list=()
for s in $SETTINGS; do for seed in $SEED_LIST; do for attn in softmax lssar; do jobs_list+=("$s:$attn:$seed"); done; done; done
running=0
for job in "${jobs_list[@]}"; do
    IFS=: read -r steps lr warmup attn seed <<<"$job"
    echo "== $attn: $steps steps, lr $lr, warmup $warmup, seed $seed ($per_job thread(s))"
    train_one "$steps" "$lr" "$warmup" "$attn" "$seed" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
done
wait

pairs=()
for s in $SETTINGS; do
    IFS=: read -r steps lr warmup <<<"$s"
    logs=""
    for seed in $SEED_LIST; do
        logs="$logs${logs:+,}$OUT/s${steps}_lr${lr}_u${warmup}_softmax_$seed/log.jsonl,$OUT/s${steps}_lr${lr}_u${warmup}_lssar_$seed/log.jsonl"
    done
    pairs+=("$steps steps, lr $lr, warmup $warmup=$logs")
done
/usr/bin/python3 eval/gap_report.py "${pairs[@]}" --title "$CORPUS ($SPLIT split), $MODEL, T $T: LSSAR p=15 against softmax" \
    -o "$OUT/gap.png" | tee "$OUT/gap_table.txt"
echo "== done in $(( ($(date +%s) - start_s) / 60 )) minutes (load: $(cut -d' ' -f1-3 /proc/loadavg))"
