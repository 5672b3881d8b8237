"""Seed 002's examples, written once against the records API and run twice on the same raw
tree: with the reference reader (`mlenergy_data` 0.4.0, from PyPI) and with `llem.records`.
Every value they produce must be the same: a notebook moves over by changing its import."""

import dataclasses
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import llem.records
import mlenergy.data.records as reference

TREE = os.environ.get("LLEM_PARITY_TREE")


@pytest.fixture(scope="module")
def tree():
    if not TREE or not Path(TREE).is_dir():
        pytest.fail(
            "LLEM_PARITY_TREE must name the tree `cargo run -p llem-records --example "
            "mlenergy_tree -- parity DIR` writes (scripts/python-tests.sh does)"
        )
    return Path(TREE)


def public(r):
    return {f.name: getattr(r, f.name) for f in dataclasses.fields(r) if not f.name.startswith("_")
            and f.name in REFERENCE_FIELDS}


REFERENCE_FIELDS = {f.name for f in dataclasses.fields(reference.LLMRun)}


def notebook(records, root):
    """What a notebook does with the records API (seed 002's examples and the reference's
    methods), returning everything it computed."""
    LLMRuns = records.LLMRuns
    out = {}
    runs = LLMRuns.from_raw_results(root, stable_only=False, n_workers=1)
    out["len"] = len(runs)
    out["bool"] = bool(runs)
    out["repr"] = repr(runs)
    out["rows"] = [public(r) for r in runs]
    out["paths"] = [(Path(r._results_path).resolve().relative_to(root.resolve()).as_posix(),
                     Path(r._prometheus_path).resolve().relative_to(root.resolve()).as_posix()
                     if r._prometheus_path else "") for r in runs]
    out["first_last"] = (public(runs[0]), public(runs[-1]))
    stable = runs.stable()
    out["stable"] = [public(r) for r in stable]
    out["unstable"] = [(r.model_id, r.max_num_seqs, r.unstable_reason) for r in runs.unstable()]
    task = runs[0].task
    # for r in runs.task("gpqa"): print(r.energy_per_token_joules, r.nickname)
    out["task_loop"] = [(r.energy_per_token_joules, r.nickname) for r in runs.task(task)]
    # best = min(runs.stable().task("gpqa"), key=lambda r: r.energy_per_token_joules)
    best = min(stable.task(task), key=lambda r: r.energy_per_token_joules)
    out["best"] = (best.model_id, best.gpu_model, best.max_num_seqs, best.energy_per_token_joules)
    out["filters"] = {
        "model_id": len(runs.model_id(runs[0].model_id)),
        "gpu_model": [len(runs.gpu_model(g)) for g in ("H100", "B200")],
        "num_gpus": [len(runs.num_gpus(1)), len(runs.num_gpus(min=2)), len(runs.num_gpus(1, 2, 4))],
        "max_num_seqs": [len(runs.max_num_seqs(8, 64)), len(runs.max_num_seqs(min=16, max=128))],
        "precision": len(runs.precision("bfloat16", "fp8")),
        "architecture": [len(runs.architecture(a)) for a in ("Dense", "MoE")],
        "nickname": len(runs.nickname(runs[0].nickname)),
        "where": len(runs.where(lambda r: r.avg_power_watts > 500)),
        "chained": len(runs.stable().task(task).num_gpus(min=1).where(lambda r: r.max_num_seqs > 8)),
    }
    with pytest.raises(TypeError):
        runs.num_gpus()
    with pytest.raises(ValueError):
        runs.num_gpus(1, min=2)
    out["group_task"] = {k: len(v) for k, v in runs.group_by("task").items()}
    out["group_two"] = {k: [r.max_num_seqs for r in v] for k, v in runs.group_by("model_id", "num_gpus").items()}
    out["added"] = len(runs + runs.task(task))
    out["frame"] = runs.to_dataframe()
    out["lengths_ok"] = runs.output_lengths()
    out["lengths_all"] = runs.output_lengths(include_unsuccessful=True)
    ok = stable.where(lambda r: r.completed_requests)
    out["itl"] = ok.inter_token_latencies()
    for m in ("power.device_instant", "power.device_average", "temperature"):
        out[f"timelines {m}"] = stable.timelines(metric=m)
    one = stable[0]
    out["per_run"] = (one.output_lengths(), one.inter_token_latencies()[:50], one.timelines().head(20))
    strict = LLMRuns.from_raw_results(root, n_workers=1)
    out["stable_only"] = [public(r) for r in strict]
    with pytest.raises(ValueError):
        strict.unstable()
    return out


# Means and percentiles are sums in another order than NumPy's pairwise ones: the last bits
# may differ (the Rust parity test, tests/mlenergy_parity.rs, allows the same).
ULPS = 1e-12


def same(a, b, where=""):
    if isinstance(a, pd.DataFrame):
        assert list(a.columns) == list(b.columns), where
        pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True),
                                      check_dtype=False, rtol=ULPS, atol=0, obj=where)
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), where
    elif isinstance(a, float) and isinstance(b, float):
        assert a == b or abs(a - b) <= ULPS * max(abs(a), abs(b)), (where, a, b)
    else:
        assert type(a) is type(b) and a == b, (where, a, b)


def test_the_seed_examples_give_the_same_values_both_ways(tree):
    ours = notebook(llem.records, tree)
    theirs = notebook(reference, tree)
    assert ours["len"] > 10 and ours["unstable"], "the tree should hold stable and unstable runs"
    for k in ("frame", "lengths_ok", "lengths_all", "itl", "timelines temperature"):
        assert len(ours[k]) > 0, k
    assert len(ours["lengths_all"]) > len(ours["lengths_ok"])
    assert set(ours) == set(theirs)
    for k in theirs:
        same(ours[k], theirs[k], k)


def test_data_columns_are_numpy_arrays_of_the_runs_values(tree):
    runs = llem.records.LLMRuns.from_raw_results(tree, stable_only=False)
    e = runs.data.energy_per_token_joules
    assert isinstance(e, np.ndarray) and e.dtype == np.float64
    assert list(e) == [r.energy_per_token_joules for r in runs]
    g = runs.data.num_gpus
    assert g.dtype == np.int64 and list(g) == [r.num_gpus for r in runs]
    nick = runs.data.nickname
    assert list(nick) == [r.nickname for r in runs]
    b = runs.data.avg_batch_size
    assert [None if math.isnan(x) else x for x in b] == [r.avg_batch_size for r in runs]
    with pytest.raises(ValueError, match="did you mean"):
        runs.data.energy_per_tokn_joules


def test_mlenergy_runs_and_llem07_bundles_load_into_one_collection(tree, tmp_path):
    import shutil

    from conftest import REPO

    shutil.copytree(tree, tmp_path / "mlenergy")
    shutil.copytree(REPO / "crates/llem-records/tests/fixtures/llem07-study", tmp_path / "llem07")
    runs = llem.records.LLMRuns.from_directory(tmp_path, stable_only=False)
    ref = reference.LLMRuns.from_raw_results(tree, stable_only=False, n_workers=1)
    by_source = {k: len(v) for k, v in runs.group_by("source").items()}
    assert by_source == {"mlenergy-raw": len(ref), "llem07": 4}, by_source
    # The llem 0.7 cells carry llem's own fields; the frame has them beside the reference's.
    df = runs.to_dataframe()
    assert {"engine", "energy_source", "config_hash"} <= set(df.columns)
    assert set(df[df["source"] == "llem07"]["engine"]) == {"transformers"}
