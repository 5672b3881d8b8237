"""The records API of seed 002 (`mlenergy_data.records`), over llem's Rust records: the same
classes, methods and values, loaded and filtered in Rust. A notebook written for
`mlenergy_data` runs with only its import changed:

    from llem.records import LLMRuns          # was: from mlenergy.data.records import LLMRuns
    runs = LLMRuns.from_raw_results("/data/benchmark", stable_only=False)
    best = min(runs.stable().task("gpqa"), key=lambda r: r.energy_per_token_joules)

Beyond the reference reader, `from_directory` also loads llem studies, ML.ENERGY raw trees and
llem 0.7 bundles into one collection, `data.<field>` gives NumPy arrays, and `to_polars()`
shares the Arrow columns with polars.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from . import _hub, _native

__all__ = ["LLMRun", "LLMRuns", "DiffusionRun", "DiffusionRuns"]

_log = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]


class _RawFiles:
    """What both kinds of run read from their raw files, through the collection that loaded
    them."""

    _results_path: str

    @property
    def results_path(self) -> str:
        """Path to the run's raw results file (`results.json`, or llem's `result.json`)."""
        return self._results_path

    def _one(self) -> Any:
        origin = self.__dict__.get("_origin")
        if origin is None:
            raise ValueError("this run was not loaded by llem.records; its raw files are unknown")
        self._fetch_results()
        native, i = origin
        return native.select([i])

    def _fetch_results(self) -> None:
        # A run loaded by from_hf downloads its raw results file the first time it is needed.
        hubs = self.__dict__.get("_hubs")
        if hubs:
            _hub.fetch_all(hubs, [self._results_path])

    def read_results_json(self) -> Dict[str, Any]:
        """The parsed raw results file (cached per run)."""
        cached = self.__dict__.get("_results_json_cache")
        if cached is None:
            self._fetch_results()
            p = Path(self._results_path)
            if not p.exists():
                raise FileNotFoundError(f"Raw results file not found: {p}")
            cached = json.loads(p.read_text())
            object.__setattr__(self, "_results_json_cache", cached)
        return cached

    def timelines(self, *, metric: str = "power.device_instant") -> Any:
        """This run's power or temperature timeline (columns timestamp, relative_time_s,
        value, metric): the steady-state window of an LLM run, a diffusion run's whole
        series."""
        t = _arrow(self._one().timelines(metric))
        return _pandas(t, ["timestamp", "relative_time_s", "value", "metric"])


@dataclass(frozen=True)
class LLMRun(_RawFiles):
    """A single LLM benchmark run (the reference's fields, in its order; then llem's own,
    None for runs other tools measured)."""

    domain: str
    task: str
    model_id: str
    nickname: str
    architecture: str
    total_params_billions: float
    activated_params_billions: float
    weight_precision: str
    gpu_model: str
    num_gpus: int
    max_num_seqs: int
    seed: Optional[int]
    num_request_repeats: Optional[int]
    tensor_parallel: int
    expert_parallel: int
    data_parallel: int
    steady_state_energy_joules: float
    steady_state_duration_seconds: float
    energy_per_token_joules: float
    energy_per_request_joules: Optional[float]
    output_throughput_tokens_per_sec: float
    request_throughput_req_per_sec: Optional[float]
    avg_power_watts: float
    total_output_tokens: Optional[float]
    completed_requests: Optional[float]
    avg_output_len: Optional[float]
    mean_itl_ms: float
    median_itl_ms: float
    p50_itl_ms: float
    p90_itl_ms: float
    p95_itl_ms: float
    p99_itl_ms: float
    avg_batch_size: Optional[float]
    is_stable: bool
    unstable_reason: str
    _results_path: str
    _prometheus_path: str
    # llem's own fields (records.md): None for runs other tools measured.
    source: Optional[str] = None
    engine: Optional[str] = None
    study: Optional[str] = None
    cycle: Optional[int] = None
    label: Optional[str] = None
    config_hash: Optional[str] = None
    experiment_id: Optional[str] = None
    host: Optional[str] = None
    measurement_methodology: Optional[str] = None
    energy_source: Optional[str] = None
    energy_scope: Optional[str] = None
    system_energy_joules: Optional[float] = None
    energy_adjusted_joules: Optional[float] = None
    mj_per_tok_total: Optional[float] = None
    mj_per_tok_adjusted: Optional[float] = None
    system_mj_per_tok: Optional[float] = None
    ttft_median_ms: Optional[float] = None
    ttft_p99_ms: Optional[float] = None
    tpot_median_ms: Optional[float] = None
    e2e_p99_ms: Optional[float] = None
    prefill_energy_joules: Optional[float] = None
    decode_energy_joules: Optional[float] = None
    idle_energy_joules: Optional[float] = None
    energy_per_request_p50_joules: Optional[float] = None
    energy_per_request_p99_joules: Optional[float] = None
    difference_prefill_energy_joules: Optional[float] = None
    difference_decode_energy_joules: Optional[float] = None
    goodput_fraction: Optional[float] = None
    goodput_req_per_sec: Optional[float] = None
    energy_per_good_request_joules: Optional[float] = None
    warnings: Optional[str] = None

    @property
    def prometheus_path(self) -> str:
        """Path to the run's `prometheus.json` (empty when there is none)."""
        return self._prometheus_path

    def read_prometheus_json(self) -> Dict[str, Any]:
        """The parsed `prometheus.json` (cached per run)."""
        cached = self.__dict__.get("_prometheus_json_cache")
        if cached is None:
            if not self._prometheus_path:
                raise ValueError("No prometheus.json path for this run")
            hubs = self.__dict__.get("_hubs")
            if hubs:
                _hub.fetch_all(hubs, [self._prometheus_path])
            p = Path(self._prometheus_path)
            if not p.exists():
                raise FileNotFoundError(f"Prometheus file not found: {p}")
            cached = json.loads(p.read_text())
            object.__setattr__(self, "_prometheus_json_cache", cached)
        return cached

    def output_lengths(self, *, include_unsuccessful: bool = False) -> List[int]:
        """Per-request output lengths, in request order."""
        t = _arrow(self._one().output_lengths(include_unsuccessful))
        return t.column("output_len").to_pylist()

    def inter_token_latencies(self) -> List[float]:
        """Inter-token latency samples, seconds (chunked-prefill zeros smoothed)."""
        return _arrow(self._one().inter_token_latencies()).column("itl_s").to_pylist()


