#!/usr/bin/env bash
# Builds the kernel layer with CMake, installs it into a prefix, and builds
# examples/c/hipkern_example.c against that prefix twice, as a C/C++
# application would: through the CMake package (examples/c/CMakeLists.txt,
# find_package(hipkern CONFIG REQUIRED)) and through pkg-config
# (`cc ... $(pkg-config --cflags --libs hipkern)`). No Rust, no Python.
#
#   scripts/build-c-example.sh [--run] [nvidia|amd ...]      (default: nvidia amd)
#
# Per platform, under ${HIPKERN_CMAKE_DIR:-target/cmake}/<platform>/: build/
# (the kernel layer), prefix/ (what `cmake --install` wrote), example-cmake/
# and example-pkgconfig/ (the two consumers). It checks that libhipkern.so's
# SONAME is libhipkern.so.<ABI> and that it exports hipkern_* symbols only.
# --run runs both programs, with $HIPKERN_EXAMPLE_ARGS (without a GPU each
# reports the runtime's no-device error and exits 0, or 2 with
# --require-device; on a GPU they check force assembly, the PSF sink and
# List 1 against float64 loops, exit 1 on a mismatch). Without pkg-config
# on the machine only the CMake consumer is built.
#
# nvidia: CMake and nvcc from .toolchain/ (scripts/install-toolchain.sh
# --cuda), or a cmake and nvcc on PATH (a GPU machine's); architectures from
# HIPKERN_CUDA_ARCH (sm_90 → 90). amd: inside the ROCm root (entered
# through scripts/in-rocm-root.sh, ROCm ${HIPKERN_ROCM:-6.4}, unless already
# there), ROCm's clang as CMake's HIP compiler; architectures from
# HIPKERN_OFFLOAD_ARCH, else GPU_TARGETS/AMDGPU_TARGETS, else gfx1201.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
run=0
platforms=()
for a in "$@"; do
  case "$a" in
    --run) run=1 ;;
    nvidia|amd) platforms+=("$a") ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "build-c-example: unknown argument '$a' (expected --run, nvidia, amd)" >&2; exit 2 ;;
  esac
