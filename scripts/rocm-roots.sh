# Sourced by install-toolchain.sh and in-rocm-root.sh: where the ROCm roots
# live and how one is made. A root is a Debian sid userland (mmdebstrap,
# the machine's own mirror) holding ROCm's HIP packages from Debian:
#
#   6.4  suite sid:                hipcc 7.0.2 (clang 21), libamdhip64-dev 6.4.3
#                                  (libamdhip64.so.6), rocm-device-libs-21
#   7.2  sid + experimental,       hipcc 7.2.4 (clang 22), libamdhip64-dev 7.2.4
#        experimental pinned up:   (libamdhip64.so.7), rocm-device-libs-22
#
# plus gcc/g++, make, cmake and pkgconf (cargo's linker, the C libraries some
# crates build from source, the CMake build of the kernel layer and its
# consumers) and binutils.
# Roots are kept outside the clone, under $HIPKERN_ROOTS_DIR or
# ${XDG_CACHE_HOME:-~/.cache}/hipkern/roots, so every clone and CI run on
# the machine reuses them; a root whose recipe changed is made again.

# Bump when a root's package list or setup changes (the stamp records it).
ROCM_ROOT_RECIPE=3

rocm_root_dir() {
  echo "${HIPKERN_ROOTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hipkern/roots}/rocm-$1"
}

# make_rocm_root VERSION MIRROR_URI: builds the root next to its final place
# and renames it there only once hipcc inside reports the expected HIP
# version (a half-made root is never left where the stamp says ready).
make_rocm_root() {
  local version="$1" mirror="$2" dir tmp suites devlibs stamp
  dir="$(rocm_root_dir "$version")"
  stamp="$dir/.hipkern-root-ready"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "recipe $ROCM_ROOT_RECIPE" ]; then
    echo "rocm $version: present ($dir)"
    return 0
  fi
  echo "rocm $version: building the root $dir (mmdebstrap, suite sid)"
  mkdir -p "$(dirname "$dir")"
  tmp="$dir.partial"
  local sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  $sudo rm -rf "$tmp"
  local hook=()
  suites=("deb $mirror sid main")
  case "$version" in
    6.4) devlibs=rocm-device-libs-21 ;;
    7.2)
      devlibs=rocm-device-libs-22
      suites+=("deb $mirror experimental main")
      # experimental's packages are never chosen unless pinned up to sid's priority.
      hook=(--setup-hook='mkdir -p "$1/etc/apt/preferences.d"; printf "Package: *\nPin: release a=experimental\nPin-Priority: 500\n" > "$1/etc/apt/preferences.d/experimental"')
      ;;
  esac
  # Check-Valid-Until: the mirror may serve a snapshot whose sid Release
  # file has expired, which apt otherwise refuses.
  $sudo mmdebstrap --quiet --variant=apt --aptopt='Acquire::Check-Valid-Until "false"' "${hook[@]}" \
    --include="hipcc,libamdhip64-dev,$devlibs,binutils,gcc,g++,make,cmake,pkgconf,file,ca-certificates" \
    sid "$tmp" "${suites[@]}"
  local want got
  want="$version"  # hipcc reports HIP major.minor = the ROCm version
  got="$($sudo unshare --mount --propagation private /bin/bash -c \
    'mount -t proc proc "$1/proc" && chroot "$1" hipcc --version' _ "$tmp" | sed -nE 's/^HIP version: ([0-9]+\.[0-9]+).*/\1/p')"
  if [ "$got" != "$want" ]; then
    echo "install-toolchain: the ROCm $version root's hipcc reports HIP '${got:-nothing}', expected $want" >&2
    return 1
  fi
  echo "recipe $ROCM_ROOT_RECIPE" | $sudo tee "$tmp/.hipkern-root-ready" >/dev/null
  $sudo rm -rf "$dir"
  $sudo mv "$tmp" "$dir"
  echo "rocm $version: ready ($(du -sh "$dir" | cut -f1), HIP $got)"
}