@dataclass(frozen=True)
class DiffusionRun(_RawFiles):
    """A single diffusion model benchmark run."""

    domain: str
    task: str
    model_id: str
    nickname: str
    total_params_billions: float
    activated_params_billions: float
    weight_precision: str
    gpu_model: str
    num_gpus: int
    batch_size: int
    inference_steps: Optional[int]
    height: int
    width: int
    num_frames: Optional[int]
    fps: Optional[int]
    ulysses_degree: Optional[int]
    ring_degree: Optional[int]
    use_torch_compile: Optional[bool]
    batch_latency_s: float
    avg_power_watts: float
    energy_per_generation_joules: float
    throughput_generations_per_sec: float
    _results_path: str

    @property
    def is_text_to_image(self) -> bool:
        """Whether this is a text-to-image run."""
        return self.task == "text-to-image"

    @property
    def is_text_to_video(self) -> bool:
        """Whether this is a text-to-video run."""
        return self.task == "text-to-video"


_LLM_FIELDS = [f.name for f in dataclasses.fields(LLMRun)]
_LLM_PUBLIC = [n for n in _LLM_FIELDS[: _LLM_FIELDS.index("_results_path")]]
_LLM_EXTRAS = _LLM_FIELDS[_LLM_FIELDS.index("_prometheus_path") + 1 :]
# llem's fields it also fills for runs other tools measured (where from, and per-token
# figures derived from theirs).
_DERIVED = {"source", "engine", "mj_per_tok_total", "system_mj_per_tok"}
_DIFFUSION_FIELDS = [f.name for f in dataclasses.fields(DiffusionRun)]
_DIFFUSION_PUBLIC = [n for n in _DIFFUSION_FIELDS if not n.startswith("_")]


def _arrow(table: Any) -> Any:
    import pyarrow as pa

    return pa.table(table)


def _pandas(t: Any, columns: List[str]) -> Any:
    import pandas as pd

    if t.num_rows == 0:
        return pd.DataFrame(columns=pd.Index(columns))
    return t.select(columns).to_pandas()


