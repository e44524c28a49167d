#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .device/go carried
# (scripts/device-pack.sh builds it): every Rust GPU test binary, the C
# examples through CMake and pkg-config, the Python suite, then the benches
# (the torch peer first). Steps run in that order, each capped so the whole
# call ends within DEADLINE seconds (default 560); a step cut short says so.
# Everything it prints and writes goes under $OUT (default /tmp/out).
# STEPS (default "tests c python benches") picks steps, for a shorter call.
set -u
STEPS=" ${STEPS:-tests c python benches} "
want() { case "$STEPS" in *" $1 "*) return 0 ;; esac; echo "=== $1: not asked for (STEPS)"; return 1; }
T0=$(date +%s); DEADLINE=${DEADLINE:-560}
# cap MAX STEP...: seconds a step may take, leaving each later STEP its
# share of the time, if it was asked for (c 30 s, python 60, benches 150).
share() { case "$STEPS" in *" $1 "*) case "$1" in c) echo 30 ;; python) echo 60 ;; benches) echo 150 ;; esac ;; *) echo 0 ;; esac; }
cap() {
  local max=$1 reserve=0 s; shift
  for s in "$@"; do reserve=$(( reserve + $(share "$s") )); done
  local l=$(( DEADLINE - ($(date +%s) - T0) - reserve ))
  [ "$l" -gt "$max" ] && l=$max; [ "$l" -lt 5 ] && l=5; echo "$l"
}
G="$PWD/.device/go"
[ -f "$G/tests.tar.xz" ] || { echo "device-verify: $G is missing (run scripts/device-pack.sh and carry .device/go)" >&2; exit 2; }
out="${OUT:-/tmp/out}"; mkdir -p "$out"
W="$(mktemp -d)"
echo "commit $(cat "$G/COMMIT"); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"

tar xJf "$G/tests.tar.xz" -C "$W"
export HIPKERN_BIN="$W/device-tests/hipkern"
mkdir -p "$out/tests"
want tests && echo "=== Rust GPU tests ($(( $(date +%s) - T0 )) s)" &&
for t in "$W"/device-tests/tests/*; do
  "$t" --list 2>/dev/null | grep -q '^gpu_' || continue
  name="$(basename "$t")"; l=$(cap 150 c python benches)
  [ "$l" -le 5 ] && { echo "$name: not run (time)"; continue; }
  timeout "$l" "$t" --test-threads=1 > "$out/tests/$name.txt" 2>&1; rc=$?
  echo "$name rc=$rc $(grep -E '^test result:' "$out/tests/$name.txt" | tail -1)"
  grep -E '^test .* FAILED|panicked' "$out/tests/$name.txt" | head -5
done

export LD_LIBRARY_PATH="$G/cex/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
want c && echo "=== C examples ($(( $(date +%s) - T0 )) s)" &&
for prog in hipkern_example psf_producers; do
  for c in cmake pkgconfig; do
    for threads in 1 16; do
      [ "$prog" = hipkern_example ] && [ "$threads" = 16 ] && continue
      OMP_NUM_THREADS=$threads timeout "$(cap 30 python benches)" "$G/cex/$c/$prog" --require-device > "$W/ex.txt" 2>&1; rc=$?
      echo "$prog ($c, $threads threads): rc=$rc; $(tail -1 "$W/ex.txt")"
      cat "$W/ex.txt" >> "$out/c_examples.txt"
    done
  done
done

if want python; then
echo "=== Python suite ($(( $(date +%s) - T0 )) s)"
site="$W/site"; mkdir -p "$site"
python3 -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' "$site" "$G"/py/wheels/*.whl
(cd "$G/py" && PYTHONPATH="$site" HIPKERN_DEEPMD_OP="$G/py/deepmd/force_assembly.py" \
  timeout "$(cap 200 benches)" python3 -m pytest -q -p no:cacheprovider -rs tests > "$out/pytest.txt" 2>&1; echo "rc=$?" >> "$out/pytest.txt")
tail -3 "$out/pytest.txt"; grep -E "^(FAILED|ERROR)" "$out/pytest.txt" | head
fi

want benches && echo "=== benches ($(( $(date +%s) - T0 )) s)" &&
{ (cd "$G" && HIPKERN_BENCH_OUT="$out/benches" timeout "$(cap 600)" bash run-benches.sh > "$out/benches.txt" 2>&1; echo "rc=$?" >> "$out/benches.txt")
tail -3 "$out/benches.txt"; }
echo "=== end ($(( $(date +%s) - T0 )) s)"
