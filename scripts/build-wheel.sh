#!/usr/bin/env bash
# Builds the `llem` Python wheel (crates/llem-py: the extension module with the whole Rust
# core, the embedded llama.cpp included, plus the pure-Python layer) with maturin into
# target/wheels, adds the `llem` command-line binary to it (scripts/bundle-cli.py), and prints
# its path on the last line.
#   scripts/build-wheel.sh            release build (what `make python` installs)
#   scripts/build-wheel.sh --dev      the test profile's build: it reuses what `cargo test`
#                                     compiled (llama.cpp is optimised in both)
# maturin comes from PyPI into target/pyenv-build (ignored by git), kept between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release
if [ "${1:-}" = "--dev" ]; then
  profile=dev
fi
venv=target/pyenv-build
maturin_version=1.16.0
if ! "$venv/bin/maturin" --version 2>/dev/null | grep -q "$maturin_version"; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "maturin==$maturin_version"
fi
out=target/wheels/$profile
rm -rf "$out"
# `--compatibility linux`: the wheel links the system's C++ runtime (llama.cpp), which a
# manylinux tag would promise away; it installs on machines like the one that built it.
"$venv/bin/maturin" build --quiet --manifest-path crates/llem-py/Cargo.toml \
  --profile "$profile" --out "$out" --interpreter python3 --compatibility linux >&2
# The command line, built with the same profile, goes into the wheel beside the extension
# module (`llem/_bin/llem`): the `llem` script and a study's cells run it.
cargo build --quiet -p llem --profile "$profile" >&2
bin_dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
wheel=$(ls "$out"/llem-*.whl | tail -n 1)
python3 scripts/bundle-cli.py "$wheel" "target/$bin_dir/llem"
echo "$wheel"
