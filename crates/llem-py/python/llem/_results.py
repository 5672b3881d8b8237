"""`ExperimentResult` and `StudyResult` (seeds 000 and 004): the records llem wrote
(`result.json`, `study_result.json`, `manifest.json`), with every field as an attribute and the
Parquet sidecars as DataFrames."""

from __future__ import annotations

import copy
import html
import json
import math
import os
from pathlib import Path
from typing import Any, Iterator, List, Optional

from ._fields import EXPERIMENT_RESULT_FIELDS, STUDY_RESULT_FIELDS


def _round(v: Any, digits: int = 4) -> Any:
    """`v` with every float rounded to `digits` significant digits, for reading."""
    if isinstance(v, float):
        if v == 0 or not math.isfinite(v):
            return v
        return round(v, max(0, digits - 1 - int(math.floor(math.log10(abs(v))))))
    if isinstance(v, dict):
        return {k: _round(x, digits) for k, x in v.items()}
    if isinstance(v, list):
        return [_round(x, digits) for x in v]
    return v


def _num(v: Any, unit: str = "") -> str:
    """A figure to four significant digits with its unit, or "-" when there is none."""
    if v is None:
        return "-"
    if isinstance(v, float):
        v = _round(v)
        v = int(v) if v == int(v) and abs(v) < 1e15 else v
    return f"{v} {unit}".strip()


def _wrap(v: Any) -> Any:
    if isinstance(v, dict):
        return Section(v)
    if isinstance(v, list):
        return [_wrap(x) for x in v]
    return v


class Section:
    """A nested object of a result: its fields as attributes (and as `s["field"]`)."""

    __slots__ = ("_data",)

    def __init__(self, data: dict) -> None:
        object.__setattr__(self, "_data", data)

    def __getattr__(self, name: str) -> Any:
        try:
            return _wrap(self._data[name])
        except KeyError:
            raise AttributeError(_no_field(type(self).__name__, name, self._data)) from None

    def __getitem__(self, name: str) -> Any:
        return _wrap(self._data[name])

    def __contains__(self, name: object) -> bool:
        return name in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __dir__(self) -> List[str]:
        return sorted(set(self._data) | set(object.__dir__(self)))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Section) and other._data == self._data

    def __repr__(self) -> str:
        return f"{type(self).__name__}({_round(self._data)!r})"

    def get(self, name: str, default: Any = None) -> Any:
        """The field, or `default` when absent."""
        return _wrap(self._data.get(name, default))

    def keys(self) -> List[str]:
        """The field names."""
        return list(self._data)

    def to_dict(self) -> dict:
        """The fields as plain JSON-like data (a copy)."""
        return copy.deepcopy(self._data)


def _no_field(kind: str, name: str, data: dict) -> str:
    import difflib

    near = difflib.get_close_matches(name, list(data), n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return f"{kind} has no field {name!r}{hint}"


def _read_parquet(path: Path) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not written for this run")
    import pandas as pd

    return pd.read_parquet(path)


class SidecarName(str):
    """A sidecar's file name (the result field, a `str`) that is also callable: calling it
    reads the file as a pandas DataFrame, so `result.timeseries == "timeseries.parquet"` and
    `result.timeseries()` both hold."""

    def __new__(cls, name: str, path: Path) -> "SidecarName":
        s = super().__new__(cls, name)
        s._path = path
        return s

    def __call__(self) -> Any:
        return _read_parquet(self._path)


class ExperimentResult(Section):
    """One measured experiment: every field of `result.json` (schema 4.0) as an attribute,
    `process_results`, `to_dict()`, and the sidecars as DataFrames: `result.timeseries` is
    the file's name, as in `result.json`, and `result.timeseries()` its samples (likewise
    `requests()`)."""

    __slots__ = ("_dir",)

    def __init__(self, data: dict, cell_dir: "str | os.PathLike[str] | None" = None) -> None:
        super().__init__(data)
        object.__setattr__(self, "_dir", Path(cell_dir) if cell_dir is not None else None)

    @classmethod
    def from_json(cls, path: "str | os.PathLike[str]") -> "ExperimentResult":
        """Reads a `result.json` (its directory holds the sidecars)."""
        p = Path(path)
        if p.is_dir():
            p = p / "result.json"
        return cls(json.loads(p.read_text()), p.parent)

    @property
    def cell_dir(self) -> Optional[Path]:
        """The directory holding `result.json` and its sidecars."""
        return self._dir

    def __getattr__(self, name: str) -> Any:
        value = Section.__getattr__(self, name)
        # The seed's sidecar fields (`timeseries`, `requests`, ...: the file's name, or None
        # when none was written) are also callable, giving the file as a DataFrame.
        if isinstance(value, str) and value.endswith(".parquet") and self._dir is not None:
            return SidecarName(value, self._dir / value)
        return value

    def __repr__(self) -> str:
        d = self._data
        return (
            f"ExperimentResult({d.get('model_name')!r} on {d.get('engine')}, "
            f"{_num(d.get('total_energy_j'), 'J')}, {_num(d.get('mj_per_tok_total'), 'mJ/tok')}, "
            f"{_num(d.get('avg_tokens_per_second'), 'tok/s')}, dir={str(self._dir)!r})"
        )

    def headline(self) -> List[tuple]:
        """The figures a reader looks at first, as (what, value) rows: the notebook view."""
        d = self._data
        lat = d.get("latency_stats") or {}
        rows = [
            ("model", d.get("model_name")),
            ("engine", d.get("engine")),
            ("energy of", {"gpu": "the GPUs", "cpu": "CPU packages + DRAM"}.get(
                d.get("energy_scope"), d.get("energy_scope") or "-")),
            ("window", f"{_num(d.get('total_inference_time_sec'), 's')} "
                       f"({d.get('measurement_methodology')})"),
            ("energy", f"{_num(d.get('total_energy_j'), 'J')} ({d.get('energy_source') or 'none'})"),
            ("energy per output token", _num(d.get("mj_per_tok_total"), "mJ/tok")),
            ("above idle", _num(d.get("mj_per_tok_adjusted"), "mJ/tok")),
            ("throughput", _num(d.get("avg_tokens_per_second"), "tok/s")),
            ("TTFT p50 / p99", f"{_num(lat.get('ttft_median_ms'))} / {_num(lat.get('ttft_p99_ms'), 'ms')}"),
            ("ITL p50 / p99", f"{_num(lat.get('itl_median_ms'))} / {_num(lat.get('itl_p99_ms'), 'ms')}"),
        ]
        g = d.get("goodput")
        if g:
            rows.append(("goodput", f"{_num(100 * g.get('goodput_fraction', 0.0), '%')} of requests "
                                    f"within the SLO, {_num(g.get('energy_per_good_request_j'), 'J')} "
                                    f"per request within it"))
        rows.append(("warnings", len(d.get("measurement_warnings") or [])))
        return rows

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(str(k))}</th>"
            f"<td style='text-align:left'>{html.escape(str(v))}</td></tr>"
            for k, v in self.headline()
        )
        warns = "".join(f"<li>{html.escape(w)}</li>" for w in self._data.get("measurement_warnings") or [])
        return (f"<div><b>ExperimentResult</b> <code>{html.escape(str(self._dir or ''))}</code>"
                f"<table>{rows}</table>" + (f"<ul>{warns}</ul>" if warns else "") + "</div>")


