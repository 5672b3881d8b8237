"""The records benchmark's peer side: mlenergy-data (PyPI) loads, filters and groups the
same data; prints `seconds runs groups` (best of 3)."""
import sys
import time
from pathlib import Path

from mlenergy.data.records.runs import LLMRuns


def work(load):
    t = time.perf_counter()
    runs = load()
    picked = runs.task("gpqa").max_num_seqs(min=16, max=512).stable()
    groups = runs.group_by("model_id", "num_gpus")
    e = sum(r.energy_per_token_joules for r in picked)
    assert e == e
    return time.perf_counter() - t, len(runs), len(groups)


def main():
    mode = sys.argv[1]
    if mode == "raw":
        load = lambda: LLMRuns.from_raw_results(sys.argv[2], stable_only=False)
    else:
        load = lambda: LLMRuns.from_parquet(sys.argv[2], base_dir=Path(sys.argv[3]), stable_only=False)
    best = min((work(load) for _ in range(3)), key=lambda r: r[0])
    print(f"{best[0]:.4f} {best[1]} {best[2]}")


# The reference loads raw trees with a process pool, which re-imports this file.
if __name__ == "__main__":
    main()
