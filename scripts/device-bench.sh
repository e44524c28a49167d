#!/usr/bin/env bash
# Builds the benchmarks for the nvidia platform into .device/benches with a
# runner, .device/run-benches.sh, for the GPU machine: it runs the torch
# peer first (same GPU, same session), then each bench, and writes JSON
# under $HIPKERN_BENCH_OUT (default .device/out).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/nvidia-build.sh
. "$ROOT/scripts/nvidia-build.sh"
rm -rf .device/benches && mkdir -p .device/benches
cargo bench --no-run --message-format=json 2>/dev/null | copy_executables .device/benches benches
cp scripts/force_torch_peer.py .device/benches/
cat > .device/run-benches.sh <<'RUN'
#!/usr/bin/env bash
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
out="${HIPKERN_BENCH_OUT:-$PWD/out}"; mkdir -p "$out"; export HIPKERN_BENCH_OUT="$out"
python3 benches/force_torch_peer.py "$out/force_torch_peer.json" && export HIPKERN_TORCH_PEER_JSON="$out/force_torch_peer.json"
for b in benches/*; do if [ -x "$b" ] && [ "${b%.py}" = "$b" ]; then "$b" --bench || rc=1; fi; done; exit ${rc:-0}
RUN
chmod +x .device/run-benches.sh
echo "ready: .device/run-benches.sh"
