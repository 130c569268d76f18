#!/usr/bin/env bash
# The project's prepared GPU check, for a short loan of one GPU (an H200: the whole check in at most
# TOTAL_S = 360 s). The loan: 15 minutes of device time in all, the machine's start-up (1-2 minutes)
# included, at most 10 minutes per command, 64 MiB carried. The first run takes start-up + up to
# TOTAL_S + 60 s (timeout_s 420: unpacking and the summary) + the idle time before the next call,
# about 9 minutes, which leaves room for one rerun of about 3 minutes, started at once, of what
# failed or was cut, never for the whole check twice:
#   TOTAL_S=150 bash scripts/gpu_check.sh --prebuilt DIR --out $OUT --only STEP,..   (timeout_s 210)
# (--carry prints both commands). The steps, in order of value, with their budgets in seconds
# (they add up to TOTAL_S; --plan prints and checks them):
#   trainer_speed          the trainer, GPT-2 124M at T 1024: tokens/s and MFU, softmax and LSSAR
#   gradcheck_*_d12        the CUDA back end against the CPU reference at 124M's size, T 1024, in
#                          float64 (-f 64: never float32 because a VM's memory starts small; the
#                          summary's gradcheck line says which precision ran)
#   matmul_bgrad           cuBLASLt's bias-gradient epilogues against the column sums (dev/matmul.cu, versions 1 and 2)
#   test_* and nccl_one_rank   the GPU twins of the emulated kernel tests, the one-rank NCCL path
#   attention_bench        attention fwd+bwd at hd 64, T 1K-16K: LSSAR/softmax and softmax/cuDNN,
#                          each length's line printed as it is measured
#   memcheck_*, racecheck_*    compute-sanitizer on small shapes: the executable searched in PATH,
#                          the CUDA toolkits (bin/ and compute-sanitizer/), /opt/nvidia and the
#                          Python wheels (nvidia/*/compute-sanitizer/), checked with --version; its
#                          path in the summary (COMPUTE_SANITIZER=path picks one)
#   data_parallel          with 2 or more GPUs only, on the time the steps before left unused
# Every step runs with its budget plus what the steps before it left unused (never eating into the
# budgets of the steps after it); when that runs out, the step and every process it started are
# stopped, also those in process groups of their own (an inner `timeout`, the trainer under it).
# A step ends as
#   passed | FAILED (exit N) | cut at N s (the clock: its budget ran out) | skipped (why) |
#   not reached (TOTAL_S was spent before it)
# and only FAILED makes the check fail. The summary gets each step's line and the figures of its
# log (its KEEP lines) as they are printed, on stdout too, so that the last 12,000 characters of a
# run's output hold it; it ends with the count of each outcome.
# Results: under --out DIR, at most 6 files: DIR/summary.txt (first, rewritten as each step
# ends) and DIR/logs.tar.gz (every step's log, packed again after each step).
# Usage:
#   bash scripts/gpu_check.sh --prebuilt DIR --out OUT   run the binaries of DIR (make gpu-check-build);
#                                                        nothing compiles; refuses at once where DIR
#                                                        is missing (a device run that did not carry it)
#   bash scripts/gpu_check.sh [--out OUT]                make gpu-check-build first (needs nvcc), then the same
#   bash scripts/gpu_check.sh --plan [--prebuilt DIR]    no GPU needed: the steps, their budgets and
#       their sum; fails if the sum exceeds TOTAL_S, a binary of DIR (default build/gpu_check) is
#       missing, or a test filter (-tc) names no test case of its source
#   bash scripts/gpu_check.sh --carry DIR    no GPU needed (make gpu-check-build ends with it): DIR
#       and the working tree a device run sends with it (tracked files, untracked ones git does not
#       ignore, shared/) must fit in 56 MiB of the 64 MiB a run carries; prints the carry list and
#       the run commands, or fails with the sizes
#   bash scripts/gpu_check.sh --libs DIR     no GPU needed (make gpu-check-build prints it): the
#       shared libraries each binary of DIR needs (readelf -d) against what DIR/lib carries
#   --only STEP,...   those steps alone (a rerun of what failed or was cut), with their budgets
#   TOTAL_S=N (environment): the whole check's seconds (default 360)
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL_S=${TOTAL_S:-360}

