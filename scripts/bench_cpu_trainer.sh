#!/usr/bin/env bash
# CPU trainer benchmark (not a test): tokens/s of this project's CPU trainer and of PyTorch on the
# CPU (test/torch_trainer_bench.py) training the same GPT-2 + RoPE model, in one run, alternating
# the two ROUNDS times and printing the medians and their ratio.
#   bash scripts/bench_cpu_trainer.sh            d4 (C 256, 4 heads), B 16, T 64, softmax and lssar
#   ATTNS=lssar ROUNDS=5 STEPS=10 B=16 T=64 DEPTH=d4 THREADS=2 bash scripts/bench_cpu_trainer.sh
# Both sides: float32, THREADS threads, OpenBLAS for the matmuls (the script prints which BLAS
# torch loaded), the full step (forward, backward, clipping, AdamW), random tokens, vocab 50257.
# OMP_WAIT_POLICY=passive for both: OpenMP threads that spin between parallel regions would
# compete with OpenBLAS's own threads for the cores.
set -euo pipefail
cd "$(dirname "$0")/.."
ATTNS=${ATTNS:-"softmax lssar"}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-10}
WARMUP=2
B=${B:-16}
T=${T:-64}
DEPTH=${DEPTH:-d4}
THREADS=${THREADS:-2}
PY=/usr/bin/python3
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS OMP_WAIT_POLICY=passive

layers=${DEPTH#d}
channels=$((64 * layers))
heads=$((channels / 64))
tmp=$(mktemp -d /tmp/bench_cpu_trainer_XXXXXX)
trap 'rm -rf "$tmp"' EXIT

for attn in $ATTNS; do make -s train_gpt2cpu_$attn; done
# a shard of random tokens, enough for every run without wrapping around
$PY -c "
import sys, random; sys.path.insert(0, 'scripts'); import fineweb
random.seed(0)
fineweb.write_datafile('$tmp/bench_000000.bin', [random.randrange(50257) for _ in range($(( (STEPS + WARMUP) * B * (T + 1) + 1 )))])
" >/dev/null

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }

ours() {  # median tokens/s of the timed steps of one run
    rm -rf "$tmp/out"
    ./train_gpt2cpu_$1 -i "$tmp/bench_*.bin" -j "" -o "$tmp/out" -e "$DEPTH" -b "$B" -t "$T" \
        -x $((STEPS + WARMUP)) -v 0 -s 0 -l 3e-4 >/dev/null
    sed -n 's/^{"step":\([0-9]*\),.*"tokens_per_s":\([0-9.e+]*\).*/\1 \2/p' "$tmp/out/log.jsonl" |
        awk -v w=$WARMUP '$1 > w {print $2}' | median
}
theirs() {
    $PY test/torch_trainer_bench.py --attn "$1" --layers "$layers" --channels "$channels" --heads "$heads" \
        --B "$B" --T "$T" --steps "$STEPS" --warmup $WARMUP --threads "$THREADS" 2>"$tmp/torch.err"
}

echo "model $DEPTH (C $channels, $heads heads), B $B, T $T, vocab 50257; $THREADS threads; $ROUNDS rounds of $STEPS timed steps"
for attn in $ATTNS; do
    : >"$tmp/ours" ; : >"$tmp/theirs"
    for r in $(seq "$ROUNDS"); do
        ours "$attn" >>"$tmp/ours"
        theirs "$attn" >>"$tmp/theirs"
        printf "  %-8s round %d: this trainer %8.1f tok/s   pytorch %8.1f tok/s\n" "$attn" "$r" \
            "$(tail -n 1 "$tmp/ours")" "$(tail -n 1 "$tmp/theirs")"
    done
    a=$(median <"$tmp/ours"); b=$(median <"$tmp/theirs")
    printf "%-8s median: this trainer %8.1f tok/s   pytorch %8.1f tok/s   ratio %.2fx\n" "$attn" "$a" "$b" \
        "$(awk -v a="$a" -v b="$b" 'BEGIN {print a / b}')"
done
sed -n '1p' "$tmp/torch.err" | sed 's/^/(pytorch side: /; s/$/)/'
