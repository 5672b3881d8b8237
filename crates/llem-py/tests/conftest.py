"""Shared set-up of the Python suite: the installed wheel is what is tested (never the source
tree), each measuring test gets a sandbox HOME with no user config and empty sensor roots, and
the real SmolLM2 from the asset cache (scripts/fetch-assets.sh)."""

import os
from pathlib import Path

import pytest

import llem

REPO = Path(__file__).resolve().parents[3]


def assets_dir() -> Path:
    d = os.environ.get("LLEM_ASSETS") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llem" / "assets"
    )
    return Path(d)


def pytest_sessionstart(session):
    # The package under test must be the installed wheel, not this checkout's python/ tree.
    src = REPO / "crates" / "llem-py" / "python"
    assert src not in Path(llem.__file__).resolve().parents, llem.__file__


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A HOME of its own, no user config, empty powercap and sysfs roots (the estimate
    sensor), the asset cache, and the results directory `tmp_path/results` as cwd."""
    assets = assets_dir()
    if not (assets / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file():
        pytest.fail(f"the asset cache {assets} lacks SmolLM2: run scripts/fetch-assets.sh")
    home = tmp_path / "home"
    for d in ("powercap", "sys"):
        (home / d).mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("LLEM_CONFIG_PATH", str(home / "no-user-config.yaml"))
    monkeypatch.setenv("LLEM_ASSETS", str(assets))
    monkeypatch.setenv("LLEM_POWERCAP_ROOT", str(home / "powercap"))
    monkeypatch.setenv("LLEM_SYSFS_ROOT", str(home / "sys"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


TINY = {
    "model": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "dataset": {
        "source": "synthetic",
        "n_prompts": 4,
        "synthetic": {"input_tokens": 16, "output_tokens": 8, "distribution": "fixed"},
    },
    "warmup": {"enabled": False},
    "baseline": {"enabled": False},
}
