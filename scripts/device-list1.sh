#!/usr/bin/env bash
# Builds what one GPU call needs to check and time List 1's kernels into
# .device/l1 (stripped, about 6 MB a binary: under the 64 MiB a device
# call carries; each binary holds every kernel's device code): the list1
# bench and the List 1 device test binaries (plans on the device, every
# kernel, the tiled entry point), with a runner, .device/l1/run.sh, for
# the GPU machine (the CLI's device tests, tests/cli_nearfield_list1.rs,
# need the program too and go in another call: scripts/device-tests.sh
# builds them). If .device/before/list1 exists (an older build of the
# bench, e.g. `git worktree add /tmp/b 6a06605` and this script there,
# then its .device/l1/list1 copied to .device/before/, with its COMMIT), it
# goes in as .device/l1/before/list1, so that before and after are timed
# on the same machine in one call.
#
# There run.sh runs the tests (plain, as `cargo test` does), then the older
# bench if present (its own env names: HIPKERN_BENCH_SCHEDULES), then this
# bench on HIPKERN_BENCH_CONFIGS / HIPKERN_BENCH_KERNELS /
# HIPKERN_BENCH_LAYOUTS (defaults: all six trees, every kernel and
# `exact`, `fast`, every layout), writing everything under $OUT (or
# .device/l1/out) and the summary last. Every step runs under `timeout`
# within one budget (HIPKERN_L1_BUDGET_S, default 480 s: a device call may
# run 600); HIPKERN_L1_TESTS=0 or HIPKERN_L1_BEFORE=0 leave those steps
# out. With HIPKERN_PROFILE=1, then Nsight Compute's counters of the
# tiled and staged kernels at 3D q = 3 uniform (within what is left of the
# budget: leave the older bench out for it).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/nvidia-build.sh
. "$ROOT/scripts/nvidia-build.sh"
rm -rf .device/l1 && mkdir -p .device/l1
cargo bench --no-run --bench list1 --message-format=json 2>/dev/null | copy_executables .device/l1 benches
cargo test --release --no-run --test nearfield_list1_device --test nearfield_list1_plan_device \
  --test nearfield_list1_tiles --message-format=json 2>/dev/null | copy_executables .device/l1 tests
