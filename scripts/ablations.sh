#!/usr/bin/env bash
# The paper's attention ablation on the CPU: every variant of the family (attention/attention_kind.h)
# trained with the same budget, data and seeds, each scored at 1x..16x its training length on the
# same bytes of the test split: one table beside the paper's rows (the mean over SEEDS seeds with a
# 95% t-interval over them; the paper's 1K/2K/4K/8K = our 1x/2x/4x/8x), every run against softmax
# token by token (block bootstrap over windows, t over seed pairs, Holm across the table's cells:
# eval/extrapolation_report.py), and one PNG.
#   bash scripts/ablations.sh                   12 runs x 3 seeds, KJV bytes (about an hour on 2 cores)
#   SEEDS=1 bash scripts/ablations.sh           one seed: a look at how the rows start, no comparison
#   CORPUS=fortunes bash scripts/ablations.sh   (or pystdlib: Python source)
#   SPLIT=val                                   the split scored (default test: the table's; val while choosing settings)
#   DATA=data/kjv MODEL=d4c128h2 B=16 STEPS=200 EVAL_TOKENS=32768 bash scripts/ablations.sh
#                                               any shards with train/val/test splits (here GPT-2 BPE)
#   VARIANTS="softmax lssar" P=15 OUT=out/ablations JOBS=2 (runs at a time, 1 thread each)
#   PRECISION=ref    the trainer's -pr: the reference path (default auto: the fast path; the evaluation
#                    takes the same -pr)
# The re-weighted variants train at p = $P (LSSAR also at p = 3, the paper's two rows), and
# LSSAR once more with p learned per layer and head from p = $P (-pl 1; run lssar_pl). sigmoid and
# relu train twice: with their length terms at the row's n_t (runs sigmoid, relu) and at the training
# length (-tl 1: runs sigmoid_tl, relu_tl, the form the paper's rows most likely use;
# doc/attention.md, section 'Choices the cited papers leave open').
# Writes OUT/<run>_s<seed>/ (log.jsonl, train.out, final checkpoint) and per split OUT/<split>/:
# <run>.csv, <run>_tokens.bin, <run>.out, ablations.txt (both tables) and ablations.png. Running it
# again reuses finished runs and evaluations.
set -euo pipefail
cd "$(dirname "$0")/.."
start_s=$(date +%s)
CORPUS=${CORPUS:-kjv}
case $CORPUS in kjv|fortunes|pystdlib) ;; *) echo "ablations.sh: CORPUS=$CORPUS is not known; use kjv, fortunes or pystdlib" >&2; exit 2 ;; esac
DATA=${DATA:-data/${CORPUS}_bytes}
MODEL=${MODEL:-d4c128h2v256}  # 4 layers, 128 channels, 2 heads of 64, bytes
STEPS=${STEPS:-1000}          # optimizer steps per model, B x 64 tokens each
B=${B:-32}
LR=${LR:-2e-3}
P=${P:-15}
SEEDS=${SEEDS:-3}             # seeds 1337, 1338, ...
JOBS=${JOBS:-2}
[[ $SEEDS =~ ^[1-9][0-9]*$ && $STEPS =~ ^[1-9][0-9]*$ && $JOBS =~ ^[1-9][0-9]*$ ]] ||
    { echo "ablations.sh: SEEDS, STEPS and JOBS must be positive integers (SEEDS=$SEEDS STEPS=$STEPS JOBS=$JOBS)" >&2; exit 2; }
SEED_LIST=$(seq 1337 $((1336 + SEEDS)))
VARIANTS=${VARIANTS:-softmax sigmoid relu lssa lssar softmax_rw sigmoid_l1_rw relu_l1_rw}  # the paper's rows (ssmax: baselines_experiment.sh)
EVAL_TOKENS=${EVAL_TOKENS:-65536}   # tokens scored at every length (64 windows of the longest: at least 50 for the intervals)
PRECISION=${PRECISION:-auto}  # the trainer's -pr
SPLIT=${SPLIT:-test}
case $SPLIT in val|test) ;; *) echo "ablations.sh: SPLIT=$SPLIT is not known; use test or val" >&2; exit 2 ;; esac
OUT=${OUT:-out/ablations_$(basename "$DATA")}
T=64                          # training length; scored at 64 ... 1024
case " $VARIANTS " in *" softmax "*) ;; *) echo "ablations.sh: VARIANTS must include softmax (every run is compared with it)" >&2; exit 2 ;; esac

