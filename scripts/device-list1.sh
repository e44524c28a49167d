#!/usr/bin/env bash
# Builds what one GPU call needs to check and time List 1's tiled kernels
# into .device/l1 (stripped, about 37 MB: under the 64 MiB a device call
# carries; each binary holds every kernel's device code): the list1 bench
# and the List 1 device test binary, with a runner, .device/l1/run.sh, for
# the GPU machine (the CLI's device tests, tests/cli_nearfield.rs, need the
# program too and go in another call: scripts/device-tests.sh builds
# them). There it runs the tests with --include-ignored, then the bench on
# the configurations and
# schedules in HIPKERN_BENCH_CONFIGS / HIPKERN_BENCH_SCHEDULES (defaults:
# the 3D q = 3 and q = 4 uniform and 3D q = 3 random trees, 2D q = 4
# uniform; grouped, per-key and source-staged tiled at 32/64/128), writing
# everything under $OUT (or .device/l1/out) and a short table last.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/nvidia-build.sh
. "$ROOT/scripts/nvidia-build.sh"
rm -rf .device/l1 && mkdir -p .device/l1
cargo bench --no-run --bench list1 --message-format=json 2>/dev/null | copy_executables .device/l1 benches
cargo test --release --no-run --test nearfield_list1_device \
  --message-format=json 2>/dev/null | copy_executables .device/l1 tests
strip .device/l1/list1 .device/l1/*-test
git rev-parse --short HEAD > .device/l1/COMMIT 2>/dev/null || echo unknown > .device/l1/COMMIT
cat > .device/l1/run.sh <<'RUN'
#!/usr/bin/env bash
# List 1 on the GPU: the tests, then the bench; the table last.
cd "$(dirname "${BASH_SOURCE[0]}")"
out="${OUT:-$PWD/out}"; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
echo "commit $(cat COMMIT)"
for t in nearfield_list1_device-test; do
  timeout 280 "./$t" --include-ignored --test-threads=1 > "$out/$t.txt" 2>&1
  echo "$t: rc $? $(grep -E '^test result:' "$out/$t.txt" | tail -1)"
  grep -E 'panicked|FAILED' "$out/$t.txt" | head -5
done
export HIPKERN_BENCH_CONFIGS="${HIPKERN_BENCH_CONFIGS:-3d-q3-uniform,3d-q4-uniform,3d-q3-random,2d-q4-uniform}"
export HIPKERN_BENCH_SCHEDULES="${HIPKERN_BENCH_SCHEDULES:-grp,t32,t64,t128,s32,s64,s128,d32,d64,d128}"
HIPKERN_BENCH_OUT="$out" timeout 280 ./list1 --bench > "$out/list1.txt" 2> "$out/list1.err"
echo "bench rc $?"
grep -E 'sources per tile' "$out/list1.err" | head -40
grep -E ' (grp|t32|t64|t128|s32|s64|s128|d32|d64|d128) ' "$out/list1.txt"
RUN
chmod +x .device/l1/run.sh
echo "ready: .device/l1/run.sh ($(du -sh .device/l1 | cut -f1)); carry .device/l1, run: .device/l1/run.sh"
