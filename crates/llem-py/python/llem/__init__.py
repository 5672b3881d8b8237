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
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

# A portable wheel carries llama.cpp's CPU kernels as modules in `_libs`; the core loads the
# best this CPU runs from there (child processes of a study inherit the setting).
_LIBS = Path(__file__).resolve().parent / "_libs"
if _LIBS.is_dir():
    os.environ.setdefault("LLEM_GGML_BACKENDS", str(_LIBS))

from . import _native, records  # noqa: E402  (after the setting above)
from ._native import ConfigError, LlemError
from ._progress import sink as _sink
from ._results import ExperimentResult, Section, StudyResult
from ._cli import cli_path as _cli_path
from ._cli import missing as _cli_missing

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
    """The configuration as a file the core can plan, and the directory its relative paths
    resolve against: a path as given, or a dict (and keyword arguments) written as JSON, which
    is YAML, to a temporary file removed afterwards, whose relative paths (`base:`,
    `_extends`) resolve against the working directory, as the caller wrote them."""

    def __init__(self, config: Config, fields: Dict[str, Any]) -> None:
        self._tmp: Optional[tempfile.TemporaryDirectory] = None
        if config is not None and not isinstance(config, dict):
            if fields:
                raise TypeError(
                    "give a configuration file or keyword arguments, not both "
                    "(pass a dict to combine them)"
                )
            if not isinstance(config, (str, os.PathLike)):
                raise TypeError(
                    f"config must be a path or a dict, not {type(config).__name__}"
                )
            self.args = (os.fspath(config), None)
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
        self.args = (self._written, os.getcwd())

    def __enter__(self) -> "tuple[str, Optional[str]]":
        return self.args

    def __exit__(self, _type: Any, exc: Any, _tb: Any) -> None:
        if self._tmp is None:
            return
        self._tmp.cleanup()
        if isinstance(exc, (ConfigError, FileNotFoundError)) and not getattr(
            exc, "_llem_renamed", False
        ):
            # The file it names is gone: name the dict (line and column are of its JSON).
            raise _renamed(exc, self._written) from None


def _renamed(exc: BaseException, written: str) -> BaseException:
    """`exc` again, naming `<dict>` where it named the temporary file, `.errors` included."""
    text = str(exc).replace(written, "<dict>")
    if isinstance(exc, FileNotFoundError):
        # A missing base: or _extends file of the dict: its own name is kept.
        text = (exc.strerror or text).replace(written, "<dict>")
        new: BaseException = FileNotFoundError(exc.errno, text)
        new.filename = exc.filename  # type: ignore[attr-defined]
    else:
        new = ConfigError(text)
    new.errors = [  # type: ignore[attr-defined]
        dict(d, file="<dict>") if d.get("file") == written else d
        for d in getattr(exc, "errors", None) or []
    ]
    new._llem_renamed = True  # type: ignore[attr-defined]
    return new


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
    A missing file raises `FileNotFoundError`; an invalid configuration `ConfigError`, whose
    `.errors` lists each problem (file, line, column, message, help); an invalid argument
    `ValueError` or `TypeError` naming it; a failed measurement `LlemError`."""
    bar = _sink(progress)
    try:
        with _ConfigFile(config, fields) as (path, config_dir):
            text, cell_dir = _native.measure(
                path, config_dir, bar, _warn,
                lock=lock, sampling_interval=sampling_interval, verbose=verbose,
            )
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
    # Every cell runs the bundled CLI: without it, each would fail to start.
    why = _cli_missing()
    if why is not None:
        raise LlemError(why)
    bar = _sink(progress)
    try:
        with _ConfigFile(config, {}) as (path, config_dir):
            # Each cell runs this package's CLI binary in a process of its own (`llem __cell
            # SPEC`), so a crashed engine never takes the notebook down.
            study_dir, _status = _native.study(
                path, config_dir, str(_cli_path()), ["__cell"], bar, _warn,
                cycles=cycles, order=order, output_dir=output_dir, resume=resume,
                resume_dir=resume_dir, fail_fast=fail_fast, circuit_breaker=circuit_breaker,
                timeout_hours=timeout_hours, gaps=gaps, lock=lock,
                sampling_interval=sampling_interval,
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
    with _ConfigFile(config, fields) as (path, config_dir):
        text, plan_warnings = _native.plan(
            path, config_dir, cycles=cycles, order=order, per_run_config=per_run_config
        )
    _warn(plan_warnings)
    return json.loads(text)
