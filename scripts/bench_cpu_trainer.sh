#!/usr/bin/env bash
# CPU trainer benchmark (not a test), on any CPU: tokens/s of this project's CPU trainer on its fast
# path in both numerics (-pr fp32, -pr bf16) and of PyTorch on the CPU (test/torch_trainer_bench.py:
# eager float32, and bf16 autocast where the CPU has bf16 matmuls) training the same GPT-2 + RoPE
# model, in one run, alternating all of them ROUNDS times; then per model and attention the medians,
# the ratios, and the figures that mean the same on every machine: each path's achieved FLOP/s as a
# share of the throughput of the step's matmuls alone measured in the same rounds (build/profile_cpu:
# fp32 through oneDNN, the fast path's, and OpenBLAS's sgemm; bf16 through oneDNN or its emulation), the profile (share of
# step time per layer kind), and the trainer's tokens/s with the cores' default thread count (no
# thread variable set) against 1 thread. Then the long-context evaluation: tokens/s of loss_vs_length
# at EVAL_LENGTHS on the reference path and on the fast path (-pr auto), measured in the same run. It
# ends with the targets (what each ratio should reach) and the figures measured against them.
#   bash scripts/bench_cpu_trainer.sh
#   MODELS="d4c128h2v256:64" ATTNS=lssar ROUNDS=5 STEPS=10 B=32 bash scripts/bench_cpu_trainer.sh
#   MODELS: descriptor:T pairs (default: the byte-level model d4c128h2v256 at T 64 and T 256, B 32,
#   and the BPE model d4 = C 256, 4 heads, vocab 50257, at T 64); EVAL_MODEL, EVAL_LENGTHS (default
#   d4c128h2v256, 1024,2048; EVAL_LENGTHS= skips the evaluation), EVAL_TOKENS (scored per length).
#   FAST_CPU_MAX_TARGET=AVX2 (layers/fast_cpu.h) with ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2
#   and BENCH_OPENBLAS_CORETYPE=Haswell runs both sides as an AVX2 machine would, on an AVX-512 one.
# Every side: the full step (forward, backward, clipping, AdamW), random tokens. This trainer runs
# with no thread variable set (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, OMP_WAIT_POLICY unset: one
# OpenMP pool, the cores' count) and once per round with OMP_NUM_THREADS=1; PyTorch with
# torch.set_num_threads(cores), at its best of two settings per round (as it is, and with
# OPENBLAS_NUM_THREADS=1, which stops its pthread OpenBLAS from competing with its OpenMP threads).
# Every command runs with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (some machines set them, and
# with them set OpenBLAS runs its AVX2 kernels on an AVX-512 CPU), and the kernels each side used are
# printed (this trainer's: the fast path's ISA target, OpenBLAS's core and oneDNN's ISA from
# build/profile_cpu, linked to the same libraries; PyTorch's: asked of the libraries in its process).
# The load average is printed beside every round: on a shared machine only ratios measured in the
# same round mean much.
set -euo pipefail
cd "$(dirname "$0")/.."
MODELS=${MODELS:-"d4c128h2v256:64 d4c128h2v256:256 d4:64"}
ATTNS=${ATTNS:-"softmax lssar"}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-10}
WARMUP=2
B=${B:-32}
CORES=$(nproc)
EVAL_MODEL=${EVAL_MODEL:-d4c128h2v256}
EVAL_LENGTHS=${EVAL_LENGTHS-"1024,2048"}
EVAL_TOKENS=${EVAL_TOKENS:-4096}
PY=/usr/bin/python3
CLEAN="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS -u OMP_WAIT_POLICY"
# BENCH_OPENBLAS_CORETYPE=Haswell: both sides' OpenBLAS on its AVX2 kernels (with the variables above, an
# AVX2 machine's run on an AVX-512 one)
[ -n "${BENCH_OPENBLAS_CORETYPE:-}" ] && CLEAN="$CLEAN OPENBLAS_CORETYPE=$BENCH_OPENBLAS_CORETYPE"

tmp=$(mktemp -d /tmp/bench_cpu_trainer_XXXXXX)
trap 'rm -rf "$tmp"' EXIT

make -s -j"$(nproc)" $(for attn in $ATTNS; do echo train_gpt2cpu_$attn; done) build/profile_cpu

