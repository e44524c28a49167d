#!/usr/bin/env bash
# On an amd or nvidia build no gpu_* test may be ignored (only the cpu
# platform ignores them): run from .ci/run and .ci/amd-in-root.sh with the
# platform's environment and CARGO_TARGET_DIR set, after the build.
set -euo pipefail
list() { cargo test --release --workspace -- --list "$@" 2>/dev/null | grep -E '^gpu_[a-z0-9_]*: test' || true; }
ignored="$(list --ignored)"
if [ -n "$ignored" ]; then echo "FAIL: GPU tests ignored on ${HIPKERN_PLATFORM:-this platform}:" >&2; echo "$ignored" >&2; exit 1; fi
echo "$(list | wc -l) GPU tests, none ignored"
