#!/usr/bin/env bash
# Installs the GPU toolchains hipkern builds with, into .toolchain/ of the
# repository (nothing system-wide except Debian packages through apt).
#
#   scripts/install-toolchain.sh [--cuda] [--amd] [--bindgen]   (default: all)
#
# Idempotent: each part checks for its own stamp file and skips when present.
# The build does not look into .toolchain/ by itself (a plain `cargo build`
# on a machine with nothing installed is the cpu platform): source
# .toolchain/env-nvidia.sh or .toolchain/env-amd.sh, or export what they set.
#
# Sources (see ../shared/TOOLCHAINS.md):
#   --cuda     CUDA 13.0 from PyPI into .toolchain/cuda (matches the H200's
#              driver 580; nvvm pinned, or ptxas rejects the PTX).
#   --amd      Debian 12's clang-19 (HIP compiler), HIP 5.2 headers and
#              libamdhip64; device libraries from Debian 13's
#              rocm-device-libs-17, fetched with a private apt state, plus
#              generated oclc_isa_version_120{0,1}.bc, into .toolchain/amdgcn.
#   --bindgen  libclang for the `bindgen` feature.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TC="$ROOT/.toolchain"
want_cuda=0 want_amd=0 want_bindgen=0
if [ $# -eq 0 ]; then want_cuda=1 want_amd=1 want_bindgen=1; fi
for a in "$@"; do
  case "$a" in
    --cuda) want_cuda=1 ;;
    --amd) want_amd=1 ;;
    --bindgen) want_bindgen=1 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "install-toolchain: unknown option '$a' (expected --cuda, --amd, --bindgen)" >&2; exit 2 ;;
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
fi

if [ $want_amd = 1 ]; then
  apt_install clang-19 lld-19 clang-tools-19 libamdhip64-dev llvm-19
  DL="$TC/amdgcn/bitcode"
  if [ -f "$TC/amdgcn/.stamp" ]; then
    echo "amd: present ($DL)"
  else
    echo "amd: fetching Debian 13 rocm-device-libs-17 with a private apt state"
    work="$TC/amdgcn/apt"
    rm -rf "$TC/amdgcn"; mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/parts" "$DL"
    mirror="$(debian_mirror)"
    cat >"$work/parts/trixie.sources" <<EOF
Types: deb
URIs: $mirror
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    aptopts=(-oDir::Etc::SourceList=/dev/null -oDir::Etc::SourceParts="$work/parts"
             -oDir::State::Lists="$work/lists" -oDir::Cache="$work/cache"
             -oAPT::Architecture=amd64 -oAPT::Architectures=amd64)
    apt-get "${aptopts[@]}" update -qq
    (cd "$work" && apt-get -qq "${aptopts[@]}" download rocm-device-libs-17 2>&1 | grep -v unsandboxed || true)
    deb="$(ls "$work"/rocm-device-libs-17_*.deb)"
    want_sha=fa10f0f5be5269c715492e4e3d3816f956a4d8b9098443d54052d351cfda9213
    got_sha="$(sha256sum "$deb" | cut -d' ' -f1)"
    if [ "$got_sha" != "$want_sha" ]; then
      echo "install-toolchain: $deb has sha256 $got_sha, expected $want_sha" >&2; exit 1
    fi
    dpkg-deb -x "$deb" "$work/x"
    cp "$work"/x/usr/lib/llvm-17/lib/clang/17/amdgcn/bitcode/*.bc "$DL/"
    # gfx1200/gfx1201 need oclc_isa_version_120N.bc, which is one constant.
    for v in 1200 1201; do
      cat >"$work/isa$v.ll" <<EOF
target datalayout = "e-p:64:64-p1:64:64-p2:32:32-p3:32:32-p4:64:64-p5:32:32-p6:32:32-p7:160:256:256:32-p8:128:128-p9:192:256:256:32-i64:64-v16:16-v24:32-v32:32-v48:64-v96:128-v192:256-v256:256-v512:512-v1024:1024-v2048:2048-n32:64-S32-A5-G1-ni:7:8:9"
target triple = "amdgcn-amd-amdhsa"
@__oclc_ISA_version = linkonce_odr hidden local_unnamed_addr addrspace(4) constant i32 ${v:0:2}0${v:2:2}, align 4
EOF
      clang-19 --target=amdgcn-amd-amdhsa -nogpulib -c -emit-llvm "$work/isa$v.ll" -o "$DL/oclc_isa_version_$v.bc"
    done
    rm -rf "$work"
    touch "$TC/amdgcn/.stamp"
  fi
fi

if [ $want_bindgen = 1 ]; then
  apt_install libclang-19-dev
fi

cat >"$TC/env-nvidia.sh" <<EOF
export HIPKERN_PLATFORM=nvidia
export NVCC="$TC/cuda/nvidia/cu13/bin/nvcc"
export HIPKERN_CUDA_ARCH="\${HIPKERN_CUDA_ARCH:-sm_90}"
EOF
cat >"$TC/env-amd.sh" <<EOF
export HIPKERN_PLATFORM=amd
export HIPCC=/usr/bin/clang++-19
export HIPKERN_DEVICE_LIB_PATH="$TC/amdgcn/bitcode"
export HIPKERN_OFFLOAD_ARCH="\${HIPKERN_OFFLOAD_ARCH:-gfx1201,gfx1100}"
EOF
echo
echo "Toolchains are in $TC. To build for a platform, source one of:"
echo "  . $TC/env-nvidia.sh     # CUDA 13.0, sm_90"
echo "  . $TC/env-amd.sh        # clang-19 HIP, gfx1201,gfx1100"
if [ $want_bindgen = 1 ]; then echo "  export LIBCLANG_PATH=/usr/lib/llvm-19/lib   # for --features bindgen"; fi
exit 0
