#!/usr/bin/env bash
# Records benchmark: load + filter + group N ML.ENERGY runs (default 10 000), from the raw
# tree and from the compiled parquet, with llem and with the PyPI package mlenergy-data
# 0.4.0 on the same files in the same run. Prints the times and the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-10000}"
out=bench/out/records
venv="${MLENERGY_VENV:-bench/out/mlenergy-venv}"
mkdir -p "$out"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "mlenergy-data==0.4.0"
fi
cargo build -q --release -p llem-records --example mlenergy_tree --example records_bench
bin=target/release/examples
tree="$out/tree-$n"
if [ ! -d "$tree/llm" ]; then
  echo "writing $n runs to $tree ..."
  "$bin/mlenergy_tree" bench "$tree" "$n"
fi
mkdir -p "$tree/runs"
"$bin/records_bench" compile "$tree" "$tree/runs/llm.parquet"
echo "nproc=$(nproc)  runs=$n  (seconds runs groups, best of 3)"
for mode in raw parquet; do
  if [ "$mode" = raw ]; then args=("$tree"); else args=("$tree/runs/llm.parquet" "$tree"); fi
  ours=$("$bin/records_bench" "$mode" "${args[@]}")
  peer=$("$venv/bin/python" bench/records_peer.py "$mode" "${args[@]}" 2>/dev/null)
  ratio=$(python3 -c "print(f'{float(\"${peer%% *}\") / float(\"${ours%% *}\"):.1f}')")
  echo "$mode: llem $ours | mlenergy-data $peer | llem is ${ratio}x faster"
done
