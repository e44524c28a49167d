#!/usr/bin/env bash
# Builds the benchmarks for the nvidia platform into .device/benches with a
# runner, .device/run-benches.sh, for the GPU machine: it runs the torch
# peer of force assembly first (same GPU, same session), then every bench
# (force_assembly, list1, psf_sink: this one runs its own torch peer,
# scripts/psf_torch_peer.py, fixture by fixture), and writes under $HIPKERN_BENCH_OUT (default
# .device/out) each bench's output and RESULTS-rows.md, the dated sections
# (GPU, driver, commit) for benches/RESULTS.md.
#
#   scripts/device-bench.sh --merge RESULTS-rows.md
#
# (here, once the rows are back) puts those sections into benches/RESULTS.md
# ahead of the older ones (newest first), after its introduction, and
# builds nothing; the commentary under each section is still the author's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [ "${1:-}" = "--merge" ]; then
  rows="${2:?device-bench: --merge needs the RESULTS-rows.md file}"
  [ -s "$rows" ] || { echo "device-bench: $rows is missing or empty" >&2; exit 2; }
  grep -q '^## ' "$rows" || { echo "device-bench: $rows has no '## ' section" >&2; exit 2; }
  python3 - "$rows" benches/RESULTS.md <<'PY'
import sys
rows, results = sys.argv[1], sys.argv[2]
new = open(rows, encoding="utf-8").read().rstrip("\n") + "\n\n"
old = open(results, encoding="utf-8").read()
at = old.find("\n## ")
head, rest = (old, "") if at < 0 else (old[: at + 1], old[at + 1 :])
open(results, "w", encoding="utf-8").write(head.rstrip("\n") + "\n\n" + new + rest)
print("merged %d section(s) into %s" % (new.count("\n## ") + new.startswith("## "), results))
PY
  exit 0
fi
# shellcheck source=scripts/nvidia-build.sh
. "$ROOT/scripts/nvidia-build.sh"
rm -rf .device/benches && mkdir -p .device/benches
cargo bench --no-run --message-format=json 2>/dev/null | copy_executables .device/benches benches
cp scripts/force_torch_peer.py scripts/psf_torch_peer.py .device/benches/
# The commit the benches were built from, for the RESULTS.md rows.
git rev-parse --short HEAD > .device/benches/COMMIT 2>/dev/null || echo unknown > .device/benches/COMMIT
cat > .device/run-benches.sh <<'RUN'
#!/usr/bin/env bash
# Runs every bench; each one's output goes to $out/<bench>.txt and, as a
# dated section (GPU, driver, commit) ready for benches/RESULTS.md, to
# $out/RESULTS-rows.md.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
out="${HIPKERN_BENCH_OUT:-$PWD/out}"; mkdir -p "$out"; export HIPKERN_BENCH_OUT="$out"
python3 benches/force_torch_peer.py "$out/force_torch_peer.json" && export HIPKERN_TORCH_PEER_JSON="$out/force_torch_peer.json"
# The PSF bench runs its torch stamp splat itself, fixture by fixture.
export HIPKERN_PSF_TORCH_PEER="$PWD/benches/psf_torch_peer.py"
gpu="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
gpu="${gpu:-unknown GPU}"; commit="$(cat benches/COMMIT 2>/dev/null || echo unknown)"
rows="$out/RESULTS-rows.md"; : > "$rows"
for b in benches/*; do
  if [ -x "$b" ] && [ "${b%.py}" = "$b" ]; then
    name="$(basename "$b")"
    "$b" --bench 2>&1 | tee "$out/$name.txt"; [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    { printf '## %s — %s, %s, kernels of commit %s\n\n```\n' "$name" "$(date -u +%F)" "$gpu" "$commit"
      cat "$out/$name.txt"; printf '```\n\n'; } >> "$rows"
  fi
done
echo "rows for benches/RESULTS.md: $rows"
exit ${rc:-0}
RUN
chmod +x .device/run-benches.sh
echo "ready: .device/run-benches.sh"
