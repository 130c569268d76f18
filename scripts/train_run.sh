# The experiments' training run, sourced by scripts/extrapolation_experiment.sh and
# scripts/ablations.sh: one model on the CPU trainer with the schedule they share (warmup STEPS / 20,
# cosine decay to 10%, validation every STEPS / 4 steps, one checkpoint at the end), reading MODEL,
# B, T, STEPS, LR and PRECISION from the sourcing script.
#   train_run DIR ATTN SEED TRAIN_PATTERN VAL_PATTERN LABEL [trainer flags...]
# trains ./train_gpt2cpu_ATTN into DIR (its output in DIR/train.out) unless DIR holds the final
# checkpoint already, then prints LABEL's last validation loss and tokens/s; on a failed run it
# names DIR/train.out, shows its last lines and returns 1.
train_run() {
    local dir=$1 attn=$2 seed=$3 train=$4 val=$5 label=$6
    shift 6
    local ckpt
    ckpt=$(printf "%s/ckpt_%08d.bin" "$dir" "$STEPS")
    [ -s "$ckpt" ] && return 0
    mkdir -p "$dir"
    "./train_gpt2cpu_$attn" -i "$train" -j "$val" -o "$dir" -ow 1 -e "$MODEL" "$@" \
        -b "$B" -t "$T" -x "$STEPS" -l "$LR" -u $((STEPS / 20)) -k cosine -q 0.1 -c 0.1 -gc 1.0 -v $((STEPS / 4)) -m 20 \
        -s 0 -n "$STEPS" -rs "$seed" -pr "$PRECISION" >"$dir/train.out" 2>&1 ||
        { echo "training failed: $dir/train.out" >&2; tail -3 "$dir/train.out" >&2; return 1; }
    echo "[$label] $(grep '^val loss' "$dir/train.out" | tail -1) ($(grep -o '[0-9]* tok/s' "$dir/train.out" | tail -1))"
}
