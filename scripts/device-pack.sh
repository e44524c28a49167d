#!/usr/bin/env bash
# Builds everything one GPU call verifies (scripts/device-tests.sh,
# device-bench.sh, device-python.sh, the C examples) and gathers it into
# .device/go (ignored; about 50 MiB, under the 64 MiB a call carries). Then
# one device call, carrying .device/go, runs
#     bash scripts/device-verify.sh
# from the repository root there.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/device-tests.sh
bash scripts/device-bench.sh
bash scripts/device-python.sh
HIPKERN_CMAKE_DIR=target/cmake bash scripts/build-c-example.sh nvidia
G=.device/go
rm -rf "$G" && mkdir -p "$G/cex/lib" "$G/cex/cmake" "$G/cex/pkgconfig"
cp .device/tests.tar.xz "$G/"
cp -r .device/benches "$G/benches"
cp .device/run-benches.sh "$G/"
cp -r .device/py "$G/py"
cp -a target/cmake/nvidia/prefix/lib/libhipkern.so* "$G/cex/lib/"
for c in cmake pkgconfig; do
  cp "target/cmake/nvidia/example-$c/hipkern_example" "target/cmake/nvidia/example-$c/psf_producers" "$G/cex/$c/"
done
git rev-parse --short HEAD > "$G/COMMIT"
du -sh "$G"
