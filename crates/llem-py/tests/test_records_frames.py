"""The records as tables: pandas and polars round trips through Arrow and Parquet, llem's own
studies in the same API, diffusion runs both ways, and errors a reader can act on."""

import dataclasses
import json
import os
from pathlib import Path

import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import llem
import mlenergy.data.records as reference
from llem.records import DiffusionRuns, LLMRuns
from conftest import TINY
from test_records_parity import tree  # noqa: F401  (the fixture)


def same_frame(polars_frame, pandas_frame):
    """The same columns and values (a column with no value is Null in polars, None in pandas)."""
    from polars.testing import assert_frame_equal

    assert_frame_equal(polars_frame, pl.from_pandas(pandas_frame), check_dtypes=False)


def test_pandas_and_polars_frames_are_the_same_table(tree):
    runs = LLMRuns.from_raw_results(tree, stable_only=False)
    df = runs.to_dataframe()
    pf = runs.to_polars()
    assert isinstance(pf, pl.DataFrame) and pf.columns == list(df.columns)
    same_frame(pf, df)
    assert df["energy_per_token_joules"].tolist() == [r.energy_per_token_joules for r in runs]
    # Polars reads the same Arrow buffers: a column's values survive the trip exactly.
    assert pf["nickname"].to_list() == [r.nickname for r in runs]


