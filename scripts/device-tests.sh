#!/usr/bin/env bash
# Builds the nvidia-platform test binaries (release) and the program for a
# GPU machine without Rust (it needs the NVIDIA driver only: cudart is
# static), stripped and packed into .device/tests.tar.xz (under the 64 MiB
# a device call carries), with a runner inside. There:
#     tar xJf tests.tar.xz && device-tests/run-tests.sh
# runs every binary that holds gpu_* tests as plain `cargo test` would (on
# a device build the GPU tests are not ignored; the CPU-only binaries run
# in CI), one test at a time, each binary under a time limit, writing each
# one's output to device-tests/logs/ (or $OUT) and ending with one summary
# line.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/nvidia-build.sh
. "$ROOT/scripts/nvidia-build.sh"
d=.device/device-tests
rm -rf "$d" .device/tests.tar.xz && mkdir -p "$d/tests"
cargo test --release --workspace --no-run --message-format=json 2>/dev/null | copy_executables "$d/tests" tests
cargo build --release --bin hipkern 2>/dev/null
cp "$CARGO_TARGET_DIR/release/hipkern" "$d/hipkern"
strip "$d/hipkern" "$d"/tests/*
cat > "$d/run-tests.sh" <<'RUN'
#!/usr/bin/env bash
# Runs every test binary here that holds gpu_* tests, as `cargo test` does
# (no --include-ignored: a device build ignores none); last line: summary.
cd "$(dirname "${BASH_SOURCE[0]}")"
logs="${OUT:-$PWD/logs}"; mkdir -p "$logs"
# The CLI tests run this copy of the program (their built-in path is the build machine's).
export HIPKERN_BIN="$PWD/hipkern"
./hipkern info | tee "$logs/info.txt"
cd tests
pass=0; fail=0; ign=0; bad=(); n=0
for t in *; do
  ./"$t" --list 2>/dev/null | grep -q '^gpu_' || continue
  n=$((n + 1))
  echo "=== $t"
  timeout "${HIPKERN_TEST_TIMEOUT:-240}" ./"$t" --test-threads=1 > "$logs/$t.txt" 2>&1; rc=$?
  grep -E '^test .* (FAILED|ignored)|^test result:|panicked' "$logs/$t.txt"
  line="$(grep -E '^test result:' "$logs/$t.txt" | tail -1)"
  p=$(echo "$line" | sed -nE 's/.* ([0-9]+) passed.*/\1/p'); f=$(echo "$line" | sed -nE 's/.* ([0-9]+) failed.*/\1/p')
  i=$(echo "$line" | sed -nE 's/.* ([0-9]+) ignored.*/\1/p')
  pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0})); ign=$((ign + ${i:-0}))
  if [ $rc -ne 0 ] || [ -z "$line" ]; then bad+=("$t(rc=$rc)"); [ "${f:-0}" = 0 ] && fail=$((fail + 1)); fi
done
gpu="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
echo "SUMMARY: $pass passed, $fail failed, $ign ignored in $n binaries with GPU tests on ${gpu:-unknown GPU}${bad:+; failing: ${bad[*]}}"
[ $fail -eq 0 ]
RUN
chmod +x "$d/run-tests.sh"
# One xz stream with a dictionary larger than all binaries together: each
# carries the same device code, which then compresses once.
XZ_OPT="--lzma2=preset=6,dict=512MiB" tar -cJf .device/tests.tar.xz -C .device device-tests
echo "ready: .device/tests.tar.xz ($(ls "$d/tests" | wc -l) binaries, $(du -sh .device/tests.tar.xz | cut -f1))"