class _Columns:
    """`runs.data.<field>`: one field's values as a NumPy array, in iteration order (floats
    with NaN for missing values; integers, booleans; text as object arrays)."""

    def __init__(self, runs: "_Runs") -> None:
        self._runs = runs
        self._cache: Dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name not in self._cache:
            import numpy as np

            kinds = dict(self._runs._native.schema())
            values = self._runs._native.column(name)
            kind = kinds.get(name, "str?")
            if kind.startswith("float"):
                arr = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
            elif kind == "int" or (kind == "int?" and None not in values):
                arr = np.array(values, dtype=np.int64)
            elif kind == "bool" and None not in values:
                arr = np.array(values, dtype=bool)
            else:
                arr = np.empty(len(values), dtype=object)
                arr[:] = values
            self._cache[name] = arr
        return self._cache[name]

    def __dir__(self) -> List[str]:
        return [n for n, _ in self._runs._native.schema()]


class _Runs:
    """What LLMRuns and DiffusionRuns share: an immutable view of a Rust collection."""

    _record: Any = None
    _public: List[str] = []

    def __init__(self, runs: Any = (), *, _stable_only: bool = False) -> None:
        if isinstance(runs, _native.NativeRuns):
            native = runs
        else:
            native = _from_records(list(runs), self._record)
        self._native = native
        self._stable_only = _stable_only
        self._rows: Optional[List[Any]] = None
        self._columns_view: Optional[_Columns] = None
        self._issues: List[Tuple[str, str]] = []
        self._left_out: List[Tuple[str, str]] = []
        # The Hub repositories the runs came from (from_hf), whose raw files are fetched
        # when first needed.
        self._hubs: Tuple[_hub.HubSource, ...] = ()

    def _derive(self, native: Any) -> Any:
        out = type(self)(native, _stable_only=self._stable_only)
        out._issues = self._issues
        out._left_out = self._left_out
        out._hubs = self._hubs
        return out

    def _fetch_raw(self, which: str = "results") -> List[str]:
        # What a repository lacks is reported by prefetch() and by the read that needs it.
        if not self._hubs:
            return []
        return _hub.fetch_all(self._hubs, _hub.raw_paths(self._records(), which))

    def prefetch(self, file: Optional[str] = None) -> Any:
        """Downloads every raw file of this collection now (results and Prometheus files;
        `file="results"` or `"prometheus"` for one kind) when it was loaded by `from_hf`, so
        later reads need no network; nothing for local runs. The whole ML.ENERGY dataset is
        about 100 GB: filter first. Returns the collection."""
        which = {None: "both", "results": "results", "prometheus": "prometheus"}.get(file)
        if which is None:
            raise ValueError(f"file must be 'results', 'prometheus' or None, not {file!r}")
        missing = self._fetch_raw(which)
        if missing:
            shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
            warnings.warn(
                f"{len(missing)} raw file(s) the summary names are not in the repository: {shown}; "
                "reading them will fail (a run without prometheus.json was judged without its "
                "batch-utilisation rule).",
                UserWarning,
                stacklevel=2,
            )
        return self

    download_raw_files = prefetch

    # Loaded but not kept ------------------------------------------------------------------

    @property
    def issues(self) -> List[Tuple[str, str]]:
        """`(results file, reason)` of each run found but not loaded."""
        return list(self._issues)

    @property
    def unstable_left_out(self) -> List[Tuple[str, str]]:
        """`(results file, why it is unstable)` of each run loaded but left out because the
        collection was loaded with `stable_only=True`; empty otherwise."""
        return list(self._left_out)

    # Filters ------------------------------------------------------------------------------

    def _one_of(self, field: str, values: Sequence[Any]) -> Any:
        return self._derive(self._native.one_of(field, [str(v) for v in values]))

    def _ints(self, field: str, exact: Sequence[int], min: Optional[int], max: Optional[int]) -> Any:
        if exact and (min is not None or max is not None):
            raise ValueError("Cannot combine exact values with min/max range")
        if not exact and min is None and max is None:
            raise TypeError(f"{field}() requires at least one argument")
        return self._derive(self._native.int_range(field, [int(x) for x in exact], min, max))

    def task(self, *tasks: str) -> Any:
        """Runs of any of these tasks."""
        return self._one_of("task", tasks)

    def model(self, *model_ids: str) -> Any:
        """Runs of any of these model ids."""
        return self._one_of("model_id", model_ids)

    model_id = model

    def gpu(self, *gpu_models: str) -> Any:
        """Runs on any of these GPU models."""
        return self._one_of("gpu_model", gpu_models)

    gpu_model = gpu

    def num_gpus(self, *counts: int, min: Optional[int] = None, max: Optional[int] = None) -> Any:
        """Runs with these GPU counts, or within `[min, max]`."""
        return self._ints("num_gpus", counts, min, max)

    def precision(self, *prec: str) -> Any:
        """Runs with any of these weight precisions."""
        return self._one_of("weight_precision", prec)

    def nickname(self, *nicknames: str) -> Any:
        """Runs of any of these model nicknames."""
        return self._one_of("nickname", nicknames)

    def where(self, *conditions: Union[str, Callable[[Any], bool]]) -> Any:
        """Runs meeting every condition: text as `llem results query --where` takes it
        (`"batch>=8"`, `"model~Qwen"`, `"stable=true"`; `= != > >= < <= ~`), or a function of a
        run that returns True for the runs to keep."""
        if not conditions:
            raise TypeError("where() needs a condition: text such as 'batch>=8', or a function")
        for c in conditions:
            if not isinstance(c, str) and not callable(c):
                raise TypeError(
                    "where() takes text conditions ('batch>=8') or functions of a run, "
                    f"not {type(c).__name__}"
                )
        texts = [c for c in conditions if isinstance(c, str)]
        out = self._derive(self._native.matching(texts)) if texts else self
        functions = [c for c in conditions if not isinstance(c, str)]
        if functions:
            keep = [i for i, r in enumerate(out._records()) if all(f(r) for f in functions)]
            out = out._derive(out._native.select(keep))
        return out

    def group_by(self, *fields: str) -> Dict[Any, Any]:
        """Groups in order of first appearance: `{value: runs}` for one field, `{(v1, v2):
        runs}` for several."""
        if not fields:
            raise TypeError("group_by() requires at least one field")
        out: Dict[Any, Any] = {}
        for key, native in self._native.group_by(list(fields)):
            out[key[0] if len(fields) == 1 else tuple(key)] = self._derive(native)
        return out

    # Access -------------------------------------------------------------------------------

    def _records(self) -> List[Any]:
        if self._rows is None:
            rows = []
            native = self._native
            names = set(f.name for f in dataclasses.fields(self._record))
            for i, d in enumerate(native.rows()):
                d["_results_path"] = d.pop("results_path", "") or ""
                if "prometheus_path" in d:
                    d["_prometheus_path"] = d.pop("prometheus_path") or ""
                r = self._record(**{k: v for k, v in d.items() if k in names})
                object.__setattr__(r, "_origin", (native, i))
                if self._hubs:
                    object.__setattr__(r, "_hubs", self._hubs)
                rows.append(r)
            self._rows = rows
        return self._rows

    @property
    def data(self) -> _Columns:
        """Per-field access: `runs.data.energy_per_token_joules` is a NumPy array, one value
        per run in iteration order (each field converted once per collection)."""
        if self._columns_view is None:
            self._columns_view = _Columns(self)
        return self._columns_view

    def __iter__(self) -> Iterator[Any]:
        return iter(self._records())

    def __len__(self) -> int:
        return len(self._native)

    def __bool__(self) -> bool:
        return len(self._native) > 0

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return self._derive(self._native.select(list(range(len(self)))[index]))
        return self._records()[index]

    def __add__(self, other: Any) -> Any:
        if type(other) is not type(self):
            return NotImplemented
        out = type(self)(
            _from_records(list(self) + list(other), self._record),
            _stable_only=self._stable_only and other._stable_only,
        )
        out._issues = self._issues + other._issues
        out._hubs = tuple(dict.fromkeys(self._hubs + other._hubs))
        return out

    def __repr__(self) -> str:
        left = len(self.unstable_left_out)
        out = f", {left} unstable left out" if left else ""
        return f"{type(self).__name__}({len(self)} runs{out})"

    def _repr_html_(self) -> str:
        import html

        head = f"<p><b>{html.escape(repr(self))}</b></p>"
        try:
            frame = self.to_dataframe()
        except ImportError:  # pandas is optional; the count is still worth showing
            return head
        return head + frame._repr_html_()

    # Tables -------------------------------------------------------------------------------

    def to_arrow(self) -> Any:
        """Every field as a pyarrow Table, paths and the configuration paths a sweep varied
        included; built in Rust and handed over without copying."""
        return _arrow(self._native.table())

    def _columns(self, t: Any) -> List[str]:
        # The reference's public fields; then, when any run was measured by llem, llem's
        # fields that some run has and the configuration paths a sweep varied. A collection
        # of ML.ENERGY runs alone gets exactly the reference's frame (its few fields llem
        # derives for them, such as `mj_per_tok_total`, stay on the records and in to_arrow).
        cols = [c for c in self._public if c in t.column_names]
        if not set(t.column_names) & set(_LLM_EXTRAS):
            return cols
        measured = [c for c in _LLM_EXTRAS if c not in _DERIVED and c in t.column_names]
        if all(t.column(c).null_count == t.num_rows for c in measured):
            return cols
        known = set(_LLM_FIELDS) | {"results_path", "prometheus_path"}
        for c in t.column_names:
            extra = c in _LLM_EXTRAS or c not in known
            if extra and c not in self._public and t.column(c).null_count < t.num_rows:
                cols.append(c)
        return cols

    def to_dataframe(self) -> Any:
        """One row per run as a pandas DataFrame (no path columns)."""
        import pandas as pd

        if not len(self):
            return pd.DataFrame()
        t = self.to_arrow()
        t = t.select(self._columns(t))
        df = t.to_pandas()
        # A column no run has a value in holds None (object), as a frame built from the
        # records does; Arrow would make a numeric one NaN.
        for name in t.column_names:
            if t.column(name).null_count == t.num_rows:
                df[name] = pd.Series([None] * t.num_rows, dtype=object)
        return df

    def to_polars(self) -> Any:
        """One row per run as a polars DataFrame, sharing the Arrow buffers."""
        import polars as pl

        t = self.to_arrow()
        if not len(self):
            return pl.DataFrame()
        return pl.from_arrow(t.select(self._columns(t)))


