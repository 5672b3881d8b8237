#!/usr/bin/env bash
# The serving client's cost: streamed tokens per client CPU-second and added latency at 1, 64
# and 1 024 concurrent streams, llem (crates/llem-engines/examples/client_bench.rs: the same
# engine code `llem run` uses) against guidellm (PyPI) in the same run, on the same
# zero-compute streaming server (examples/fake_openai_server.rs: first token after F ms, then
# one token every G ms).
#
# The server runs on CPU 1, the client under test on CPU 0 (taskset), so they do not take
# each other's time. CPU per token is marginal: each tool runs a full and a fifth-size
# workload and (cpu_full - cpu_small) / (tokens_full - tokens_small) is taken, so start-up
# (Python imports) is not charged to streaming. guidellm's CPU is its whole process tree
# (user + sys, /usr/bin/time); llem's is getrusage of its process over the run (µs
# resolution; /usr/bin/time's 10 ms ticks would be most of it).
# Added latency: TTFT minus F (both tools time from request start to first token), p50 and
# p99; for llem also every token's lateness against the server's schedule, next to the
# server's own send lateness (GET /stats), which is part of what any client sees.
#
#   bench/client.sh [TOKENS] [GAP_MS] [FIRST_MS]
set -euo pipefail
cd "$(dirname "$0")/.."
tokens=${1:-32}
gap=${2:-20}
first=${3:-20}
out=bench/out/client
venv=bench/out/guidellm-venv
mkdir -p "$out"
python=${PYTHON:-python3}

cargo build -q --release -p llem-engines --example client_bench --example fake_openai_server
if [ ! -x "$venv/bin/guidellm" ]; then
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q "guidellm==0.8.1" "gguf==0.19.0"
fi
# guidellm needs a tokenizer for its synthetic prompts: SmolLM2's, taken from the GGUF offline.
tok=$out/smollm2-tokenizer
if [ ! -f "$tok/tokenizer.json" ]; then
  scripts/fetch-assets.sh >/dev/null
  assets=${LLEM_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/llem/assets}
  HF_HUB_OFFLINE=1 "$venv/bin/python" - "$assets/smollm2" "$tok" <<'PY'
import sys
from transformers import AutoTokenizer
AutoTokenizer.from_pretrained(sys.argv[1], gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf").save_pretrained(sys.argv[2])
PY
fi

port=$((20000 + RANDOM % 20000))
taskset -c 1 target/release/examples/fake_openai_server --port "$port" --first-token-ms "$first" --gap-ms "$gap" >"$out/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
sleep 1
url=http://127.0.0.1:$port

# cpu_seconds LOGFILE: user + sys of the timed process tree.
cpu_seconds() { awk '/^cpu/ {print $2 + $3}' "$1"; }

run_llem() { # conc requests -> prints JSON line, CPU into $out/time.txt
  /usr/bin/time -f "cpu %U %S" -o "$out/time.txt" \
    taskset -c 0 target/release/examples/client_bench "$url" "$1" "$2" "$tokens" "$gap"
}

run_guidellm() { # conc requests
  rm -f "$out/g.json"
  HF_HUB_OFFLINE=1 /usr/bin/time -f "cpu %U %S" -o "$out/time.txt" \
    taskset -c 0 "$venv/bin/guidellm" run --backend "kind=openai_http,target=$url,model=fake-model" \
    --profile "kind=concurrent,streams=$1" --constraint "kind=max_requests,count=$2" \
    --data "kind=synthetic_text,prompt_tokens=16,output_tokens=$tokens" \
    --tokenizer "kind=huggingface_auto,model=$tok" --output "kind=json,path=$out/g.json" \
    --disable-console >/dev/null 2>"$out/guidellm.err"
  "$python" - "$out/g.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))["benchmarks"][0]
m = b["metrics"]
print(json.dumps({
    "tokens": m["output_token_count"]["successful"]["total_sum"],
    "failed": len(b["requests"]["errored"]) + len(b["requests"]["incomplete"]),
    "ttft_p50_ms": m["time_to_first_token_ms"]["successful"]["percentiles"]["p50"],
    "ttft_p99_ms": m["time_to_first_token_ms"]["successful"]["percentiles"]["p99"],
    "itl_p99_ms": m["inter_token_latency_ms"]["successful"]["percentiles"]["p99"],
}))
PY
}

: >"$out/results.jsonl"
for conc in 1 64 1024; do
  full=$((conc * 4 > 64 ? conc * 4 : 64))
  small=$((full / 5))
  for tool in llem guidellm; do
    s=$(run_"$tool" "$conc" "$small"); cs=$(cpu_seconds "$out/time.txt")
    curl -s "$url/stats" >/dev/null
    f=$(run_"$tool" "$conc" "$full"); cf=$(cpu_seconds "$out/time.txt")
    st=$(curl -s "$url/stats")
    "$python" - "$tool" "$conc" "$full" "$cs" "$cf" "$first" "$s" "$f" "$st" >>"$out/results.jsonl" <<'PY'
import json, sys
tool, conc, full, cs, cf, first = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
s, f, st = json.loads(sys.argv[7]), json.loads(sys.argv[8]), json.loads(sys.argv[9])
if tool == "llem":
    cs, cf = s["cpu_s"], f["cpu_s"]
row = {"tool": tool, "concurrency": conc, "requests": full, "failed": f.get("failed"),
       "tokens": f["tokens"], "cpu_s": cf,
       "tokens_per_cpu_s": (f["tokens"] - s["tokens"]) / max(cf - cs, 1e-9),
       "server_send_lateness_p99_us": st.get("send_lateness_p99_us")}
if tool == "llem":
    row.update(ttft_added_p50_ms=f["ttft_p50_ms"] - first, ttft_added_p99_ms=f["ttft_p99_ms"] - first,
               token_lateness_p50_us=f["lateness_p50_us"], token_lateness_p99_us=f["lateness_p99_us"])
else:
    row.update(ttft_added_p50_ms=f["ttft_p50_ms"] - first, ttft_added_p99_ms=f["ttft_p99_ms"] - first)
print(json.dumps(row))
PY
    tail -n 1 "$out/results.jsonl"
  done
done

"$python" - "$out/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {(r["tool"], r["concurrency"]): r for r in rows}
print("\n| streams | llem tok/CPU-s | guidellm tok/CPU-s | ratio | llem TTFT added p50/p99 ms | guidellm TTFT added p50/p99 ms | llem token lateness p50/p99 µs | server send lateness p99 µs |")
print("|---|---|---|---|---|---|---|---|")
for c in sorted({r["concurrency"] for r in rows}):
    l, g = by.get(("llem", c)), by.get(("guidellm", c))
    if not (l and g):
        continue
    print(f"| {c} | {l['tokens_per_cpu_s']:.0f} | {g['tokens_per_cpu_s']:.0f} | {l['tokens_per_cpu_s'] / g['tokens_per_cpu_s']:.1f}x | "
          f"{l['ttft_added_p50_ms']:.2f} / {l['ttft_added_p99_ms']:.2f} | {g['ttft_added_p50_ms']:.2f} / {g['ttft_added_p99_ms']:.2f} | "
          f"{l['token_lateness_p50_us']:.0f} / {l['token_lateness_p99_us']:.0f} | {l['server_send_lateness_p99_us'] or float('nan'):.0f} |")
PY
