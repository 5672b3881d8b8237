#!/usr/bin/env bash
# Records what the reference reader `mlenergy-data` 0.4.0 (PyPI) derives from the parity tree
# (written by `examples/mlenergy_tree.rs parity`), as the fixture the parity test compares
# llem's records against. Run it again after changing the tree generator.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${MLENERGY_VENV:-target/mlenergy-venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "mlenergy-data==0.4.0"
fi
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
cargo run -q -p llem-records --example mlenergy_tree -- parity "$tree"
"$venv/bin/python" scripts/mlenergy_parity.py "$tree" 2>/dev/null \
  > crates/llem-records/tests/fixtures/mlenergy_parity.json
echo "wrote crates/llem-records/tests/fixtures/mlenergy_parity.json"
