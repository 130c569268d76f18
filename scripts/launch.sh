#!/usr/bin/env bash
# Starts N ranks of a data-parallel program on this machine, one per GPU:
#   scripts/launch.sh -n 8 ./train_gpt2cu_lssar -e d12 -b 64 ...
# Rank r runs the program with RANK=r, WORLD_SIZE=N, LOCAL_RANK=r (its GPU), and every rank gets
# the same fresh DIST_RUN_ID (runtime/distributed.h: it names the rendezvous file, so a file left by
# an earlier or concurrent launch is never read) and DIST_ID_DIR (default /tmp); with
# DIST_RENDEZVOUS=tcp://127.0.0.1:PORT set, rank 0 serves the id on that port instead. Each output line
# (stdout and stderr) is prefixed with "[rank r] ". If a rank exits non-zero, the others are
# stopped (TERM, then KILL after 10 s) and the launch exits with that rank's code; Ctrl-C stops
# them all. Exit 0 when every rank exits 0; 2 on bad usage.
# Across nodes, use srun (scripts/slurm_gpt2_124M.sbatch): the program reads SLURM_PROCID etc.
# Or run launch.sh on every node, as torchrun does, with the same run id and rank 0's address:
#   node 0: scripts/launch.sh -n 8 --nnodes 2 --node-rank 0 --rendezvous tcp://node0:29500 --run-id exp1 ./prog
#   node 1: scripts/launch.sh -n 8 --nnodes 2 --node-rank 1 --rendezvous tcp://node0:29500 --run-id exp1 ./prog
# Node k's ranks are k*N .. k*N+N-1 (LOCAL_RANK 0..N-1); a rank that fails stops this node's ranks,
# and the other nodes' ranks then fail their next collective (runtime/distributed.h's watchdog).
set -u

usage() {
    echo "usage: $0 -n N [--nnodes M --node-rank K --rendezvous tcp://HOST:PORT --run-id ID] [--] program [args...]" >&2
    echo "       (N >= 1 ranks on this machine; M machines, this one the K-th, all given the same HOST:PORT and ID)" >&2
    exit 2
}

n=""
nnodes=1
node_rank=0
rendezvous=""
run_id=""
while [ $# -gt 0 ]; do
    case "$1" in
        -n) [ $# -ge 2 ] || usage; n="$2"; shift 2 ;;
        --nnodes) [ $# -ge 2 ] || usage; nnodes="$2"; shift 2 ;;
        --node-rank) [ $# -ge 2 ] || usage; node_rank="$2"; shift 2 ;;
        --rendezvous) [ $# -ge 2 ] || usage; rendezvous="$2"; shift 2 ;;
        --run-id) [ $# -ge 2 ] || usage; run_id="$2"; shift 2 ;;
        -h|--help) usage ;;
        --) shift; break ;;
        *) break ;;
    esac
done
if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ]; then
    echo "launch.sh: -n '$n' must be a number of ranks >= 1" >&2
    usage
fi
if ! [[ "$nnodes" =~ ^[0-9]+$ ]] || [ "$nnodes" -lt 1 ]; then
    echo "launch.sh: --nnodes '$nnodes' must be a number of machines >= 1" >&2
    usage
fi
if ! [[ "$node_rank" =~ ^[0-9]+$ ]] || [ "$node_rank" -ge "$nnodes" ]; then
    echo "launch.sh: --node-rank '$node_rank' must be in [0, $nnodes)" >&2
    usage
fi
[ $# -ge 1 ] || { echo "launch.sh: no program to run" >&2; usage; }
if [ "$nnodes" -gt 1 ]; then
    # every node must name the same run and find rank 0 the same way; nothing shared can be drawn here
    run_id=${run_id:-${DIST_RUN_ID:-}}
    [ -n "$run_id" ] || { echo "launch.sh: --nnodes $nnodes needs --run-id ID, the same on every node" >&2; usage; }
    rendezvous=${rendezvous:-${DIST_RENDEZVOUS:-}}
    if [ -z "$rendezvous" ] && [ -z "${DIST_ID_DIR:-}" ]; then
        echo "launch.sh: --nnodes $nnodes needs --rendezvous tcp://HOST:PORT (node 0's address), or DIST_ID_DIR" \
             "set to a directory every node shares" >&2
        usage
    fi
fi

export DIST_RUN_ID="${run_id:-launch_$(hostname -s 2>/dev/null || echo host)_$$_$(date +%s%N)_${RANDOM}}"
export DIST_ID_DIR="${DIST_ID_DIR:-/tmp}"
[ -n "$rendezvous" ] && export DIST_RENDEZVOUS="$rendezvous"
world=$((n * nnodes))
first=$((node_rank * n))
status_dir=$(mktemp -d /tmp/launch_status.XXXXXX)

# line-buffered stdio, so that the ranks' lines interleave as they are printed, not in 4 KiB blocks
linebuf=()
command -v stdbuf > /dev/null && linebuf=(stdbuf -oL -eL)

set -m  # each rank's pipeline in its own process group, so stopping a rank stops all it started
pgids=()
tails=()
for ((r = 0; r < n; r++)); do
    ( RANK=$((first + r)) WORLD_SIZE=$world LOCAL_RANK=$r "${linebuf[@]}" "$@" 2>&1; echo $? > "$status_dir/$r" ) |
        sed -u "s/^/[rank $((first + r))] /" &
    tails[r]=$!
    pgids[r]=$(ps -o pgid= -p "${tails[r]}" | tr -d ' ')
done
set +m

stop_all() {
    for ((r = 0; r < n; r++)); do kill -TERM -- "-${pgids[r]}" 2>/dev/null; done
    for ((i = 0; i < 100; i++)); do
        alive=0
        for ((r = 0; r < n; r++)); do kill -0 "${tails[r]}" 2>/dev/null && alive=1; done
        [ $alive -eq 0 ] && return
        sleep 0.1
    done
    for ((r = 0; r < n; r++)); do kill -KILL -- "-${pgids[r]}" 2>/dev/null; done
}
trap 'echo "[launch] interrupted: stopping every rank" >&2; stop_all; rm -rf "$status_dir"; exit 130' INT TERM

# poll: a rank is done when its output pipeline ended; its code is in $status_dir/r
done_count=0
declare -A finished
code=0
while [ $done_count -lt $n ]; do
    for ((r = 0; r < n; r++)); do
        [ -n "${finished[$r]:-}" ] && continue
        kill -0 "${tails[r]}" 2>/dev/null && continue
        wait "${tails[r]}" 2>/dev/null
        finished[$r]=1
        done_count=$((done_count + 1))
        rc=$(cat "$status_dir/$r" 2>/dev/null || echo 143)
        if [ "$rc" -ne 0 ]; then
            echo "[launch] rank $((first + r)) exited with $rc: stopping the other ranks" >&2
            code=$rc
            stop_all
            break 2
        fi
    done
    sleep 0.1
done
wait 2>/dev/null
rm -rf "$status_dir"
exit $code