def _from_records(records: List[Any], kind: Any) -> Any:
    """A native collection of `records` (runs this module made): one selection when they come
    from one collection, else the concatenation of each source's selection."""
    if not records:
        return _native.NativeRuns.empty(kind is DiffusionRun)
    parts: List[Tuple[Any, List[int]]] = []
    for r in records:
        origin = r.__dict__.get("_origin") if hasattr(r, "__dict__") else None
        if origin is None:
            raise TypeError(
                f"{kind.__name__} objects not loaded by llem.records cannot form a collection"
            )
        native, i = origin
        if parts and parts[-1][0] is native:
            parts[-1][1].append(i)
        else:
            parts.append((native, [i]))
    out = parts[0][0].select(parts[0][1])
    for native, idx in parts[1:]:
        out = out.concat(native.select(idx))
    return out


def _load_raw(roots: Sequence[PathLike], tasks: Optional[set], config_dir: Optional[PathLike],
              n_workers: Optional[int], diffusion: bool) -> Tuple[Any, List[Tuple[str, str]]]:
    """One kind of run from raw trees, with the issues of those not loaded."""
    if not roots:
        raise TypeError("from_raw_results() requires at least one root")
    return _native.NativeRuns.from_raw_results(
        [os.fspath(r) for r in roots],
        sorted(tasks) if tasks is not None else None,
        os.fspath(config_dir) if config_dir is not None else None,
        n_workers,
        diffusion,
    )


