#!/usr/bin/env bash
# Builds .device/vol (ignored): everything one GPU call needs to time
# volumential's List 1 (issue 32's peer) on the NVIDIA GPU, with no network:
#
#   wheels/   cp312 manylinux x86_64 wheels of volumential and what its List 1
#             imports (pyopencl with its ocl-icd loader, loopy, islpy, pymbolic,
#             pytools, sumpy, boxtree, arraycontext, sympy, mpmath, ...); not
#             numpy (the machine's), not scipy (35 MB: a stub stands in when
#             the machine has none; volumential imports it, List 1 never uses
#             it), not pocl
#   stubs/    that scipy stand-in
#   inputs/   table.npz (hipkern's 3D Laplace q=3 table), uniform.npz and
#             random.npz (the bench trees, the density's seed and sha256, and
#             hipkern's CPU float64 List 1 of it: the reference)
#   volumential_list1_peer.py, run.sh
#
# Then, from the repository root on the GPU machine (carrying .device/vol):
#     bash .device/vol/run.sh          # output under $OUT
#
# Needs here: python3 with pip and its package index, the Rust toolchain (hipkern's CPU
# build, unless HIPKERN_PYTHON names a python that imports hipkern), and git
# mirrors of xywei/volumential and inducer/{sumpy,boxtree,arraycontext}
# (VOL_MIRROR, default /work/.mirror, as <owner>+<name>/repo bare git dirs;
# or point VOLUMENTIAL_SRC etc. at checked-out trees). The dependency
# commits are the ones volumential's uv.lock pins.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
V=.device/vol
BUILD="${VOL_BUILD:-/tmp/volumential-pack-build}"
MIRROR="${VOL_MIRROR:-/work/.mirror}"
PY="${PYTHON:-python3}"
mkdir -p "$BUILD/src" "$BUILD/wheels"

# {{{ sources: volumential main, and the pure-Python deps at uv.lock's commits

declare -A PIN=(
  [xywei+volumential]=HEAD
  [inducer+sumpy]=83c5db03ba9266e8c2b24e5d3115142db6ca1be8
  [inducer+boxtree]=bfee6b8ffee7e187a1020984305a7107cecca638
  [inducer+arraycontext]=4ed685da024473266b2a635b350615e36c3ce176
)
for key in "${!PIN[@]}"; do
  name="${key#*+}"
  envname="$(echo "$name" | tr a-z A-Z)_SRC"
  src="${!envname:-}"
  if [ -z "$src" ]; then
    git_dir="$MIRROR/$key/repo"
    [ -d "$git_dir" ] || { echo "no source for $name: set $envname or VOL_MIRROR" >&2; exit 1; }
    src="$BUILD/src/$name"
    rm -rf "$src" && mkdir -p "$src"
    git --git-dir="$git_dir" archive "${PIN[$key]}" | tar x -C "$src"
    echo "$name: $(git --git-dir="$git_dir" rev-parse "${PIN[$key]}")" >> "$BUILD/src/COMMITS.new"
  fi
  "$PY" -m pip wheel -q --no-deps -w "$BUILD/wheels" "$src"
done
[ -f "$BUILD/src/COMMITS.new" ] && sort "$BUILD/src/COMMITS.new" > "$BUILD/src/COMMITS" && rm "$BUILD/src/COMMITS.new"

# Pure-Python packages published as sdists only.
"$PY" -m pip wheel -q --no-deps -w "$BUILD/wheels" cgen==2025.1 genpy==2022.1 codepy==2025.1

# }}}

# {{{ binary and pure wheels for CPython 3.12 (the GPU machine's)

"$PY" -m pip download -q -d "$BUILD/wheels" --find-links "$BUILD/wheels" \
  --python-version 3.12 --implementation cp --only-binary=:all: \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_34_x86_64 \
  sumpy==2024.0 boxtree==2024.10 arraycontext==2024.0 \
  loopy==2025.2 pytools==2026.1.1 pymbolic==2025.1 \
  pyopencl islpy sympy mpmath mako cgen genpy codepy

# }}}

