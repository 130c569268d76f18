#!/usr/bin/env bash
# The paper's attention ablation at its scale: GPT-2 124M (d12) + RoPE, trained at T = 1024 on
# FineWeb with the setup of scripts/run_gpt2_124M.sh (8 GPUs, 524,288 tokens per step, 18,865 steps,
# AdamW lr 6e-4, 700 warmup steps, cosine to 0.1x), once per variant of the family with the same
# seed, then the validation loss of each at 1K..16K and one table beside the paper's rows
# (scripts/ablation_table.py) with one PNG. Each run resumes from its newest checkpoint (-y 1).
#   bash scripts/run_ablations_124M.sh                       every variant, one after another
#   VARIANTS="softmax_rw sigmoid_l1_rw" STEPS=4000 bash scripts/run_ablations_124M.sh
#   GPUS=4 (2x the accumulation), DATA=data/fineweb10B (python3 scripts/fineweb.py -v 10B), P=15
# LSSAR runs three times: p = 3, p = $P, and p learned per layer and head from $P (-pl 1; run lssar_pl).
set -euo pipefail
cd "$(dirname "$0")/.."
GPUS=${GPUS:-8}
OUT=${OUT:-out/ablations_124M}
DATA=${DATA:-data/fineweb10B}
B=${B:-64}                    # sequences per GPU per micro-step
T=1024
TOTAL=524288                  # tokens per optimizer step, all GPUs together
STEPS=${STEPS:-18865}
P=${P:-15}
SEED=${SEED:-1337}
VARIANTS=${VARIANTS:-softmax sigmoid relu lssa lssar softmax_rw sigmoid_l1_rw relu_l1_rw}  # the paper's rows
final=$(printf "ckpt_%08d.bin" "$STEPS")

targets=""
for v in $VARIANTS; do targets="$targets train_gpt2cu_$v build/loss_vs_length_cu_$v"; done
make -s -j"$(nproc)" $targets
mkdir -p "$OUT"
runs=()
train_eval() {  # run-name variant extra-flags...
    local run=$1 v=$2
    shift 2
    echo "== $run: d12, $STEPS steps of $TOTAL tokens at T = $T on $GPUS GPUs"
    bash scripts/launch.sh -n "$GPUS" "./train_gpt2cu_$v" \
        -i "$DATA/fineweb_train_*.bin" -j "$DATA/fineweb_val_*.bin" -o "$OUT/$run" \
        -e d12 "$@" -b "$B" -t $T -d $TOTAL -x "$STEPS" -rs "$SEED" \
        -l 6e-4 -u 700 -k cosine -q 0.1 -c 0.1 -gc 1.0 \
        -v 250 -m 20 -s 0 -n 2000 -nk 2 -y 1
    "./build/loss_vs_length_cu_$v" -e "$OUT/$run/$final" -j "$DATA/fineweb_val_*.bin" -t $T -l 1,2,4,8,16 \
        -o "$OUT/$run.csv"
    runs+=("$run=$OUT/$run.csv")
}
reweighting=" $(/usr/bin/python3 scripts/manifest.py names reweight=true | tr '\n' ' ')"  # scripts/manifest.py
for v in $VARIANTS; do
    if [ "$v" = lssar ]; then  # the paper's two rows, and p learned
        train_eval "lssar_p3" lssar -p 3; train_eval "lssar_p$P" lssar -p "$P"
        train_eval "lssar_pl" lssar -p "$P" -pl 1
    elif [[ $reweighting == *" $v "* ]]; then
        train_eval "${v}_p$P" "$v" -p "$P"
    else
        train_eval "$v" "$v"
    fi
done
/usr/bin/python3 scripts/ablation_table.py "${runs[@]}" --train-len $T \
    --title "GPT-2 124M, FineWeb, trained at $T for $STEPS steps (seed $SEED)" -o "$OUT/ablations.png" \
    | tee "$OUT/ablations.txt"
