#!/usr/bin/env bash
# Runs a command inside a ROCm root made by `scripts/install-toolchain.sh
# --rocm` (ROCm 6.4) or `--rocm7` (ROCm 7.2): ROCm's own hipcc,
# libamdhip64 and device libraries, on a Debian sid userland, never
# installed on the host.
#
#   scripts/in-rocm-root.sh [--rocm 6.4|7.2] COMMAND [ARG ...]
#
# The command runs in the current folder, which must be inside this
# repository (the repository, the Rust toolchain and cargo's home are
# bind-mounted into the root at their own paths, so paths printed inside
# are valid outside). It sees HIPKERN_PLATFORM=amd, HIPCC=/usr/bin/hipcc
# (ROCm's hipcc, which finds its own device libraries), HIPKERN_ROCM_ROOT
# (the version), and the caller's
# HIPKERN_OFFLOAD_ARCH, GPU_TARGETS, AMDGPU_TARGETS, CARGO_TARGET_DIR, CC
# and CI. Mounts live in a private mount namespace (unshare), so nothing
# stays mounted on the host after the command, however it ends. Needs
# root, or sudo. Exit status: the command's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version=6.4
if [ "${1:-}" = --rocm ]; then version="${2:?--rocm needs 6.4 or 7.2}"; shift 2; fi
case "$version" in
  6.4|7.2) ;;
  *) echo "in-rocm-root: --rocm $version: expected 6.4 or 7.2" >&2; exit 2 ;;
esac
if [ $# -eq 0 ]; then sed -n '2,18p' "$0"; exit 2; fi
# shellcheck source=scripts/rocm-roots.sh
. "$ROOT/scripts/rocm-roots.sh"
root="$(rocm_root_dir "$version")"
if [ ! -f "$root/.hipkern-root-ready" ]; then
  flag=--rocm; [ "$version" = 7.2 ] && flag=--rocm7
  echo "in-rocm-root: no ROCm $version root at $root: run scripts/install-toolchain.sh $flag" >&2
  exit 2
fi
case "$PWD/" in
  "$ROOT"/*) ;;
  *) echo "in-rocm-root: run it from inside $ROOT (the folder bind-mounted into the root)" >&2; exit 2 ;;
esac
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
rustup_home="${RUSTUP_HOME:-$HOME/.rustup}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# Inside the new mount namespace: /proc (hipcc reads it), the bind mounts,
# then chroot with a clean environment plus what the build needs.
inner='
set -eu
root="$1" repo="$2" cargo_home="$3" rustup_home="$4" cwd="$5" version="$6"; shift 6
mount -t proc proc "$root/proc"
for d in "$repo" "$cargo_home" "$rustup_home"; do
  [ -d "$d" ] || continue
  mkdir -p "$root$d"
  mount --bind "$d" "$root$d"
done
exec chroot "$root" /usr/bin/env -i \
  HOME="$HOME" USER=root TERM="${TERM:-dumb}" LANG=C.UTF-8 \
  PATH="$cargo_home/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  CARGO_HOME="$cargo_home" RUSTUP_HOME="$rustup_home" \
  HIPKERN_PLATFORM=amd HIPCC=/usr/bin/hipcc HIPKERN_ROCM_ROOT="$version" \
  ${HIPKERN_OFFLOAD_ARCH:+HIPKERN_OFFLOAD_ARCH="$HIPKERN_OFFLOAD_ARCH"} \
  ${GPU_TARGETS:+GPU_TARGETS="$GPU_TARGETS"} \
  ${AMDGPU_TARGETS:+AMDGPU_TARGETS="$AMDGPU_TARGETS"} \
  ${CARGO_TARGET_DIR:+CARGO_TARGET_DIR="$CARGO_TARGET_DIR"} \
  ${CC:+CC="$CC"} ${CI:+CI="$CI"} \
  /bin/bash -c "cd \"\$0\" && exec \"\$@\"" "$cwd" "$@"
'
exec $SUDO env HOME="$HOME" HIPKERN_OFFLOAD_ARCH="${HIPKERN_OFFLOAD_ARCH:-}" \
  GPU_TARGETS="${GPU_TARGETS:-}" AMDGPU_TARGETS="${AMDGPU_TARGETS:-}" \
  CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-}" CC="${CC:-}" CI="${CI:-}" TERM="${TERM:-dumb}" \
  unshare --mount --propagation private /bin/bash -c "$inner" inner \
  "$root" "$ROOT" "$cargo_home" "$rustup_home" "$PWD" "$version" "$@"
