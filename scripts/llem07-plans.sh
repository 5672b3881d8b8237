#!/usr/bin/env bash
# Regenerates crates/llem-config/tests/fixtures/llem07-plans.json: what llenergymeasure 0.7.0
# itself makes of each YAML example in its sdist (configs/ and the docs' yaml blocks), for
# the test that llem plans every one it plans, into as many configurations. Needs the engines
# venv (scripts/engines-env.sh), the sdist from scripts/fetch-assets.sh, network to PyPI.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-$repo/target/pyenv-engines/bin/python}
sdist=${LLEM_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/llem/assets}/llem07/llenergymeasure-0.7.0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$repo/scripts/llem07-env.sh"
LLEM07="env PYTHONPATH=$work/shim:$work/pkgs HOME=$work $py $work/pkgs/bin/llem" \
  PYTHONPATH="$work/pkgs" "$py" "$repo/scripts/llem07_plans.py" "$sdist" \
  "$repo/crates/llem-config/tests/fixtures/llem07-plans.json"