# name:budget, in the order they run (the order of value)
STEPS=(
    trainer_speed:80
    gradcheck_lssar_d12:60
    gradcheck_softmax_d12:45
    matmul_bgrad:15
    test_simt:8
    test_vendor_host:12
    test_layers_cuda:15
    test_attention_cuda:25
    test_model_cuda:25
    nccl_one_rank:5
    attention_bench:40
    memcheck_attention:12
    racecheck_attention:8
    memcheck_model:6
    racecheck_model:4
    data_parallel:0
)

# doctest filters of the steps that run part of a test, and the source whose TEST_CASEs they name
FILTER_ATTENTION_MEMCHECK='an odd number of heads*,head size 128*'
FILTER_ATTENTION_RACECHECK='head size 128*'
FILTER_MODEL='first step*'
FILTER_ONE_RANK='one rank with a one-rank NCCL communicator*'
step_filter() {  # NAME -> "SOURCE|FILTER" or nothing
    case $1 in
        memcheck_attention) echo "test/test_attention_cuda.cu|$FILTER_ATTENTION_MEMCHECK" ;;
        racecheck_attention) echo "test/test_attention_cuda.cu|$FILTER_ATTENTION_RACECHECK" ;;
        memcheck_model|racecheck_model) echo "test/test_model_cuda.cu|$FILTER_MODEL" ;;
        nccl_one_rank) echo "test/test_distributed.cu|$FILTER_ONE_RANK" ;;
    esac
}

# the prebuilt binaries a step runs
step_binaries() {
    case $1 in
        trainer_speed) echo "train_gpt2cu_softmax train_gpt2cu_lssar write_random_shard" ;;
        gradcheck_lssar_d12) echo "gradcheck_cu_lssar" ;;
        gradcheck_softmax_d12) echo "gradcheck_cu_softmax" ;;
        matmul_bgrad) echo "matmul_gpu" ;;
        test_simt) echo "test_simt_gpu" ;;
        test_vendor_host) echo "test_vendor_host_gpu" ;;
        test_layers_cuda) echo "test_layers_cuda_gpu" ;;
        test_attention_cuda|memcheck_attention|racecheck_attention) echo "test_attention_cuda_gpu" ;;
        test_model_cuda|memcheck_model|racecheck_model) echo "test_model_cuda_gpu" ;;
        nccl_one_rank|data_parallel) echo "test_distributed_gpu" ;;
        attention_bench) echo "attention_backward" ;;
    esac
}

# the lines of a step's log that go into the summary (an extended regex)
step_keep() {
    case $1 in
        trainer_speed) echo '^(attn|softmax|lssar) |^lssar / softmax|stopped|FAILED|no step' ;;
        gradcheck_*) echo '^(gradcheck|cuda back end|cpu |passed|FAILED)|FAILED$' ;;
        matmul_bgrad) echo '^kernel version|^(forward|backward) |no algorithm|VALIDATION FAILED' ;;
        test_*|nccl_one_rank|data_parallel) echo '^\[doctest\] (test cases|assertions)|SKIPPED' ;;
        attention_bench) echo '^fwd\+bwd T=|^cudnn |^targets|^validate .*FAIL' ;;
        memcheck_*|racecheck_*) echo 'ERROR SUMMARY|^\[doctest\] test cases|Device not supported' ;;
    esac
}

