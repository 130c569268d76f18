#!/usr/bin/env bash
# Orbits to Newton's law (orbits/README.md): simulate planetary systems, tokenise them into .bin
# shards, pre-train softmax and LSSAR GPTs with the project's trainer, fit a ridge force probe on
# each model's frozen final hidden states, and run symbolic regression on the true and the
# predicted forces.
#   bash scripts/orbits.sh --quick     CPU, 4,000 systems, d2c64, 400 steps: 137 s on 2 idle cores
#   bash scripts/orbits.sh             CPU, 8,000 systems, d4c128, 1,000 steps: 1,008 s on 2 idle cores
#   bash scripts/orbits_gpu.sh         the reference's scale on GPUs (this script with BACKEND=cu)
# Outputs under --out (default $OUT or out/orbits): simulator.csv, probe.csv, laws.csv,
# expressions.csv, forces.png, the data (data/) and each model's run (<attn>_<model>/).
# Every size can be overridden from the environment: SYSTEMS_TRAIN SYSTEMS_VAL SYSTEMS_PROBE
# PLANETS SIM_STEPS BINS MODEL STEPS LR WARMUP BATCH TOTAL_BATCH CHUNK JOBS SEED (the trainer's) BACKEND (cpu|cu) GPUS
# PRECISION (the trainer's -pr: auto, the fastest, by default; ref for the CPU reference path).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/attn_flags.sh

usage() {
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    echo "flags: --quick, --threads N (1..256, default \$THREADS or 2), --out DIR, -h"
}
QUICK=0
THREADS=${THREADS:-2}
OUT=${OUT:-out/orbits}
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1; shift ;;
        --threads) [ $# -ge 2 ] || { echo "error: --threads needs a value" >&2; exit 1; }; THREADS=$2; shift 2 ;;
        --out) [ $# -ge 2 ] || { echo "error: --out needs a value" >&2; exit 1; }; OUT=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "error: unknown flag '$1' (-h lists the flags)" >&2; exit 1 ;;
    esac
done
positive() {   # name value lo hi
    if ! [[ "$2" =~ ^[0-9]+$ ]] || [ "$2" -lt "$3" ] || [ "$2" -gt "$4" ]; then
        echo "error: $1 $2: expected an integer in [$3, $4]" >&2; exit 1
    fi
}
positive --threads "$THREADS" 1 256

if [ $QUICK = 1 ]; then
    : "${SYSTEMS_TRAIN:=4000}" "${SYSTEMS_VAL:=100}" "${SYSTEMS_PROBE:=300}" "${MODEL:=d2c64h1}" "${STEPS:=400}" "${LR:=3e-3}"
else
    : "${SYSTEMS_TRAIN:=8000}" "${SYSTEMS_VAL:=200}" "${SYSTEMS_PROBE:=600}" "${MODEL:=d4c128h2}" "${STEPS:=1000}" "${LR:=2e-3}"
fi
: "${PLANETS:=1}" "${SIM_STEPS:=63}" "${BINS:=128}" "${BATCH:=8}" "${CHUNK:=20000}" "${JOBS:=1}" "${WARMUP:=20}" "${SEED:=1337}" "${BACKEND:=cpu}" "${GPUS:=1}"
for v in SYSTEMS_TRAIN:1:100000000 SYSTEMS_VAL:1:1000000 SYSTEMS_PROBE:8:1000000 PLANETS:1:8 SIM_STEPS:2:100000 \
         BINS:2:16000 STEPS:1:100000000 SEED:0:4000000000 BATCH:1:4096 WARMUP:0:100000000 CHUNK:1:100000000 JOBS:1:1024 GPUS:1:1024; do
    IFS=: read -r name lo hi <<< "$v"
    positive "$name" "${!name}" "$lo" "$hi"
done
case "$BACKEND" in cpu|cu) ;; *) echo "error: BACKEND=$BACKEND: expected cpu or cu" >&2; exit 1 ;; esac
BODIES=$((PLANETS + 1))
T=$((1 + 2 * BODIES * SIM_STEPS))
V=$((2 * BINS + 2))
: "${TOTAL_BATCH:=$((BATCH * T * GPUS))}"
PY=/usr/bin/python3
DATA=$OUT/data
start=$(date +%s)

echo "== building the $BACKEND trainer and the hidden-state tool (softmax, lssar)"
make -s -j"$(nproc)" train_gpt2${BACKEND}_softmax train_gpt2${BACKEND}_lssar train_gpt2cpu_lssar build/hidden_states_cpu_softmax build/hidden_states_cpu_lssar
mkdir -p "$DATA"
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS OMP_WAIT_POLICY=passive