rm -rf "$V" && mkdir -p "$V/wheels" "$V/inputs" "$V/stubs/scipy"
for w in "$BUILD"/wheels/*.whl; do
  case "$(basename "$w")" in
    numpy-*|scipy-*|pocl_binary_distribution-*) ;;   # the machine's, a stub, not used
    *) cp "$w" "$V/wheels/" ;;
  esac
done
[ -f "$BUILD/src/COMMITS" ] && cp "$BUILD/src/COMMITS" "$V/wheels/SOURCES"

# {{{ inputs: hipkern's table, trees and CPU reference

HKPY="${HIPKERN_PYTHON:-}"
if [ -z "$HKPY" ]; then
  if [ ! -x "$BUILD/hk/bin/python" ] || ! "$BUILD/hk/bin/python" -c 'import hipkern' 2>/dev/null; then
    "$PY" -m venv "$BUILD/hk"
    HIPKERN_PLATFORM=cpu "$BUILD/hk/bin/pip" install -q ./python
  fi
  HKPY="$BUILD/hk/bin/python"
fi
"$HKPY" scripts/volumential_list1_peer.py --save-inputs "$V/inputs" --tree uniform,random

# }}}

cp scripts/volumential_list1_peer.py "$V/"
cat > "$V/stubs/scipy/__init__.py" <<'EOF'
"""Stand-in for scipy where the machine has none (volumential-pack.sh).

volumential imports scipy when the package loads (singular_integral_2d);
its List 1 never uses it. Any use fails here, loudly."""


def __getattr__(name):
    raise ImportError(f"scipy.{name}: this is volumential-pack.sh's scipy stub")
EOF

cat > "$V/run.sh" <<'EOF'
#!/usr/bin/env bash
# volumential's List 1 on the NVIDIA GPU through its OpenCL driver, on
# hipkern's bench trees (scripts/volumential_list1_peer.py). No network:
# the wheels are installed into a temporary folder. Output under $OUT.
# Knobs: VOL_RUNS (10), VOL_WARMUP (2), VOL_TABLES (reduced,full),
# VOL_BATCH (1,32: 1 is volumential's default list1_target_batch_size),
# VOL_TREES (uniform,random), VOL_PLATFORM (nvidia), VOL_TIMEOUT_S (270 a tree).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
out="${OUT:-$PWD/out}"; mkdir -p "$out"
work="$(mktemp -d)"; site="$work/site"
export XDG_CACHE_HOME="$work/cache" PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INDEX=1
if ! python3 -m pip install -q --no-index --no-deps --target "$site" wheels/*.whl \
    > "$out/pip.txt" 2>&1; then
  echo "pip failed (see pip.txt); unpacking the wheels instead" | tee -a "$out/pip.txt"
  python3 -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
    "$site" wheels/*.whl
fi
pp="$site"
if ! python3 -c 'import scipy' 2>/dev/null; then pp="$site:$PWD/stubs"; echo "scipy: stub"; fi
export PYTHONPATH="$pp${PYTHONPATH:+:$PYTHONPATH}"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -2
  ls /etc/OpenCL/vendors 2>&1; ldconfig -p 2>/dev/null | grep -i opencl
  python3 -c 'import sys, numpy, pyopencl, loopy, islpy, sumpy, volumential; print(sys.version.split()[0], "numpy", numpy.__version__, "pyopencl", pyopencl.VERSION_TEXT, "islpy", islpy.__version__, "volumential", volumential.volumential_version)'
} 2>&1 | tee "$out/env.txt"
# One process per tree: each first call is cold (fresh loopy/pyopencl
# caches from the script, a fresh NVIDIA JIT cache here).
export CUDA_CACHE_PATH="$work/nvcache"
rc=0
for tree in $(echo "${VOL_TREES:-uniform,random}" | tr , ' '); do
  timeout "${VOL_TIMEOUT_S:-270}" python3 volumential_list1_peer.py --inputs inputs \
    --platform "${VOL_PLATFORM:-nvidia}" --tree "$tree" \
    --runs "${VOL_RUNS:-10}" --warmup "${VOL_WARMUP:-2}" \
    --table-storage "${VOL_TABLES:-reduced,full}" --batch-sizes "${VOL_BATCH:-1,32}" \
    --quiet --json "$out/volumential_list1_$tree.json" >> "$out/volumential_list1.txt" 2>&1
  r=$?; echo "$tree rc=$r" >> "$out/volumential_list1.txt"; [ $r -ne 0 ] && rc=$r
done
grep -E "^(device|volumential-list1)|Error|error|rc=" "$out/volumential_list1.txt" | tail -24
rm -rf "$work"
exit $rc
EOF
chmod +x "$V/run.sh" "$V/volumential_list1_peer.py"
git rev-parse --short HEAD > "$V/COMMIT"
du -sh "$V"
tar cJf "$BUILD/vol.tar.xz" -C .device vol
echo "tar cJf: $(du -h "$BUILD/vol.tar.xz" | cut -f1) ($BUILD/vol.tar.xz)"