class LLMRuns(_Runs):
    """Immutable collection of LLM benchmark runs with fluent filtering (seed 002).

    Iterate for `LLMRun` records, or use `data.<field>` for columns:

        for r in runs.task("gpqa"):
            print(r.energy_per_token_joules, r.nickname)
        energies = runs.task("gpqa").data.energy_per_token_joules
    """

    _record = LLMRun
    _public = _LLM_PUBLIC

    @classmethod
    def _loaded(cls, native: Any, issues: List[Tuple[str, str]], stable_only: bool) -> "LLMRuns":
        if issues:
            _log.warning("%d runs were found but not loaded; see .issues", len(issues))
        left_out: List[Tuple[str, str]] = []
        if stable_only:
            unstable = native.stability(False)
            left_out = list(zip(unstable.column("results_path"), unstable.column("unstable_reason")))
            native = native.stability(True)
        if left_out:
            reasons = Counter(reason or "unstable" for _, reason in left_out)
            why = "; ".join(f"{n} x {reason}" for reason, n in reasons.most_common(3))
            more = len(reasons) - 3
            warnings.warn(
                f"{len(left_out)} of {len(left_out) + len(native)} runs were left out as unstable "
                f"(stable_only=True): {why}{f'; {more} other reasons' if more > 0 else ''}. "
                "They are listed in .unstable_left_out; load with stable_only=False to keep them.",
                stacklevel=3,
            )
        out = cls(native, _stable_only=stable_only)
        out._issues = issues
        out._left_out = left_out
        return out

    @classmethod
    def from_raw_results(
        cls,
        *roots: PathLike,
        tasks: Optional[set] = None,
        config_dir: Optional[PathLike] = None,
        stable_only: bool = True,
        n_workers: Optional[int] = None,
    ) -> "LLMRuns":
        """Loads ML.ENERGY raw benchmark trees (one or more roots, or results sub-directories),
        computing stability jointly across them (see the reference for the rules)."""
        llm, issues = _load_raw(roots, tasks, config_dir, n_workers, diffusion=False)
        return cls._loaded(llm, issues, stable_only)

    @classmethod
    def from_directory(cls, root: PathLike, *, stable_only: bool = True) -> "LLMRuns":
        """Loads whatever `root` holds: a compiled directory (`runs/llm.parquet`), an ML.ENERGY
        raw tree, llem studies or cells, llem 0.7 bundles, or a tree holding several."""
        llm, _diffusion, issues = _native.NativeRuns.from_directory(os.fspath(root))
        return cls._loaded(llm, issues, stable_only)

    @classmethod
    def from_parquet(
        cls, path: PathLike, *, base_dir: Optional[PathLike] = None, stable_only: bool = True
    ) -> "LLMRuns":
        """Reads a compiled `llm.parquet`; relative paths resolve against `base_dir`."""
        native = _native.NativeRuns.from_parquet(
            os.fspath(path), os.fspath(base_dir) if base_dir is not None else None, False
        )
        return cls._loaded(native, [], stable_only)

    @classmethod
    def from_hf(
        cls,
        repo_id: str = _hub.DEFAULT_REPO,
        *,
        revision: Optional[str] = None,
        stable_only: bool = True,
    ) -> "LLMRuns":
        """Loads the LLM runs of a Hugging Face dataset repository (default: ML.ENERGY's
        benchmark, which is gated: request access on its page and set `HF_TOKEN`). Downloads
        the compiled summary `runs/llm.parquet` (a few MB) now; a run's raw files follow when
        something first reads them (`output_lengths()`, `timelines()`,
        `inter_token_latencies()`) or on `prefetch()`. Needs `huggingface_hub`; honours
        `HF_ENDPOINT`, `HF_HOME`/`HF_HUB_CACHE` and offline mode as every Hub client does."""
        source, parquet = _hub.HubSource.summary(repo_id, "runs/llm.parquet", revision)
        out = cls.from_parquet(parquet, base_dir=source.root, stable_only=stable_only)
        out._hubs = (source,)
        return out

    def batch(self, *sizes: int, min: Optional[int] = None, max: Optional[int] = None) -> "LLMRuns":
        """Runs with these batch limits (`max_num_seqs`), or within `[min, max]`."""
        return self._ints("max_num_seqs", sizes, min, max)

    max_num_seqs = batch

    def architecture(self, *arch: str) -> "LLMRuns":
        """Runs of any of these architectures (`Dense`, `MoE`)."""
        return self._one_of("architecture", arch)

    def stable(self) -> "LLMRuns":
        """Stable runs only."""
        return self._derive(self._native.stability(True))

    def unstable(self) -> "LLMRuns":
        """Unstable runs only. Raises ValueError on a collection loaded with
        `stable_only=True` (its unstable runs were never kept)."""
        if self._stable_only:
            raise ValueError(
                "Cannot filter unstable runs: this collection was loaded with "
                "stable_only=True. Reload with stable_only=False to access unstable runs."
            )
        return self._derive(self._native.stability(False))

    def output_lengths(self, *, include_unsuccessful: bool = False) -> Any:
        """Per-request output lengths (columns task, model_id, num_gpus, max_num_seqs,
        output_len), read from each run's raw file."""
        self._fetch_raw()
        t = _arrow(self._native.output_lengths(include_unsuccessful))
        return _pandas(t, ["task", "model_id", "num_gpus", "max_num_seqs", "output_len"])

    def inter_token_latencies(self) -> Any:
        """Inter-token latency samples in seconds (columns task, model_id, num_gpus,
        max_num_seqs, itl_s); chunked-prefill zeros are spread over the tokens they cover."""
        self._fetch_raw()
        t = _arrow(self._native.inter_token_latencies())
        return _pandas(t, ["task", "model_id", "num_gpus", "max_num_seqs", "itl_s"])

    def time_bins(self) -> Any:
        """Each llem run's measurement window in time bins (`timeline.parquet`): columns
        start_s, end_s, energy_j, idle_energy_j (with no request in flight), power_w,
        output_tokens, requests_started, requests_finished, mean_in_flight, then task,
        model_id, num_gpus, max_num_seqs, results_path. Runs other tools measured add no rows."""
        t = _arrow(self._native.time_bins())
        return _pandas(
            t,
            [
                "start_s",
                "end_s",
                "energy_j",
                "idle_energy_j",
                "power_w",
                "output_tokens",
                "requests_started",
                "requests_finished",
                "mean_in_flight",
                "task",
                "model_id",
                "num_gpus",
                "max_num_seqs",
                "results_path",
            ],
        )

    def timelines(self, *, metric: str = "power.device_instant") -> Any:
        """Power or temperature timelines in the steady-state window, summed over GPUs
        (`power.device_instant`, `power.device_average`, `temperature`)."""
        self._fetch_raw()
        t = _arrow(self._native.timelines(metric))
        return _pandas(
            t,
            [
                "timestamp",
                "relative_time_s",
                "value",
                "metric",
                "task",
                "model_id",
                "num_gpus",
                "max_num_seqs",
            ],
        )


