# Sourced by device-tests.sh and device-bench.sh (with ROOT set): the CUDA
# toolchain, the nvidia target folder, and copy_executables.
"$ROOT/scripts/install-toolchain.sh" --cuda >/dev/null
# shellcheck disable=SC1091
. "$ROOT/.toolchain/env-nvidia.sh"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target/nvidia}"

# copy_executables DEST MODE < cargo's --message-format=json
#   MODE tests:   every test-harness executable, named <target>-<kind>
#   MODE benches: every bench executable, named <target>
copy_executables() {
  python3 -c '
import json, os, shutil, sys
dest, mode = sys.argv[1], sys.argv[2]
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    kind = m["target"]["kind"][0]
    if mode == "tests" and m.get("profile", {}).get("test"):
        name = m["target"]["name"] + "-" + kind
    elif mode == "benches" and kind == "bench":
        name = m["target"]["name"]
    else:
        continue
    shutil.copy2(m["executable"], os.path.join(dest, name))
    print("built", name)
' "$1" "$2"
}
