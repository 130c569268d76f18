#!/usr/bin/env bash
# Passkey retrieval learned inside the training length, then tested beyond it: trains softmax, LSSA,
# LSSAR p=15, LSSAR p=3 and LSSAR p=15 with p warming up from 1 over the first quarter of the steps
# (the trainer's -pw) on the passkey training mix (build/passkey_mix: KJV windows of T tokens,
# FRACTION of them holding eval/passkey.h's prompt with KJV text as filler, the evaluation's keys
# held out), with the same budget, schedule and seed, then scores passkey retrieval at 1x-16x the
# training length (TRIALS trials per length, the needle's depth recorded per trial).
#   bash scripts/passkey_experiment.sh          5 x 4,000 steps, 3 at a time: 91 minutes on the 2-core
#                                               build machine (trainers at 1,200-2,600 tok/s each)
#   STEPS=1500 JOBS=2 RUNS="softmax:softmax:15 lssar_p15:lssar:15" bash scripts/passkey_experiment.sh
#   STEPS=600 FRACTION=0.75 PROMPTS=1 bash scripts/passkey_experiment.sh   a shorter, sparser mix
#   JOBS=1 THREADS=8 bash scripts/passkey_experiment.sh                    one model at a time, 8 threads
#   PRECISION=fp32 bash scripts/passkey_experiment.sh   the CPU reference path (default: -pr auto, the fastest)
# Writes out/passkey_exp/<run>/ (log.jsonl, train.out, the final checkpoint, passkey.csv,
# passkey_trials.csv), out/passkey_exp/passkey_table.txt, passkey_accuracy.png,
# passkey_depth.png and training_curves.png. Running it again reuses finished runs (-y 1).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/attn_flags.sh
STEPS=${STEPS:-4000}           # optimizer steps per model, B x T = 1,024 tokens each
THREADS=${THREADS:-2}          # cores in all
JOBS=${JOBS:-3}                # models trained at once, THREADS / JOBS threads each (at least 1)
OUT=${OUT:-out/passkey_exp}
MODEL=${MODEL:-d2c128h2}       # 2 layers, 128 channels, 2 heads of 64
T=${T:-128}                    # training length (the demo's 64 leaves 2 tokens of filler beside the prompt)
B=${B:-8}
LR=${LR:-3e-3}
FRACTION=${FRACTION:-1.0}      # share of training windows with a needle
PROMPTS=${PROMPTS:-2}          # prompts per needle window: uniform in [1, PROMPTS] (build/passkey_mix -pm)
SEED=${SEED:-1337}             # the mix, the initialisation and the data order
TRIALS=${TRIALS:-100}          # passkey trials per length (held out from training: -hn below)
LENGTHS=$T,$((2 * T)),$((4 * T)),$((8 * T)),$((16 * T))
RUNS=${RUNS:-"softmax:softmax:15 lssar_p15:lssar:15 lssa:lssa:15 lssar_p3:lssar:3 lssar_p15w:lssar:15:$((STEPS / 4))"}  # name:variant:p[:pw]
# (pw: the trainer's -pw, p rising linearly from 1 to p over the first pw steps; e.g. lssar_p15w:lssar:15:1000)
for spec in $RUNS; do  # refused before anything is built or trained
    IFS=: read -r name attn p pw <<<"$spec"
    if [ -z "$name" ] || [ -z "$attn" ] || [ -z "$p" ] || { [ -n "$pw" ] && ! [[ "$pw" =~ ^[0-9]+$ ]]; }; then
        echo "error: RUNS entry '$spec': expected name:variant:p[:pw], pw a whole number of steps" >&2
        exit 1
    fi
done
start_s=$(date +%s)

bash scripts/install_deps.sh >/dev/null
echo "== building the CPU trainers, passkey tools and the mix tool"
make -s -j"$(nproc)" train_gpt2cpu_softmax train_gpt2cpu_lssa train_gpt2cpu_lssar build/passkey_cpu_softmax \
    build/passkey_cpu_lssa build/passkey_cpu_lssar build/passkey_mix
if [ ! -s data/kjv/kjv_train_000000.bin ] || [ ! -s data/kjv/kjv_val_000000.bin ]; then
    bash scripts/prepare_kjv.sh
fi
mix=data/passkey_mix/kjv_T${T}_f${FRACTION}_pm${PROMPTS}_s${SEED}
if [ ! -s "${mix}_train_000000.bin" ]; then
    echo "== the passkey training mix: $FRACTION of the KJV windows of $T tokens hold a needle"
    mkdir -p data/passkey_mix
    build/passkey_mix -i data/kjv/kjv_train_000000.bin -j data/kjv/kjv_val_000000.bin -o "$mix" -t "$T" \
        -f "$FRACTION" -pm "$PROMPTS" -rs "$SEED" -hs 1337 -hn "$TRIALS"
