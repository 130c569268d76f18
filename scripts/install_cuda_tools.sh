#!/usr/bin/env bash
# Puts a SASS disassembler (cuobjdump, nvdisasm) into third_party/cuda-tools/bin for
# scripts/kernel_stats.sh, where the CUDA toolkit of this machine ships without them.
# They come from Debian's nvidia-cuda-toolkit package (the non-free component of the release in
# /etc/os-release), downloaded with apt-get into a private package list and unpacked here: the
# system's apt sources and installed packages are left as they are. Safe to run again.
#   bash scripts/install_cuda_tools.sh
set -euo pipefail
cd "$(dirname "$0")/.."
dest=third_party/cuda-tools
if [ -x "$dest/bin/cuobjdump" ]; then
    echo "cuobjdump ready in $dest/bin"
    exit 0
fi
. /etc/os-release
codename=${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/deb"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $codename non-free" \
    > "$work/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=/nonexistent"
          -o "Dir::State::Lists=$work/lists" -o "APT::Sandbox::User=root")
echo "fetching Debian $codename's nvidia-cuda-toolkit (cuobjdump, nvdisasm)"
apt-get "${apt_opts[@]}" update -qq
(cd "$work/deb" && apt-get "${apt_opts[@]}" download -qq nvidia-cuda-toolkit)
dpkg-deb -x "$work"/deb/nvidia-cuda-toolkit_*.deb "$work/x"
mkdir -p "$dest/bin"
cp "$work/x/usr/bin/cuobjdump" "$work/x/usr/bin/nvdisasm" "$dest/bin/"
"$dest/bin/cuobjdump" --version | tail -1
echo "cuobjdump ready in $dest/bin"
