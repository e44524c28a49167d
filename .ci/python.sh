#!/usr/bin/env bash
# The Python package as a user gets it: a fresh virtual environment,
# `pip install ./python` (the README's way; maturin comes from PyPI through
# pip's build isolation), the examples run, then the tests with torch on
# the CPU (the GPU tests skip without a GPU).
#
#   .ci/python.sh cpu      the cpu platform: examples and every CPU test
#   .ci/python.sh nvidia   the nvidia build (nvcc, sm_90): installs, imports,
#                          says "nvidia", and a device call gives the
#                          runtime's no-device error as a Python exception
#   scripts/in-rocm-root.sh --rocm 6.4 .ci/python.sh amd
#                          the amd build by ROCm's hipcc inside the root
#                          (HIPKERN_OFFLOAD_ARCH, default gfx942): the
#                          extension built by cargo as maturin builds it,
#                          linked against libamdhip64, imported by the
#                          root's Python: "amd" and hipErrorNoDevice
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
platform="${1:?usage: $0 cpu|nvidia}"
export CARGO_TARGET_DIR="$ROOT/target/ci-python-$platform/cargo"
venv="$ROOT/target/ci-python-$platform/venv"
py="$venv/bin/python"
if [ "$platform" != amd ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$py" -m pip install -q --upgrade pip
fi
case "$platform" in
  cpu)
    HIPKERN_PLATFORM=cpu "$py" -m pip install -q "./python[test,torch]"
    "$py" -c 'import hipkern; assert hipkern.platform() == "cpu", hipkern.platform(); print("hipkern", hipkern.__version__, hipkern.platform(), "ABI", hipkern.abi_version())'
    for ex in python/examples/*.py; do
      echo "--- $ex"
      "$py" "$ex"
    done
    # From outside the source tree, so that the installed package is tested.
    (cd "$venv" && "$py" -m pytest -q -p no:cacheprovider -rs "$ROOT/python/tests")
    ;;
  nvidia)
    # shellcheck disable=SC1091
    . .toolchain/env-nvidia.sh
    HIPKERN_PLATFORM=nvidia "$py" -m pip install -q ./python
    "$py" - <<'PY'
import hipkern, hipkern._native as n
assert hipkern.platform() == "nvidia", hipkern.platform()
print("hipkern", hipkern.platform(), hipkern.compiled_archs(), "ABI", hipkern.abi_version())
assert n.force_plan_scratch_bytes(1000, 100) > 0  # no device needed
try:
    print("devices:", hipkern.device_count())
except RuntimeError as e:
    print("no GPU here, as expected:", e)
PY
    ;;
  amd)
    [ "${HIPKERN_PLATFORM:-}" = amd ] || { echo "run it inside a ROCm root (scripts/in-rocm-root.sh)" >&2; exit 2; }
    export HIPKERN_OFFLOAD_ARCH="${HIPKERN_OFFLOAD_ARCH:-gfx942}"
    (cd python && cargo build --release --features pyo3/extension-module)
    pkg="$ROOT/target/ci-python-amd/pkg"
    rm -rf "$pkg" && mkdir -p "$pkg/hipkern"
    cp python/hipkern/*.py "$pkg/hipkern/"
    cp "$CARGO_TARGET_DIR/release/lib_native.so" "$pkg/hipkern/_native.abi3.so"
    readelf -d "$pkg/hipkern/_native.abi3.so" | grep -q 'NEEDED.*libamdhip64'
    PYTHONPATH="$pkg" python3 - <<'PY'
import hipkern
assert hipkern.platform() == "amd", hipkern.platform()
print("hipkern", hipkern.platform(), hipkern.compiled_archs(), "ABI", hipkern.abi_version())
try:
    print("devices:", hipkern.device_count())
except RuntimeError as e:
    print("no GPU here, as expected:", e)
PY
    ;;
  *) echo "unknown platform $platform" >&2; exit 2 ;;
esac
echo "python ($platform): OK"
