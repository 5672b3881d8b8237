#!/usr/bin/env bash
# The system tools llama.cpp's build needs (llem embeds it through llama-cpp-2): cmake,
# clang and libclang (bindgen). Installed with apt-get on Debian/Ubuntu when missing;
# elsewhere, a message says what to install. Idempotent and quiet when all is present.
set -euo pipefail

have_libclang() {
  ldconfig -p 2>/dev/null | grep -q 'libclang[-.0-9]*\.so' ||
    ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 ||
    [ -n "${LIBCLANG_PATH:-}" ]
}

missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v clang >/dev/null || missing+=(clang)
have_libclang || missing+=(libclang-dev)
[ ${#missing[@]} -eq 0 ] && exit 0

if command -v apt-get >/dev/null; then
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo=(sudo); else
      echo "build-deps: need ${missing[*]} (apt-get install ${missing[*]}), but not root and no sudo" >&2
      exit 1
    fi
  fi
  echo "build-deps: installing ${missing[*]} (llama.cpp's build needs them) ..."
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null ||
    { "${sudo[@]}" apt-get update -qq >/dev/null && "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null; }
  exit 0
fi
echo "build-deps: llama.cpp's build needs ${missing[*]}; install them with your package manager" >&2
echo "  (Fedora: dnf install cmake clang clang-devel; macOS: brew install cmake llvm)" >&2
exit 1
