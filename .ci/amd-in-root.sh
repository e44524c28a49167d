#!/usr/bin/env bash
# CI's amd platform, run inside a ROCm root by .ci/run:
#   scripts/in-rocm-root.sh --rocm V .ci/amd-in-root.sh ARCH,ARCH,... [C_EXAMPLE_ARCH]
# Builds every target with ROCm's own hipcc for the architectures given,
# checks that every archive member with device code holds a code object for
# each, runs the runtime/FFI tests (no GPU here: the runtime's own no-device
# error must come back as an Error) with the GPU tests skipped by name,
# checks that no GPU test is ignored on a device build, runs clippy, prints
# `hipkern info`, and, when C_EXAMPLE_ARCH is given, builds the kernel
# layer with CMake for that architecture (one: each is minutes of compile),
# installs it, and builds and runs the C example against it through the
# CMake package and pkg-config (scripts/build-c-example.sh).
set -euo pipefail
archs="${1:?usage: amd-in-root.sh ARCH[,ARCH...] [C_EXAMPLE_ARCH]}"
c_example_arch="${2:-}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
start=$SECONDS
step() { echo; echo "=== [amd ROCm $HIPKERN_ROCM_ROOT, $((SECONDS - start))s] $*"; }
export HIPKERN_OFFLOAD_ARCH="$archs"
export CARGO_TARGET_DIR="target/ci-amd-$HIPKERN_ROCM_ROOT"
TEST_CMD=(cargo test --release --workspace)

step "hipcc: $(hipcc --version | head -2 | tr '\n' ' ')"
step "build all targets for $archs"
"${TEST_CMD[@]}" --all-targets --no-run

step "every archive member with device code holds $archs"
lib="$(ls -t "$CARGO_TARGET_DIR"/release/build/hipkern-sys-*/out/libhipkern_kernels.a | head -1)"
bundler="$(ls /usr/lib/llvm-*/bin/clang-offload-bundler | sort -V | tail -1)"
tmp="$(mktemp -d)"
(cd "$tmp" && ar x "$ROOT/$lib")
with_code=0
for o in "$tmp"/*.o; do
  # Host-only members (runtime.o: no kernels) have no .hip_fatbin section.
  if ! objdump -h "$o" | grep -q '\.hip_fatbin'; then echo "$(basename "$o"): host code only"; continue; fi
  with_code=$((with_code + 1))
  objcopy -O binary --only-section=.hip_fatbin "$o" "$tmp/fb.bin"
  bundles="$("$bundler" -list -type=o -input="$tmp/fb.bin")"
  echo "$(basename "$o"): $(echo "$bundles" | tr '\n' ' ')"
  for arch in ${archs//,/ }; do
    if ! echo "$bundles" | grep -q -- "--$arch\$"; then
      echo "FAIL: $(basename "$o") has no $arch code object" >&2; exit 1
    fi
  done
done
rm -rf "$tmp"
if [ "$with_code" -eq 0 ]; then echo "FAIL: no member of $lib holds device code" >&2; exit 1; fi

step "the library links ROCm's libamdhip64"
bin="$CARGO_TARGET_DIR/release/hipkern"
cargo build --release --bin hipkern
needed="$(objdump -p "$bin" | sed -nE 's/^ *NEEDED +(libamdhip64\.so\.[0-9]+)$/\1/p')"
echo "hipkern NEEDED: ${needed:-nothing}"
want="libamdhip64.so.${HIPKERN_ROCM_ROOT%%.*}"
if [ "$needed" != "$want" ]; then echo "FAIL: hipkern links '${needed}', expected $want" >&2; exit 1; fi

step "hipkern info (no GPU here)"
"$bin" info

step "runtime/FFI tests, GPU tests skipped by name"
"${TEST_CMD[@]}" --test runtime -- --skip gpu_
cargo test --release -p hipkern-sys

step "no GPU test is ignored on a device build"
.ci/no-ignored-gpu-tests.sh

step "clippy"
HIPKERN_CHECK_ONLY=1 cargo clippy --release --workspace --all-targets -- -D warnings

if [ -n "$c_example_arch" ]; then
  step "CMake build for $c_example_arch, install, the C example through find_package and pkg-config (runs to the no-device path)"
  HIPKERN_OFFLOAD_ARCH="$c_example_arch" HIPKERN_CMAKE_DIR="target/ci-cmake" scripts/build-c-example.sh --run amd
fi
step "amd ROCm $HIPKERN_ROCM_ROOT done"
