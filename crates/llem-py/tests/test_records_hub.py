"""Seed 002's `from_hf()` and `prefetch()` against a local stand-in of the Hub's file API
(hub_standin.py), through the real `huggingface_hub`, in child processes so that `HF_ENDPOINT`
and `HF_HOME` are read as a user's shell would set them. The reference reader loads the same
repository through the same stand-in, for parity."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from hub_standin import COMMIT, Hub
from llem.records import LLMRuns
from test_records_parity import tree  # noqa: F401  (the fixture)


@pytest.fixture
def hub(tree, tmp_path):
    """A dataset repository `acme/bench` holding the parity tree's raw files under `raw/` and
    their compiled summary `runs/llm.parquet` (paths relative to the repository), served by
    the stand-in beside a gated `acme/gated`."""
    repo = tmp_path / "repo"
    shutil.copytree(tree, repo / "raw")
    t = LLMRuns.from_raw_results(tree, stable_only=False).to_arrow()
    for col in ("results_path", "prometheus_path"):
        prefix = str(tree) + "/"
        values = [(v[len(prefix):] and "raw/" + v[len(prefix):]) if v else v
                  for v in t.column(col).to_pylist()]
        t = t.set_column(t.schema.get_field_index(col), col, pa.array(values, pa.string()))
    (repo / "runs").mkdir()
    pq.write_table(t, repo / "runs" / "llm.parquet")
    h = Hub({"acme/bench": repo}, gated={"acme/gated"})
    yield h, repo, tmp_path
    h.close()


def child(h, home, script, offline=False, extra=None):
    """Runs `script` in a fresh interpreter pointed at the stand-in; its JSON output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_ENDPOINT=h.url, HF_HOME=str(home), HF_HUB_DISABLE_TELEMETRY="1",
               HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HUB_DISABLE_XET="1")
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    env.update(extra or {})
    prelude = textwrap.dedent(
        f"""
        import json, sys, urllib.request
        def stage(name):
            urllib.request.urlopen({h.url!r} + "/__stage/" + name).read()
        """
    )
    done = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(script)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


LOAD = """
import warnings
from llem.records import LLMRuns
import mlenergy.data.records as reference

runs = LLMRuns.from_hf("acme/bench", stable_only=False)
stage("loaded")
first = runs[0]
sub = runs.where(lambda r: r.model_id == first.model_id)
lengths = sub.output_lengths()
stage("lengths")
again = sub.output_lengths()
stage("again")
rest = runs.where(lambda r: r.model_id != first.model_id)
with warnings.catch_warnings(record=True) as warned:
    warnings.simplefilter("always")
    assert rest.prefetch() is rest
stage("prefetch")
ref = reference.LLMRuns.from_hf("acme/bench", stable_only=False)
stage("reference")
print(json.dumps({
    "n": len(runs),
    "sub": sorted(r.results_path for r in sub),
    "rest": sorted(r.results_path for r in rest),
    "rest_prom": sorted(r.prometheus_path for r in rest if r.prometheus_path),
    "lengths": lengths["output_len"].tolist(),
    "same_again": again["output_len"].tolist() == lengths["output_len"].tolist(),
    "ours": [r.energy_per_token_joules for r in runs],
    "theirs": [r.energy_per_token_joules for r in ref],
    "one_run": runs[1].output_lengths()[:5],
    "warned": [str(w.message) for w in warned],
}))
"""


def resolve(path):
    return f"/datasets/acme/bench/resolve/main/{path}"


def test_from_hf_downloads_the_summary_then_raw_files_when_needed(hub):
    h, repo, tmp = hub
    home = tmp / "hf"
    got = child(h, home, LOAD)
    s = h.stages()
    # Loading fetched the summary alone.
    assert {p for _, p in s["loaded"]} == {resolve("runs/llm.parquet")}, s["loaded"]
    snap = home / "hub" / "datasets--acme--bench" / "snapshots" / COMMIT
    assert (snap / "runs" / "llm.parquet").is_file()
    local = LLMRuns.from_parquet(repo / "runs" / "llm.parquet", base_dir=repo, stable_only=False)
    assert got["n"] == len(local) > 2
    rel = lambda p: Path(p).relative_to(snap).as_posix()
    # Output lengths fetched exactly the results files of the runs asked about (one HEAD
    # each; the cache skips the GET of a file whose content it already holds).
    fetched = {p for m, p in s["lengths"] if m == "HEAD"}
    assert fetched == {resolve(rel(p)) for p in got["sub"]}, (fetched, got["sub"])
    assert all(p.endswith("results.json") for p in fetched)
    mine = local.where(lambda r: r.model_id == local[0].model_id)
    assert got["lengths"] == mine.output_lengths()["output_len"].tolist()
    # Read again: from disk, nothing asked of the Hub.
    assert s["again"] == [] and got["same_again"]
    # prefetch() fetched every raw file of the other runs: results and Prometheus files; the
    # tree has runs without prometheus.json, which it names in a warning.
    asked = {p for m, p in s["prefetch"] if m == "HEAD"}
    assert asked == {resolve(rel(p)) for p in got["rest"] + got["rest_prom"]}
    there = [p for p in got["rest_prom"] if (repo / rel(p)).is_file()]
    absent = [rel(p) for p in got["rest_prom"] if not (repo / rel(p)).is_file()]
    downloaded = {p for m, p in s["prefetch"] if m == "GET"}
    assert downloaded <= {resolve(rel(p)) for p in got["rest"] + there}
    assert any(p.endswith("prometheus.json") for p in downloaded)
    assert all((snap / rel(p)).is_file() for p in got["rest"] + there)
    assert absent, "the parity tree has runs without prometheus.json"
    [warning] = got["warned"]
    assert warning.startswith(f"{len(absent)} raw file(s) the summary names are not in the repository: {absent[0]}")
    # A single run reads its raw file from the cache too (it was fetched above).
    assert s["rest"] == []
    assert got["one_run"] == local[1].output_lengths()[:5]
    # The reference reader, through the same stand-in and cache, sees the same runs.
    assert got["ours"] == got["theirs"]


def test_the_hub_cache_serves_a_second_session_offline(hub):
    h, repo, tmp = hub
    home = tmp / "hf"
    child(h, home, LOAD)
    h.log.clear()
    got = child(h, home, """
from llem.records import LLMRuns
runs = LLMRuns.from_hf("acme/bench", stable_only=False)
print(json.dumps({"n": len(runs), "lengths": len(runs.output_lengths())}))
""", offline=True)
    assert got["n"] > 2 and got["lengths"] > 0
    assert h.log == [], "offline, the cache answered everything"


def test_a_gated_dataset_says_what_to_do_and_a_missing_hub_client_how_to_get_it(hub):
    h, repo, tmp = hub
    got = child(h, tmp / "hf", """
from llem.records import LLMRuns
try:
    LLMRuns.from_hf("acme/gated")
except PermissionError as e:
    print(json.dumps({"error": str(e)}))
""")
    assert "acme/gated" in got["error"] and "HF_TOKEN" in got["error"], got
    assert f"{h.url}/datasets/acme/gated" in got["error"], got
    got = child(h, tmp / "hf", """
sys.modules["huggingface_hub"] = None  # as where it is not installed
from llem.records import DiffusionRuns
try:
    DiffusionRuns.from_hf()
except ImportError as e:
    print(json.dumps({"error": str(e)}))
""")
    assert "pip install 'llem[hub]'" in got["error"], got