# runs step NAME (the binaries of $dir); its output goes to the log
step_command() {
    case $1 in
        trainer_speed) env PREBUILT="$dir" STEPS=20 LIMIT_S=30 WORK="$LOGS/trainer" bash scripts/gpu_train_check.sh ;;
        # B 1: the float64 CPU runs dominate; -f 64 whatever MemAvailable says at the start (a microVM's
        # memory grows as it is used); the tool's first line says the precision, kept in the summary
        gradcheck_lssar_d12) "$dir/gradcheck_cu_lssar" -e d12 -t 1024 -b 1 -p 15 -f 64 ;;
        gradcheck_softmax_d12) "$dir/gradcheck_cu_softmax" -e d12 -t 1024 -b 1 -f 64 ;;
        # at 124M's fc/fcproj shapes (N 8192, C 768, 4C): the product's epilogues (BGRADB, DGELU_BGRAD;
        # a missing algorithm prints "[matmul] cuBLASLt has no algorithm") and the column sums, each validated
        matmul_bgrad) "$dir/matmul_gpu" 1 && "$dir/matmul_gpu" 2 ;;
        test_simt) "$dir/test_simt_gpu" ;;
        test_vendor_host) "$dir/test_vendor_host_gpu" ;;
        test_layers_cuda) "$dir/test_layers_cuda_gpu" ;;
        test_attention_cuda) "$dir/test_attention_cuda_gpu" ;;
        test_model_cuda) "$dir/test_model_cuda_gpu" ;;
        nccl_one_rank) "$dir/test_distributed_gpu" -tc="$FILTER_ONE_RANK" ;;
        attention_bench) env PREBUILT="$dir" WORK="$LOGS/attention" bash scripts/gpu_check_attention.sh ;;
        memcheck_attention) "$sanitizer" --tool memcheck --error-exitcode 3 "$dir/test_attention_cuda_gpu" \
                                -tc="$FILTER_ATTENTION_MEMCHECK" ;;
        racecheck_attention) "$sanitizer" --tool racecheck --error-exitcode 3 "$dir/test_attention_cuda_gpu" \
                                 -tc="$FILTER_ATTENTION_RACECHECK" ;;
        memcheck_model) "$sanitizer" --tool memcheck --error-exitcode 3 "$dir/test_model_cuda_gpu" -tc="$FILTER_MODEL" ;;
        racecheck_model) "$sanitizer" --tool racecheck --error-exitcode 3 "$dir/test_model_cuda_gpu" -tc="$FILTER_MODEL" ;;
        data_parallel) "$dir/test_distributed_gpu" ;;
    esac
}

# why step NAME does not run on this machine, or nothing
step_skip_reason() {
    case $1 in
        memcheck_*|racecheck_*)
            if [ -z "$sanitizer" ]; then echo "compute-sanitizer not found ($SANITIZER_WHERE)"
            elif [ -n "$sanitizer_refused" ]; then echo "compute-sanitizer answered 'Device not supported' (this machine's runtime)"
            fi ;;
        data_parallel) [ "$ngpu" -ge 2 ] || echo "$ngpu GPU: the 2-rank checks need 2 or more" ;;
    esac
}

NAMES=() BUDGETS=()
for s in "${STEPS[@]}"; do NAMES+=("${s%%:*}"); BUDGETS+=("${s#*:}"); done

dir="" out="build/gpu_check_out" plan=0 carry="" only="" libs=""
while [ $# -gt 0 ]; do
    case $1 in
        --only) only=${2:?"--only needs step names, comma-separated"}; shift 2 ;;
        --prebuilt) dir=${2:?"--prebuilt needs the folder make gpu-check-build wrote"}; shift 2 ;;
        --out) out=${2:?"--out needs a folder (the run tool's \$OUT)"}; shift 2 ;;
        --plan) plan=1; shift ;;
        --carry) carry=${2:?"--carry needs the folder make gpu-check-build wrote"}; shift 2 ;;
        --libs) libs=${2:?"--libs needs the folder make gpu-check-build wrote"}; shift 2 ;;
        *) echo "usage: $0 [--prebuilt DIR] [--out DIR] [--only STEP,..] | --plan [--prebuilt DIR] | --carry DIR | --libs DIR" >&2; exit 2 ;;
    esac
