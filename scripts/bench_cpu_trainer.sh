#!/usr/bin/env bash
# CPU trainer benchmark (not a test): tokens/s of this project's CPU trainer on each of its paths
# (-pr fp32, -pr bf16) and of PyTorch on the CPU (test/torch_trainer_bench.py: float32, and bf16
# autocast) training the same GPT-2 + RoPE model, in one run, alternating all of them ROUNDS times;
# then per model and attention the medians, the ratios, and the figure that means the same on every
# machine: the bf16 path's achieved FLOP/s as a share of the bf16 matmul throughput measured in the
# same rounds (build/profile_cpu: one step's matmuls alone through oneDNN), beside its profile (share
# of step time per layer kind). Then the long-context evaluation: tokens/s of loss_vs_length at
# EVAL_LENGTHS on the fp32 reference path and on the bf16 path, measured in the same run. It ends
# with the targets (what each ratio should reach) and the figures measured against them.
#   bash scripts/bench_cpu_trainer.sh
#   MODELS="d4:64 d4c128h2v256:256" ATTNS=lssar ROUNDS=5 STEPS=10 B=16 THREADS=2 bash scripts/bench_cpu_trainer.sh
#   MODELS: descriptor:T pairs (default: the BPE model d4 = C 256, 4 heads, vocab 50257, at T 64, and
#   the byte-level model d4c128h2v256 at T 64 and T 256); EVAL_MODEL, EVAL_LENGTHS (default
#   d4c128h2v256, 1024,2048; EVAL_LENGTHS= skips the evaluation), EVAL_TOKENS (scored per length).
# Every side: THREADS threads, the full step (forward, backward, clipping, AdamW), random tokens.
# Every command runs with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (some machines set them, and
# with them set OpenBLAS runs its AVX2 kernels on an AVX-512 CPU), and the OpenBLAS kernel and the
# oneDNN ISA each side used are printed (this trainer's: build/profile_cpu in the same environment,
# linked to the same libraries; PyTorch's: asked of the libraries mapped into its process).
# OMP_WAIT_POLICY=passive for all: OpenMP threads that spin between parallel regions would compete
# with OpenBLAS's own threads for the cores. The load average is printed beside every round: on a
# shared machine only ratios measured in the same round mean much.
set -euo pipefail
cd "$(dirname "$0")/.."
MODELS=${MODELS:-"d4:64 d4c128h2v256:64 d4c128h2v256:256"}
ATTNS=${ATTNS:-"softmax lssar"}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-10}
WARMUP=2
B=${B:-16}
THREADS=${THREADS:-2}
EVAL_MODEL=${EVAL_MODEL:-d4c128h2v256}
EVAL_LENGTHS=${EVAL_LENGTHS-"1024,2048"}
EVAL_TOKENS=${EVAL_TOKENS:-4096}
PY=/usr/bin/python3
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS OMP_WAIT_POLICY=passive
CLEAN="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE"  # prefixes every measured command

tmp=$(mktemp -d /tmp/bench_cpu_trainer_XXXXXX)
trap 'rm -rf "$tmp"' EXIT

for attn in $ATTNS; do make -s train_gpt2cpu_$attn; done
make -s build/profile_cpu

