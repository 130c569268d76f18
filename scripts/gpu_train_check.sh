#!/usr/bin/env bash
# GPU check of the whole trainer's speed: GPT-2 124M (d12) at T = 1024, softmax against LSSAR p = 15,
# on one GPU, in at most about four minutes (builds included; needs no network and no dataset):
#   1. writes a synthetic training shard of random GPT-2 token ids (dataloader/shard.h's writer):
#      speed does not depend on what the tokens say
#   2. builds ./train_gpt2cu_softmax and ./train_gpt2cu_lssar with nvcc
#   3. trains each for STEPS steps of B x 1024 tokens (no validation, sampling or checkpoints)
#   4. prints each one's median tokens/s and MFU over the steps after the first WARMUP, and the
#      ratio LSSAR / softmax
#   5. with 2 or more GPUs, LSSAR data-parallel on all of them through the real NCCL, with and
#      without ZeRO-1: tokens/s and the scaling against one GPU
# Usage: bash scripts/gpu_train_check.sh          (outputs in build/gpu_train_check/)
#        B=8 STEPS=30 bash scripts/gpu_train_check.sh
#        PREBUILT=DIR bash scripts/gpu_train_check.sh   the trainers and shard writer of DIR
#                                                  (make gpu-check-build): nothing is built
#        bash scripts/gpu_train_check.sh --summarize SOFTMAX_OUTPUT LSSAR_OUTPUT
#            only step 4, on two saved trainer outputs (needs no GPU)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/attn_flags.sh
B=${B:-16}            # sequences per step
T=1024
STEPS=${STEPS:-50}    # optimizer steps per variant
WARMUP=${WARMUP:-5}   # first steps left out of the medians (allocation, cuBLAS heuristics)
LIMIT_S=${LIMIT_S:-90}   # a run still going after this is stopped; the steps it logged still count
dir=${WORK:-build/gpu_train_check}

# Median tokens/s and MFU of the trainer's step lines after the first $WARMUP:
#   step  7/50 | loss 10.9 | norm 1.2 | lr 3.00e-04 | 61.2 ms | 267712 tok/s | MFU 38.1% | ETA 0m02s
# prints "TOKENS_PER_S MFU_PERCENT STEPS_USED" ("-" for an MFU the trainer did not print), nothing
# if no step line is left.
summarize() {
    awk -v warmup="$WARMUP" '
        function median(a, n,    i, j, t) {
            for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        /^step +[0-9]+\/[0-9]+ \|/ {
            split($2, s, "/")
            if (s[1] + 0 <= warmup) next
            nf = split($0, f, " [|] ")
            tok = ""; mfu = ""
            for (i = 1; i <= nf; i++) {
                if (f[i] ~ / tok\/s$/) { tok = f[i]; sub(/ tok\/s$/, "", tok) }
                if (f[i] ~ /^MFU /) { mfu = f[i]; sub(/^MFU /, "", mfu); sub(/%$/, "", mfu) }
            }
            if (tok == "") next
            n++; toks[n] = tok + 0
            if (mfu != "") { m++; mfus[m] = mfu + 0 }
        }
        END {
            if (n == 0) exit
            printf "%.0f %s %d\n", median(toks, n), m == n ? sprintf("%.1f", median(mfus, m)) : "-", n
        }' "$1"
}

report() {  # report SOFTMAX_OUTPUT LSSAR_OUTPUT
    local status=0 s r
    s=$(summarize "$1")
    r=$(summarize "$2")
    printf "%-8s %12s %8s %6s\n" attn "tokens/s" "MFU %" steps
    for v in softmax lssar; do
        local line=$s
        [ $v = lssar ] && line=$r
        if [ -z "$line" ]; then
            printf "%-8s %12s\n" $v "no step after the first $WARMUP logged"
            status=1
        else
            read -r tok mfu n <<< "$line"
            printf "%-8s %12s %8s %6s\n" $v "$tok" "$mfu" "$n"
        fi
    done
    if [ -n "$s" ] && [ -n "$r" ]; then
        awk -v s="${s%% *}" -v r="${r%% *}" 'BEGIN {
            printf "lssar / softmax: tokens/s %.2f, step time %.2f\n", r / s, s / r }'
    fi
    return $status
}