class DiffusionRuns(_Runs):
    """Immutable collection of diffusion model benchmark runs with fluent filtering."""

    _record = DiffusionRun
    _public = _DIFFUSION_PUBLIC

    @classmethod
    def from_raw_results(
        cls,
        *roots: PathLike,
        tasks: Optional[set] = None,
        config_dir: Optional[PathLike] = None,
        n_workers: Optional[int] = None,
    ) -> "DiffusionRuns":
        """Loads the diffusion runs of ML.ENERGY raw benchmark trees."""
        diffusion, issues = _load_raw(roots, tasks, config_dir, n_workers, diffusion=True)
        out = cls(diffusion)
        out._issues = issues
        return out

    @classmethod
    def from_directory(cls, root: PathLike) -> "DiffusionRuns":
        """Loads the diffusion runs of whatever `root` holds (compiled or raw)."""
        _llm, diffusion, issues = _native.NativeRuns.from_directory(os.fspath(root))
        out = cls(diffusion)
        out._issues = issues
        return out

    @classmethod
    def from_hf(cls, repo_id: str = _hub.DEFAULT_REPO, *, revision: Optional[str] = None) -> "DiffusionRuns":
        """Loads the diffusion runs of a Hugging Face dataset repository: the compiled
        `runs/diffusion.parquet` now, each run's raw files when first read or on
        `prefetch()` (as `LLMRuns.from_hf`)."""
        source, parquet = _hub.HubSource.summary(repo_id, "runs/diffusion.parquet", revision)
        out = cls.from_parquet(parquet, base_dir=source.root)
        out._hubs = (source,)
        return out

    @classmethod
    def from_parquet(cls, path: PathLike, *, base_dir: Optional[PathLike] = None) -> "DiffusionRuns":
        """Reads a compiled `diffusion.parquet`."""
        return cls(
            _native.NativeRuns.from_parquet(
                os.fspath(path), os.fspath(base_dir) if base_dir is not None else None, True
            )
        )

    def batch(self, *sizes: int, min: Optional[int] = None, max: Optional[int] = None) -> "DiffusionRuns":
        """Runs with these batch sizes, or within `[min, max]`."""
        return self._ints("batch_size", sizes, min, max)

    batch_size = batch

    def timelines(self, *, metric: str = "power.device_instant") -> Any:
        """Power or temperature over each run's whole series (diffusion runs have no
        steady-state window), summed over GPUs; `relative_time_s` from the first sample."""
        self._fetch_raw()
        t = _arrow(self._native.timelines(metric))
        return _pandas(
            t,
            ["timestamp", "relative_time_s", "value", "metric", "task", "model_id", "num_gpus",
             "batch_size"],
        )