load() { cut -d' ' -f1 /proc/loadavg; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
range() { sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%s-%s", lo, hi}'; }

# dL[cC][hH][vV] (model/gpt2_descriptor.h): layers, channels (64 L), heads (C / 64), vocabulary (50257)
parse_model() {
    local d=$1
    layers=$(echo "$d" | sed -E 's/^d([0-9]+).*/\1/')
    channels=$(echo "$d" | sed -nE 's/.*c([0-9]+).*/\1/p'); channels=${channels:-$((64 * layers))}
    heads=$(echo "$d" | sed -nE 's/.*h([0-9]+).*/\1/p'); heads=${heads:-$((channels / 64 > 0 ? channels / 64 : 1))}
    vocab=$(echo "$d" | sed -nE 's/.*v([0-9]+).*/\1/p'); vocab=${vocab:-50257}
}

# a shard of random tokens below $1, enough for every run without wrapping around
make_shard() {  # $1 vocab, $2 T
    rm -f "$tmp"/bench_*.bin
    $PY -c "
import sys, random; sys.path.insert(0, 'scripts'); import fineweb
random.seed(0)
fineweb.write_datafile('$tmp/bench_000000.bin', [random.randrange($1) for _ in range($(( (STEPS + WARMUP) * B * ($2 + 1) + 1 )))])
" >/dev/null
}

ours() {  # $1 attn, $2 precision, $3 descriptor, $4 T: median tokens/s of the timed steps of one run
    rm -rf "$tmp/out"
    $CLEAN ./train_gpt2cpu_$1 -i "$tmp/bench_*.bin" -j "" -o "$tmp/out" -e "$3" -b "$B" -t "$4" \
        -x $((STEPS + WARMUP)) -v 0 -s 0 -l 3e-4 -pr "$2" >"$tmp/ours.out"
    grep -q "^precision: $2" "$tmp/ours.out" || { echo "error: -pr $2 did not run $2:" >&2; cat "$tmp/ours.out" >&2; exit 1; }
    sed -n 's/^precision: //p' "$tmp/ours.out" >"$tmp/ours_precision_$2"
    sed -n 's/^{"step":\([0-9]*\),.*"tokens_per_s":\([0-9.e+]*\).*/\1 \2/p' "$tmp/out/log.jsonl" |
        awk -v w=$WARMUP '$1 > w {print $2}' | median
}
theirs() {  # $1 attn, $2 autocast (none | bf16)
    $CLEAN $PY test/torch_trainer_bench.py --attn "$1" --layers "$layers" --channels "$channels" --heads "$heads" \
        --vocab "$vocab" --B "$B" --T "$T" --steps "$STEPS" --warmup $WARMUP --threads "$THREADS" \
        --autocast "$2" 2>"$tmp/torch_$2.err"
}
profile() {  # $1 attn, $2 descriptor, $3 T: the bf16 matmul throughput, FLOPs per token, the layer profile
    $CLEAN build/profile_cpu -e "$2" -b "$B" -t "$3" -a "$1" -x 3 >"$tmp/profile.out"
    awk '/^matmul_gflops_bf16/ {print $2}' "$tmp/profile.out" >>"$tmp/mm_bf16"
    awk '/^matmul_gflops_fp32/ {print $2}' "$tmp/profile.out" >>"$tmp/mm_fp32"
    sed -n 's/^profile bf16 (share of step time): //p' "$tmp/profile.out" >>"$tmp/profiles"
    awk '/^flops_per_token/ {print $2}' "$tmp/profile.out" >"$tmp/flops_per_token"
    sed -n 's/^openblas_corename //p' "$tmp/profile.out" >"$tmp/ours_openblas"
    sed -n 's/^onednn_isa //p' "$tmp/profile.out" >"$tmp/ours_onednn"
}

echo "$THREADS threads, B $B, $ROUNDS rounds of $STEPS timed steps (after $WARMUP) per side; load average before: $(load)"
grep -q amx_bf16 /proc/cpuinfo && echo "cpu: AMX-BF16 present" || echo "cpu: no AMX (bf16 matmuls on AVX512-BF16 where present)"
echo "environment of the measured commands: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (here: ${OPENBLAS_CORETYPE-unset}, ${OPENBLAS_L2_SIZE-unset})"
: >"$tmp/summary"; : >"$tmp/step_ratios"
for model in $MODELS; do
    desc=${model%%:*}; T=${model##*:}
    parse_model "$desc"
    make_shard "$vocab" "$T"
    for attn in $ATTNS; do
        for f in mm_bf16 mm_fp32 profiles loads ours_fp32 ours_bf16 torch_fp32 torch_bf16; do : >"$tmp/${f}_$attn"; done
    done
    : >"$tmp/lssar_over_softmax"
    echo
    echo "== $desc (L $layers, C $channels, $heads heads, vocab $vocab), T $T: each round runs every attention and side"
    for r in $(seq "$ROUNDS"); do
        for attn in $ATTNS; do
            l0=$(load)
            ours "$attn" fp32 "$desc" "$T" >>"$tmp/ours_fp32_$attn"
            theirs "$attn" none >>"$tmp/torch_fp32_$attn"
            ours "$attn" bf16 "$desc" "$T" >>"$tmp/ours_bf16_$attn"
            theirs "$attn" bf16 >>"$tmp/torch_bf16_$attn"
            profile "$attn" "$desc" "$T"
            for f in mm_bf16 mm_fp32 profiles; do tail -n 1 "$tmp/$f" >>"$tmp/${f}_$attn"; done
            l1=$(load)
            echo "$l0" >>"$tmp/loads_$attn"; echo "$l1" >>"$tmp/loads_$attn"
            printf "  round %d %-8s (load %s -> %s): this trainer fp32 %7.1f  bf16 %7.1f | pytorch fp32 %7.1f  bf16 autocast %7.1f tok/s | bf16 matmuls %6.1f GFLOP/s\n" \
                "$r" "$attn" "$l0" "$l1" "$(tail -n 1 "$tmp/ours_fp32_$attn")" "$(tail -n 1 "$tmp/ours_bf16_$attn")" \
                "$(tail -n 1 "$tmp/torch_fp32_$attn")" "$(tail -n 1 "$tmp/torch_bf16_$attn")" "$(tail -n 1 "$tmp/mm_bf16_$attn")"
        done
        if [ -s "$tmp/ours_bf16_softmax" ] && [ -s "$tmp/ours_bf16_lssar" ]; then  # step times of the same round
            ratio "$(tail -n 1 "$tmp/ours_bf16_softmax")" "$(tail -n 1 "$tmp/ours_bf16_lssar")" >>"$tmp/lssar_over_softmax"
            echo >>"$tmp/lssar_over_softmax"
        fi
    done
    for attn in $ATTNS; do
        of=$(printf "%.1f" "$(median <"$tmp/ours_fp32_$attn")"); ob=$(printf "%.1f" "$(median <"$tmp/ours_bf16_$attn")")
        tf=$(median <"$tmp/torch_fp32_$attn"); tb=$(median <"$tmp/torch_bf16_$attn")
        mmb=$(median <"$tmp/mm_bf16_$attn"); mmf=$(median <"$tmp/mm_fp32_$attn"); fpt=$(cat "$tmp/flops_per_token")
        gf() { awk -v t="$1" -v f="$fpt" 'BEGIN {printf "%.1f", t * f / 1e9}'; }
        share=$(awk -v a="$(gf "$ob")" -v b="$mmb" 'BEGIN {printf "%.0f", 100 * a / b}')
        prof=$(tail -n 1 "$tmp/profiles_$attn")
        attn_share=$(echo "$prof" | sed -nE 's/.* attention ([0-9.]+)%.*/\1/p')
        loads=$(range <"$tmp/loads_$attn")
        echo
        echo "| $desc T $T $attn (load $loads) | tokens/s (median) | GFLOP/s | vs PyTorch bf16 autocast |"
        echo "|---|---:|---:|---:|"
        echo "| this trainer, -pr fp32 | $of | $(gf "$of") | $(ratio "$of" "$tb")x |"
        echo "| this trainer, -pr bf16 | $ob | $(gf "$ob") | $(ratio "$ob" "$tb")x |"
        echo "| PyTorch fp32 | $tf | $(gf "$tf") | $(ratio "$tf" "$tb")x |"
        echo "| PyTorch bf16 autocast | $tb | $(gf "$tb") | 1.00x |"
        echo "matmuls alone, one step's shapes (median of the rounds): bf16 oneDNN $mmb GFLOP/s, fp32 OpenBLAS $mmf GFLOP/s"
        echo "bf16 path: $(gf "$ob") GFLOP/s achieved = ${share}% of the bf16 matmul throughput of the same rounds;" \
             "$(ratio "$ob" "$tb")x PyTorch's bf16 autocast; $(ratio "$ob" "$of")x the fp32 path (model FLOPs: $fpt per token)"
        echo "profile of the bf16 path (last round): $prof"
        echo "kernels: this trainer OpenBLAS $(cat "$tmp/ours_openblas"), oneDNN $(cat "$tmp/ours_onednn") ($(cat "$tmp/ours_precision_bf16"));" \
             "PyTorch $(sed -n 's/.*kernels: //p' "$tmp/torch_none.err" | head -n 1) (fp32), $(sed -n 's/.*kernels: //p' "$tmp/torch_bf16.err" | head -n 1) (bf16 autocast)"
        echo "$desc $T $attn $ob $tb $share $attn_share $loads" >>"$tmp/summary"
    done
    if [ -s "$tmp/lssar_over_softmax" ]; then
        echo "$desc $T $(grep . "$tmp/lssar_over_softmax" | median) $(grep . "$tmp/lssar_over_softmax" | tr '\n' ' ')" >>"$tmp/step_ratios"
    fi
done
sed -n '1p' "$tmp/torch_bf16.err" | sed 's/; kernels.*//; s/^/(pytorch side: /; s/$/)/'

: >"$tmp/eval_summary"
if [ -n "$EVAL_LENGTHS" ]; then
    longest=$(echo "$EVAL_LENGTHS" | tr ',' '\n' | sort -g | tail -n 1)
    echo
    echo "== long-context evaluation: loss_vs_length (eval/loss_vs_length.h) on $EVAL_MODEL at $EVAL_LENGTHS, $EVAL_TOKENS tokens per length, fp32 reference path and bf16 path on the same weights and tokens"
    for attn in $ATTNS; do
        l0=$(load)
        $CLEAN build/profile_cpu -e "$EVAL_MODEL" -b 4 -t 64 -a "$attn" -x 1 -el "$EVAL_LENGTHS" -en "$EVAL_TOKENS" >"$tmp/eval.out"
        l1=$(load)
        sed -n 's/^eval_T \([0-9]*\) tokens [0-9]*: \(.*\)/\1 \2/p' "$tmp/eval.out" | while read -r L rest; do
            echo "  $attn T $L (load $l0 -> $l1): $rest"
        done
        sed -n 's/^profile bf16 eval T \([0-9]*\) (share of time):/  profile of the bf16 path at T \1:/p' "$tmp/eval.out"
        x=$(sed -nE "s/^eval_T $longest .*bf16 \/ fp32 ([0-9.]+)x/\1/p" "$tmp/eval.out")
        echo "$attn $longest $x $l0-$l1" >>"$tmp/eval_summary"
    done
fi

echo
echo "== targets (ratios of one run)"
while read -r desc T attn ob tb share attn_share loads; do
    printf "  %-14s T %-4s %-8s bf16 path at %s%% of the bf16 matmul throughput (target >= 70%%); %sx PyTorch bf16 autocast; attention %s%% of the step (target <= %s%%) | load %s\n" \
        "$desc" "$T" "$attn" "$share" "$(ratio "$ob" "$tb")" "$attn_share" "$([ "$T" -le 64 ] && echo 15 || echo 35)" "$loads"
done <"$tmp/summary"
while read -r desc T med rounds; do
    echo "  $desc T $T: LSSAR's step time ${med}x softmax's on the bf16 path, median of the rounds' ratios ($rounds) (target <= 1.15)"
done <"$tmp/step_ratios"
while read -r attn L x loads; do
    echo "  evaluation at T $L, $attn: bf16 path ${x}x the fp32 reference path's tokens/s (target >= 5) | load $loads"
done <"$tmp/eval_summary"
echo "load average after: $(load)"
