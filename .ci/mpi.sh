#!/usr/bin/env bash
# The MPI examples (examples/mpi) on CPU ranks: built against Debian's
# OpenMPI, each run with 1, 2 and 4 ranks (oversubscribed on a 2-core
# machine); each checks, on rank 0, the distributed result against one rank
# (force and PSF within rounding, List 1 bitwise) and exits non-zero
# otherwise.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export LIBCLANG_PATH="${LIBCLANG_PATH:-/usr/lib/llvm-19/lib}"
export CARGO_TARGET_DIR="$ROOT/target/ci-mpi"
HIPKERN_PLATFORM=cpu cargo build --release --manifest-path examples/mpi/Cargo.toml
HIPKERN_PLATFORM=cpu cargo clippy --release --manifest-path examples/mpi/Cargo.toml -- -D warnings
cargo fmt --manifest-path examples/mpi/Cargo.toml --check
# Root in CI containers; OpenMPI refuses root unless told.
flags=(--oversubscribe)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
for ex in mpi_force mpi_psf mpi_list1; do
  for np in 1 2 4; do
    echo "--- mpirun -np $np $ex --cpu"
    timeout 600 mpirun "${flags[@]}" -np "$np" "$CARGO_TARGET_DIR/release/$ex" --cpu
  done
done
echo "mpi examples: OK"
