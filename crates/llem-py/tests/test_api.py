"""The package's surface: what editors and `help()` see, and the names seed 002 and the
reference reader use."""

import inspect
import subprocess
import sys
from pathlib import Path

import llem
import llem.records as records
from conftest import REPO

SEED_LLM_METHODS = [
    "from_directory", "from_raw_results", "from_parquet", "task", "model", "gpu", "num_gpus",
    "batch", "precision", "architecture", "nickname", "stable", "unstable", "where",
    "group_by", "to_dataframe", "output_lengths", "inter_token_latencies", "timelines",
    "from_hf", "prefetch",
]
# The same filters under the names mlenergy-data 0.4.0 gives them.
REFERENCE_NAMES = ["model_id", "gpu_model", "max_num_seqs"]


def test_every_seed_method_is_there_and_documented():
    for name in SEED_LLM_METHODS + REFERENCE_NAMES + ["to_polars", "to_arrow"]:
        m = getattr(records.LLMRuns, name)
        assert inspect.getdoc(m), name
    for name in ["from_directory", "from_raw_results", "from_parquet", "task", "model", "gpu",
                 "num_gpus", "batch", "batch_size", "precision", "nickname", "where", "group_by",
                 "to_dataframe", "from_hf", "prefetch", "download_raw_files"]:
        assert inspect.getdoc(getattr(records.DiffusionRuns, name)), name
    assert isinstance(records.LLMRuns.data, property)


def test_help_answers_for_the_measuring_api():
    for f in (llem.run_experiment, llem.run_study, llem.plan, llem.ExperimentResult,
              llem.StudyResult, llem.ConfigError, llem.LlemError):
        assert len(inspect.getdoc(f) or "") > 40, f
    text = subprocess.run([sys.executable, "-c", "import llem; help(llem.run_experiment)"],
                          capture_output=True, text=True, env={"PAGER": "cat", "TERM": "dumb"}).stdout
    assert "KeyboardInterrupt" in text


def test_the_stubs_ship_and_match_the_result_schema():
    pkg = Path(llem.__file__).parent
    for f in ("py.typed", "_native.pyi", "_results.pyi", "_fields.py"):
        assert (pkg / f).is_file(), f
    check = subprocess.run([sys.executable, str(REPO / "scripts" / "python_stubs.py"), "--check",
                            str(pkg)])
    assert check.returncode == 0, "regenerate with python3 scripts/python_stubs.py"
    # Editors show a field's meaning on hover: an attribute docstring under each field.
    stub = (pkg / "_results.pyi").read_text()
    assert "    total_energy_j: float\n    \"\"\"Energy of the inference device" in stub


def test_help_lists_every_result_field_with_its_meaning():
    from llem._fields import EXPERIMENT_RESULT_FIELDS, STUDY_RESULT_FIELDS

    text = subprocess.run([sys.executable, "-c", "import llem; help(llem.ExperimentResult)"],
                          capture_output=True, text=True, env={"PAGER": "cat", "TERM": "dumb"}).stdout
    for name, typ, doc in EXPERIMENT_RESULT_FIELDS:
        assert f"\n |  {name}\n" in text, name
        assert inspect.getdoc(getattr(llem.ExperimentResult, name)).startswith(doc[:30]), name
    assert "Energy of the inference device over the window, J" in text
    for name, typ, doc in STUDY_RESULT_FIELDS:
        assert inspect.getdoc(getattr(llem.StudyResult, name)), name
    # A field a result lacks still names the nearest.
    r = llem.ExperimentResult({"total_energy_j": 1.0})
    assert r.total_energy_j == 1.0
    try:
        r.mj_per_tok_total
    except AttributeError as e:
        assert "mj_per_tok_total" in str(e)
    else:
        raise AssertionError("a missing field must raise AttributeError")


def test_a_result_reads_well_in_a_terminal_and_a_notebook():
    r = llem.ExperimentResult({
        "model_name": "SmolLM2", "engine": "llamacpp", "total_energy_j": 12.345678912,
        "mj_per_tok_total": 3.14159265358, "avg_tokens_per_second": 51.23456789,
        "energy_scope": "cpu", "energy_source": "counter", "total_inference_time_sec": 2.0004,
        "measurement_methodology": "total", "measurement_warnings": ["host busy: 12 %"],
        "latency_stats": {"ttft_median_ms": 20.123456, "ttft_p99_ms": 31.987654},
        "goodput": {"goodput_fraction": 0.65, "energy_per_good_request_j": 10.6612345},
    })
    assert repr(r) == ("ExperimentResult('SmolLM2' on llamacpp, 12.35 J, 3.142 mJ/tok, "
                       "51.23 tok/s, dir='None')")
    page = r._repr_html_()
    for want in ("<table>", "energy per output token", "3.142 mJ/tok", "CPU packages + DRAM",
                 "20.12 / 31.99 ms", "65 % of requests within the SLO, 10.66 J", "host busy: 12 %"):
        assert want in page, want
    assert "12.345678912" not in repr(r.latency_stats) and "20.12" in repr(r.latency_stats)


def test_python_m_llem_is_the_cli():
    out = subprocess.run([sys.executable, "-m", "llem", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and llem.__version__ in out.stdout, out
