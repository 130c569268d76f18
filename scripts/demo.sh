#!/usr/bin/env bash
# The main job on a machine without a GPU: train a small GPT-2 + RoPE on the King James Bible
# twice, once with softmax attention and once with LSSAR (p = 15), on the CPU, then measure the
# validation loss of both at 1x to 16x the training length, print it side by side and plot it,
# and how sharp each one's attention stays at 16x (entropy of the attention rows, plotted), and
# last their zero-shot accuracy on a KJV cloze test (scripts/prepare_mc.py kjv_cloze).
#   bash scripts/demo.sh                     2-3 minutes of training per model on 2 cores, ~8 minutes in all
#   STEPS=600 THREADS=8 bash scripts/demo.sh longer / on more cores
#   PRECISION=fp32 bash scripts/demo.sh      the fp32 reference path (default auto: bf16 matmuls where
#                                            the CPU has AMX or AVX512-BF16, the fastest; else fp32)
# Writes out/demo/{softmax,lssar}/ (log.jsonl, the final checkpoint), out/demo/{softmax,lssar}.csv
# out/demo/loss_vs_length.png, out/demo/training_curves.png, out/demo/maps/,
# out/demo/attention_entropy.png and out/demo/kjv_cloze_{softmax,lssar}.csv. Running it again
# resumes or reuses finished runs (-y 1).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/attn_flags.sh
STEPS=${STEPS:-200}           # optimizer steps per model, 1024 tokens each
THREADS=${THREADS:-2}
OUT=${OUT:-out/demo}
MODEL=${MODEL:-d4c128h2}      # 4 layers, 128 channels, 2 heads of 64 (7.2M parameters, 6.4M of them the embedding)
T=64                          # training length; evaluated at 64 ... 1024
PRECISION=${PRECISION:-auto}  # the trainer's -pr

bash scripts/install_deps.sh
echo "== building the CPU trainer and the loss-versus-length tool for softmax and lssar"
make -s train_gpt2cpu_softmax train_gpt2cpu_lssar build/loss_vs_length_cpu_softmax build/loss_vs_length_cpu_lssar \
    build/attention_maps_cpu_softmax build/attention_maps_cpu_lssar build/mc_eval_cpu_softmax build/mc_eval_cpu_lssar
if [ ! -s data/kjv/kjv_train_000000.bin ] || [ ! -s data/kjv/kjv_val_000000.bin ]; then
    echo "== tokenizing the King James Bible into data/kjv"
    bash scripts/prepare_kjv.sh
fi

# OMP_WAIT_POLICY=passive: OpenMP threads that spin between parallel regions would take the
# cores from OpenBLAS's threads.
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS OMP_WAIT_POLICY=passive
mkdir -p "$OUT"
final=$(printf "ckpt_%08d.bin" "$STEPS")
for attn in softmax lssar; do
    echo "== training $MODEL with $attn attention: $STEPS steps of 16 x $T tokens"
    ./train_gpt2cpu_$attn -i "data/kjv/kjv_train_*.bin" -j "data/kjv/kjv_val_*.bin" -o "$OUT/$attn" \
        -e "$MODEL" $(p_flag $attn 15) -b 16 -t $T -x "$STEPS" -l 2e-3 -u 20 -k cosine -q 0.1 -c 0.1 -gc 1.0 \
        -v 50 -m 20 -s "$STEPS" -g 48 -gk 40 -gp "And God said" -n "$STEPS" -nk 1 -y 1 -pr "$PRECISION"
    echo "== loss versus length, $attn"
    ./build/loss_vs_length_cpu_$attn -e "$OUT/$attn/$final" -j "data/kjv/kjv_val_*.bin" -t $T \
        -l 1,2,4,8,16 -o "$OUT/$attn.csv"
done

echo "== training curves"
/usr/bin/python3 eval/plot_training.py softmax="$OUT/softmax/log.jsonl" "lssar p=15"="$OUT/lssar/log.jsonl" \
    --tokens-per-step $((16 * T)) --title "KJV, $MODEL, T $T, $STEPS steps" -o "$OUT/training_curves.png"

echo "== softmax and LSSAR side by side (trained at $T tokens)"
/usr/bin/python3 eval/plot_loss_vs_length.py softmax="$OUT/softmax.csv" "lssar p=15"="$OUT/lssar.csv" \
    --train-len $T --title "KJV, $MODEL, trained at $T tokens for $STEPS steps" -o "$OUT/loss_vs_length.png"

echo "== attention at 16x the training length (T = 1024): entropy H of the rows, effective span exp(H)"
mkdir -p "$OUT/maps"
for attn in softmax lssar; do
    echo "-- $attn"
    ./build/attention_maps_cpu_$attn -e "$OUT/$attn/$final" -j "data/kjv/kjv_val_*.bin" -T 1024 -rows 64 \
        -o "$OUT/maps/$attn" | sed -n '/^per layer/,/^mean entropy by row/p' | sed '$d'
done
/usr/bin/python3 eval/plot_attention_maps.py entropy "$OUT/maps/softmax_stats.csv:softmax" \
    "$OUT/maps/lssar_stats.csv:lssar p=15" -o "$OUT/attention_entropy.png"

echo "== zero-shot KJV cloze: the first half of each verse of the validation books, its true second half"
echo "   and three others of about its length; acc_norm = the lowest mean loss per token picks the true one"
[ -s data/mc/kjv_cloze_val.bin ] || /usr/bin/python3 scripts/prepare_mc.py kjv_cloze
for attn in softmax lssar; do
    ./build/mc_eval_cpu_$attn -e "$OUT/$attn/$final" -f data/mc/kjv_cloze_val.bin -o "$OUT/kjv_cloze_$attn.csv" \
        > "$OUT/kjv_cloze_$attn.txt"
done
printf "%-10s %-28s %-28s %s\n" model acc acc_norm chance
for attn in softmax lssar; do
    f="$OUT/kjv_cloze_$attn.txt"
    printf "%-10s %-28s %-28s %s\n" "$attn" "$(grep '^acc ' "$f" | awk '{print $2, $6, $7}')" \
        "$(grep '^acc_norm ' "$f" | awk '{print $2, $6, $7}')" "$(grep '^chance ' "$f" | awk '{print $2}')"
done
echo "== passkey retrieval learned at the training length and tested at 1x-16x: a separate run of"
echo "   5 models x 4,000 steps (91 minutes on the 2-core build machine): bash scripts/passkey_experiment.sh"
echo "   the gap to softmax at the training length against steps, lr and warmup: bash scripts/gap_experiment.sh (CORPUS=fortunes for the second corpus)"
