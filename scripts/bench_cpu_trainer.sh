#!/usr/bin/env bash
# CPU trainer benchmark (not a test): tokens/s of this project's CPU trainer on each of its paths
# (-pr fp32, -pr bf16) and of PyTorch on the CPU (test/torch_trainer_bench.py: float32, and bf16
# autocast) training the same GPT-2 + RoPE model, in one run, alternating all of them ROUNDS
# times; then the medians, the ratios, the achieved FLOP/s of the bf16 path as a share of the
# bf16 matmul throughput measured in the same rounds (build/profile_cpu), and the bf16 path's
# share of step time per layer kind.
#   bash scripts/bench_cpu_trainer.sh            d4 (C 256, 4 heads), B 16, T 64, softmax and lssar
#   ATTNS=lssar ROUNDS=5 STEPS=10 B=16 T=64 DEPTH=d4 THREADS=2 bash scripts/bench_cpu_trainer.sh
# Every side: THREADS threads, the full step (forward, backward, clipping, AdamW), random tokens,
# vocab 50257. OMP_WAIT_POLICY=passive for all: OpenMP threads that spin between parallel regions
# would compete with OpenBLAS's own threads for the cores.
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
make -s build/profile_cpu
# a shard of random tokens, enough for every run without wrapping around
$PY -c "
import sys, random; sys.path.insert(0, 'scripts'); import fineweb
random.seed(0)
fineweb.write_datafile('$tmp/bench_000000.bin', [random.randrange(50257) for _ in range($(( (STEPS + WARMUP) * B * (T + 1) + 1 )))])
" >/dev/null

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

ours() {  # $1 attn, $2 precision: median tokens/s of the timed steps of one run
    rm -rf "$tmp/out"
    ./train_gpt2cpu_$1 -i "$tmp/bench_*.bin" -j "" -o "$tmp/out" -e "$DEPTH" -b "$B" -t "$T" \
        -x $((STEPS + WARMUP)) -v 0 -s 0 -l 3e-4 -pr "$2" >"$tmp/ours.out"
    grep -q "^precision: $2" "$tmp/ours.out" || { echo "error: -pr $2 did not run $2:" >&2; cat "$tmp/ours.out" >&2; exit 1; }
    sed -n 's/^{"step":\([0-9]*\),.*"tokens_per_s":\([0-9.e+]*\).*/\1 \2/p' "$tmp/out/log.jsonl" |
        awk -v w=$WARMUP '$1 > w {print $2}' | median
}
theirs() {  # $1 attn, $2 autocast (none | bf16)
    $PY test/torch_trainer_bench.py --attn "$1" --layers "$layers" --channels "$channels" --heads "$heads" \
        --B "$B" --T "$T" --steps "$STEPS" --warmup $WARMUP --threads "$THREADS" --autocast "$2" 2>"$tmp/torch.err"
}
profile() {  # $1 attn: the bf16 matmul throughput, FLOPs per token and the layer profile
    build/profile_cpu -e "$DEPTH" -b "$B" -t "$T" -a "$1" -x 3 >"$tmp/profile.out"
    awk '/^matmul_gflops_bf16/ {print $2}' "$tmp/profile.out" >>"$tmp/mm_bf16"
    awk '/^matmul_gflops_fp32/ {print $2}' "$tmp/profile.out" >>"$tmp/mm_fp32"
    sed -n 's/^profile bf16 (share of step time): //p' "$tmp/profile.out" >>"$tmp/profiles"
    awk '/^flops_per_token/ {print $2}' "$tmp/profile.out" >"$tmp/flops_per_token"
}

echo "model $DEPTH (C $channels, $heads heads), B $B, T $T, vocab 50257; $THREADS threads; $ROUNDS rounds of $STEPS timed steps"
echo "load before: $(uptime | sed 's/.*load average/load average/')"
grep -q amx_bf16 /proc/cpuinfo && echo "cpu: AMX-BF16 present" || echo "cpu: no AMX (bf16 matmuls on AVX512-BF16 where present)"
for attn in $ATTNS; do
    : >"$tmp/mm_bf16"; : >"$tmp/mm_fp32"; : >"$tmp/profiles"
    for side in ours_fp32 ours_bf16 torch_fp32 torch_bf16; do : >"$tmp/$side"; done
    for r in $(seq "$ROUNDS"); do
        ours "$attn" fp32 >>"$tmp/ours_fp32"
        theirs "$attn" none >>"$tmp/torch_fp32"
        ours "$attn" bf16 >>"$tmp/ours_bf16"
        theirs "$attn" bf16 >>"$tmp/torch_bf16"
        profile "$attn"
        printf "  %-8s round %d: this trainer fp32 %7.1f  bf16 %7.1f | pytorch fp32 %7.1f  bf16 autocast %7.1f tok/s | bf16 matmuls %6.1f GFLOP/s\n" \
            "$attn" "$r" "$(tail -n 1 "$tmp/ours_fp32")" "$(tail -n 1 "$tmp/ours_bf16")" "$(tail -n 1 "$tmp/torch_fp32")" \
            "$(tail -n 1 "$tmp/torch_bf16")" "$(tail -n 1 "$tmp/mm_bf16")"
    done
    of=$(printf "%.1f" "$(median <"$tmp/ours_fp32")"); ob=$(printf "%.1f" "$(median <"$tmp/ours_bf16")")
    tf=$(median <"$tmp/torch_fp32"); tb=$(median <"$tmp/torch_bf16")
    mmb=$(median <"$tmp/mm_bf16"); mmf=$(median <"$tmp/mm_fp32"); fpt=$(cat "$tmp/flops_per_token")
    gf() { awk -v t="$1" -v f="$fpt" 'BEGIN {printf "%.1f", t * f / 1e9}'; }
    echo
    echo "| $attn | tokens/s (median) | GFLOP/s | vs PyTorch bf16 autocast |"
    echo "|---|---:|---:|---:|"
    echo "| this trainer, -pr fp32 | $of | $(gf "$of") | $(ratio "$of" "$tb")x |"
    echo "| this trainer, -pr bf16 | $ob | $(gf "$ob") | $(ratio "$ob" "$tb")x |"
    echo "| PyTorch fp32 | $tf | $(gf "$tf") | $(ratio "$tf" "$tb")x |"
    echo "| PyTorch bf16 autocast | $tb | $(gf "$tb") | 1.00x |"
    echo "matmuls alone, one step's shapes (median of the rounds): bf16 oneDNN $mmb GFLOP/s, fp32 OpenBLAS $mmf GFLOP/s"
    echo "bf16 path: $(gf "$ob") GFLOP/s achieved = $(awk -v a="$(gf "$ob")" -v b="$mmb" 'BEGIN {printf "%.0f", 100 * a / b}')% of the bf16 matmul throughput; bf16 / fp32 path $(ratio "$ob" "$of")x (model FLOPs: $fpt per token)"
    echo "profile of the bf16 path (last round): $(tail -n 1 "$tmp/profiles")"
    echo
done
sed -n '1p' "$tmp/torch.err" | sed 's/^/(pytorch side: /; s/$/)/'
echo "load after: $(uptime | sed 's/.*load average/load average/')"
