#!/usr/bin/env bash
# The crates as a user gets them. `cargo publish --dry-run` packages
# hipkern-sys and hipkern and builds each from its .crate file alone (cpu
# platform; nothing is uploaded). Both .crate files are then unpacked into
# a scratch folder, and a program outside the workspace
# (.ci/packaged-app) that depends on hipkern by version, through [patch],
# is built and run: lean (default-features = false, its dependency tree
# checked) and full on cpu, lean on nvidia (the kernels compiled from the
# package's own sources; no GPU here, so it reports the runtime's error).
#
#   .ci/packaged-crates.sh [--allow-dirty] cpu|nvidia ...
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
dirty=()
publish=1
while [ $# -gt 0 ]; do
  case "$1" in
    --allow-dirty) dirty=(--allow-dirty); shift ;;
    # The .crate files of an earlier run of this script are reused.
    --skip-publish) publish=0; shift ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--allow-dirty] [--skip-publish] cpu|nvidia ..." >&2; exit 2; }
export CARGO_TARGET_DIR="$ROOT/${CARGO_TARGET_DIR:-target/ci-package}"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)"
crates="$CARGO_TARGET_DIR/package"
scratch="$CARGO_TARGET_DIR/packaged"

if [ $publish = 1 ]; then
  # The verification unpacks the workspace's .crate files into an overlay
  # registry under CARGO_HOME (folders named "-<hash>") and builds them as
  # registry crates, which cargo takes as immutable: an unpacked
  # hipkern-sys of the same version from an earlier run, or its compiled
  # library in the target folder, is reused even when the package changed,
  # and a stale C ABI then fails the build. Remove both.
  rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/hipkern-*
  for d in "$CARGO_TARGET_DIR"/debug "$CARGO_TARGET_DIR"/package; do
    rm -rf "$d"/.fingerprint/hipkern-* "$d"/build/hipkern-* "$d"/deps/libhipkern*
  done
  echo "--- cargo publish --dry-run --workspace (hipkern-sys and hipkern $version)"
  HIPKERN_PLATFORM=cpu cargo publish --dry-run --workspace "${dirty[@]}"
  # The same .crate files where `cargo package` puts them (verified above).
  cargo package --workspace --no-verify "${dirty[@]}"
fi

scratch="$scratch-$(echo "$@" | tr ' ' -)"
rm -rf "$scratch"
mkdir -p "$scratch/crates"
for c in hipkern-sys hipkern; do
  tar xzf "$crates/$c-$version.crate" -C "$scratch/crates"
done
# The kernel sources are files in the package, not a link out of it.
test -f "$scratch/crates/hipkern-sys-$version/hip/include/hipkern.h"
test ! -L "$scratch/crates/hipkern-sys-$version/hip"
cp -r .ci/packaged-app "$scratch/app"
sed "s|@CRATES@|$scratch/crates|g; s|@VERSION@|$version|g" \
  .ci/packaged-app/Cargo.toml.in >"$scratch/app/Cargo.toml"
rm "$scratch/app/Cargo.toml.in"
# The workspace's lock file, so that the dependencies resolve to the
# versions the verification above compiled (and its builds are reused).
cp Cargo.lock "$scratch/app/Cargo.lock"
cd "$scratch/app"

# What default-features = false must not pull in.
heavy=(clap indicatif rusqlite libsqlite3-sys fitsio fitsio-sys png zip ndarray ndarray-npy signal-hook)
for platform in "$@"; do
  case "$platform" in
    cpu)
      echo "--- cpu: the lean build's dependency tree"
      tree="$(HIPKERN_PLATFORM=cpu cargo tree -e normal --prefix none)"
      echo "$tree"
      for c in "${heavy[@]}"; do
        if echo "$tree" | grep -q "^$c v"; then
          echo "FAIL: hipkern with default-features = false depends on $c" >&2
          exit 1
        fi
      done
      echo "--- cpu: lean build, run"
      HIPKERN_PLATFORM=cpu cargo run
      echo "--- cpu: full build (default features), run"
      HIPKERN_PLATFORM=cpu cargo run --features full
      ;;
    nvidia)
      echo "--- nvidia: lean build from the packaged kernel sources, run (no GPU here)"
      (
        # shellcheck disable=SC1091
        . "$ROOT/.toolchain/env-nvidia.sh"
        CARGO_TARGET_DIR="$CARGO_TARGET_DIR/nvidia" cargo run 2>&1 | tee "$scratch/nvidia.out"
      )
      grep -q "^hipkern-sys platform: nvidia$" "$scratch/nvidia.out"
      ;;
    *) echo "unknown platform $platform" >&2; exit 2 ;;
  esac
done
echo "packaged crates: OK"
