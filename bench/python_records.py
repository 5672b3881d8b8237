"""One side of the Python records benchmark, in a fresh process: load a raw ML.ENERGY tree with
`LLMRuns.from_raw_results` (llem's `llem.records` or the reference `mlenergy.data.records`),
filter and group it, and print `seconds peak_rss_mb runs groups`. The peak is the whole
process's (ru_maxrss), interpreter and imports included."""
import resource
import sys
import time


def main():
    which, tree = sys.argv[1], sys.argv[2]
    if which == "llem":
        from llem.records import LLMRuns
    else:
        from mlenergy.data.records.runs import LLMRuns
    t = time.perf_counter()
    runs = LLMRuns.from_raw_results(tree, stable_only=False)
    picked = runs.task("gpqa").max_num_seqs(min=16, max=512).stable()
    groups = runs.group_by("model_id", "num_gpus")
    e = sum(r.energy_per_token_joules for r in picked)
    assert e == e
    took = time.perf_counter() - t
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{took:.4f} {peak_mb:.0f} {len(runs)} {len(groups)}")


# The reference loads raw trees with a process pool, which re-imports this file.
if __name__ == "__main__":
    main()