done
# --prebuilt DIR must be there (a device run carries it only if its carry list names it) and hold
# binaries: refused at once, before any step would fail for want of them
if [ -n "$dir" ] && [ -z "$carry" ] && [ -z "$libs" ]; then
    why=""
    if [ ! -d "$dir" ]; then why="no such folder"
    elif [ -z "$(find "$dir" -maxdepth 1 -type f \( -name '*.gz' -o -perm -u+x \) -print -quit)" ]; then why="no binaries in it"
    fi
    if [ -n "$why" ]; then
        echo "gpu_check: --prebuilt $dir: $why. A device run has it only where its carry list names it:" \
             "carry [\"$dir\"] (make gpu-check-build builds it and prints the carry list and the command)"
        [ $plan = 0 ] && mkdir -p "$out" 2>/dev/null && echo "gpu_check: --prebuilt $dir: $why; carry [\"$dir\"]" > "$out/summary.txt"
        exit 2
    fi
fi
# the run scripts' variant lists (scripts/attn_flags.sh) from the folder's manifest: the device may
# have neither a compiler nor the build folder
[ -n "$dir" ] && [ -s "$dir/manifest.json" ] && export LSSAR_MANIFEST="$dir/manifest.json"
if [ -n "$only" ]; then  # those steps alone, in the plan's order, with their budgets
    IFS=',' read -r -a wanted <<< "$only"
    for w in "${wanted[@]}"; do
        case " ${NAMES[*]} " in *" $w "*) ;; *) echo "--only $only: no step '$w'; the steps: ${NAMES[*]}" >&2; exit 2 ;; esac
    done
    kept_names=() kept_budgets=()
    for ((i = 0; i < ${#NAMES[@]}; i++)); do
        case ",$only," in *",${NAMES[$i]},"*) kept_names+=("${NAMES[$i]}"); kept_budgets+=("${BUDGETS[$i]}") ;; esac
    done
    NAMES=("${kept_names[@]}") BUDGETS=("${kept_budgets[@]}")
fi

# ----------------------------------------------------------------------------
# --libs DIR: the shared libraries each binary of DIR needs (readelf -d, NEEDED), against DIR/lib
# (the copies the folder carries) and what a GPU machine has without the folder: the C and C++
# runtimes, the driver's libcuda, CUDA's libraries (the toolkit's or a wheel's nvidia/*/lib, found
# by the run). Anything else would not be found there: fails, naming it.

if [ -n "$libs" ]; then
    [ -d "$libs" ] || { echo "gpu_check --libs: $libs is not a folder (make gpu-check-build writes it)"; exit 1; }
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    carried=$(for f in "$libs"/lib/*; do [ -e "$f" ] && basename "$f" .gz; done | tr '\n' ' ')
    echo "libraries carried in $libs/lib: ${carried:-none }" | sed 's/ $//'
    bad=""
    for f in "$libs"/*; do
        [ -f "$f" ] || continue
        name=$(basename "$f" .gz)
        case $f in *.gz) gunzip -c "$f" > "$tmp/$name" 2>/dev/null || continue ;; *) cp "$f" "$tmp/$name" ;; esac
        needed=$(readelf -d "$tmp/$name" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p')
        [ -n "$needed" ] || continue  # not a dynamically linked binary (COMMIT)
        line=""
        for l in $needed; do
            case " $carried " in
                *" $l "*) where=carried ;;
                *) case $l in
                       libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*|libstdc++.so.*|libgcc_s.so.*)
                           where=system ;;
                       libcuda.so.*|libnvidia-ml.so.*) where=driver ;;
                       libcudart.so.*|libcublas.so.*|libcublasLt.so.*|libnccl.so.*|libcudnn*.so.*|libnvrtc*.so.*|libnvJitLink.so.*)
                           where=CUDA ;;
                       *) where="NOT CARRIED"; bad="$bad $name:$l" ;;
                   esac ;;
            esac
            line="$line $l ($where)"
        done
        echo "  $name:$line"
    done
    if [ -n "$bad" ]; then
        echo "gpu_check --libs: FAILED: needed, not carried and not on a GPU machine without the folder:$bad" \
             "(GPU_CHECK_LIBS of scripts/scripts.mk)"
        exit 1
    fi
    echo "gpu_check --libs: OK: every library needed is carried, the system's, the driver's or CUDA's"
    exit 0
fi

# ----------------------------------------------------------------------------
# --carry DIR: what a device run sends, against its limit; the carry list and the command

if [ -n "$carry" ]; then
    [ -d "$carry" ] || { echo "gpu_check --carry: $carry is not a folder (make gpu-check-build writes it)"; exit 1; }
    rel=$(realpath --relative-to=. "$carry")
    case $rel in
        ..*|/*) echo "gpu_check --carry: $carry is outside the repository; a run carries paths inside it"; exit 1 ;;
    esac
    mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
    folder=$(du -sb "$carry" | cut -f1)
    tree=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 stat -c %s 2>/dev/null |
            awk '{ s += $1 } END { print s + 0 }')
    [ -d shared ] && tree=$((tree + $(du -sb shared | cut -f1)))
    total=$((folder + tree)) limit=$((56 * 1048576))
    echo "device run: $rel $(mib "$folder") + the working tree $(mib "$tree") = $(mib "$total") (at most $(mib "$limit"): a run carries 64 MiB in all)"
    if [ "$total" -gt "$limit" ]; then
        echo "gpu_check --carry: FAILED: $(mib "$total") is over $(mib "$limit"); the largest files of $rel:"
        find "$carry" -type f -printf '%s %p\n' | sort -rn | head -5 | awk '{ printf "    %.1f MiB %s\n", $1 / 1048576, $2 }'
        exit 1
    fi
    echo "device run: carry [\"$rel\"], timeout_s $((TOTAL_S + 60)), command:"
    echo "    bash scripts/gpu_check.sh --prebuilt $rel --out \$OUT"
    echo "then at once, while the machine is warm, only what failed or was cut (the loan's 15 minutes:" \
         "start-up 1-2 min + this run + the rerun): carry [\"$rel\"], timeout_s 210, command:"
    echo "    TOTAL_S=150 bash scripts/gpu_check.sh --prebuilt $rel --out \$OUT --only STEP,.."
    exit 0
fi

# ----------------------------------------------------------------------------
# --plan: the steps, their budgets and their sum; the binaries and the test filters checked

# do the doctest filter patterns (comma-separated, * and ? wildcards) each name a TEST_CASE of source?
filter_misses() {
    local source=$1 filter=$2 pattern name found
    local names
    names=$(sed -n 's/^TEST_CASE("\([^"]*\)".*/\1/p' "$source")
    IFS=',' read -r -a patterns <<< "$filter"
    for pattern in "${patterns[@]}"; do
        found=0
        while IFS= read -r name; do
            # shellcheck disable=SC2053
            [[ "$name" == $pattern ]] && { found=1; break; }
        done <<< "$names"
        [ $found = 1 ] || echo "'$pattern' ($source)"
    done
}

if [ $plan = 1 ]; then
    dir=${dir:-build/gpu_check}
    sum=0 bad=0 missing="" misses=""
    printf "gpu_check plan: %d steps in order of value, TOTAL_S = %d s, binaries of %s\n" "${#NAMES[@]}" "$TOTAL_S" "$dir"
    for ((i = 0; i < ${#NAMES[@]}; i++)); do
        name=${NAMES[$i]} budget=${BUDGETS[$i]}
        sum=$((sum + budget))
        note=""
        [ "$name" = data_parallel ] && note="  (2+ GPUs only, on the time left unused)"
        bins=$(step_binaries "$name")
        printf "  %2d  %-22s %4d s  %s%s\n" $((i + 1)) "$name" "$budget" "$bins" "$note"
        for b in $bins; do  # as make gpu-check-build leaves it (gzipped), or unpacked
            [ -f "$dir/$b.gz" ] || [ -f "$dir/$b" ] || case " $missing " in *" $b "*) ;; *) missing="$missing $b" ;; esac
        done
        f=$(step_filter "$name")
        [ -n "$f" ] && misses="$misses$(filter_misses "${f%%|*}" "${f#*|}" | sed "s/^/ $name: /")"
    done
    printf "sum of the budgets: %d s of TOTAL_S = %d s\n" "$sum" "$TOTAL_S"
    if [ "$sum" -gt "$TOTAL_S" ]; then
        echo "gpu_check plan: FAILED: the budgets add up to $sum s, more than TOTAL_S = $TOTAL_S s"; bad=1
    fi
    if [ -n "$missing" ]; then
        echo "gpu_check plan: FAILED: missing in $dir:$missing (make gpu-check-build)"; bad=1
    fi
    if [ -n "$misses" ]; then
        echo "gpu_check plan: FAILED: test filters that name no test case:$misses"; bad=1
    fi
    [ $bad = 0 ] && echo "gpu_check plan: OK"
    exit $bad
fi

# ----------------------------------------------------------------------------
# the run

start=$(date +%s)
mkdir -p "$out"
SUMMARY=$out/summary.txt
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check_logs.XXXXXX")
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
pack_logs() { tar -czf "$out/logs.tar.gz.part" --exclude='*.bin' -C "$LOGS" . 2>/dev/null && mv "$out/logs.tar.gz.part" "$out/logs.tar.gz"; }

if ! nvidia-smi -L >/dev/null 2>&1; then
    note "gpu_check: no GPU visible (nvidia-smi -L failed); run this on a machine with one"
    exit 1
fi
if [ -z "$dir" ]; then
    make -j"$(nproc)" gpu-check-build > "$LOGS/build.log" 2>&1 || { note "gpu_check: build failed, see $out/logs.tar.gz"; pack_logs; exit 1; }
    dir=build/gpu_check
fi
dir=$(cd "$dir" && pwd)
note "gpu_check $(date -u +%FT%TZ), binaries of $dir (commit $(cat "$dir/COMMIT" 2>/dev/null || echo ?)), TOTAL_S = $TOTAL_S s"
# the folder's binaries, gzipped by make gpu-check-build: unpacked next to the logs' folder
if ls "$dir"/*.gz > /dev/null 2>&1; then
    bindir=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check_bin.XXXXXX")
    for z in "$dir"/*.gz; do gunzip -c "$z" > "$bindir/$(basename "$z" .gz)" && chmod +x "$bindir/$(basename "$z" .gz)"; done
    [ -d "$dir/lib" ] && ln -s "$dir/lib" "$bindir/lib"
    dir=$bindir
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a "$SUMMARY"
ngpu=$(nvidia-smi -L | grep -c '^GPU')
# the folder's own OpenBLAS (and its Fortran runtime), gzipped by make gpu-check-build
libdir=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check_lib.XXXXXX")
for z in "$dir"/lib/*.gz; do [ -e "$z" ] && gunzip -c "$z" > "$libdir/$(basename "$z" .gz)"; done
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
all_binaries() { for name in "${NAMES[@]}"; do step_binaries "$name"; done | tr ' ' '\n' | sort -u; }
missing_libs() { for b in $(all_binaries); do [ -f "$dir/$b" ] && ldd "$dir/$b" 2>/dev/null; done | grep 'not found' | sort -u; }
missing=$(missing_libs)
if [ -n "$missing" ]; then
    # CUDA's libraries (cuBLAS, NCCL, cuDNN) may be there only as Python wheels (nvidia/*/lib)
    for d in $(python3 -c 'import glob, os, site; print(" ".join(sorted(set(os.path.dirname(p) for s in site.getsitepackages()
               for p in glob.glob(os.path.join(s, "nvidia", "*", "lib", "lib*.so*"))))))' 2>/dev/null); do
        LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
    done
    missing=$(missing_libs)
