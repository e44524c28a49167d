#!/usr/bin/env bash
# Builds the benchmarks for the nvidia platform into .device/benches with a
# runner, .device/run-benches.sh, for the GPU machine: it runs the torch
# peer first (same GPU, same session), then each bench, and writes JSON
# under $HIPKERN_BENCH_OUT (default .device/out).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
"$ROOT/scripts/install-toolchain.sh" --cuda >/dev/null
# shellcheck disable=SC1091
. "$ROOT/.toolchain/env-nvidia.sh"
export CARGO_TARGET_DIR="$ROOT/target/nvidia"
rm -rf .device/benches && mkdir -p .device/benches
cargo bench --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys, shutil
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and "bench" in m["target"]["kind"] and m.get("executable"):
        shutil.copy2(m["executable"], ".device/benches/" + m["target"]["name"]); print("built", m["target"]["name"])
'
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
