#!/usr/bin/env bash
# The C ABI's PSF hub (hip/psf_producers.hip, host C++) run without a GPU:
# compiled by the host's g++ and linked with tests/c/fake_device.c (the
# runtime and the atomic splat in host memory, hipkern.h's rule), then
# driven by the C/OpenMP example (examples/c/psf_producers.c) with 1, 2, 4
# and 16 OpenMP threads, whose own checks must hold: the image against a
# float64 loop, the two refusals named, the counts. The threads, the ring,
# the waits for buffers and the renumbering of a refused event are the
# real code; only the device is not. Also under ThreadSanitizer.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
out="$ROOT/target/ci-c-hub"
mkdir -p "$out"
build() {
  local name="$1"; shift
  g++ -std=c++17 -O2 "$@" -Wall -Wextra -Werror -Ihip/include -x c++ -c hip/psf_producers.hip -o "$out/$name-hub.o"
  gcc -std=c11 -O2 "$@" -Wall -Wextra -Werror -ffp-contract=off -Ihip/include -c tests/c/fake_device.c -o "$out/$name-fake.o"
  gcc -std=c11 -O2 "$@" -fopenmp -Wall -Wextra -Werror -ffp-contract=off -Ihip/include -c examples/c/psf_producers.c -o "$out/$name-example.o"
  g++ "$@" -fopenmp "$out/$name-example.o" "$out/$name-hub.o" "$out/$name-fake.o" -o "$out/$name" -lm -lpthread
}
build plain
build tsan -fsanitize=thread -g
for threads in 1 2 4 16; do
  echo "--- OMP_NUM_THREADS=$threads"
  OMP_NUM_THREADS=$threads "$out/plain" --require-device "$out/image.npy"
done
echo "--- ThreadSanitizer, 8 threads"
# libgomp is not instrumented: its barriers would be reported; the hub's
# own threads and locks are what this run checks.
TSAN_OPTIONS="halt_on_error=1 report_signal_unsafe=0 suppressions=$ROOT/tests/c/tsan.supp" \
  OMP_NUM_THREADS=8 "$out/tsan" --require-device
echo "c hub on the fake device: OK"
