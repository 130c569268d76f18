#!/usr/bin/env bash
# Static figures of every CUDA kernel of the trainer at sm_90 (H100/H200), no GPU needed:
# registers, spills, stack, static and dynamic shared memory, theoretical occupancy (blocks and
# warps per SM), the SASS instruction mix (tensor-core MMA, MUFU, FP32 FFMA/FADD/FMUL, global and
# shared loads/stores, barriers), and for the attention kernels the non-MMA instructions per MMA of
# the main loop, with the LSSAR/softmax ratios and the targets on the last lines.
#   1. nvcc -cubin -arch=sm_90 -Xptxas -v of train_gpt2.cu built for lssar and for softmax (every
#      head size of the variant is instantiated there): ptxas's resource usage
#   2. cuobjdump -sass of that cubin (scripts/install_cuda_tools.sh fetches one where the toolkit
#      lacks it; CUOBJDUMP=path picks another)
#   3. the launch configurations (threads per block, dynamic shared memory) as the code launches
#      them, recorded by the SIMT emulator (SIMT_LAUNCH_LOG): one step of the emulated trainer at
#      GPT-2 124M's shapes (d12, T 64: the layers' configurations do not depend on T) and the
#      emulated attention test (every variant and head size); kept in build/kernel_stats/ and
#      recorded again when the binaries are newer
#   4. scripts/kernel_stats.py: the table (stdout) and build/kernel_stats.csv
# Usage: bash scripts/kernel_stats.sh            (about 3 minutes the first time, seconds after)
#        KERNEL_STATS_ATTN="softmax lssa sigmoid_l1_rw" bash scripts/kernel_stats.sh
#                                                  the kernels of other variants (default: lssar softmax;
#                                                  the ratio lines need both of those)
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
dir=build/kernel_stats
attns=${KERNEL_STATS_ATTN:-lssar softmax}
mkdir -p "$dir"

find_cuobjdump() {
    for c in "${CUOBJDUMP:-}" /usr/local/cuda/bin/cuobjdump "$(command -v cuobjdump || true)" \
             third_party/cuda-tools/bin/cuobjdump; do
        [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return 0; }
    done
    return 1
}
cuobjdump=$(find_cuobjdump) || { bash scripts/install_cuda_tools.sh >&2; cuobjdump=$(find_cuobjdump); }

# 1. the cubins and ptxas's figures (the trainer's flags, one architecture): the trainer built for
#    lssar and for softmax (a build holds its variant's attention kernels only), the two compiled
#    at once
: > "$dir/ptxas.txt"
: > "$dir/sass.txt"
for attn in $attns; do
    echo "compiling train_gpt2.cu (ATTN=$attn) for sm_90 (nvcc -cubin)" >&2
    "$NVCC" -O3 --use_fast_math -std=c++17 -I. -Xcompiler -fopenmp -DATTN_NAME="\"$attn\"" -arch=sm_90 -cubin \
        -Xptxas -v -x cu train_gpt2.cu -o "$dir/train_gpt2_$attn.sm_90.cubin" > "$dir/ptxas_$attn.txt" 2>&1 &
done
for attn in $attns; do
    wait -n || { cat "$dir"/ptxas_*.txt >&2; exit 1; }
done
for attn in $attns; do
    cat "$dir/ptxas_$attn.txt" >> "$dir/ptxas.txt"
    # 2. SASS; a disassembler older than the cubin's ELF header (CUDA >= 12.8 writes ABI version 8)
    #    reads it once the header says the same in the older format
    cubin=$dir/train_gpt2_$attn.sm_90.cubin
    if ! "$cuobjdump" -sass "$cubin" >> "$dir/sass.txt" 2> "$dir/cuobjdump.err"; then
        /usr/bin/python3 scripts/kernel_stats.py --legacy-elf "$cubin" "$dir/legacy.cubin"
        "$cuobjdump" -sass "$dir/legacy.cubin" >> "$dir/sass.txt" ||
            { echo "kernel_stats: $cuobjdump cannot read $cubin:" >&2; cat "$dir/cuobjdump.err" >&2; exit 1; }
    fi
done

# 3. launch configurations from the emulator
make -j2 build/train_gpt2cu_emu_lssar build/test_attention_cuda >&2
launches=$dir/launches.tsv
if [ ! -s "$launches" ] || [ build/train_gpt2cu_emu_lssar -nt "$launches" ] || [ build/test_attention_cuda -nt "$launches" ]; then
    echo "recording launch configurations (emulated trainer step at d12, attention test)" >&2
    rm -f "$launches.new"
    g++ -O2 -std=c++17 -I. tools/write_random_shard.cpp dataloader/shard.cpp -o "$dir/write_random_shard"
    "$dir/write_random_shard" "$dir/random_train_000000.bin" 4096
    SIMT_LAUNCH_LOG=$launches.new build/train_gpt2cu_emu_lssar -i "$dir/random_train_*.bin" -j "" -e d12 -t 64 -b 1 \
        -x 1 -v 0 -s 0 > "$dir/record_trainer.txt" 2>&1 || { tail -5 "$dir/record_trainer.txt" >&2; exit 1; }
    SIMT_LAUNCH_LOG=$launches.new build/test_attention_cuda > "$dir/record_attention.txt" 2>&1 ||
        { tail -5 "$dir/record_attention.txt" >&2; exit 1; }
    mv "$launches.new" "$launches"
fi

# 4. the table and the CSV
/usr/bin/python3 scripts/kernel_stats.py "$dir/ptxas.txt" "$dir/sass.txt" "$launches" build/kernel_stats.csv
echo "written: build/kernel_stats.csv ($("$cuobjdump" --version | tail -1 | sed 's/^Cuda compilation tools, //'))"