fi

per_job=$((THREADS / JOBS)); [ "$per_job" -ge 1 ] || per_job=1
export OMP_NUM_THREADS=$per_job OPENBLAS_NUM_THREADS=$per_job OMP_WAIT_POLICY=passive
mkdir -p "$OUT"
final=$(printf "ckpt_%08d.bin" "$STEPS")

train_one() {  # name variant p [pw]: trains, prints every 100th step and the validation losses
    local name=$1 attn=$2 p=$3 pw=${4:-0}
    mkdir -p "$OUT/$name"
    ./train_gpt2cpu_$attn -i "${mix}_train_*.bin" -j "${mix}_val_*.bin" -o "$OUT/$name" -e "$MODEL" $(p_flag $attn "$p") \
        $([ "$pw" -gt 0 ] && echo "-pw $pw") \
        -b "$B" -t "$T" -x "$STEPS" -l "$LR" -u 50 -k cosine -q 0.1 -c 0.1 -gc 1.0 -v 100 -m 20 -s 0 \
        -n 250 -nk 1 -y 1 -rs "$SEED" -pr "${PRECISION:-auto}" >"$OUT/$name/train.out" 2>&1 || { echo "[$name] training failed: $OUT/$name/train.out"; tail -3 "$OUT/$name/train.out"; return 1; }
    grep -E "^step +[0-9]*00/|^val loss" "$OUT/$name/train.out" | tail -2 | sed "s/^/[$name] /"
}

eval_one() {  # name variant
    local name=$1 attn=$2
    build/passkey_cpu_$attn -e "$OUT/$name/$final" -l "$LENGTHS" -n "$TRIALS" -rs 1337 -o "$OUT/$name/passkey.csv" \
        -ot "$OUT/$name/passkey_trials.csv" >"$OUT/$name/passkey.out" 2>&1 || { echo "[$name] passkey failed: $OUT/$name/passkey.out"; return 1; }
    echo "[$name] passkey accuracy per length: $(tail -n +2 "$OUT/$name/passkey.csv" | cut -d, -f1,2 | tr '\n' ' ')"
}

# the runs in JOBS lanes: lane j takes runs j, j + JOBS, ...
lane() {
    local j=$1 i=0 spec
    for spec in $RUNS; do
        if [ $((i % JOBS)) -eq "$j" ]; then
            IFS=: read -r name attn p pw <<<"$spec"
            echo "[$name] training $MODEL ($attn, p $p${pw:+ after $pw steps of p warmup}) for $STEPS steps of $B x $T tokens, $per_job thread(s)"
            [ -s "$OUT/$name/$final" ] || train_one "$name" "$attn" "$p" "${pw:-0}"
            eval_one "$name" "$attn"
        fi
        i=$((i + 1))
    done
}
pids=()
for j in $(seq 0 $((JOBS - 1))); do lane "$j" & pids+=($!); done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done

echo "== passkey retrieval at $LENGTHS (trained at $T), $TRIALS trials per length"
specs=() curves=()
for spec in $RUNS; do
    IFS=: read -r name attn p pw <<<"$spec"
    label=$name; [ "$attn" = lssar ] && label="lssar p=$p${pw:+ (p warmup $pw)}"
    if [ ! -s "$OUT/$name/passkey_trials.csv" ]; then echo "[$name] no passkey result: left out of the table"; continue; fi
    specs+=("$label=$OUT/$name/passkey_trials.csv")
    curves+=("$label=$OUT/$name/log.jsonl")
done
[ ${#specs[@]} -gt 0 ] || { echo "no run finished" >&2; exit 1; }
baseline=()
[[ " ${specs[*]}" == *" softmax="* ]] && baseline=(--baseline softmax)
/usr/bin/python3 eval/passkey_report.py "${specs[@]}" --train-len "$T" "${baseline[@]}" \
    --title "passkey mix f=$FRACTION pm=$PROMPTS, $MODEL, T $T, $STEPS steps" \
    -o "$OUT/passkey_accuracy.png" --heatmap "$OUT/passkey_depth.png" | tee "$OUT/passkey_table.txt"
/usr/bin/python3 eval/plot_training.py "${curves[@]}" --title "passkey mix, $MODEL, T $T" -o "$OUT/training_curves.png"
[ "$failed" -eq 0 ] || echo "some runs failed (see above); the table holds the others"
echo "== done in $(( ($(date +%s) - start_s) / 60 )) minutes (load: $(cut -d' ' -f1-3 /proc/loadavg))"
