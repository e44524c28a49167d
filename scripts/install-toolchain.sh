#!/usr/bin/env bash
# Installs the GPU toolchains hipkern builds with, without touching the
# host's own compilers (the only system-wide change is Debian packages
# through apt: mmdebstrap, libclang).
#
#   scripts/install-toolchain.sh [--cuda] [--rocm] [--rocm7] [--bindgen] [--mpi]
#                                (default: --cuda --rocm --bindgen)
#
# Idempotent: each part checks for its own stamp file and skips when present.
# The build does not look for these by itself (a plain `cargo build` on a
# machine with nothing installed is the cpu platform): source
# .toolchain/env-nvidia.sh, or run commands in a ROCm root with
# scripts/in-rocm-root.sh.
#
# Sources (see docs/toolchains.md):
#   --cuda     CUDA 13.0 from PyPI into .toolchain/cuda (matches the GPU
#              machines' driver 580; nvvm pinned, or ptxas rejects the PTX),
#              CMake 3.31 from PyPI into .toolchain/cmake, pkgconf (apt).
#   --rocm     ROCm 6.4's HIP userland from Debian sid (hipcc 7.0.2, clang 21,
#              libamdhip64.so.6) in a root made by mmdebstrap from this
#              machine's own Debian mirror, kept under ~/.cache/hipkern/roots.
#   --rocm7    ROCm 7.2's (hipcc 7.2.4, clang 22, libamdhip64.so.7) from
#              Debian experimental, likewise.
#   --bindgen  libclang for the `bindgen` feature.
#   --mpi      OpenMPI (apt: openmpi-bin, libopenmpi-dev) and libclang, for
#              the MPI examples (examples/mpi, rsmpi).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TC="$ROOT/.toolchain"
want_cuda=0 want_rocm=0 want_rocm7=0 want_bindgen=0 want_mpi=0
if [ $# -eq 0 ]; then want_cuda=1 want_rocm=1 want_bindgen=1; fi
for a in "$@"; do
  case "$a" in
    --cuda) want_cuda=1 ;;
    --rocm) want_rocm=1 ;;
    --rocm7) want_rocm7=1 ;;
    --bindgen) want_bindgen=1 ;;
    --mpi) want_mpi=1 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "install-toolchain: unknown option '$a' (expected --cuda, --rocm, --rocm7, --bindgen, --mpi)" >&2; exit 2 ;;
  esac
done

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
APT_UPDATED=0
apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ $APT_UPDATED = 0 ]; then $SUDO apt-get update -qq; APT_UPDATED=1; fi
  echo "apt: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The Debian mirror this machine already uses: the URIs: field of its deb822
# sources (first entry whose suites are not -security), else sources.list.
debian_mirror() {
  local f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri="$(awk '
      /^URIs:/ {u=$2}
      /^Suites:/ { if ($0 !~ /security/ && u != "") { print u; exit } }
      /^$/ {u=""}' "$f")"
    if [ -n "$uri" ]; then echo "$uri"; return 0; fi
  done
  if [ -f /etc/apt/sources.list ]; then
    uri="$(awk '$1=="deb" && $0 !~ /security/ {for(i=2;i<=NF;i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' /etc/apt/sources.list)"
    if [ -n "$uri" ]; then echo "$uri"; return 0; fi
  fi
  echo "install-toolchain: no Debian mirror found in the apt sources" >&2
  return 1
}

mkdir -p "$TC"

if [ $want_cuda = 1 ]; then
  if [ -x "$TC/cuda/nvidia/cu13/bin/nvcc" ] && [ -f "$TC/cuda/.stamp-13.0" ]; then
    echo "cuda: present ($TC/cuda)"
  else
    echo "cuda: installing CUDA 13.0 from PyPI into $TC/cuda"
    rm -rf "$TC/cuda"
    # One pip call: a second --target install into the same prefix replaces nvidia/.
    python3 -m pip install -q --disable-pip-version-check --target "$TC/cuda" \
      nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-runtime==13.0.96 \
      nvidia-cuda-cccl==13.0.85 nvidia-cuda-crt==13.0.88 nvidia-cuda-profiler-api==13.0.85
    # cuobjdump (oldest on PyPI is 13.2) goes into its own prefix, used only to inspect builds.
    python3 -m pip install -q --disable-pip-version-check --target "$TC/cuobjdump" \
      nvidia-cuda-cuobjdump==13.2.51
    touch "$TC/cuda/.stamp-13.0"
  fi
  # The wheels keep the libraries in lib/ and ship no unversioned
  # libcudart.so; nvcc's own link line (and so CMake's CUDA compiler check)
  # looks in lib64/, and CMake's FindCUDAToolkit wants libcudart.so, as a
  # toolkit install has them.
  [ -e "$TC/cuda/nvidia/cu13/lib64" ] || ln -s lib "$TC/cuda/nvidia/cu13/lib64"
  [ -e "$TC/cuda/nvidia/cu13/lib/libcudart.so" ] || ln -s libcudart.so.13 "$TC/cuda/nvidia/cu13/lib/libcudart.so"
  # CMake (the kernel layer's CMake build and its consumers) and pkg-config.
  if [ -x "$TC/cmake/cmake/data/bin/cmake" ] && [ -f "$TC/cmake/.stamp-3.31.6" ]; then
    echo "cmake: present ($TC/cmake)"
  else
    rm -rf "$TC/cmake"
    python3 -m pip install -q --disable-pip-version-check --target "$TC/cmake" cmake==3.31.6
    touch "$TC/cmake/.stamp-3.31.6"
  fi
  apt_install pkgconf
fi

if [ $want_rocm = 1 ] || [ $want_rocm7 = 1 ]; then
  apt_install mmdebstrap
  # shellcheck source=scripts/rocm-roots.sh
  . "$ROOT/scripts/rocm-roots.sh"
  mirror="$(debian_mirror)"
  if [ $want_rocm = 1 ]; then make_rocm_root 6.4 "$mirror"; fi
  if [ $want_rocm7 = 1 ]; then make_rocm_root 7.2 "$mirror"; fi
fi

if [ $want_bindgen = 1 ] || [ $want_mpi = 1 ]; then
  apt_install libclang-19-dev
fi

if [ $want_mpi = 1 ]; then
  apt_install openmpi-bin libopenmpi-dev
fi

cat >"$TC/env-nvidia.sh" <<EOF
export HIPKERN_PLATFORM=nvidia
export NVCC="$TC/cuda/nvidia/cu13/bin/nvcc"
export HIPKERN_CUDA_ARCH="\${HIPKERN_CUDA_ARCH:-sm_90}"
EOF
rm -f "$TC/env-amd.sh"  # the retired clang-19 path's
echo
echo "To build for a platform:"
echo "  . $TC/env-nvidia.sh                  # CUDA 13.0, sm_90"
echo "  scripts/in-rocm-root.sh cargo build  # ROCm 6.4's hipcc (--rocm 7.2 for 7.2), gfx1201 unless HIPKERN_OFFLOAD_ARCH says"
if [ $want_bindgen = 1 ]; then echo "  export LIBCLANG_PATH=/usr/lib/llvm-19/lib   # for --features bindgen"; fi
exit 0
