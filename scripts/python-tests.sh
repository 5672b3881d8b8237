#!/usr/bin/env bash
# The Python package's test suite (crates/llem-py/tests): builds the wheel, installs it in a
# clean venv (target/pyenv-llem, made afresh each time; pip's cache keeps the downloads) with
# pytest, polars, tqdm, the reference reader `mlenergy-data` 0.4.0 and a Jupyter kernel
# (ipykernel, jupyter_client, ipywidgets: the notebook tests), writes the records
# parity tree, and runs pytest against the installed package. Needs the model assets
# (scripts/fetch-assets.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
wheel=$(scripts/build-wheel.sh --dev | tail -n 1)
venv=target/pyenv-llem
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "$wheel" \
  'pytest>=8' 'polars>=1' 'tqdm>=4.60' 'mlenergy-data==0.4.0' 'huggingface_hub>=0.20' \
  'ipykernel>=6' 'jupyter_client>=8' 'ipywidgets>=8'
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
cargo run --quiet -p llem-records --example mlenergy_tree -- parity "$tree/parity"
# From outside the checkout, so `import llem` can only be the installed wheel.
cd "$tree"
LLEM_PARITY_TREE="$tree/parity" "$OLDPWD/$venv/bin/python" -m pytest -q -p no:cacheprovider \
  "$OLDPWD/crates/llem-py/tests"