# simulate NAME N SEED: the systems of one shard ($DATA/systems_NAME.npz, orbits_NAME.bin), reused
# when an earlier run made them with the same settings
simulate_shard() {
    local name=$1 n=$2 seed=$3 stamp="$2 systems, seed $3, $PLANETS planet(s), $SIM_STEPS steps, $BINS bins"
    if [ ! -s "$DATA/orbits_$name.bin" ] || [ "$(cat "$DATA/systems_$name.txt" 2>/dev/null)" != "$stamp" ]; then
        OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 $PY orbits/simulate.py -n "$n" --seed "$seed" --planets "$PLANETS" \
            --steps "$SIM_STEPS" -o "$DATA/systems_$name.npz"
        $PY orbits/tokens.py "$DATA/systems_$name.npz" --bins "$BINS" -o "$DATA/orbits_$name.bin"
        echo "$stamp" > "$DATA/systems_$name.txt"
    fi
}
export -f simulate_shard
export DATA PLANETS SIM_STEPS BINS PY
chunks=$(( (SYSTEMS_TRAIN + CHUNK - 1) / CHUNK ))
echo "== simulating $SYSTEMS_TRAIN training ($chunks shard(s), $JOBS at a time), $SYSTEMS_VAL validation and" \
     "$SYSTEMS_PROBE probe systems: $PLANETS planet(s), $SIM_STEPS steps, sequences of $T tokens"
for ((c = 0; c < chunks; c++)); do
    n=$(( c == chunks - 1 ? SYSTEMS_TRAIN - c * CHUNK : CHUNK ))
    printf "train_%06d %d %d\n" "$c" "$n" $((1000 + c))
done | xargs -P "$JOBS" -L 1 bash -c 'simulate_shard "$@"' _
simulate_shard val_000000 "$SYSTEMS_VAL" 2
simulate_shard probe_000000 "$SYSTEMS_PROBE" 3
$PY orbits/simulator_summary.py "$DATA" -o "$OUT/simulator.csv"

final=$(printf "ckpt_%08d.bin" "$STEPS")
launch=()
[ "$BACKEND" = cu ] && launch=(bash scripts/launch.sh -n "$GPUS")
for attn in softmax lssar; do
    RUN=$OUT/${attn}_$MODEL
    echo "== pre-training $MODEL (vocabulary $V) with $attn attention: $STEPS steps of $TOTAL_BATCH tokens"
    "${launch[@]}" ./train_gpt2${BACKEND}_$attn -i "$DATA/orbits_train_*.bin" -j "$DATA/orbits_val_*.bin" \
        -o "$RUN" -e "${MODEL}v$V" $(p_flag $attn 15) -b "$BATCH" -t $T -d "$TOTAL_BATCH" -x "$STEPS" -l "$LR" -u "$WARMUP" \
        -k cosine -q 0.1 -c 0.1 -gc 1.0 -v 100 -m 10 -s 0 -n "$STEPS" -nk 1 -y 1 -rs "$SEED" -pr "${PRECISION:-auto}" |
        grep --line-buffered -E "^(model|precision|step [0-9]*0/|val|wrote)" || true
    [ -s "$RUN/$final" ] || { echo "error: training $attn left no $RUN/$final" >&2; exit 1; }
    echo "== final hidden states of the $SYSTEMS_PROBE probe systems, $attn"
    ./build/hidden_states_cpu_$attn -e "$RUN/$final" -i "$DATA/orbits_probe_000000.bin" -t $T -pr "${PRECISION:-auto}" \
        -o "$RUN/hidden_probe.npy" | grep -E "^(checkpoint|wrote)"
done

# the control: the same model at its initialisation (one step of lr 0), random features
RUN=$OUT/untrained_$MODEL
echo "== control: $MODEL (lssar) untrained, final hidden states of the probe systems"
./train_gpt2cpu_lssar -i "$DATA/orbits_val_*.bin" -j "" -o "$RUN" -e "${MODEL}v$V" -b 1 -t $T -x 1 -l 0 \
    -v 0 -s 0 -n 1 -nk 1 -y 1 -rs "$SEED" > "$RUN.log" 2>&1 || { cat "$RUN.log" >&2; exit 1; }
./build/hidden_states_cpu_lssar -e "$RUN/ckpt_00000001.bin" -i "$DATA/orbits_probe_000000.bin" -t $T \
    -o "$RUN/hidden_probe.npy" | grep -E "^wrote"

echo "== force probe and symbolic regression"
$PY orbits/analyse.py "$DATA/systems_probe_000000.npz" softmax="$OUT/softmax_$MODEL/hidden_probe.npy" \
    lssar="$OUT/lssar_$MODEL/hidden_probe.npy" untrained="$OUT/untrained_$MODEL/hidden_probe.npy" \
    --plot softmax,lssar -o "$OUT"
echo "total $(( $(date +%s) - start )) s"
