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
]
# The same filters under the names mlenergy-data 0.4.0 gives them.
REFERENCE_NAMES = ["model_id", "gpu_model", "max_num_seqs"]


def test_every_seed_method_is_there_and_documented():
    for name in SEED_LLM_METHODS + REFERENCE_NAMES + ["to_polars", "to_arrow"]:
        m = getattr(records.LLMRuns, name)
        assert inspect.getdoc(m), name
    for name in ["from_directory", "from_raw_results", "from_parquet", "task", "model", "gpu",
                 "num_gpus", "batch", "batch_size", "precision", "nickname", "where", "group_by",
                 "to_dataframe"]:
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
    for f in ("py.typed", "_native.pyi", "_results.pyi"):
        assert (pkg / f).is_file(), f
    check = subprocess.run([sys.executable, str(REPO / "scripts" / "python_stubs.py"), "--check",
                            str(pkg / "_results.pyi")])
    assert check.returncode == 0, "regenerate with python3 scripts/python_stubs.py"


def test_python_m_llem_is_the_cli():
    out = subprocess.run([sys.executable, "-m", "llem", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and llem.__version__ in out.stdout, out
