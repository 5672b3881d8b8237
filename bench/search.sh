#!/usr/bin/env bash
# How often the search (`search:` in a study, crates/llem-search) finds the best feasible
# configuration, and how much of the grid it measures, against random search at the same
# budget and against the full grid, on synthetic deployment grids with known optima
# (crates/llem-search/src/sim.rs: engine x precision x batch size x threads x flag, an ITL
# limit, runs scattering by a CV of 2-10 %), and on a recorded real sweep of the embedded
# engine (bench/data/embedded-sweep.csv) replayed under 100 ITL limits. No test: the rates are
# statistics over many grids.
# Goal (issue 36): right >= 95 % of the time with <= 30 % of the grid.
#
#   bench/search.sh [SURFACES] [BUDGET_SHARE]      e.g. bench/search.sh 200 0.3
set -euo pipefail
cd "$(dirname "$0")/.."
surfaces=${1:-200}
budget=${2:-0.3}
out=bench/out/search
mkdir -p "$out"
cargo run -q --release -p llem-search --example search_bench -- \
  --trials "$surfaces" --budget "$budget" --verbose > "$out/trials.txt"
grep -v '^synthetic' "$out/trials.txt" | tee "$out/table.md"
# The recorded real sweep (bench/search-fixture.sh), replayed under 100 ITL limits: each run
# of a configuration is one of its three recorded runs, drawn at random.
cargo run -q --release -p llem-search --example search_bench -- \
  --replay bench/data/embedded-sweep.csv --trials 100 --budget "$budget" --verbose \
  > "$out/replay.txt"
grep -v '^recorded' "$out/replay.txt" | tee -a "$out/table.md"
echo "every surface: $out/trials.txt, $out/replay.txt" >&2