strip .device/l1/list1 .device/l1/*-test
git rev-parse --short HEAD > .device/l1/COMMIT 2>/dev/null || echo unknown > .device/l1/COMMIT
if [ -x .device/before/list1 ]; then
  mkdir -p .device/l1/before
  cp .device/before/list1 .device/l1/before/list1
  strip .device/l1/before/list1 2>/dev/null || true
  if [ -f .device/before/COMMIT ]; then
    cp .device/before/COMMIT .device/l1/before/COMMIT
  else
    echo unknown > .device/l1/before/COMMIT
  fi
  echo "with the older bench of $(cat .device/l1/before/COMMIT): .device/l1/before/list1"
fi
cat > .device/l1/run.sh <<'RUN'
#!/usr/bin/env bash
# List 1 on the GPU: the tests, the older bench (if here), the bench; the
# summaries last. Each step under `timeout`, within one budget.
cd "$(dirname "${BASH_SOURCE[0]}")"
out="${OUT:-$PWD/out}"; mkdir -p "$out"
budget="${HIPKERN_L1_BUDGET_S:-480}"
# Seconds left of the budget, less $1 kept for the steps after.
left() { local n=$(( budget - SECONDS - ${1:-0} )); [ "$n" -gt 0 ] && echo "$n" || echo 1; }
cap() { local a; a=$(left "$2"); [ "$a" -lt "$1" ] && echo "$a" || echo "$1"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
echo "commit $(cat COMMIT)"
configs="3d-q3-uniform,3d-q3-random,3d-q4-uniform,3d-q4-random,2d-q4-uniform,2d-q4-random"
# The benches' shares: kept for them while the tests run.
after_s=160; before_s=0
if [ -x before/list1 ] && [ "${HIPKERN_L1_BEFORE:-1}" != 0 ]; then before_s=120; fi
if [ "${HIPKERN_L1_TESTS:-1}" != 0 ]; then
  for t in nearfield_list1_plan_device-test nearfield_list1_device-test nearfield_list1_tiles-test; do
    timeout "$(cap 240 $(( after_s + before_s )))" "./$t" --test-threads=1 > "$out/$t.txt" 2>&1
    echo "$t: rc $? at ${SECONDS} s: $(grep -E '^test result:' "$out/$t.txt" | tail -1)"
    grep -E 'panicked|FAILED|skipped' "$out/$t.txt" | sort | uniq -c | sort -rn | head -8
  done
fi
if [ "$before_s" -gt 0 ]; then
  # The older bench (6a06605's names; b1, per-target batch 1, always runs:
  # its reference).
  mkdir -p "$out/before"
  HIPKERN_BENCH_CONFIGS="$configs" \
    HIPKERN_BENCH_SCHEDULES="b32,grp,t32,t64,t128,s32,s64,d32,f32,f64,auto" \
    HIPKERN_BENCH_OUT="$out/before" timeout "$(cap 200 "$after_s")" ./before/list1 --bench \
    > "$out/before-list1.txt" 2> "$out/before-list1.err"
  echo "before bench ($(cat before/COMMIT)): rc $? at ${SECONDS} s"
fi
export HIPKERN_BENCH_CONFIGS="${HIPKERN_BENCH_CONFIGS:-$configs}"
export HIPKERN_BENCH_KERNELS="${HIPKERN_BENCH_KERNELS:-per-target,grouped,tiled,staged,tiled-fma,exact,fast}"
HIPKERN_BENCH_OUT="$out" timeout "$(left 0)" ./list1 --bench > "$out/list1.txt" 2> "$out/list1.err"
echo "bench rc $? at ${SECONDS} s"
grep -E 'skipped|panicked' "$out/list1.txt" "$out/list1.err" | head -5
if [ -s "$out/before-list1.txt" ]; then
  echo "before ($(cat before/COMMIT)), median ms:"
  awk '$1 ~ /^[23]d-/ && $5 ~ /^(b32|grp|t64|s32|f32|auto)$/ {
         k = $1 " " $4; if (!(k in row)) { order[n++] = k; row[k] = sprintf("%-15s %-12s", $1, $4) }
         row[k] = row[k] sprintf(" %s=%s", $5, $6) }
       END { for (i = 0; i < n; i++) print row[order[i]] }' "$out/before-list1.txt"
fi
sed -n '/^summary:/,/^plans under/p' "$out/list1.txt" | grep -v '^plans under'
# With HIPKERN_PROFILE=1: Nsight Compute's counters of the tiled and
# staged kernels at 3D q = 3 uniform (one launch each, per layout), clocks
# left alone.
if [ "${HIPKERN_PROFILE:-0}" = 1 ] && command -v ncu > /dev/null; then
  # dense runs first in every bench (its per-target output is the
  # reference): 32 timed launches of the kernel in it, then the layout's.
  for layout in dense orbit; do
    skip=3; [ "$layout" = dense ] || skip=40
    for kernel in tiled staged; do
      [ "$(left 0)" -gt 20 ] || { echo "ncu $layout $kernel: no time left"; continue; }
      HIPKERN_BENCH_CONFIGS=3d-q3-uniform HIPKERN_BENCH_KERNELS=$kernel \
        HIPKERN_BENCH_LAYOUTS=$layout timeout "$(cap 150 0)" ncu --clock-control none \
        -k regex:'list1_(tiled|staged)_kernel' --launch-skip $skip --launch-count 1 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis \
        --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
        --section InstructionStats --section WarpStateStats \
        ./list1 --bench > "$out/ncu-$layout-$kernel.txt" 2>&1
      echo "ncu $layout $kernel: rc $?"
    done
  done
fi
RUN
chmod +x .device/l1/run.sh
size="$(du -sm .device/l1 | cut -f1)"
echo "ready: .device/l1/run.sh (${size} MB); carry .device/l1, run: .device/l1/run.sh"
if [ "$size" -gt 60 ]; then
  echo "warning: .device/l1 is ${size} MB, near the 64 MiB a device call carries" >&2
fi