done
[ ${#platforms[@]} -eq 0 ] && platforms=(nvidia amd)
jobs="$(nproc 2>/dev/null || echo 2)"
# Arguments for the example programs (e.g. --require-device on a GPU machine).
read -r -a HIPKERN_EXAMPLE_ARGS <<<"${HIPKERN_EXAMPLE_ARGS:-}"

# check_exports LIB ABI: SONAME and the dynamic symbol table of libhipkern.so.
check_exports() {
  local lib="$1" abi="$2" soname others n
  soname="$(objdump -p "$lib" | sed -nE 's/^ *SONAME +//p')"
  if [ "$soname" != "libhipkern.so.$abi" ]; then
    echo "FAIL: $lib has SONAME '$soname', expected libhipkern.so.$abi" >&2; return 1
  fi
  n="$(nm -D --defined-only "$lib" | awk '$3 ~ /^hipkern_/' | wc -l)"
  others="$(nm -D --defined-only "$lib" | awk '$3 !~ /^hipkern_/ && $2 != "A"')"
  if [ -n "$others" ]; then
    echo "FAIL: $lib exports symbols other than hipkern_*:" >&2; echo "$others" | head -20 >&2; return 1
  fi
  echo "$lib: SONAME $soname, $n symbols exported, all hipkern_*"
}

for p in "${platforms[@]}"; do
  if [ "$p" = amd ] && [ -z "${HIPKERN_ROCM_ROOT:-}" ]; then
    flags=(); [ $run = 1 ] && flags=(--run)
    "$ROOT/scripts/in-rocm-root.sh" --rocm "${HIPKERN_ROCM:-6.4}" \
      "$ROOT/scripts/build-c-example.sh" "${flags[@]}" amd
    continue
  fi
  (
    base="${HIPKERN_CMAKE_DIR:-target/cmake}"
    case "$base" in /*) ;; *) base="$ROOT/$base" ;; esac
    dir="$base/$p"
    [ -n "${HIPKERN_ROCM_ROOT:-}" ] && dir="$dir-rocm$HIPKERN_ROCM_ROOT"
    cfg=(-DHIPKERN_PLATFORM="$p" -DCMAKE_BUILD_TYPE=Release)
    case "$p" in
      nvidia)
        if [ -x "$ROOT/.toolchain/cuda/nvidia/cu13/bin/nvcc" ]; then
          export PATH="$ROOT/.toolchain/cuda/nvidia/cu13/bin:$PATH"
        fi
        if [ -x "$ROOT/.toolchain/cmake/cmake/data/bin/cmake" ]; then
          export PATH="$ROOT/.toolchain/cmake/cmake/data/bin:$PATH"
        fi
        command -v nvcc >/dev/null || { echo "build-c-example: no nvcc (scripts/install-toolchain.sh --cuda)" >&2; exit 1; }
        command -v cmake >/dev/null || { echo "build-c-example: no cmake (scripts/install-toolchain.sh --cuda)" >&2; exit 1; }
        archs="${HIPKERN_CUDA_ARCH:-sm_90}"
        archs="${archs//sm_/}"
        cfg+=(-DCMAKE_CUDA_COMPILER="$(command -v nvcc)" -DCMAKE_CUDA_ARCHITECTURES="${archs//,/;}")
        ;;
      amd)
        clang="$(ls /usr/lib/llvm-*/bin/clang++ | sort -V | tail -1)"
        archs="${HIPKERN_OFFLOAD_ARCH:-${GPU_TARGETS:-${AMDGPU_TARGETS:-gfx1201}}}"
        archs="${archs//;/,}"
        cfg+=(-DCMAKE_HIP_COMPILER="$clang" -DCMAKE_HIP_ARCHITECTURES="${archs//,/;}")
        ;;
    esac
    echo "=== $p: the kernel layer with CMake ($(cmake --version | head -1)) into $dir/prefix"
    rm -rf "$dir/prefix" "$dir/example-cmake" "$dir/example-pkgconfig"
    mkdir -p "$dir"
    cmake -S "$ROOT" -B "$dir/build" "${cfg[@]}" >"$dir/configure.log" 2>&1 \
      || { cat "$dir/configure.log"; exit 1; }
    grep -E '^-- hipkern:' "$dir/configure.log"
    cmake --build "$dir/build" -j "$jobs"
    cmake --install "$dir/build" --prefix "$dir/prefix" >/dev/null
    find "$dir/prefix" -type f -o -type l | sed "s|^$dir/prefix/|  |" | sort
    abi="$(sed -nE 's/^#define HIPKERN_ABI_VERSION ([0-9]+).*/\1/p' "$ROOT/hip/include/hipkern.h")"
    check_exports "$dir/prefix/lib/libhipkern.so" "$abi"

    echo "=== $p: examples/c with find_package(hipkern CONFIG REQUIRED)"
    cmake -S "$ROOT/examples/c" -B "$dir/example-cmake" -DCMAKE_PREFIX_PATH="$dir/prefix" \
      -DCMAKE_BUILD_TYPE=Release ${CUDAToolkit_ROOT:+-DCUDAToolkit_ROOT="$CUDAToolkit_ROOT"} \
      >"$dir/example-cmake.log" 2>&1 || { cat "$dir/example-cmake.log"; exit 1; }
    grep -E '^-- hipkern ' "$dir/example-cmake.log"
    cmake --build "$dir/example-cmake" -j "$jobs"

    if ! command -v pkg-config >/dev/null; then
      echo "=== $p: no pkg-config on this machine: the pkg-config consumer is not built"
      if [ $run = 1 ]; then echo "=== $p: run (CMake consumer)"; "$dir/example-cmake/hipkern_example" "${HIPKERN_EXAMPLE_ARGS[@]}"; fi
      exit 0
    fi
    echo "=== $p: examples/c with pkg-config --cflags --libs hipkern"
    mkdir -p "$dir/example-pkgconfig"
    flags="$(PKG_CONFIG_PATH="$dir/prefix/lib/pkgconfig" pkg-config --cflags --libs hipkern)"
    echo "pkg-config: $flags"
    # shellcheck disable=SC2086
    "${CC:-cc}" -std=c11 -O2 -Wall -Wextra -Werror -ffp-contract=off \
      "$ROOT/examples/c/hipkern_example.c" -o "$dir/example-pkgconfig/hipkern_example" $flags -lm
    # shellcheck disable=SC2086
    "${CC:-cc}" -std=c11 -O2 -fopenmp -Wall -Wextra -Werror -ffp-contract=off \
      "$ROOT/examples/c/psf_producers.c" -o "$dir/example-pkgconfig/psf_producers" $flags -lm
    echo "built hipkern_example and psf_producers in $dir/example-cmake and $dir/example-pkgconfig ($p)"
    if [ $run = 1 ]; then
      for prog in hipkern_example psf_producers; do
        echo "=== $p: run $prog (CMake consumer)"
        "$dir/example-cmake/$prog" "${HIPKERN_EXAMPLE_ARGS[@]}"
        echo "=== $p: run $prog (pkg-config consumer)"
        LD_LIBRARY_PATH="$dir/prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
          "$dir/example-pkgconfig/$prog" "${HIPKERN_EXAMPLE_ARGS[@]}"
      done
    fi
  )
done
