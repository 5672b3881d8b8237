#!/usr/bin/env bash
# Peak memory of `llem run --dry-run --json` on a 100 000-cell, 3-cycle sweep, next to the
# Python llenergymeasure 0.7.0 planning the same sweep, measured in the same run.
# Goal (issue 22): llem under 150 MB peak resident memory.
#
#   bench/dryrun.sh [CELLS] [--no-peer]
#
# The peer's figure is the peak of `llenergymeasure.api.load_study` alone (what its
# `llem run --dry-run` does before estimating VRAM and printing), so it is a lower bound of
# its dry run. The Python peer is installed from PyPI into bench/.venv on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
cells=${1:-100000}
peer=${2:-}
mkdir -p bench/out
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build -q --release -p llem
a=$((cells < 100 ? cells : 100))
b=$((cells / a < 100 ? cells / a : 100)); b=$((b < 1 ? 1 : b))
c=$((cells / (a * b))); c=$((c < 1 ? 1 : c))
list() { seq -s ', ' "$2" $(($2 + $1 - 1)); }
# The sweep of bench/expand.sh (crates/llem-config/benches/expand.rs).
cat > "$work/sweep.yaml" <<EOF
name: bench-$cells
model: SmolLM2-135M-Instruct.Q4_1.gguf
engine: llamacpp
dataset: {source: sharegpt}
decoder: {preset: deterministic}
sweep:
  random_seed: [$(list "$a" 0)]
  dataset.n_prompts: [$(list "$b" 1)]
  llamacpp.batch_size: [$(list "$c" 1)]
study_execution: {n_cycles: 3, experiment_order: shuffle}
EOF

# Peak resident set (KiB) and wall seconds of a command, its stdout counted in bytes.
measure() {
  local out=$1; shift
  /usr/bin/time -f '%M %e' -o "$work/time" "$@" | wc -c > "$work/bytes"
  read -r kib secs < "$work/time"
  printf '%s %s %s\n' "$kib" "$secs" "$(cat "$work/bytes")" > "$out"
}

export LLEM_CONFIG_PATH=/nonexistent/llem-bench.yaml
{
  measure "$work/plain" target/release/llem run "$work/sweep.yaml" --dry-run --json
  measure "$work/full" target/release/llem run "$work/sweep.yaml" --dry-run --json --per-run-config
  measure "$work/text" target/release/llem run "$work/sweep.yaml" --dry-run
  for k in plain full text; do
    read -r kib secs bytes < "$work/$k"
    printf '%-6s peak %6.1f MB  %6.2f s  %7.1f MB written\n' "$k" \
      "$(echo "$kib / 1024" | bc -l)" "$secs" "$(echo "$bytes / 1048576" | bc -l)"
  done
} | tee bench/out/dryrun-llem.txt

llem_kib=$(read -r kib _ < "$work/plain"; echo "$kib")
if [ "$peer" != "--no-peer" ]; then
  if [ ! -x bench/.venv/bin/python ]; then
    python3 -m venv bench/.venv
    bench/.venv/bin/pip install -q 'llenergymeasure==0.7.0'
  fi
  echo "== llenergymeasure 0.7.0: load_study (Python) =="
  /usr/bin/time -f '%M %e' -o "$work/peer" bench/.venv/bin/python bench/expand_peer.py "$cells" 1 \
    | tee bench/out/dryrun-python.txt
  read -r peer_kib peer_s < "$work/peer"
  echo "peer   peak $(echo "$peer_kib / 1024" | bc -l | xargs printf '%.1f') MB  ${peer_s} s" \
    | tee -a bench/out/dryrun-python.txt
fi
python3 - "$llem_kib" "${peer_kib:-0}" "$cells" <<'PY'
import sys
llem, peer, cells = int(sys.argv[1]) / 1024, int(sys.argv[2]) / 1024, sys.argv[3]
line = f"\n{cells} cells, --dry-run --json: llem peak {llem:.1f} MB"
if peer:
    line += f", llenergymeasure load_study alone {peer:.1f} MB, ratio {peer / llem:.1f}x less"
print(line + f" ({'meets' if llem < 150 else 'misses'} the < 150 MB goal)")
PY
