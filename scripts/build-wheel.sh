#!/usr/bin/env bash
# Builds the `llem` Python wheel (crates/llem-py: the extension module with the whole Rust
# core, the embedded llama.cpp included, plus the pure-Python layer) with maturin into
# target/wheels, adds the `llem` command-line binary to it (scripts/bundle-cli.py), and prints
# its path on the last line.
#   scripts/build-wheel.sh             release build for this machine's kind of CPU (AVX2 and
#                                      up: the workspace's x86-64-v3 floor; what `make python`
#                                      installs)
#   scripts/build-wheel.sh --dev       the test profile's build: it reuses what `cargo test`
#                                      compiled (llama.cpp is optimised in both)
#   scripts/build-wheel.sh --portable  the wheel to hand out (manylinux_2_28): built with zig
#                                      against glibc 2.28 with its C++ runtime linked in (no
#                                      libstdc++, no libgomp needed), Rust at the x86-64
#                                      baseline, llama.cpp's CPU kernels as modules for every
#                                      level from SSE4.2 to AVX-512, the best picked when the
#                                      engine starts; built in target/portable, libraries in
#                                      the wheel's llem/_libs
# maturin (and for --portable, zig from PyPI's ziglang) comes into target/pyenv-build (ignored
# by git), kept between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release
portable=0
case "${1:-}" in
  --dev) profile=dev ;;
  --portable) portable=1 ;;
  "") ;;
  *) echo "usage: scripts/build-wheel.sh [--dev|--portable]" >&2; exit 2 ;;
esac
venv=target/pyenv-build
maturin_version=1.16.0
zig_version=0.17.1
if ! "$venv/bin/maturin" --version 2>/dev/null | grep -q "$maturin_version"; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "maturin==$maturin_version"
fi
if [ "$portable" = 1 ] && ! "$venv/bin/python" -m ziglang version 2>/dev/null | grep -q "$zig_version"; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check "ziglang==$zig_version"
fi
features=()
out=target/wheels/$profile
target_dir=target
if [ "$portable" = 1 ]; then
  features=(--no-default-features --features portable-cpu)
  out=target/wheels/portable
  target_dir=target/portable
  export CARGO_TARGET_DIR=$target_dir
  # zig's clang reads the host's headers for bindgen; the extension module finds llama.cpp in
  # llem/_libs, the CLI (llem/_bin/llem) in ../_libs. Rust stays at the x86-64 baseline: the
  # target CPU is handed to zig for the C++ too, and llama.cpp's AVX-512 kernels compiled
  # for an x86-64-v2 base made zig's clang grow past 20 GB (the kernels set their own flags).
  inc="-I$(clang -print-resource-dir)/include -I/usr/include/x86_64-linux-gnu -I/usr/include"
  export BINDGEN_EXTRA_CLANG_ARGS="$inc" BINDGEN_EXTRA_CLANG_ARGS_x86_64_unknown_linux_gnu="$inc"
  export RUSTFLAGS='-C target-cpu=x86-64 -C link-arg=-Wl,-rpath,$ORIGIN/_libs:$ORIGIN/../_libs'
  export PATH="$PWD/$venv/bin:$PATH"
fi
rm -rf "$out"
if [ "$portable" = 1 ]; then
  zig=(--zig --target x86_64-unknown-linux-gnu --compatibility manylinux_2_28 --auditwheel skip)
  "$venv/bin/maturin" build --quiet --manifest-path crates/llem-py/Cargo.toml --release \
    --out "$out" --interpreter python3 "${zig[@]}" "${features[@]}" >&2
  # The command line through maturin too: the same zig wrappers, so llama.cpp is built once.
  bin_wheels=$(mktemp -d)
  "$venv/bin/maturin" build --quiet --manifest-path crates/llem/Cargo.toml -b bin --release \
    --out "$bin_wheels" "${zig[@]}" "${features[@]}" >&2
  bin_dir=$(mktemp -d)
  python3 -m zipfile -e "$(ls "$bin_wheels"/*.whl | head -n 1)" "$bin_dir"
  cli=$(ls "$bin_dir"/*.data/scripts/llem)
else
  # `--compatibility linux`: the wheel links the system's C++ runtime (llama.cpp), which a
  # manylinux tag would promise away; it installs on machines like the one that built it.
  "$venv/bin/maturin" build --quiet --manifest-path crates/llem-py/Cargo.toml \
    --profile "$profile" --out "$out" --interpreter python3 --compatibility linux >&2
  # The command line, built with the same profile, goes into the wheel beside the extension
  # module (`llem/_bin/llem`): the `llem` script and a study's cells run it.
  cargo build --quiet -p llem --profile "$profile" >&2
  cli=$target_dir/$([ "$profile" = dev ] && echo debug || echo "$profile")/llem
fi
wheel=$(ls "$out"/llem-*.whl | tail -n 1)
libs=()
if [ "$portable" = 1 ]; then
  # llama.cpp's shared libraries (under their sonames, as the binaries ask for them) and its
  # CPU kernel modules, each finding the others beside itself.
  build_out=$(ls -td "$target_dir"/x86_64-unknown-linux-gnu/release/build/llama-cpp-sys-2-*/out | head -n 1)
  stage=$(mktemp -d)
  trap 'rm -rf "$stage" "$bin_wheels" "$bin_dir"' EXIT
  cp -L "$build_out"/lib/libllama.so.0 "$build_out"/lib/libggml.so.0 \
    "$build_out"/lib/libggml-base.so.0 "$build_out"/backends/libggml-cpu-*.so "$stage"/
  for lib in "$stage"/*.so*; do
    patchelf --set-rpath '$ORIGIN' "$lib"
    # zig keeps debug info; the wheel does not need it.
    strip --strip-debug "$lib"
  done
  libs=("$stage"/*.so*)
fi
python3 scripts/bundle-cli.py "$wheel" "$cli" "${libs[@]}"
echo "$wheel"
