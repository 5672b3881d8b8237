"""Loads an ML.ENERGY raw tree with the reference reader (`mlenergy-data`) and prints what it
derived as JSON: every run (stable and unstable), per-request output lengths, inter-token
latency summaries and power timelines. `scripts/record-mlenergy-parity.sh` runs it on the
tree `examples/mlenergy_tree.rs parity` writes and stores the output as the test fixture."""

import json
import math
import sys
from pathlib import Path

import mlenergy.data
from mlenergy.data.records.runs import LLMRuns


def clean(v):
    if isinstance(v, float) and math.isnan(v):
        return None
    if hasattr(v, "item"):  # numpy scalars
        return clean(v.item())
    return v


def main() -> None:
    root = Path(sys.argv[1]).resolve()
    runs = LLMRuns.from_raw_results(root, stable_only=False, n_workers=1)
    rel = lambda p: str(Path(p).resolve().relative_to(root))
    out_runs = []
    for r in runs:
        d = {k: clean(v) for k, v in vars(r).items() if not k.startswith("_")}
        d["results_path"] = rel(r._results_path)
        d["prometheus_path"] = rel(r._prometheus_path)
        out_runs.append(d)
    lengths = runs.output_lengths(include_unsuccessful=True)
    itl = runs.inter_token_latencies()
    tl = runs.timelines(metric="power.device_instant")
    key = ["task", "model_id", "num_gpus", "max_num_seqs"]
    doc = {
        "mlenergy_data_version": getattr(mlenergy.data, "__version__", "0.4.0"),
        "runs": out_runs,
        "output_lengths_all": [
            [clean(x) for x in row] for row in lengths[key + ["output_len"]].itertuples(index=False)
        ],
        "output_lengths_ok": len(runs.output_lengths()),
        "itl": [
            {**{k: clean(g[k].iloc[0]) for k in key}, "n": len(g), "sum": float(g["itl_s"].sum()),
             "max": float(g["itl_s"].max()), "min": float(g["itl_s"].min())}
            for _, g in itl.groupby(key, sort=False)
        ],
        "timelines": [
            [clean(x) for x in row]
            for row in tl[key + ["timestamp", "relative_time_s", "value"]].itertuples(index=False)
        ],
    }
    json.dump(doc, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
