#!/usr/bin/env bash
# Times scripts/demo.sh as a fresh machine runs it, the installs included, on this machine's CPU: a
# Debian bookworm root made by debootstrap (minbase) with what a new machine of this project's kind
# has before the project installs anything (g++, make, git, python3, clang-14, ...), a clone of this
# repository's HEAD in it, and demo.sh run there through chroot. The variables demo.sh and the
# fast path read pass through (CORPUS, STEPS, THREADS, PRECISION, FAST_CPU_MAX_TARGET,
# ONEDNN_MAX_CPU_ISA). Needs root and Debian's mirror (MIRROR, default http://deb.debian.org/debian);
# debootstrap is installed if missing. The root stays in ROOT (default /tmp/llm_fresh_root) for
# inspection, its output in ROOT/root/llm/out; the next run starts it anew.
#   sudo bash scripts/demo_fresh_machine.sh
#   sudo FAST_CPU_MAX_TARGET=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 bash scripts/demo_fresh_machine.sh   as AVX2 runs it
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${ROOT:-/tmp/llm_fresh_root}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
# what a new machine of the project's kind has of what install_deps.sh would otherwise install
BASE_PACKAGES="g++ make git python3 ca-certificates procps clang-14 libclang-rt-14-dev gfortran libblas-dev liblapack-dev"
[ "$(id -u)" -eq 0 ] || { echo "demo_fresh_machine.sh: needs root (debootstrap, chroot, mount); run it with sudo" >&2; exit 1; }
case "$ROOT" in /|/usr|/usr/*|/etc|/etc/*|"") echo "demo_fresh_machine.sh: ROOT=$ROOT would remove a system folder; choose a new folder" >&2; exit 2 ;; esac
git rev-parse --verify -q HEAD >/dev/null || { echo "demo_fresh_machine.sh: $(pwd) is not a git repository with a commit" >&2; exit 1; }
[ -z "$(git status --porcelain --untracked-files=no)" ] ||
    echo "demo_fresh_machine.sh: note: the fresh machine gets HEAD ($(git rev-parse --short HEAD)), not your uncommitted changes"

unmount() { for m in proc dev; do mountpoint -q "$ROOT/$m" && umount "$ROOT/$m"; done; return 0; }
if [ -d "$ROOT" ]; then unmount; rm -rf --one-file-system "$ROOT"; fi  # never into a mount left behind
trap unmount EXIT
command -v debootstrap >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
echo "== a fresh Debian bookworm in $ROOT (not timed)"
debootstrap --variant=minbase bookworm "$ROOT" "$MIRROR" >"$ROOT.debootstrap.log" 2>&1 ||
    { tail -20 "$ROOT.debootstrap.log" >&2; echo "demo_fresh_machine.sh: debootstrap failed (log: $ROOT.debootstrap.log)" >&2; exit 1; }
cp /etc/resolv.conf "$ROOT/etc/"
mount -t proc proc "$ROOT/proc"
mount --bind /dev "$ROOT/dev"
in_root() { chroot "$ROOT" env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
echo "== what a new machine has before the project's installs: $BASE_PACKAGES (not timed)"
in_root bash -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $BASE_PACKAGES >/dev/null"
git clone -q "$(pwd)" "$ROOT/root/llm"
pass=()
for v in CORPUS STEPS THREADS PRECISION FAST_CPU_MAX_TARGET ONEDNN_MAX_CPU_ISA; do
    [ -n "${!v:-}" ] && pass+=("$v=${!v}")
done
echo "== bash scripts/demo.sh in the fresh root (commit $(git rev-parse --short HEAD)${pass:+, ${pass[*]}}), timed"
start=$(date +%s)
in_root env "${pass[@]}" bash -c 'cd /root/llm && bash scripts/demo.sh'
s=$(( $(date +%s) - start ))
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; AVX-512: $(grep -q avx512f /proc/cpuinfo && echo yes || echo no), AVX512-BF16: $(grep -q avx512_bf16 /proc/cpuinfo && echo yes || echo no)"
echo "== the demo on a fresh machine, installs included: $((s / 60)) min $((s % 60)) s ($cpu${pass:+; ${pass[*]}})"
