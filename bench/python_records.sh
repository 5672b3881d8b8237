#!/usr/bin/env bash
# Python records benchmark: `LLMRuns.from_raw_results` on N raw ML.ENERGY runs (default
# 10 000), then a filter and a grouping, with llem's wheel (`llem.records`, release build) and
# with the PyPI package mlenergy-data 0.4.0, on the same trees in the same run, each in a fresh
# process (best of 3). Two tree shapes: llem's bench tree (many runs per model) and a sparse
# one (about one run per model, two GPU families). Prints times, peak memory and the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-10000}"
out=bench/out/python-records
venv=bench/out/python-venv
mkdir -p "$out"
wheel=$(scripts/build-wheel.sh | tail -n 1)
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "mlenergy-data==0.4.0"
fi
"$venv/bin/pip" install -q --force-reinstall --no-deps "$wheel"
"$venv/bin/pip" install -q "$wheel"
cargo build -q --release -p llem-records --example mlenergy_tree
for shape in bench sparse; do
  tree="$out/$shape-$n"
  if [ ! -d "$tree/llm" ]; then
    echo "writing $n runs ($shape shape) to $tree ..."
    target/release/examples/mlenergy_tree "$shape" "$tree" "$n"
  fi
  best() {
    for _ in 1 2 3; do "$venv/bin/python" bench/python_records.py "$1" "$tree"; done | sort -n | head -n 1
  }
  ours=$(best llem)
  peer=$(best mlenergy)
  read -r t_ours mb_ours runs _ <<< "$ours"
  read -r t_peer mb_peer runs_peer _ <<< "$peer"
  [ "$runs" = "$runs_peer" ] || { echo "run counts differ: $runs vs $runs_peer" >&2; exit 1; }
  ratio=$(python3 -c "print(f'{$t_peer / $t_ours:.1f}')")
  echo "$shape ($runs runs): llem ${t_ours} s, ${mb_ours} MB | mlenergy-data ${t_peer} s, ${mb_peer} MB | llem is ${ratio}x faster"
done
