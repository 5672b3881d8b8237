#!/usr/bin/env bash
# Records the real sweep that bench/search.sh replays: runs bench/search-fixture.yaml (20
# configurations x 3 cycles of the embedded engine) and writes each run's figures to
# bench/data/embedded-sweep.csv. Run once, on a quiet machine; the CSV is committed.
#   bench/search-fixture.sh                 (LLEM_BIN=<a release llem> to skip the build)
set -euo pipefail
cd "$(dirname "$0")/.."
# LLEM_BIN: another release build of llem (the portable wheel's `llem/_bin/llem`).
[ -n "${LLEM_BIN:-}" ] || cargo build -q --release -p llem
out=bench/out/search-fixture
rm -rf "$out"
"${LLEM_BIN:-target/release/llem}" run bench/search-fixture.yaml -o "$out" --quiet
python3 - "$out" bench/data/embedded-sweep.csv <<'PY'
import csv, glob, json, os, sys
study = glob.glob(os.path.join(sys.argv[1], "*", "manifest.json"))[0]
root = os.path.dirname(study)
manifest = json.load(open(study))
fields = ["mj_per_tok_total", "itl_p90_ms", "avg_tokens_per_second"]
with open(sys.argv[2], "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["batch_size", "n_threads", "flash_attn", "cycle"] + fields)
    for e in manifest["experiments"]:
        if e["status"] != "completed":
            sys.exit(f"{e['cell_dir']} did not complete: record the sweep again")
        r = json.load(open(os.path.join(root, e["result_file"])))
        c = e["config"]["llamacpp"]
        lat = r["latency_stats"]
        w.writerow([c["batch_size"], c["n_threads"], c["flash_attn"], e["cycle"],
                    r["mj_per_tok_total"], lat["itl_p90_ms"], r["avg_tokens_per_second"]])
PY
echo "bench/data/embedded-sweep.csv: $(($(wc -l < bench/data/embedded-sweep.csv) - 1)) runs"
