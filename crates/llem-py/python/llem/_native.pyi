"""Type stubs of `llem._native`, the Rust core (crates/llem-py/src). The public API is the
pure-Python layer (`llem`, `llem.records`); these are what it calls."""

import os
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

class LlemError(RuntimeError):
    """A measurement, study or load failed; the message is llem's."""

class ConfigError(ValueError):
    """An invalid configuration: the message names file:line:col and the nearest valid key;
    `.errors` lists each problem as a dict (file, line, column, kind, message, help)."""

    errors: List[Dict[str, Any]]

def version() -> str:
    """The llem version this module was built from."""

Path = Union[str, "os.PathLike[str]"]

def plan(
    config: str,
    config_dir: Optional[str] = None,
    *,
    cycles: Optional[int] = None,
    order: Optional[str] = None,
    per_run_config: Optional[bool] = None,
) -> Tuple[str, List[str]]:
    """`(plan as JSON, warnings)` of a configuration file."""

def measure(
    config: str,
    config_dir: Optional[str],
    on_event: Callable[[str], Any],
    on_plan: Callable[[List[str]], Any],
    *,
    lock: Optional[bool] = None,
    sampling_interval: Optional[str] = None,
    verbose: Optional[int] = None,
) -> Tuple[str, str]:
    """Measures one experiment in this process: `(result.json text, cell dir)`; `on_plan` is
    given the configuration warnings before it starts."""

def study(
    config: str,
    config_dir: Optional[str],
    program: str,
    launcher_args: List[str],
    on_event: Callable[[str], Any],
    on_plan: Callable[[List[str]], Any],
    *,
    cycles: Optional[int] = None,
    order: Optional[str] = None,
    output_dir: Optional[Path] = None,
    resume: Optional[bool] = None,
    resume_dir: Optional[Path] = None,
    fail_fast: Optional[bool] = None,
    circuit_breaker: Optional[bool] = None,
    timeout_hours: Optional[float] = None,
    gaps: Optional[bool] = None,
    lock: Optional[bool] = None,
    sampling_interval: Optional[str] = None,
) -> Tuple[str, str]:
    """Runs a study, cells as `program launcher_args... SPEC`: `(dir, status)`; `on_plan` is
    given the configuration warnings before it starts."""

class ArrowTable:
    """A record batch, readable through the Arrow PyCapsule stream interface."""

    def __arrow_c_stream__(self, requested_schema: Optional[object] = None) -> object: ...
    def __len__(self) -> int: ...

Issues = List[Tuple[str, str]]

class NativeRuns:
    """An immutable collection of LLM or diffusion runs, held in Rust."""

    @staticmethod
    def from_raw_results(
        roots: List[str],
        tasks: Optional[List[str]] = None,
        config_dir: Optional[str] = None,
        n_workers: Optional[int] = None,
        diffusion: bool = False,
    ) -> Tuple["NativeRuns", Issues]: ...
    @staticmethod
    def from_directory(root: str) -> Tuple["NativeRuns", "NativeRuns", Issues]: ...
    @staticmethod
    def from_parquet(path: str, base_dir: Optional[str] = None, diffusion: bool = False) -> "NativeRuns": ...
    @staticmethod
    def empty(diffusion: bool) -> "NativeRuns": ...
    @property
    def is_diffusion(self) -> bool: ...
    def __len__(self) -> int: ...
    def concat(self, other: "NativeRuns") -> "NativeRuns": ...
    def select(self, indices: List[int]) -> "NativeRuns": ...
    def one_of(self, field: str, values: List[str]) -> "NativeRuns": ...
    def int_range(
        self, field: str, exact: List[int], min: Optional[int] = None, max: Optional[int] = None
    ) -> "NativeRuns": ...
    def matching(self, conditions: List[str]) -> "NativeRuns": ...
    def stability(self, stable: bool) -> "NativeRuns": ...
    def group_by(self, fields: List[str]) -> List[Tuple[tuple, "NativeRuns"]]: ...
    def schema(self) -> List[Tuple[str, str]]: ...
    def rows(self) -> List[dict]: ...
    def column(self, name: str) -> List[Any]: ...
    def table(self) -> ArrowTable: ...
    def output_lengths(self, include_unsuccessful: bool) -> ArrowTable: ...
    def inter_token_latencies(self) -> ArrowTable: ...
    def time_bins(self) -> ArrowTable: ...
    def timelines(self, metric: str) -> ArrowTable: ...