fi
[ -z "$missing" ] || note "gpu_check: libraries not found: $(echo "$missing" | awk '{print $1}' | tr '\n' ' ')"
# compute-sanitizer: the first candidate that is an executable file and answers --version. A
# candidate that is a folder (a toolkit's or a wheel's compute-sanitizer/) stands for the
# executable of that name inside it. SANITIZER_GLOBS replaces the places searched after PATH.
SANITIZER_WHERE="PATH, ${SANITIZER_GLOBS:-/usr/local/cuda*/{bin,compute-sanitizer}, /opt/nvidia/*[/*], the Python wheels' nvidia/*/compute-sanitizer}"
sanitizer_candidates() {
    [ -n "${COMPUTE_SANITIZER:-}" ] && echo "$COMPUTE_SANITIZER"
    command -v compute-sanitizer 2>/dev/null
    local g
    if [ -n "${SANITIZER_GLOBS:-}" ]; then
        for g in $SANITIZER_GLOBS; do echo "$g"; done
    else
        for g in /usr/local/cuda*/bin/compute-sanitizer /usr/local/cuda*/compute-sanitizer \
                 /opt/nvidia/*/compute-sanitizer /opt/nvidia/*/*/compute-sanitizer; do echo "$g"; done
        python3 -c 'import glob, os, site
for s in site.getsitepackages(): print("\n".join(sorted(glob.glob(os.path.join(s, "nvidia", "*", "compute-sanitizer")))))' \
            2>/dev/null
    fi
}
find_sanitizer() {
    local c version
    while IFS= read -r c; do
        [ -n "$c" ] || continue
        [ -d "$c" ] && c=$c/compute-sanitizer
        [ -f "$c" ] && [ -x "$c" ] || continue
        version=$(timeout 30 "$c" --version 2>&1) || continue
        version=$(echo "$version" | grep -i -m1 version || echo "$version" | tail -1)
        echo "$c|$version"
        return 0
    done < <(sanitizer_candidates)
    return 1
}
sanitizer="" sanitizer_refused=""
if found=$(find_sanitizer); then
    sanitizer=${found%%|*}
    note "compute-sanitizer: $sanitizer (${found#*|})"
