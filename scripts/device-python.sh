#!/usr/bin/env bash
# Builds what the Python package's GPU tests and bench need on a GPU
# machine without Rust or network, into .device/py (carry that folder):
# the nvidia wheel (abi3; cudart static, so the NVIDIA driver is all it
# needs beside the machine's own torch), pytest's wheels for Python 3.12,
# DeePMD-kit 3.2.0's Triton op (fetched, not committed), the tests, the
# bench and a runner. There:
#     .device/py/run.sh
# installs the wheels into a scratch folder, runs python/tests (CPU and
# GPU tests) and then python/bench/force_bench.py; logs and the bench's
# JSON go to $OUT.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
"$ROOT/scripts/install-toolchain.sh" --cuda >/dev/null
d=.device/py
rm -rf "$d" && mkdir -p "$d/wheels"
python3 -m pip install -q --upgrade "maturin>=1.7,<2"
(
  # shellcheck disable=SC1091
  . "$ROOT/.toolchain/env-nvidia.sh"
  HIPKERN_PLATFORM=nvidia CARGO_TARGET_DIR="$ROOT/target/python-nvidia" \
    python3 -m maturin build --release --strip -m python/Cargo.toml -o "$d/wheels"
)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux2014_x86_64 --platform any -d "$d/wheels" \
  pytest pluggy iniconfig packaging
python/tools/fetch-deepmd-op.sh "$d/deepmd"
cp -r python/tests python/bench "$d/"
rm -rf "$d"/tests/__pycache__
cat > "$d/run.sh" <<'RUN'
#!/usr/bin/env bash
# The Python package's tests (CPU and GPU) and the force bench, with the
# machine's own Python, torch and triton; last lines: the bench's table.
cd "$(dirname "${BASH_SOURCE[0]}")"
out="${OUT:-$PWD/out}"; mkdir -p "$out"
site="$(mktemp -d)"
# Unpacked rather than pip-installed: a wheel is a zip, and pip would
# refuse the extension's manylinux tag on an older glibc than the build
# machine's without saying whether the library would load.
python3 -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' "$site" wheels/*.whl
export PYTHONPATH="$site" HIPKERN_DEEPMD_OP="$PWD/deepmd/force_assembly.py"
python3 -c 'import hipkern, torch; print("hipkern", hipkern.platform(), hipkern.compiled_archs(), "torch", torch.__version__, torch.cuda.get_device_name(0))'
timeout "${HIPKERN_PY_TEST_S:-420}" python3 -m pytest -q -p no:cacheprovider -rs tests \
  > "$out/pytest.txt" 2>&1; echo "pytest rc=$?" >> "$out/pytest.txt"
grep -E "passed|failed|error|rc=" "$out/pytest.txt" | tail -5
grep -E "^(FAILED|ERROR)" "$out/pytest.txt" | head -20
timeout "${HIPKERN_PY_BENCH_S:-240}" python3 bench/force_bench.py "$out/force_bench.json" \
  2>&1 | tee "$out/force_bench.txt" | tail -8
RUN
chmod +x "$d/run.sh"
du -sh "$d"
