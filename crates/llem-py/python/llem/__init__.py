"""llem: what LLM inference costs (energy, throughput, latency, FLOPs), measured by the Rust
core this package wraps.

    import llem
    result = llem.run_experiment("experiment.yaml")        # or a dict, or keyword arguments
    print(result.mj_per_tok_total, result.energy_uncertainty)
    study = llem.run_study("study.yaml")                    # cells in child processes
    plan = llem.plan("study.yaml")                          # the dry run
    runs = llem.records.LLMRuns.from_directory("results/")  # seed 002's records API
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

from . import _native, records
from ._native import ConfigError, LlemError
from ._progress import sink as _sink
from ._results import ExperimentResult, Section, StudyResult

__version__: str = _native.version()

__all__ = [
    "run_experiment",
    "run_study",
    "plan",
    "ExperimentResult",
    "StudyResult",
    "Section",
    "ConfigError",
    "LlemError",
    "records",
    "__version__",
]

Config = Union[str, "os.PathLike[str]", Dict[str, Any], None]
ProgressArg = Union[bool, Callable[[dict], None], None]


class _ConfigFile:
    """The configuration as `llem run` arguments naming a file the core can plan: a path as
    given, or a dict (and keyword arguments) written as JSON, which is YAML, to a temporary
    file removed afterwards, whose relative paths (`base:`, `_extends`) resolve against the
    working directory, as the caller wrote them."""

    def __init__(self, config: Config, fields: Dict[str, Any]) -> None:
        self._tmp: Optional[tempfile.TemporaryDirectory] = None
        if config is not None and not isinstance(config, dict):
            if fields:
                raise TypeError(
                    "give a configuration file or keyword arguments, not both "
                    "(pass a dict to combine them)"
                )
            self.args = [os.fspath(config)]
            return
        merged: Dict[str, Any] = dict(config or {})
        merged.update(fields)
        if not merged:
            raise TypeError("nothing to run: give a configuration file, a dict or keyword arguments")
        self._tmp = tempfile.TemporaryDirectory(prefix="llem-")
        name = str(merged.get("name") or "experiment")
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        path = Path(self._tmp.name) / f"{safe}.yaml"
        try:
            text = json.dumps(merged, indent=2, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"the configuration is not plain data: {e}") from None
        path.write_text(text + "\n")
        self._written = str(path)
        self.args = [self._written, "--config-dir", os.getcwd()]

    def __enter__(self) -> List[str]:
        return self.args

    def __exit__(self, _type: Any, exc: Any, _tb: Any) -> None:
        if self._tmp is None:
            return
        self._tmp.cleanup()
        if isinstance(exc, ConfigError):
            # The file it names is gone: name the dict (line and column are of its JSON).
            raise ConfigError(str(exc).replace(self._written, "<dict>")) from None


def _flags(**opts: Any) -> List[str]:
    """`llem run` flags for the options that are set."""
    out: List[str] = []
    for name, value in opts.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            out.append(flag)
        else:
            out += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    return out


def _warn(lines: List[str]) -> None:
    """Configuration warnings as Python warnings, attributed to the code that called the API
    function (this is called from it, or from the core once planned, before anything runs)."""
    for w in lines:
        warnings.warn(w, stacklevel=3)


def run_experiment(
    config: Config = None,
    /,
    *,
    progress: ProgressArg = None,
    lock: bool = True,
    sampling_interval: Optional[str] = None,
    verbose: int = 0,
    **fields: Any,
) -> ExperimentResult:
    """Measures one experiment in this process and returns its `ExperimentResult`.

    `config` is an experiment YAML path, or a dict mirroring the YAML; keyword arguments set
    top-level fields (`run_experiment(model="...", engine="llamacpp", dataset={"n_prompts":
    10})`). `progress`: bars (default), `False` for none, or a function given each event.
    `lock=False` takes no device locks. The GIL is released while it runs; Ctrl-C stops the
    engine at its next step, removes the run's partial files and raises `KeyboardInterrupt`.
    Invalid configurations raise `ConfigError` (with file:line:col), failures `LlemError`."""
    bar = _sink(progress)
    try:
        with _ConfigFile(config, fields) as config_args:
            args = config_args + _flags(no_lock=not lock, interval=sampling_interval)
            args += ["-v"] * int(verbose)
            text, cell_dir = _native.measure(args, bar, _warn)
    finally:
        getattr(bar, "close", lambda: None)()
    return ExperimentResult(json.loads(text), Path(cell_dir).absolute())


def run_study(
    config: Config,
    /,
    *,
    progress: ProgressArg = None,
    cycles: Optional[int] = None,
    order: Optional[str] = None,
    output_dir: Optional[str] = None,
    resume: bool = False,
    resume_dir: "str | os.PathLike[str] | None" = None,
    fail_fast: bool = False,
    circuit_breaker: bool = True,
    timeout_hours: Optional[float] = None,
    gaps: bool = True,
    lock: bool = True,
    sampling_interval: Optional[str] = None,
) -> StudyResult:
    """Runs (or resumes) a study, each cell in its own child process, and returns its
    `StudyResult` (statistics across cycles with confidence intervals, the manifest, every
    completed experiment). A study that stops early (circuit breaker, wall-clock limit) is
    returned too: check `.status`. Ctrl-C terminates the running cell, checkpoints the
    manifest (resume with `resume_dir=`) and raises `KeyboardInterrupt`."""
    bar = _sink(progress)
    try:
        with _ConfigFile(config, {}) as config_args:
            args = config_args + _flags(
                cycles=cycles,
                order=order,
                output=output_dir,
                resume=resume,
                resume_dir=resume_dir,
                fail_fast=fail_fast,
                no_circuit_breaker=not circuit_breaker,
                timeout=timeout_hours,
                no_gaps=not gaps,
                no_lock=not lock,
                interval=sampling_interval,
            )
            # Each cell runs this package's CLI in a fresh interpreter (`python -m llem
            # __cell SPEC`), so a crashed engine never takes the notebook down.
            study_dir, _status = _native.study(
                args, sys.executable, ["-m", "llem", "__cell"], bar, _warn
            )
    finally:
        getattr(bar, "close", lambda: None)()
    return StudyResult(Path(study_dir).absolute())


def plan(
    config: Config = None,
    /,
    *,
    cycles: Optional[int] = None,
    order: Optional[str] = None,
    per_run_config: bool = False,
    **fields: Any,
) -> Dict[str, Any]:
    """The dry run: what `llem run --dry-run --json` prints, as a dict (configurations,
    runs in execution order, memory estimates, warnings). Runs nothing."""
    with _ConfigFile(config, fields) as config_args:
        text, plan_warnings = _native.plan(config_args + _flags(cycles=cycles, order=order), per_run_config)
    _warn(plan_warnings)
    return json.loads(text)
