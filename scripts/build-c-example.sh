#!/usr/bin/env bash
# Builds examples/c/hipkern_example.c, a plain C program of the C ABI, for
# each platform named (default: nvidia amd), against the kernel layer's
# static library as hipkern-sys's build script makes it:
#
#   scripts/build-c-example.sh [--run] [nvidia|amd|cpu ...]
#
# For each platform: `cargo build --release -p hipkern-sys` (nvidia: the
# toolchain of .toolchain/env-nvidia.sh, installed first when missing; amd:
# ROCm's hipcc inside the ROCm root, entered through scripts/in-rocm-root.sh
# unless already inside, ROCm ${HIPKERN_ROCM:-6.4}) into $CARGO_TARGET_DIR when set,
# else ${CARGO_TARGET_PREFIX:-target/}<platform>; the
# build-script-executed message of that build gives libhipkern_kernels.a's
# folder (hipkern-sys's OUT_DIR) and the libraries it links (nvidia: static
# cudart, dl, rt, pthread, stdc++; amd: amdhip64, stdc++). The program is
# compiled with ${CC:-cc} (plain C11: hipkern.h needs no HIP or CUDA header)
# and linked into <target dir>/c-example/hipkern_example; the last line per
# platform says where. --run also runs each one built (without a GPU it
# reports the runtime's no-device error and exits 0; on a GPU it checks
# force assembly, the PSF sink and List 1 against float64 loops, exit 1 on
# a mismatch).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
run=0
platforms=()
for a in "$@"; do
  case "$a" in
    --run) run=1 ;;
    nvidia|amd|cpu) platforms+=("$a") ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "build-c-example: unknown argument '$a' (expected --run, nvidia, amd, cpu)" >&2; exit 2 ;;
  esac
done
[ ${#platforms[@]} -eq 0 ] && platforms=(nvidia amd)

# Reads cargo's --message-format=json on stdin; prints the linker arguments
# of hipkern-sys's build script: -L folders, then its libraries (static ones
# by file name, so the linker cannot pick a shared one instead).
link_args() {
  python3 -c '
import json, sys
found = None
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "build-script-executed" and "hipkern-sys" in m.get("package_id", ""):
        found = m
if found is None:
    sys.exit("build-c-example: no build-script-executed message from hipkern-sys")
args = []
for p in found["linked_paths"]:
    args.append("-L" + p.split("=", 1)[-1])
for l in found["linked_libs"]:
    kind, _, name = l.rpartition("=")
    args.append("-l:lib%s.a" % name if kind == "static" else "-l" + name)
print(" ".join(args))
'
}

for p in "${platforms[@]}"; do
  if [ "$p" = amd ] && [ -z "${HIPKERN_ROCM_ROOT:-}" ]; then
    flags=(); [ $run = 1 ] && flags=(--run)
    "$ROOT/scripts/in-rocm-root.sh" --rocm "${HIPKERN_ROCM:-6.4}" \
      "$ROOT/scripts/build-c-example.sh" "${flags[@]}" amd
    continue
  fi
  (
    case "$p" in
      nvidia)
        env_file="$ROOT/.toolchain/env-nvidia.sh"
        if [ ! -f "$env_file" ]; then "$ROOT/scripts/install-toolchain.sh" --cuda >/dev/null; fi
        # shellcheck disable=SC1090
        . "$env_file" ;;
      amd) ;;  # inside the ROCm root: HIPKERN_PLATFORM=amd, HIPCC=hipcc already
      cpu) export HIPKERN_PLATFORM=cpu ;;
    esac
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/${CARGO_TARGET_PREFIX:-target/}$p}"
    echo "=== $p: cargo build --release -p hipkern-sys (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
    json="$(cargo build --release -p hipkern-sys --message-format=json)"
    libs="$(echo "$json" | link_args)"
    out="$CARGO_TARGET_DIR/c-example"
    mkdir -p "$out"
    cmd=("${CC:-cc}" -std=c11 -O2 -Wall -Wextra -Werror -ffp-contract=off
         -I "$ROOT/hip/include" "$ROOT/examples/c/hipkern_example.c"
         -o "$out/hipkern_example")
    # shellcheck disable=SC2206
    cmd+=($libs -lm)
    echo "${cmd[*]}"
    "${cmd[@]}"
    echo "built $out/hipkern_example ($p)"
    if [ $run = 1 ]; then "$out/hipkern_example"; fi
  )
done
