#!/usr/bin/env bash
# The paper's attention ablation on the CPU: every variant of the family (attention/attention_kind.h)
# trained with the same budget and seeds on the same data, each evaluated at 1x..16x its training
# length (the mean over SEEDS seeds with a 95% t-interval over them), one table beside the paper's
# rows (its 1K/2K/4K/8K = our 1x/2x/4x/8x) and one PNG.
#   bash scripts/ablations.sh                     12 runs x 3 seeds, ~2-3 minutes of training each on 2 cores
#   SEEDS=1 bash scripts/ablations.sh             one seed: a look at how the rows start, no comparison
#   STEPS=600 MODEL=d6c192h3 bash scripts/ablations.sh
#   DATA=data/mine  (its *_train_*.bin, *_val_*.bin and *_test_*.bin shards; default data/kjv, made if missing)
#   SPLIT=val       the split scored (default test: the table's; val while choosing settings)
#   VARIANTS="softmax lssar" P=15 THREADS=8 OUT=out/ablations EVAL_TOKENS=4096
#   PRECISION=ref    the trainer's -pr: the reference path (default auto: the fast path's bf16 where the
#                    CPU has bf16 matmuls, 2-3x faster; the evaluation takes the same -pr)
# The re-weighted variants train at p = $P (LSSAR also at p = 3, the paper's two rows), and
# LSSAR once more with p learned per layer and head from p = $P (-pl 1; run lssar_pl). sigmoid and
# relu train twice: with their length terms at the row's n_t (runs sigmoid, relu) and at the training
# length (-tl 1: runs sigmoid_tl, relu_tl, the form the paper's rows most likely use;
# doc/attention.md, section 'Choices the cited papers leave open').
# Writes $OUT/<run>_s<seed>/ (log.jsonl, final checkpoint), $OUT/<run>.csv, $OUT/ablations.txt (the table)
# and $OUT/ablations.png. Running it again resumes or reuses finished runs (-y 1).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-200}           # optimizer steps per model, 16 x 64 tokens each
THREADS=${THREADS:-2}
OUT=${OUT:-out/ablations}
MODEL=${MODEL:-d4c128h2}      # 4 layers, 128 channels, 2 heads of 64
DATA=${DATA:-data/kjv}
P=${P:-15}
SEEDS=${SEEDS:-3}             # seeds 1337, 1338, ...
[[ $SEEDS =~ ^[1-9][0-9]*$ ]] || { echo "ablations.sh: SEEDS=$SEEDS: give a positive integer" >&2; exit 2; }
SEED_LIST=$(seq 1337 $((1336 + SEEDS)))
VARIANTS=${VARIANTS:-softmax sigmoid relu lssa lssar softmax_rw sigmoid_l1_rw relu_l1_rw}  # the paper's rows (ssmax: baselines_experiment.sh)
WARMUP=${WARMUP:-$(( STEPS / 10 ))}  # learning-rate warmup steps, then cosine decay to 0.1x
EVAL_TOKENS=${EVAL_TOKENS:-65536}   # tokens scored at every length (64 windows of the longest: at least 50 for the intervals)
PRECISION=${PRECISION:-auto}  # the trainer's -pr
T=64                          # training length; evaluated at 64 ... 1024

train_glob=$(ls "$DATA"/*_train_*.bin 2>/dev/null | head -1 || true)
if [ -z "$train_glob" ] && [ "$DATA" = data/kjv ]; then
    echo "== tokenizing the King James Bible into data/kjv"
    bash scripts/prepare_kjv.sh
fi
train_pattern=$(ls "$DATA"/*_train_*.bin | head -1 | sed 's/_train_[0-9]*\.bin$/_train_*.bin/')
val_pattern=${train_pattern/_train_/_val_}
SPLIT=${SPLIT:-test}
eval_pattern=${train_pattern/_train_/_${SPLIT}_}
ls $val_pattern > /dev/null || { echo "error: no validation shards $val_pattern" >&2; exit 1; }
ls $eval_pattern > /dev/null || { echo "error: no $SPLIT shards $eval_pattern (scripts/prepare_*.sh write train, val and test)" >&2; exit 1; }

echo "== building the CPU trainer and the loss-versus-length tool for: $VARIANTS"
targets=""
for v in $VARIANTS; do targets="$targets train_gpt2cpu_$v build/loss_vs_length_cpu_$v"; done
make -s -j2 $targets

export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS OMP_WAIT_POLICY=passive
mkdir -p "$OUT"
final=$(printf "ckpt_%08d.bin" "$STEPS")
runs=()
train_eval() {  # run-name variant extra-flags...
    local run=$1 v=$2 ckpts=""
    shift 2
    for seed in $SEED_LIST; do
        echo "== training $MODEL with $run: $STEPS steps of 16 x $T tokens, seed $seed"
        "./train_gpt2cpu_$v" -i "$train_pattern" -j "$val_pattern" -o "$OUT/${run}_s$seed" -e "$MODEL" "$@" \
            -b 16 -t $T -x "$STEPS" -l 2e-3 -u "$WARMUP" -k cosine -q 0.1 -c 0.1 -gc 1.0 -rs "$seed" \
            -v 50 -m 20 -s 0 -n "$STEPS" -nk 1 -y 1 -pr "$PRECISION"
        ckpts="$ckpts${ckpts:+,}$OUT/${run}_s$seed/$final"
    done
    echo "== loss versus length, $run ($SEEDS seed(s))"
    "./build/loss_vs_length_cpu_$v" -e "$ckpts" -j "$eval_pattern" -t $T -l 1,2,4,8,16 -n "$EVAL_TOKENS" \
        -pr "$PRECISION" -o "$OUT/$run.csv" > "$OUT/$run.out"
    runs+=("$run=$OUT/$run.csv")
}
# from the manifest (scripts/manifest.py): the variants with re-weighting, and those whose definition
# holds a length other than log-length scaling's threshold (dot_logn's bias, mean's scale: -tl 1 applies)
reweighting=" $(/usr/bin/python3 scripts/manifest.py names reweight=true | tr '\n' ' ')"
with_len=" $(/usr/bin/python3 scripts/manifest.py names has_len=true log_len_scaling=false | tr '\n' ' ')"
for v in $VARIANTS; do
    if [ "$v" = lssar ]; then  # the paper's two rows, and p learned
        train_eval "lssar_p3" lssar -p 3; train_eval "lssar_p$P" lssar -p "$P"
        train_eval "lssar_pl" lssar -p "$P" -pl 1
    elif [[ $reweighting == *" $v "* ]]; then
        train_eval "${v}_p$P" "$v" -p "$P"
    elif [[ $with_len == *" $v "* ]]; then
        train_eval "$v" "$v"; train_eval "${v}_tl" "$v" -tl 1
    else
        train_eval "$v" "$v"
    fi
done

echo "== the ablation table (validation loss; paper: GPT-2 124M, FineWeb, trained at 1K)"
/usr/bin/python3 scripts/ablation_table.py "${runs[@]}" --train-len $T \
    --title "$(basename "$DATA"), $MODEL, trained at $T tokens for $STEPS steps ($SEEDS seed(s))" -o "$OUT/ablations.png" \
    | tee "$OUT/ablations.txt"