class StudyResult(Section):
    """A study: every field of `study_result.json` as an attribute (`statistics` across cycles
    with confidence intervals, `summary`, ...), `experiments` as `ExperimentResult`s, `manifest`
    and the study directory."""

    __slots__ = ("_dir", "_manifest")

    def __init__(self, study_dir: "str | os.PathLike[str]") -> None:
        d = Path(study_dir)
        data = json.loads((d / "study_result.json").read_text())
        super().__init__(data)
        object.__setattr__(self, "_dir", d)
        object.__setattr__(self, "_manifest", json.loads((d / "manifest.json").read_text()))

    @property
    def study_dir(self) -> Path:
        """The study's directory."""
        return self._dir

    @property
    def manifest(self) -> Section:
        """`manifest.json`: every cell with its status, times, energy and errors."""
        return Section(self._manifest)

    @property
    def experiments(self) -> List[ExperimentResult]:
        """The completed cells' results, in execution order, each with its directory."""
        files = self._data.get("result_files") or []
        exps = self._data.get("experiments") or []
        out = []
        for i, e in enumerate(exps):
            f = files[i] if i < len(files) else None
            out.append(ExperimentResult(e, (self._dir / f).parent if f else None))
        return out

    @property
    def cells(self) -> List[Section]:
        """The manifest's cells (completed, failed, interrupted, skipped)."""
        return [Section(c) for c in self._manifest.get("experiments", [])]

    @property
    def search(self) -> Optional[Section]:
        """`search.json` of a study with a `search:` block (its answer with the interval of
        its runs, why it stopped, every configuration's prediction, every evaluation, the
        feasible set and the Pareto frontier); None for a study that measured its whole grid."""
        path = self._dir / "search.json"
        if not path.is_file():
            return None
        return Section(json.loads(path.read_text()))

    def __repr__(self) -> str:
        s = self._data.get("summary", {})
        return (
            f"StudyResult({self._data.get('study_name')!r}, {self._data.get('status')}, "
            f"{s.get('completed')}/{s.get('total_experiments')} completed, dir={str(self._dir)!r})"
        )

    def _repr_html_(self) -> str:
        head = html.escape(repr(self))
        rows = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in (
                e.get("experiment_id"), e.get("engine"), _num(e.get("mj_per_tok_total")),
                _num(e.get("avg_tokens_per_second")), len(e.get("measurement_warnings") or []),
            )) + "</tr>"
            for e in self._data.get("experiments") or []
        )
        return (f"<div><b>{head}</b><table><tr><th>experiment</th><th>engine</th><th>mJ/tok</th>"
                f"<th>tok/s</th><th>warnings</th></tr>{rows}</table></div>")


def _field_property(name: str, typ: str, doc: str) -> property:
    def get(self: Section) -> Any:
        return type(self).__getattr__(self, name)

    get.__name__ = name
    return property(get, doc=f"{doc} ({typ})" if doc else typ)


# Every field of the schema as a documented property: `help(ExperimentResult)` and editors list
# them with their meaning (a field a result lacks still raises AttributeError, naming the
# nearest). Accessors of the class's own, like StudyResult.experiments, stay.
for _cls, _fields in ((ExperimentResult, EXPERIMENT_RESULT_FIELDS),
                      (StudyResult, STUDY_RESULT_FIELDS)):
    for _name, _typ, _doc in _fields:
        if _name not in _cls.__dict__:
            setattr(_cls, _name, _field_property(_name, _typ, _doc))
del _cls, _fields, _name, _typ, _doc
