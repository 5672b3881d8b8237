#!/usr/bin/env python3
"""The Python peer of benches/expand.rs: llenergymeasure (PyPI) expanding the same sweep.

llenergymeasure 0.7 writes the same study in its own grammar (task:, serving_mode:,
transformers.llem_execution.batch_size); the sweep shape is identical: 100 random seeds x
100 prompt counts x 10 batch sizes = 100 000 configurations, 3 cycles, shuffled.
`llenergymeasure.api.load_study` is timed: parse, expansion, pydantic validation of every
configuration, hashing, dedup and cycle ordering, as `llem run --dry-run` does.

usage: expand_peer.py [CELLS] [REPEATS]
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path


def sweep_yaml(cells: int) -> str:
    a = min(cells, 100)
    b = max(1, min(cells // a, 100))
    c = max(1, cells // (a * b))
    lst = lambda n, start: ", ".join(str(v) for v in range(start, start + n))
    return (
        f"study_name: bench-{cells}\n"
        "serving_mode: offline\n"
        "engine: transformers\n"
        "task:\n  model: gpt2\n  dataset: {source: aienergyscore}\n"
        "sampling_preset: deterministic\n"
        "sweep:\n"
        f"  task.random_seed: [{lst(a, 0)}]\n"
        f"  task.dataset.n_prompts: [{lst(b, 1)}]\n"
        f"  transformers.llem_execution.batch_size: [{lst(c, 1)}]\n"
        "study_execution: {n_cycles: 3, experiment_order: shuffle}\n"
    )


def main() -> None:
    cells = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    from llenergymeasure import __version__
    from llenergymeasure.api import load_study

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "sweep.yaml"
        path.write_text(sweep_yaml(cells))
        times = []
        for i in range(repeats):
            t0 = time.perf_counter()
            study = load_study(path)
            wall = time.perf_counter() - t0
            times.append(wall)
            print(
                f"run {i + 1}: {len(study.experiments)} runs, design "
                f"{study.study_design_hash} in {wall:.3f} s",
                flush=True,
            )
    print(f"median of {repeats}: {statistics.median(times):.3f} s for {cells} cells "
          f"(llenergymeasure {__version__})")


if __name__ == "__main__":
    main()
