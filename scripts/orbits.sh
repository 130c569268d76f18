#!/usr/bin/env bash
# Orbits to Newton's law on the CPU (orbits/README.md): simulate planetary systems, tokenise them
# into .bin shards, pre-train softmax and LSSAR GPTs with the CPU trainer, fit a ridge force probe
# on each model's frozen final hidden states, and run symbolic regression on the true and the
# predicted forces.
#   bash scripts/orbits.sh --quick        ~10 minutes on 2 idle cores (4,000 systems, d2c64, 400 steps)
#   bash scripts/orbits.sh                the larger CPU run (20,000 systems, d4c128, 2,000 steps)
#   OUT=out/x THREADS=8 bash scripts/orbits.sh
# Outputs under $OUT (default out/orbits): simulator.csv, probe.csv, laws.csv, expressions.csv,
# forces.png, the data (data/) and each model's run (softmax_<model>/, lssar_<model>/). scripts/orbits_gpu.sh is the
# same pipeline at the reference's scale on a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
    echo "flags: --quick, --threads N (1..256, default \$THREADS or 2), --out DIR (default \$OUT or out/orbits), -h"
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
if ! [[ "$THREADS" =~ ^[0-9]+$ ]] || [ "$THREADS" -lt 1 ] || [ "$THREADS" -gt 256 ]; then
    echo "error: --threads $THREADS: expected an integer in [1, 256]" >&2; exit 1
fi

PLANETS=1; BINS=128; STEPS_SIM=63
if [ $QUICK = 1 ]; then
    TRAIN_SYS=4000; VAL_SYS=100; PROBE_SYS=300; MODEL=d2c64h1; STEPS=400; LR=3e-3
else
    TRAIN_SYS=20000; VAL_SYS=200; PROBE_SYS=600; MODEL=d4c128h2; STEPS=2000; LR=2e-3
fi
BODIES=$((PLANETS + 1))
T=$((1 + 2 * BODIES * STEPS_SIM))
V=$((2 * BINS + 2))
PY=/usr/bin/python3
DATA=$OUT/data
start=$(date +%s)

echo "== building the CPU trainer and the hidden-state tool (softmax, lssar)"
make -s train_gpt2cpu_softmax train_gpt2cpu_lssar build/hidden_states_cpu_softmax build/hidden_states_cpu_lssar
mkdir -p "$DATA"
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS OMP_WAIT_POLICY=passive

echo "== simulating: $TRAIN_SYS training, $VAL_SYS validation, $PROBE_SYS probe systems ($PLANETS planet(s), $STEPS_SIM steps)"
for split in train:$TRAIN_SYS:1 val:$VAL_SYS:2 probe:$PROBE_SYS:3; do
    IFS=: read -r name n seed <<< "$split"
    stamp="$n systems, seed $seed, $PLANETS planet(s), $STEPS_SIM steps"
    if [ ! -s "$DATA/systems_$name.npz" ] || [ "$(cat "$DATA/systems_$name.txt" 2>/dev/null)" != "$stamp" ]; then
        $PY orbits/simulate.py -n "$n" --seed "$seed" --planets $PLANETS --steps $STEPS_SIM -o "$DATA/systems_$name.npz"
        echo "$stamp" > "$DATA/systems_$name.txt"
    fi
    $PY orbits/tokens.py "$DATA/systems_$name.npz" --bins $BINS -o "$DATA/orbits_${name}_000000.bin"
done
$PY - "$DATA" "$OUT/simulator.csv" <<'EOF'
import sys, numpy as np
rows = []
for name in ("train", "val", "probe"):
    z = np.load(f"{sys.argv[1]}/systems_{name}.npz")
    e, l = z["energy_err"], z["angmom_err"]
    rows.append(f"{name},{len(e)},{e.max():.3g},{np.median(e):.3g},{z['config_energy_tol'].item():g},"
                f"{l.max():.3g},{z['config_angmom_tol'].item():g},{int(z['rejected_tol'])},{int(z['rejected_box'])}")
open(sys.argv[2], "w").write("split,systems,energy_err_max,energy_err_median,energy_tol,angmom_err_max,"
                             "angmom_tol,rejected_tol,rejected_box\n" + "\n".join(rows) + "\n")
print("simulator: " + "; ".join(r.split(",")[0] + " energy error max " + r.split(",")[2] for r in rows))
EOF

final=$(printf "ckpt_%08d.bin" "$STEPS")
for attn in softmax lssar; do
    RUN=$OUT/${attn}_$MODEL
    echo "== pre-training $MODEL (vocabulary $V) with $attn attention: $STEPS steps of 8 x $T tokens"
    ./train_gpt2cpu_$attn -i "$DATA/orbits_train_*.bin" -j "$DATA/orbits_val_*.bin" -o "$RUN" \
        -e "${MODEL}v$V" -p 15 -b 8 -t $T -x $STEPS -l $LR -u 20 -k cosine -q 0.1 -c 0.1 -gc 1.0 \
        -v 100 -m 10 -s 0 -n $STEPS -nk 1 -y 1 | grep -E "^(model|step [0-9]*0/|val|wrote)" || true
    [ -s "$RUN/$final" ] || { echo "error: training $attn left no $RUN/$final" >&2; exit 1; }
    echo "== final hidden states of the $PROBE_SYS probe systems, $attn"
    ./build/hidden_states_cpu_$attn -e "$RUN/$final" -i "$DATA/orbits_probe_000000.bin" -t $T \
        -o "$RUN/hidden_probe.npy" | grep -v sequences
done

echo "== force probe and symbolic regression"
$PY orbits/analyse.py "$DATA/systems_probe.npz" softmax="$OUT/softmax_$MODEL/hidden_probe.npy" \
    lssar="$OUT/lssar_$MODEL/hidden_probe.npy" -o "$OUT"
echo "total $(( $(date +%s) - start )) s"