else
    note "compute-sanitizer: not found ($SANITIZER_WHERE)"
fi

# every descendant of PID (from /proc: ps may be missing), and each process in their process
# groups (other than this script's): a child that left the tree by making a group of its own and
# whose parent then exited (a trainer under an inner `timeout`) is still reached
descendants() {
    local -A parent=() group=() tree=([$1]=1) groups=()
    local f line rest pid me="" changed=1
    for f in /proc/[0-9]*/stat; do
        read -r line < "$f" 2>/dev/null || continue
        pid=${line%% *} rest=${line##*) }  # "pid (comm) state ppid pgrp ...", comm may hold ") "
        read -r _ ppid pgid _ <<< "$rest"
        parent[$pid]=$ppid group[$pid]=$pgid
    done
    me=${group[$$]:-}
    while [ $changed = 1 ]; do
        changed=0
        for pid in "${!parent[@]}"; do
            [ -n "${tree[$pid]:-}" ] && continue
            if [ -n "${tree[${parent[$pid]}]:-}" ] || [ -n "${groups[${group[$pid]}]:-}" ]; then
                tree[$pid]=1 changed=1
                [ "${group[$pid]}" != "$me" ] && groups[${group[$pid]}]=1
            fi
        done
    done
    echo "${!tree[@]}"
}
stop_tree() {  # SIGTERM to them all at once, SIGKILL to what is left 5 s later
    local pids i
    pids=$(descendants "$1")
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null
    for ((i = 0; i < 25; i++)); do
        # shellcheck disable=SC2086
        kill -0 $pids 2>/dev/null || return 0
        sleep 0.2
    done
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null
    return 0
}

passed=0 failed=0 cut=0 skipped=0 not_reached=0
# run_step INDEX: step INDEX of STEPS, with its budget plus the time the steps before left unused
run_step() {
    local name=${NAMES[$1]} budget=${BUDGETS[$1]} later=0 j
    for ((j = $1 + 1; j < ${#NAMES[@]}; j++)); do later=$((later + BUDGETS[j])); done
    local left=$((TOTAL_S - ($(date +%s) - start)))
    local reason
    reason=$(step_skip_reason "$name")
    if [ -n "$reason" ]; then note "$name: skipped ($reason)"; skipped=$((skipped + 1)); return; fi
    if [ "$left" -lt 3 ]; then
        note "$name: not reached ($((left > 0 ? left : 0)) s of TOTAL_S = $TOTAL_S s left)"; not_reached=$((not_reached + 1)); return
    fi
    local give=$((left - later))
    [ "$give" -lt "$budget" ] && give=$budget
    [ "$give" -gt "$left" ] && give=$left
    [ "$give" -lt 1 ] && give=1
    local log=$LOGS/$name.log keep t0 rc pid
    keep=$(step_keep "$name")
    t0=$(date +%s)
    note "$name: running (budget ${give} s)"
    : > "$log"  # there before tail opens it
    # the clock: after give s the step and every process it started (also in process groups of
    # their own, as an inner `timeout` makes one) get SIGTERM, 5 s later SIGKILL (stop_tree)
    local cut_mark=$LOGS/.cut
    rm -f "$cut_mark"
    bash -c 'step_command "$1"' _ "$name" > "$log" 2>&1 &
    pid=$!
    (
        trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
        sleep "$give" & sleeper=$!
        wait "$sleeper"
        : > "$cut_mark"
        stop_tree "$pid"
    ) &
    local clock_pid=$!
    # the log's figures into the summary as they are printed
    tail -n +1 -f -s 0.2 --pid=$pid "$log" 2>/dev/null | grep --line-buffered -E "$keep" | sed -u 's/^/    /' | tee -a "$SUMMARY" &
    local tail_pid=$!
    wait $pid
    rc=$?
    [ -e "$cut_mark" ] || kill "$clock_pid" 2>/dev/null
    wait "$clock_pid" 2>/dev/null  # cut: until every process of the step is gone
    local took=$(($(date +%s) - t0))
    wait $tail_pid 2>/dev/null
    [ -e "$cut_mark" ] && rc=124
    rm -f "$cut_mark"
    if [ "$name" = memcheck_attention ] && grep -q 'Device not supported' "$log"; then
        sanitizer_refused=1
        note "$name: skipped (compute-sanitizer answered 'Device not supported': this machine's runtime, gVisor, hides the GPU from it), $took s"
        skipped=$((skipped + 1))
    elif [ $rc = 0 ]; then
        note "$name: passed, $took s"; passed=$((passed + 1))
    elif { [ $rc = 124 ] || [ $rc = 137 ]; } && [ "$took" -ge $((give - 1)) ]; then
        note "$name: cut at $give s (its budget); what it printed by then is above and in the logs"; cut=$((cut + 1))
    else
        note "$name: FAILED (exit $rc), $took s"; failed=$((failed + 1))
        grep -E 'ERROR|error|FAILED|fail' "$log" | head -8 | sed 's/^/    ! /' | tee -a "$SUMMARY"
    fi
    pack_logs
}

export -f step_command
export dir LOGS sanitizer FILTER_ATTENTION_MEMCHECK FILTER_ATTENTION_RACECHECK FILTER_MODEL FILTER_ONE_RANK
for ((i = 0; i < ${#NAMES[@]}; i++)); do run_step $i; done
total=$(($(date +%s) - start))
note "gpu_check: $passed passed, $failed failed, $cut cut, $((skipped + not_reached)) skipped ($not_reached not reached); $total s of TOTAL_S = $TOTAL_S s: $([ $failed = 0 ] && echo PASSED || echo FAILED)"
pack_logs
rm -rf "$LOGS" "$libdir" "${bindir:-}"
[ $failed = 0 ]
