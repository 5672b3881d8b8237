"""Progress of a measurement or a study, from the events the Rust core sends: a tqdm bar in
Jupyter and terminals when tqdm is installed, else one line per phase on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any, Callable, Optional

try:  # tqdm.auto picks the notebook widget in Jupyter and the text bar elsewhere.
    from tqdm.auto import tqdm as _tqdm
except Exception:  # pragma: no cover - tqdm is optional
    _tqdm = None


class _Lines:
    """A stand-in bar for when tqdm is missing: a line in words when a phase starts, and when
    it ends with what it did (a study: a line per cell done, counted against the whole)."""

    def __init__(self, desc: str, total: Optional[int], unit: Optional[str]) -> None:
        self.desc, self.total, self.unit = desc, total, unit
        self.n = 0
        self.post = ""
        said = f": {total} {unit}" if total and unit else ""
        _say(f"{desc}{said}")

    def update(self, n: int) -> None:
        self.n += n

    def set_postfix_str(self, s: str) -> None:
        self.post = s
        if self.unit:  # a study: one line per cell done
            of = f" of {self.total}" if self.total else ""
            _say(f"{self.desc}: {self.n}{of} {self.unit} done ({s})")

    def close(self) -> None:
        if self.unit is None:
            _say(f"{self.desc.split(':')[0]} done" + (f": {self.post}" if self.post else ""))


def _say(s: str) -> None:
    print(f"llem: {s}", file=sys.stderr, flush=True)


def _bar(desc: str, total: Optional[int], position: int = 0, unit: Optional[str] = None) -> Any:
    if _tqdm is None:
        return _Lines(desc, total, unit)
    return _tqdm(total=total, desc=desc, position=position, leave=True, dynamic_ncols=True,
                 unit=f" {unit}" if unit else "it")


class Progress:
    """Renders events (JSON text) as they arrive; `enabled=False` renders nothing."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.study: Any = None
        self.phase: Any = None

    def __call__(self, event: str) -> None:
        if not self.enabled:
            return
        e = json.loads(event)
        kind = e.get("event")
        if kind is None:
            self._cell(e)
        elif kind == "study_started":
            self.study = _bar("study", e.get("total"), unit="cells")
        elif kind == "cell_started":
            label = e.get("label") or f"cell {e.get('index')}"
            self._note(f"cell {e.get('index')} (cycle {e.get('cycle')}): {label}")
        elif kind == "cell":
            self._cell(e.get("message") or {})
        elif kind == "cell_finished":
            self._close_phase()
            if self.study is not None:
                self.study.update(1)
                self.study.set_postfix_str(str(e.get("status")))
            if e.get("error"):
                self._note(f"cell {e.get('index')} {e.get('status')}: {e['error']}")
        elif kind == "waiting":
            self._note(f"pause {e.get('seconds', 0):.0f} s ({e.get('reason')})")
        elif kind == "note":
            self._note(str(e.get("message")))

    def _cell(self, m: dict) -> None:
        t = m.get("type")
        if t == "phase":
            self._close_phase()
            self.phase = _bar(f"{m.get('phase')}: {m.get('detail')}", m.get("total"), 1 if self.study else 0)
        elif t == "advance" and self.phase is not None:
            step = int(m.get("done", 0)) - int(self.phase.n)
            if step > 0:
                self.phase.update(step)
            post = f"{m.get('tokens', 0)} tok"
            if m.get("power_w") is not None:
                post += f", {m['power_w']:.0f} W"
            self.phase.set_postfix_str(post)
        elif t == "phase_done":
            if self.phase is not None and m.get("summary"):
                self.phase.set_postfix_str(m["summary"])
            self._close_phase()
        elif t == "note":
            self._note(f"warning: {m.get('message')}")
        elif t == "failed":
            self._note(f"failed: {m.get('message')}")

    def _note(self, s: str) -> None:
        if _tqdm is not None:
            _tqdm.write(f"llem: {s}", file=sys.stderr)
        else:
            _say(s)

    def _close_phase(self) -> None:
        if self.phase is not None:
            self.phase.close()
            self.phase = None

    def close(self) -> None:
        self._close_phase()
        if self.study is not None:
            self.study.close()
            self.study = None


def sink(progress: "bool | Callable[[dict], None] | None") -> Callable[[str], None]:
    """The callable the core sends events to: our bars (`True`/`None`), nothing (`False`), or
    the caller's own function, given each event as a dict."""
    if callable(progress):
        return lambda s: progress(json.loads(s))
    if progress is not None and not isinstance(progress, bool):
        raise TypeError(
            f"progress must be True, False, None or a function, not {type(progress).__name__}"
        )
    return Progress(enabled=progress is not False)
