#!/usr/bin/env bash
# Builds what one GPU call needs to check and time List 1's tiled kernels
# into .device/l1 (stripped, about 37 MB: under the 64 MiB a device call
# carries; each binary holds every kernel's device code): the list1 bench
# and the List 1 device test binary, with a runner, .device/l1/run.sh, for
# the GPU machine (the CLI's device tests, tests/cli_nearfield_list1.rs, need the
# program too and go in another call: scripts/device-tests.sh builds
# them). There it runs the tests (plain, as `cargo test` does), then the bench on
# the configurations and
# schedules in HIPKERN_BENCH_CONFIGS / HIPKERN_BENCH_SCHEDULES (defaults:
# the 3D q = 3 and q = 4 uniform and 3D q = 3 random trees, 2D q = 4
# uniform; grouped, per-key and source-staged tiled at 32/64/128 and the
# evaluator's defaults, auto), writing everything under $OUT (or
# .device/l1/out) and a short table last; with HIPKERN_PROFILE=1 then
# Nsight Compute's counters of the tiled kernels at 3D q = 3 uniform.
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
  timeout 280 "./$t" --test-threads=1 > "$out/$t.txt" 2>&1
  echo "$t: rc $? $(grep -E '^test result:' "$out/$t.txt" | tail -1)"
  grep -E 'panicked|FAILED' "$out/$t.txt" | head -5
done
export HIPKERN_BENCH_CONFIGS="${HIPKERN_BENCH_CONFIGS:-3d-q3-uniform,3d-q4-uniform,3d-q3-random,2d-q4-uniform}"
export HIPKERN_BENCH_SCHEDULES="${HIPKERN_BENCH_SCHEDULES:-grp,t32,t64,t128,s32,s64,s128,d32,d64,d128,auto}"
HIPKERN_BENCH_OUT="$out" timeout 280 ./list1 --bench > "$out/list1.txt" 2> "$out/list1.err"
echo "bench rc $?"
grep -E ' auto: ' "$out/list1.err" | head -40
grep -E ' (grp|t64|t128|s32|auto) ' "$out/list1.txt"
# With HIPKERN_PROFILE=1: Nsight Compute's counters of the tiled kernels
# at 3D q = 3 uniform (one launch each of per-key t64 and staged s32, per
# layout), clocks left alone.
if [ "${HIPKERN_PROFILE:-0}" = 1 ] && command -v ncu > /dev/null; then
  # dense runs first in every bench (its b1 is the reference): 32 timed
  # launches of it, then the layout's.
  for layout in dense orbit; do
    skip=3; [ "$layout" = dense ] || skip=40
    for sched in t64 s32; do
      HIPKERN_BENCH_CONFIGS=3d-q3-uniform HIPKERN_BENCH_SCHEDULES=$sched \
        HIPKERN_BENCH_LAYOUTS=$layout timeout 150 ncu --clock-control none \
        -k regex:'list1_tiled_mma' --launch-skip $skip --launch-count 1 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis \
        --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
        --section InstructionStats --section WarpStateStats \
        ./list1 --bench > "$out/ncu-$layout-$sched.txt" 2>&1
      echo "ncu $layout $sched: rc $?"
    done
  done
fi
RUN
chmod +x .device/l1/run.sh
echo "ready: .device/l1/run.sh ($(du -sh .device/l1 | cut -f1)); carry .device/l1, run: .device/l1/run.sh"