def test_arrow_to_parquet_and_back_keeps_every_run(tree, tmp_path):
    runs = LLMRuns.from_raw_results(tree, stable_only=False)
    t = runs.to_arrow()
    assert {"results_path", "prometheus_path"} <= set(t.column_names)
    path = tmp_path / "runs" / "llm.parquet"
    path.parent.mkdir()
    pq.write_table(t, path)
    back = LLMRuns.from_parquet(path, stable_only=False)
    assert [dataclasses.astuple(r) for r in back] == [dataclasses.astuple(r) for r in runs]
    # The reference reader reads what llem wrote, as a compiled directory.
    ref = reference.LLMRuns.from_directory(tmp_path, stable_only=False)
    assert [r.energy_per_token_joules for r in ref] == [r.energy_per_token_joules for r in runs]
    # And a polars frame written by polars reads back in pandas identically.
    pf = runs.to_polars()
    pf.write_parquet(tmp_path / "frame.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "frame.parquet"), runs.to_dataframe())


def test_indexing_slicing_grouping_and_stability(tree):
    runs = LLMRuns.from_raw_results(tree, stable_only=False)
    assert runs[1:3][0] == runs[1] and len(runs[::-1]) == len(runs)
    assert runs[::-1][0] == runs[-1]
    g = runs.group_by("max_num_seqs")
    assert all(isinstance(k, int) for k in g) and sum(len(v) for v in g.values()) == len(runs)
    assert len(runs.stable()) + len(runs.unstable()) == len(runs)
    with pytest.raises(ValueError, match="did you mean"):
        runs.group_by("nickame")
    with pytest.raises(FileNotFoundError):
        LLMRuns.from_raw_results(tree / "missing")
    assert runs.issues and all(len(i) == 2 for i in runs.issues)
    assert runs.unstable_left_out == []


def test_where_takes_the_clis_conditions_and_functions(tree):
    runs = LLMRuns.from_raw_results(tree, stable_only=False)
    sizes = sorted({r.max_num_seqs for r in runs})
    mid = sizes[len(sizes) // 2]
    big = runs.where(f"max_num_seqs>={mid}")
    assert 0 < len(big) < len(runs)
    assert list(big) == list(runs.where(lambda r: r.max_num_seqs >= mid))
    both = runs.where(f"max_num_seqs>={mid}", lambda r: r.is_stable)
    assert list(both) == [r for r in big if r.is_stable]
    assert list(runs.where("is_stable=true")) == list(runs.stable())
    # One name per field, as in the records and JSON.
    with pytest.raises(ValueError, match="write `max_num_seqs`"):
        runs.where("batch>=2")
    with pytest.raises(ValueError, match="did you mean"):
        runs.where("batchh>=2")
    with pytest.raises(ValueError, match="OP"):
        runs.where("max_num_seqs")
    with pytest.raises(TypeError, match="not int"):
        runs.where(3)


def test_unstable_runs_left_out_are_counted_named_and_warned_about(tree):
    every = LLMRuns.from_raw_results(tree, stable_only=False)
    unstable = every.unstable()
    assert len(unstable) > 0
    with pytest.warns(UserWarning) as caught:
        stable = LLMRuns.from_raw_results(tree)
    [w] = [w for w in caught if "left out as unstable" in str(w.message)]
    assert str(w.message).startswith(f"{len(unstable)} of {len(every)} runs were left out")
    assert "stable_only=False" in str(w.message)
    assert w.filename == __file__, "the warning points at the caller's line"
    assert len(stable) == len(every) - len(unstable)
    assert stable.unstable_left_out == [(r.results_path, r.unstable_reason) for r in unstable]
    assert stable.batch(*{r.max_num_seqs for r in every}).unstable_left_out == stable.unstable_left_out


def test_a_llem_study_loads_into_the_same_api(sandbox):
    yaml = sandbox / "s.yaml"
    yaml.write_text(
        "name: rec\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\noutput_dir: results\n"
        "dataset: {source: synthetic, n_prompts: 2, synthetic: {input_tokens: 8, output_tokens: 4}}\n"
        "warmup: {enabled: false}\nbaseline: {enabled: false}\n"
        "sweep: {llamacpp.batch_size: [1, 2]}\n"
        "study_execution: {n_cycles: 1, experiment_gap_seconds: 0, cycle_gap_seconds: 0}\n"
    )
    study = llem.run_study(yaml, progress=False)
    runs = LLMRuns.from_directory(study.study_dir, stable_only=False)
    assert len(runs) == 2
    assert {r.engine for r in runs} == {"llamacpp"} and all(r.source == "llem" for r in runs)
    df = runs.to_dataframe()
    # llem's own fields and the swept path join the reference's columns.
    assert {"energy_source", "mj_per_tok_total", "llamacpp.batch_size"} <= set(df.columns)
    assert sorted(df["llamacpp.batch_size"].astype(int)) == [1, 2]
    e = [x.total_energy_j for x in study.experiments]
    assert sorted(runs.data.steady_state_energy_joules) == pytest.approx(sorted(e))
    same_frame(runs.to_polars(), df)
    lengths = runs.output_lengths()
    assert list(lengths.columns) == ["task", "model_id", "num_gpus", "max_num_seqs", "output_len"]
    assert (lengths["output_len"] == 4).all() and len(lengths) == 4
    # Each run's window in time bins, adding up to its window energy.
    bins = runs.time_bins()
    assert list(bins.columns[:5]) == ["start_s", "end_s", "energy_j", "idle_energy_j", "power_w"]
    sums = bins.groupby("results_path")["energy_j"].sum()
    assert len(sums) == 2
    for r in runs:
        assert sums[r.results_path] == pytest.approx(r.steady_state_energy_joules, rel=0.005)


def write_diffusion_tree(root: Path) -> None:
    run = root / ("diffusion/h100/current/run/diffusion/text-to-image/black-forest-labs/FLUX.1-dev/"
                  "batch-4+uly-2+ring-1+size-1024x768+steps-28+tc-True")
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps({
        "iteration_energy_measurements": [
            {"gpu_energy": {"0": 100.0, "1": 120.0}, "time": 2.0},
            {"gpu_energy": {"0": 110.0, "1": 130.0}, "time": 2.5},
        ],
        "num_frames": None,
        # Base GPU 0 out of order; GPU 1 misses a timestamp (forward-filled) and has one
        # the base lacks (never used).
        "timeline": {
            "power": {
                "device_instant": {"0": [[100.0, 300.0], [99.5, 290.0], [100.5, 310.0]],
                                   "1": [[99.5, 200.0], [100.25, 205.0], [100.5, 210.0]]},
                "device_average": {"0": [[99.5, 295.0], [100.0, 305.0]],
                                   "1": [[99.5, 195.0], [100.0, 207.0]]},
            },
            "temperature": {"0": [[99.5, 55.0], [100.0, 56.0]], "1": [[100.0, 50.0]]},
        },
    }))
    cfg = root / "configs/xdit/text-to-image/black-forest-labs/FLUX.1-dev"
    cfg.mkdir(parents=True)
    (cfg / "model_info.json").write_text(json.dumps({"total_parameters_billion": 12, "nickname": "FLUX.1 dev"}))


def test_diffusion_runs_both_ways(tmp_path):
    write_diffusion_tree(tmp_path)
    ours = DiffusionRuns.from_raw_results(tmp_path, n_workers=1)
    theirs = reference.DiffusionRuns.from_raw_results(tmp_path, n_workers=1)
    assert len(ours) == len(theirs) == 1
    a, b = ours[0], theirs[0]
    for f in dataclasses.fields(b):
        if not f.name.startswith("_"):
            assert getattr(a, f.name) == pytest.approx(getattr(b, f.name)), f.name
    assert a.is_text_to_image and not a.is_text_to_video
    assert list(ours.batch(4).task("text-to-image").data.num_gpus) == [2]
    pd.testing.assert_frame_equal(ours.to_dataframe(), theirs.to_dataframe(), check_dtype=False)
    for m in ("power.device_instant", "power.device_average", "temperature"):
        mine, ref = ours.timelines(metric=m), theirs.timelines(metric=m)
        assert len(mine) > 0 and list(mine.columns) == list(ref.columns), m
        pd.testing.assert_frame_equal(mine, ref, check_dtype=False, obj=m)
    pd.testing.assert_frame_equal(a.timelines(), b.timelines(), check_dtype=False)
