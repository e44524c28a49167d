#!/usr/bin/env bash
# Fetches DeePMD-kit 3.2.0's force-assembly Triton op (one file of its
# wheel, LGPL-3.0, not part of hipkern: never committed) for the peer
# tests and the bench, into DEST (default .device/py/deepmd):
#     python/tools/fetch-deepmd-op.sh [DEST]
# then HIPKERN_DEEPMD_OP=DEST/force_assembly.py.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dest="${1:-$ROOT/.device/py/deepmd}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: deepmd-kit==3.2.0 -d "$tmp"
mkdir -p "$dest"
python3 - "$tmp" "$dest" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/deepmd_kit-3.2.0-*.whl")[0]
member = "deepmd/kernels/triton/sezm/force_assembly.py"
with zipfile.ZipFile(wheel) as z:
    data = z.read(member)
open(sys.argv[2] + "/force_assembly.py", "wb").write(data)
print(f"{member} of {wheel.rsplit('/', 1)[1]} ({len(data)} bytes)")
PY
