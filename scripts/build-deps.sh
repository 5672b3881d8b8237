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

rc=0
"$(dirname "$0")/apt-install.sh" build-deps "llama.cpp's build needs them" "${missing[@]}" || rc=$?
[ "$rc" -eq 3 ] || exit "$rc"
echo "build-deps: llama.cpp's build needs ${missing[*]}; install them with your package manager" >&2
echo "  (Fedora: dnf install cmake clang clang-devel; macOS: brew install cmake llvm)" >&2
exit 1
