#!/usr/bin/env bash
# Decode throughput of SmolLM2-135M-Instruct Q4_1 on the CPU: `llem run` (the embedded engine
# with the whole harness: telemetry sampler, per-token records, progress) against llama.cpp
# driven directly through the same bindings and the same compiled llama.cpp
# (crates/llem-engines/examples/raw_decode.rs, the same release build of llama.cpp), at equal
# settings, alternating in the same run.
# Goals (issue 4): llem / raw >= 0.97 at batch 1 and 8; batch 8 >= 1.3x batch 1.
#
#   bench/decode.sh [PP] [TG] [REPEATS]
#   LLEM_BIN=target/portable/release/llem bench/decode.sh   # another llem build (the portable
#                                     wheel's, scripts/build-wheel.sh --portable) against the
#                                     same peer: does it keep the native speed?
set -euo pipefail
cd "$(dirname "$0")/.."
pp=${1:-128}
tg=${2:-128}
repeats=${3:-3}
threads=${THREADS:-$(nproc)}
out=bench/out/decode
mkdir -p "$out"
scripts/build-deps.sh
scripts/fetch-assets.sh >/dev/null
scripts/python-env.sh >/dev/null
[ -n "${LLEM_BIN:-}" ] || cargo build -q --release -p llem
cargo build -q --release -p llem-engines --example raw_decode
assets=${LLEM_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/llem/assets}
model="$assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
py=target/pyenv/bin/python

: >"$out/runs.jsonl"
for rep in $(seq 1 "$repeats"); do
  for npl in 1 8; do
    target/release/examples/raw_decode "$model" "$pp" "$tg" "$npl" "$threads" 1 >>"$out/runs.jsonl"
    cat >"$out/llem-b$npl.yaml" <<YAML
name: decode-b$npl
model: $model
dataset: {source: synthetic, n_prompts: $npl, synthetic: {input_tokens: $pp, output_tokens: $tg}}
max_input_tokens: $pp
decoder: {preset: deterministic}
llamacpp: {batch_size: $npl, n_threads: $threads}
warmup: {n_warmup: 1, thermal_floor_seconds: 0}
baseline: {enabled: false}
YAML
    rm -rf "$out/results-b$npl"
    # 100 Hz, as bench/README.md states: the sampler's cost is part of what is timed.
    "${LLEM_BIN:-target/release/llem}" run "$out/llem-b$npl.yaml" -o "$out/results-b$npl" --interval 10ms --quiet 2>/dev/null
    "$py" - "$out/results-b$npl" "$npl" "$pp" "$tg" >>"$out/runs.jsonl" <<'PY'
import glob, json, sys
import pyarrow.parquet as pq
d, npl, pp, tg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
cell = glob.glob(f"{d}/*/*/")[0]
r = json.load(open(cell + "result.json"))
t = pq.read_table(cell + "requests.parquet").to_pylist()
first = min(q["first_token_s"] for q in t)
last = max(q["token_times_s"][-1] for q in t)
decoded = sum(q["output_tokens"] - 1 for q in t)
g = r["extended_metrics"]["gpu_utilisation"]
print(json.dumps({"peer": "llem", "npl": npl, "pp": pp, "tg": tg,
                  "decode_tps": decoded / (last - first),
                  "total_tps": r["avg_total_tokens_per_second"],
                  "window_s": r["total_inference_time_sec"],
                  "process_cpu_pct": g["process_cpu_pct"], "sampler_cpu_s": g["sampler_cpu_s"],
                  "experiment_s": r["duration_sec"],
                  "sampling_interval_ms": r["environment"]["sampling_interval_ms"]}))
PY
  done
done

"$py" - "$out/runs.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
med = lambda peer, npl, k: statistics.median(r[k] for r in runs if r["peer"] == peer and r["npl"] == npl)
print(f"{'batch':>5} {'raw dec tok/s':>14} {'llem dec tok/s':>15} {'ratio':>6} {'raw tot tok/s':>14} {'llem tot tok/s':>15} {'ratio':>6}")
for npl in (1, 8):
    rd, ld = med("raw", npl, "decode_tps"), med("llem", npl, "decode_tps")
    rt, lt = med("raw", npl, "total_tps"), med("llem", npl, "total_tps")
    print(f"{npl:>5} {rd:>14.1f} {ld:>15.1f} {ld/rd:>6.3f} {rt:>14.1f} {lt:>15.1f} {lt/rt:>6.3f}")
print(f"batch 8 / batch 1 decode: llem {med('llem', 8, 'decode_tps') / med('llem', 1, 'decode_tps'):.2f}x, "
      f"raw {med('raw', 8, 'decode_tps') / med('raw', 1, 'decode_tps'):.2f}x")
for npl in (1, 8):
    s = [r for r in runs if r["peer"] == "llem" and r["npl"] == npl]
    print(f"llem batch {npl}: sampler thread {statistics.median(r['sampler_cpu_s'] for r in s):.3f} s CPU over "
          f"{statistics.median(r['experiment_s'] for r in s):.1f} s; process {statistics.median(r['process_cpu_pct'] for r in s):.0f} % of a core in the window; "
          f"sampled every {statistics.median(r['sampling_interval_ms'] for r in s):.1f} ms")
PY