load() { cut -d' ' -f1 /proc/loadavg; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
range() { sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%s-%s", lo, hi}'; }
max2() { awk -v a="$1" -v b="$2" 'BEGIN {print (a > b ? a : b)}'; }

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

ours() {  # $1 attn, $2 precision, $3 descriptor, $4 T, [$5 threads]: median tokens/s of the timed steps of one run
    rm -rf "$tmp/out"
    $CLEAN ${5:+OMP_NUM_THREADS=$5} ./train_gpt2cpu_$1 -i "$tmp/bench_*.bin" -j "" -o "$tmp/out" -e "$3" -b "$B" -t "$4" \
        -x $((STEPS + WARMUP)) -v 0 -s 0 -l 3e-4 -pr "$2" >"$tmp/ours.out"
    grep -q "^precision: $2 on the fast path" "$tmp/ours.out" ||
        { echo "error: -pr $2 did not run the fast path's $2:" >&2; cat "$tmp/ours.out" >&2; exit 1; }
    sed -n 's/^precision: //p' "$tmp/ours.out" >"$tmp/ours_precision_$2"
    sed -n 's/^{"step":\([0-9]*\),.*"tokens_per_s":\([0-9.e+]*\).*/\1 \2/p' "$tmp/out/log.jsonl" |
        awk -v w=$WARMUP '$1 > w {print $2}' | median
}
theirs() {  # $1 attn, $2 autocast (none | bf16): PyTorch's best of its two thread settings
    local a b
    a=$($CLEAN $PY test/torch_trainer_bench.py --attn "$1" --layers "$layers" --channels "$channels" --heads "$heads" \
        --vocab "$vocab" --B "$B" --T "$T" --steps "$STEPS" --warmup $WARMUP --threads "$CORES" \
        --autocast "$2" 2>"$tmp/torch_$2.err")
    b=$($CLEAN OPENBLAS_NUM_THREADS=1 $PY test/torch_trainer_bench.py --attn "$1" --layers "$layers" --channels "$channels" \
        --heads "$heads" --vocab "$vocab" --B "$B" --T "$T" --steps "$STEPS" --warmup $WARMUP --threads "$CORES" \
        --autocast "$2" 2>/dev/null)
    max2 "$a" "$b"
}
profile() {  # $1 attn, $2 descriptor, $3 T: the matmul throughputs, FLOPs per token, the layer profiles
    for pr in fp32 bf16; do
        $CLEAN build/profile_cpu -e "$2" -b "$B" -t "$3" -a "$1" -x 3 -pr $pr >"$tmp/profile.out"
        sed -n "s/^profile $pr (share of step time): //p" "$tmp/profile.out" >>"$tmp/profiles_$pr"
    done
    awk '/^matmul_gflops_bf16/ {print $2}' "$tmp/profile.out" >>"$tmp/mm_bf16"
    awk '/^matmul_gflops_fp32/ {print $2}' "$tmp/profile.out" >>"$tmp/mm_fp32"
    awk '/^matmul_gflops_sgemm/ {print $2}' "$tmp/profile.out" >>"$tmp/mm_sgemm"
    awk '/^flops_per_token/ {print $2}' "$tmp/profile.out" >"$tmp/flops_per_token"
    sed -n 's/^openblas_corename //p' "$tmp/profile.out" >"$tmp/ours_openblas"
    sed -n 's/^onednn_isa //p' "$tmp/profile.out" >"$tmp/ours_onednn"
    sed -n 's/^fast_target //p' "$tmp/profile.out" >"$tmp/ours_target"
}

hw_bf16=$($CLEAN build/profile_cpu -e d1c64h1v256 -b 1 -t 8 -x 1 -pr auto | grep -c '^numerics bf16' || true)
echo "$CORES cores, B $B, $ROUNDS rounds of $STEPS timed steps (after $WARMUP) per side; load average before: $(load)"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); $(grep -o -m1 avx512_bf16 /proc/cpuinfo || echo 'no avx512_bf16'), $(grep -o -m1 -w avx512f /proc/cpuinfo || echo 'no avx512f'), $(grep -o -m1 -w avx2 /proc/cpuinfo || echo 'no avx2')"
echo "bf16 matmuls in hardware: $([ "$hw_bf16" -gt 0 ] && echo "yes: -pr auto is bf16, PyTorch's bf16 autocast is measured too" || echo "no: -pr auto is fp32, PyTorch's autocast is not measured (no bf16 matmuls to use)")"
echo "environment of the measured commands: OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE and the thread variables unset (here: ${OPENBLAS_CORETYPE-unset}, ${OPENBLAS_L2_SIZE-unset}); FAST_CPU_MAX_TARGET ${FAST_CPU_MAX_TARGET-unset}, ONEDNN_MAX_CPU_ISA ${ONEDNN_MAX_CPU_ISA-unset}, ATEN_CPU_CAPABILITY ${ATEN_CPU_CAPABILITY-unset}"
auto=$([ "$hw_bf16" -gt 0 ] && echo bf16 || echo fp32)
: >"$tmp/summary"; : >"$tmp/step_ratios"
for model in $MODELS; do
    desc=${model%%:*}; T=${model##*:}
    parse_model "$desc"
    make_shard "$vocab" "$T"
    for attn in $ATTNS; do
        for f in mm_bf16 mm_fp32 mm_sgemm profiles_fp32 profiles_bf16 loads ours_fp32 ours_bf16 ours_1t torch_fp32 torch_bf16; do
            : >"$tmp/${f}_$attn"
        done
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
            ours "$attn" "$auto" "$desc" "$T" 1 >>"$tmp/ours_1t_$attn"
            if [ "$hw_bf16" -gt 0 ]; then theirs "$attn" bf16 >>"$tmp/torch_bf16_$attn"; else echo 0 >>"$tmp/torch_bf16_$attn"; fi
            : >"$tmp/profiles_fp32"; : >"$tmp/profiles_bf16"
            profile "$attn" "$desc" "$T"
            for f in mm_bf16 mm_fp32 mm_sgemm profiles_fp32 profiles_bf16; do tail -n 1 "$tmp/$f" >>"$tmp/${f}_$attn"; done
            l1=$(load)
            echo "$l0" >>"$tmp/loads_$attn"; echo "$l1" >>"$tmp/loads_$attn"
            printf "  round %d %-8s (load %s -> %s): this trainer fp32 %7.1f  bf16 %7.1f  %s 1 thread %7.1f | pytorch fp32 %7.1f  bf16 autocast %7.1f tok/s | matmuls fp32 %6.1f  bf16 %6.1f GFLOP/s\n" \
                "$r" "$attn" "$l0" "$l1" "$(tail -n 1 "$tmp/ours_fp32_$attn")" "$(tail -n 1 "$tmp/ours_bf16_$attn")" "$auto" \
                "$(tail -n 1 "$tmp/ours_1t_$attn")" "$(tail -n 1 "$tmp/torch_fp32_$attn")" "$(tail -n 1 "$tmp/torch_bf16_$attn")" \
                "$(tail -n 1 "$tmp/mm_fp32_$attn")" "$(tail -n 1 "$tmp/mm_bf16_$attn")"
        done
        if [ -s "$tmp/ours_${auto}_softmax" ] && [ -s "$tmp/ours_${auto}_lssar" ]; then  # step times of the same round
            ratio "$(tail -n 1 "$tmp/ours_${auto}_softmax")" "$(tail -n 1 "$tmp/ours_${auto}_lssar")" >>"$tmp/lssar_over_softmax"
            echo >>"$tmp/lssar_over_softmax"
        fi
    done
    for attn in $ATTNS; do
        of=$(printf "%.1f" "$(median <"$tmp/ours_fp32_$attn")"); ob=$(printf "%.1f" "$(median <"$tmp/ours_bf16_$attn")")
        o1=$(printf "%.1f" "$(median <"$tmp/ours_1t_$attn")")
        tf=$(median <"$tmp/torch_fp32_$attn"); tb=$(median <"$tmp/torch_bf16_$attn")
        mmb=$(median <"$tmp/mm_bf16_$attn"); mmf=$(median <"$tmp/mm_fp32_$attn"); mms=$(median <"$tmp/mm_sgemm_$attn")
        fpt=$(cat "$tmp/flops_per_token")
        gf() { awk -v t="$1" -v f="$fpt" 'BEGIN {printf "%.1f", t * f / 1e9}'; }
        share_f=$(awk -v a="$(gf "$of")" -v b="$mmf" 'BEGIN {printf "%.0f", 100 * a / b}')
        share_b=$(awk -v a="$(gf "$ob")" -v b="$mmb" 'BEGIN {printf "%.0f", 100 * a / b}')
        oa=$([ "$auto" = bf16 ] && echo "$ob" || echo "$of")
        loads=$(range <"$tmp/loads_$attn")
        echo
        echo "| $desc T $T $attn (load $loads) | tokens/s (median) | GFLOP/s | vs PyTorch fp32 |"
        echo "|---|---:|---:|---:|"
        echo "| this trainer, -pr fp32 | $of | $(gf "$of") | $(ratio "$of" "$tf")x |"
        echo "| this trainer, -pr bf16 | $ob | $(gf "$ob") | $(ratio "$ob" "$tf")x |"
        echo "| this trainer, -pr $auto, 1 thread | $o1 | $(gf "$o1") | $(ratio "$o1" "$tf")x |"
        echo "| PyTorch fp32 (eager, best of two thread settings) | $tf | $(gf "$tf") | 1.00x |"
        [ "$hw_bf16" -gt 0 ] && echo "| PyTorch bf16 autocast | $tb | $(gf "$tb") | $(ratio "$tb" "$tf")x |"
        echo "matmuls alone, one step's shapes (median of the rounds): fp32 oneDNN $mmf GFLOP/s (the fast path's), fp32 OpenBLAS sgemm $mms GFLOP/s, bf16 $mmb GFLOP/s ($(cat "$tmp/ours_onednn"))"
        echo "fp32 path: $(gf "$of") GFLOP/s = ${share_f}% of the fp32 matmul throughput (oneDNN) of the same rounds, $(awk -v a="$(gf "$of")" -v b="$mms" 'BEGIN {printf "%.0f", 100 * a / b}')% of OpenBLAS sgemm's; bf16 path: $(gf "$ob") GFLOP/s = ${share_b}% of the bf16 matmul throughput (model FLOPs: $fpt per token)"
        echo "threads: -pr $auto with the default $CORES threads $(ratio "$oa" "$o1")x 1 thread"
        echo "profile of the fp32 path (last round): $(tail -n 1 "$tmp/profiles_fp32_$attn")"
        echo "profile of the bf16 path (last round): $(tail -n 1 "$tmp/profiles_bf16_$attn")"
        echo "kernels: this trainer's fast path $(cat "$tmp/ours_target"), OpenBLAS $(cat "$tmp/ours_openblas") ($(cat "$tmp/ours_precision_fp32"));" \
             "PyTorch $(sed -n 's/.*kernels: //p' "$tmp/torch_none.err" | head -n 1) (fp32)"
        echo "$desc $T $attn $of $ob $tf $tb $share_f $share_b $(ratio "$oa" "$o1") $loads" >>"$tmp/summary"
    done
    if [ -s "$tmp/lssar_over_softmax" ]; then
        echo "$desc $T $(grep . "$tmp/lssar_over_softmax" | median) $(grep . "$tmp/lssar_over_softmax" | tr '\n' ' ')" >>"$tmp/step_ratios"
    fi
done
sed -n '1p' "$tmp/torch_none.err" | sed 's/; kernels.*//; s/^/(pytorch side: /; s/$/)/'

: >"$tmp/eval_summary"
if [ -n "$EVAL_LENGTHS" ]; then
    longest=$(echo "$EVAL_LENGTHS" | tr ',' '\n' | sort -g | tail -n 1)
    echo
    echo "== long-context evaluation: loss_vs_length (eval/loss_vs_length.h) on $EVAL_MODEL at $EVAL_LENGTHS, $EVAL_TOKENS tokens per length, the reference path and the fast path (-pr $auto) on the same weights and tokens"
    for attn in $ATTNS; do
        l0=$(load)
        $CLEAN build/profile_cpu -e "$EVAL_MODEL" -b 4 -t 64 -a "$attn" -x 1 -pr "$auto" -el "$EVAL_LENGTHS" -en "$EVAL_TOKENS" >"$tmp/eval.out"
        l1=$(load)
        sed -n 's/^eval_T \([0-9]*\) tokens [0-9]*: \(.*\)/\1 \2/p' "$tmp/eval.out" | while read -r L rest; do
            echo "  $attn T $L (load $l0 -> $l1): $rest"
        done
        sed -n "s/^profile $auto eval T \([0-9]*\) (share of time):/  profile of the fast path at T \1:/p" "$tmp/eval.out"
        x=$(sed -nE "s/^eval_T $longest .* \/ ref ([0-9.]+)x/\1/p" "$tmp/eval.out")
        echo "$attn $longest $x $l0-$l1" >>"$tmp/eval_summary"
    done
fi

echo
echo "== targets (ratios of one run)"
while read -r desc T attn of ob tf tb share_f share_b threads loads; do
    best=$([ "$auto" = bf16 ] && echo "$ob" || echo "$of")
    printf "  %-14s T %-4s %-8s -pr %s %sx PyTorch eager fp32 (target >= 2 on AVX2); fp32 path at %s%% of the fp32 matmul throughput (target >= 60%% on AVX2); bf16 path at %s%% of the bf16 matmul throughput; %s threads %sx 1 thread (target >= 1.7) | load %s\n" \
        "$desc" "$T" "$attn" "$auto" "$(ratio "$best" "$tf")" "$share_f" "$share_b" "$CORES" "$threads" "$loads"
done <"$tmp/summary"
while read -r desc T med rounds; do
    echo "  $desc T $T: LSSAR's step time ${med}x softmax's on the $auto path, median of the rounds' ratios ($rounds) (target <= 1.15)"
done <"$tmp/step_ratios"
while read -r attn L x loads; do
    echo "  evaluation at T $L, $attn: the fast path ${x}x the reference path's tokens/s (target >= 10 on AVX2, >= 5 with bf16) | load $loads"
done <"$tmp/eval_summary"
echo "load average after: $(load)"