if ! ls "$DATA"/*_test_*.bin >/dev/null 2>&1; then
    case $DATA in
        data/${CORPUS}_bytes) bash "scripts/prepare_$CORPUS.sh" --bytes ;;
        data/kjv) bash scripts/prepare_kjv.sh ;;
        *) echo "ablations.sh: no shards $DATA/*_test_*.bin (scripts/prepare_*.sh write train, val and test)" >&2; exit 1 ;;
    esac
fi
train_pattern=$(ls "$DATA"/*_train_*.bin | head -1 | sed 's/_train_[0-9]*\.bin$/_train_*.bin/')
val_pattern=${train_pattern/_train_/_val_}
eval_pattern=${train_pattern/_train_/_${SPLIT}_}
ls $val_pattern > /dev/null || { echo "ablations.sh: no validation shards $val_pattern" >&2; exit 1; }
ls $eval_pattern > /dev/null || { echo "ablations.sh: no $SPLIT shards $eval_pattern (scripts/prepare_*.sh write train, val and test)" >&2; exit 1; }

echo "== building the CPU trainer and the loss-versus-length tool for: $VARIANTS"
targets=""
for v in $VARIANTS; do targets="$targets train_gpt2cpu_$v build/loss_vs_length_cpu_$v"; done
make -s -j"$(nproc)" $targets

# the runs: name, attention, the trainer's extra flags. From the manifest (scripts/manifest.py): the
# variants with re-weighting, and those whose definition holds a length other than log-length
# scaling's threshold (dot_logn's bias, mean's scale: -tl 1 applies)
reweighting=" $(/usr/bin/python3 scripts/manifest.py names reweight=true | tr '\n' ' ')"
with_len=" $(/usr/bin/python3 scripts/manifest.py names has_len=true log_len_scaling=false | tr '\n' ' ')"
RUNS=()
for v in $VARIANTS; do
    if [ "$v" = lssar ]; then  # the paper's two rows, and p learned
        RUNS+=("lssar_p3 lssar -p 3" "lssar_p$P lssar -p $P" "lssar_pl lssar -p $P -pl 1")
    elif [[ $reweighting == *" $v "* ]]; then
        RUNS+=("${v}_p$P $v -p $P")
    elif [[ $with_len == *" $v "* ]]; then
        RUNS+=("$v $v" "${v}_tl $v -tl 1")
    else
        RUNS+=("$v $v")
    fi
done

mkdir -p "$OUT"
echo "== $(basename "$DATA"), $MODEL, T $T, B $B, $STEPS steps ($((STEPS * B * T)) tokens per run), lr $LR cosine, seeds $(echo $SEED_LIST), -pr $PRECISION: ${#RUNS[@]} runs x $SEEDS seed(s)"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=passive
source scripts/train_run.sh
train_one() {  # run attention seed flags...
    local run=$1 attn=$2 seed=$3
    shift 3
    train_run "$OUT/${run}_s$seed" "$attn" "$seed" "$train_pattern" "$val_pattern" "$run seed $seed" "$@"
}
running=0; failed=0
for seed in $SEED_LIST; do
    for r in "${RUNS[@]}"; do
        read -r run attn flags <<<"$r"
        # shellcheck disable=SC2086
        train_one "$run" "$attn" "$seed" $flags &
        running=$((running + 1))
        if [ "$running" -ge "$JOBS" ]; then wait -n || failed=1; running=$((running - 1)); fi
    done
done
while [ "$running" -gt 0 ]; do wait -n || failed=1; running=$((running - 1)); done
[ "$failed" = 0 ] || { echo "ablations.sh: a training run failed (above); running the script again resumes" >&2; exit 1; }

# every run scored on the same tokens, all its seeds at once; softmax's token losses first, the
# others paired against them
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2
EVAL="$OUT/$SPLIT"
mkdir -p "$EVAL"
specs=(); paired=()
for r in "${RUNS[@]}"; do
    read -r run attn flags <<<"$r"
    ckpts=$(for seed in $SEED_LIST; do printf "%s/%s_s%s/ckpt_%08d.bin," "$OUT" "$run" "$seed" "$STEPS"; done | sed 's/,$//')
    vs=(); [ "$run" = softmax ] || vs=(-vs "$EVAL/softmax_tokens.bin")
    if [ ! -s "$EVAL/$run.csv" ]; then
        "build/loss_vs_length_cpu_$attn" -e "$ckpts" -j "$eval_pattern" -t $T -l 1,2,4,8,16 -n "$EVAL_TOKENS" \
            -pr "$PRECISION" -o "$EVAL/$run.csv" -ot "$EVAL/${run}_tokens.bin" "${vs[@]}" >"$EVAL/$run.out" 2>&1 ||
            { echo "evaluation failed: $EVAL/$run.out" >&2; tail -3 "$EVAL/$run.out" >&2; exit 1; }
        echo "[$run] scored"
    fi
    specs+=("$run=$EVAL/$run.csv")
done

{
    echo "$(basename "$DATA"), $MODEL, T $T, B $B, $STEPS steps ($((STEPS * B * T)) tokens per run), lr $LR cosine to 10%,"
    echo "warmup $((STEPS / 20)), seeds $(echo $SEED_LIST), -pr $PRECISION; $EVAL_TOKENS tokens of the $SPLIT split scored at every length."
    echo
    echo "The ablation beside the paper's rows:"
} >"$EVAL/ablations.txt"
/usr/bin/python3 scripts/ablation_table.py "${specs[@]}" --train-len $T --split "$SPLIT" --baseline none \
    --title "$(basename "$DATA"), $MODEL, trained at $T for $STEPS steps ($SEEDS seed(s))" -o "$EVAL/ablations.png" \
    | tee -a "$EVAL/ablations.txt"
echo | tee -a "$EVAL/ablations.txt"
/usr/bin/python3 eval/extrapolation_report.py --train-len $T --split "$SPLIT" --baseline softmax "${specs[@]}" |
    tee -a "$EVAL/ablations.txt"
echo "== done in $(( ($(date +%s) - start_s) / 60 )) minutes (load: $(cut -d' ' -f1-3 /proc/loadavg)); $EVAL/ablations.txt, $EVAL/ablations.png"
