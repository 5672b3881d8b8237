#!/usr/bin/env bash
# Expanding and hashing a 100 000-cell sweep: llem vs the Python llenergymeasure package,
# measured in the same run on the same machine. Goal (issue 2): llem < 1 s.
#
#   bench/expand.sh [CELLS] [REPEATS]
#
# The Python peer is installed from PyPI into bench/.venv on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
cells=${1:-100000}
repeats=${2:-5}
mkdir -p bench/out

echo "== llem (cargo bench, release) =="
cargo bench -q -p llem-config --bench expand -- "$cells" "$repeats" | tee bench/out/expand-llem.txt

if [ ! -x bench/.venv/bin/python ]; then
  python3 -m venv bench/.venv
  bench/.venv/bin/pip install -q 'llenergymeasure==0.7.0'
fi
echo "== llenergymeasure (Python) =="
bench/.venv/bin/python bench/expand_peer.py "$cells" "$repeats" | tee bench/out/expand-python.txt

llem=$(awk '/^median/ {print $4}' bench/out/expand-llem.txt)
py=$(awk '/^median/ {print $4}' bench/out/expand-python.txt)
python3 - "$llem" "$py" "$cells" <<'PY'
import sys
llem, py, cells = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
print(f"\n{cells} cells: llem {llem:.3f} s, llenergymeasure {py:.3f} s, ratio {py / llem:.0f}x faster"
      f" ({'meets' if llem < 1.0 else 'misses'} the < 1 s goal)")
PY
