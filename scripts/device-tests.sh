#!/usr/bin/env bash
# Builds the nvidia-platform test binaries (release) into .device/ with a
# runner, .device/run-tests.sh, that executes each as plain `cargo test`
# would (on a device build the gpu_* tests are not ignored) and ends with
# one summary line. Copy .device/ to a GPU machine (it needs
# only the NVIDIA driver: cudart is linked statically) and run:
#     .device/run-tests.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/nvidia-build.sh
. "$ROOT/scripts/nvidia-build.sh"
rm -rf .device/tests && mkdir -p .device/tests
cargo test --release --workspace --no-run --message-format=json 2>/dev/null | copy_executables .device/tests tests
cargo build --release --bin hipkern 2>/dev/null
cp "$CARGO_TARGET_DIR/release/hipkern" .device/hipkern
cat > .device/run-tests.sh <<'RUN'
#!/usr/bin/env bash
# Runs every test binary here as `cargo test` does; last line: summary.
cd "$(dirname "${BASH_SOURCE[0]}")"
# The CLI tests run this copy of the program (their built-in path is this machine's).
export HIPKERN_BIN="$PWD/hipkern"
./hipkern info
cd tests
pass=0; fail=0; ign=0; bad=()
for t in *; do
  echo "=== $t"
  out="$(./"$t" --test-threads=1 2>&1)"; rc=$?
  echo "$out"
  line="$(echo "$out" | grep -E '^test result:' | tail -1)"
  p=$(echo "$line" | sed -nE 's/.* ([0-9]+) passed.*/\1/p'); f=$(echo "$line" | sed -nE 's/.* ([0-9]+) failed.*/\1/p')
  i=$(echo "$line" | sed -nE 's/.* ([0-9]+) ignored.*/\1/p')
  pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0})); ign=$((ign + ${i:-0}))
  if [ $rc -ne 0 ] || [ -z "$line" ]; then bad+=("$t"); [ "${f:-0}" = 0 ] && fail=$((fail + 1)); fi
done
gpu="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
echo "SUMMARY: $pass passed, $fail failed, $ign ignored in $(ls | wc -l) binaries on ${gpu:-unknown GPU}${bad:+; failing: ${bad[*]}}"
[ $fail -eq 0 ]
RUN
chmod +x .device/run-tests.sh
echo "ready: .device/run-tests.sh ($(ls .device/tests | wc -l) binaries, $(du -sh .device | cut -f1))"