if [ "${1:-}" = "--summarize" ]; then
    [ $# -eq 3 ] || { echo "usage: $0 --summarize SOFTMAX_OUTPUT LSSAR_OUTPUT" >&2; exit 2; }
    report "$2" "$3"
    exit $?
fi

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_train_check: no GPU visible (nvidia-smi -L failed); run this on a machine with one" >&2
    exit 1
fi
mkdir -p "$dir"
start=$(date +%s)
echo "=== trainer speed: d12, B $B x T $T, $STEPS steps per attention variant (median after step $WARMUP)"

# 1. synthetic shard: (STEPS + 1) batches of random ids < 50257 (the trainer checks them)
# 2. the trainers
if [ -n "${PREBUILT:-}" ]; then
    writer=$PREBUILT/write_random_shard
    trainer=$PREBUILT/train_gpt2cu_
else
    ${CXX:-g++} -std=c++17 -O2 -I. tools/write_random_shard.cpp dataloader/shard.cpp -o "$dir/write_random_shard" ||
        { echo "gpu_train_check: building the shard writer failed"; exit 1; }
    make -j"$(nproc)" train_gpt2cu_softmax train_gpt2cu_lssar > "$dir/build.log" 2>&1 ||
        { echo "gpu_train_check: build failed, see $dir/build.log"; tail -30 "$dir/build.log"; exit 1; }
    echo "build: $(( $(date +%s) - start )) s"
    writer=$dir/write_random_shard
    trainer=./train_gpt2cu_
fi
"$writer" "$dir/random_train_000000.bin" $(( (STEPS + 1) * B * T + T + 1 )) ||
    { echo "gpu_train_check: writing the shard failed"; exit 1; }

# 3. the runs
status=0
for v in softmax lssar; do
    t0=$(date +%s)
    timeout "$LIMIT_S" "$trainer$v" -i "$dir/random_train_*.bin" -j "" -o "$dir/out_$v" -e d12 $(p_flag $v 15) \
        -b "$B" -t $T -x "$STEPS" -l 3e-4 -u 10 -v 0 -s 0 > "$dir/$v.txt" 2>&1
    rc=$?
    if [ $rc = 124 ]; then
        echo "$v: stopped after $LIMIT_S s (LIMIT_S); $(grep -c '^step' "$dir/$v.txt") steps logged"
    elif [ $rc != 0 ]; then
        echo "$v: FAILED (exit $rc), see $dir/$v.txt"; tail -5 "$dir/$v.txt"; status=1
    else
        echo "$v: $STEPS steps in $(( $(date +%s) - t0 )) s"
    fi
done

# 4. the figures
report "$dir/softmax.txt" "$dir/lssar.txt" || status=1

# 5. with several GPUs: the real NCCL build, LSSAR data-parallel over all of them (scripts/launch.sh),
#    plain and ZeRO-1; tokens/s against the one-GPU run above (scaling = ratio / GPUs)
ngpu=$(nvidia-smi -L | grep -c '^GPU')
if [ "$ngpu" -ge 2 ]; then
    one=$(summarize "$dir/lssar.txt")
    for z in 0 1; do
        out="$dir/lssar_dp${ngpu}_z$z.txt"
        timeout "$LIMIT_S" scripts/launch.sh -n "$ngpu" "${trainer}lssar" -i "$dir/random_train_*.bin" -j "" -e d12 \
            -p 15 -b "$B" -t $T -x "$(( STEPS / ngpu > WARMUP + 10 ? STEPS / ngpu : WARMUP + 10 ))" -l 3e-4 -u 10 -v 0 -s 0 -z $z > "$out.raw" 2>&1
        rc=$?
        sed -n 's/^\[rank 0\] //p' "$out.raw" > "$out"
        line=$(summarize "$out")
        if [ $rc != 0 ] && [ $rc != 124 ] || [ -z "$line" ]; then
            echo "lssar x $ngpu GPUs (ZeRO-1 $z): FAILED (exit $rc), see $out.raw"; tail -5 "$out.raw"; status=1
            continue
        fi
        read -r tok mfu n <<< "$line"
        awk -v t="$tok" -v one="${one%% *}" -v g="$ngpu" -v z="$z" -v mfu="$mfu" 'BEGIN {
            printf "lssar x %d GPUs (ZeRO-1 %d): %.0f tokens/s, MFU %s%%, %.2fx one GPU (scaling %.0f%%)\n",
                   g, z, t, mfu, one > 0 ? t / one : 0, one > 0 ? 100 * t / one / g : 0 }'
    done
else
    echo "data parallel: skipped (1 GPU; the 2-rank NCCL runs need 2 or more)"
fi
echo "gpu_train_check total: $(( $(date +%s) - start )) s, $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
