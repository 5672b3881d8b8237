"""Collections loaded from a Hugging Face dataset repository (seed 002's `from_hf`): the
compiled summary is downloaded at once, each run's raw files when something first needs them
or on `prefetch()`. Downloads go through `huggingface_hub` (an optional dependency: `pip
install 'llem[hub]'`), so `HF_ENDPOINT`, `HF_HOME`/`HF_HUB_CACHE`, `HF_TOKEN` and offline mode
work as they do for every Hub client, and files already in the Hub cache are not fetched
again."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable, List, Optional, Tuple

DEFAULT_REPO = "ml-energy/benchmark-v3"

_GATED = (
    "cannot download {file!r} from the Hugging Face dataset {repo!r}: {why}. The dataset may be "
    "gated: request access at {endpoint}/datasets/{repo}, then set HF_TOKEN to an access token "
    "(https://huggingface.co/settings/tokens)."
)


def _hub() -> Any:
    try:
        import huggingface_hub
    except ImportError:
        raise ImportError(
            "from_hf() needs huggingface_hub: pip install 'llem[hub]' (or huggingface_hub)"
        ) from None
    return huggingface_hub


class HubSource:
    """Where a collection came from: a dataset repository at a revision, and the local
    snapshot directory its relative paths were resolved against."""

    def __init__(self, repo_id: str, revision: Optional[str], root: Path) -> None:
        self.repo_id = repo_id
        self.revision = revision
        self.root = root

    @classmethod
    def summary(cls, repo_id: str, filename: str, revision: Optional[str]) -> Tuple["HubSource", Path]:
        """Downloads the compiled summary `filename` (`runs/llm.parquet`); the source and the
        file's local path."""
        path = download(repo_id, filename, revision)
        assert path is not None  # missing_ok is off: a missing summary raised
        # runs/llm.parquet sits two levels under the snapshot's root.
        return cls(repo_id, revision, path.parent.parent), path

    def relative(self, path: str) -> Optional[str]:
        """`path` (as the collection resolved it) inside the repository, or None when it is
        not under this snapshot (or empty)."""
        if not path:
            return None
        try:
            return Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return None

    def fetch(self, paths: Iterable[str]) -> List[str]:
        """Downloads every path under this snapshot not yet on disk, eight at a time; the
        ones the repository does not have (a run without a Prometheus file), which the read
        that needs one reports."""
        wanted = sorted({r for p in paths if (r := self.relative(p)) and not (self.root / r).is_file()})
        if not wanted:
            return []
        with ThreadPoolExecutor(max_workers=min(8, len(wanted))) as pool:
            got = list(pool.map(lambda r: download(self.repo_id, r, self.revision, missing_ok=True), wanted))
        return [r for r, p in zip(wanted, got) if p is None]


def download(repo_id: str, filename: str, revision: Optional[str],
             missing_ok: bool = False) -> Optional[Path]:
    """One file of a dataset repository, through the Hub cache; None when the repository does
    not have it and `missing_ok`."""
    hub = _hub()
    from huggingface_hub import constants
    from huggingface_hub.errors import (EntryNotFoundError, GatedRepoError,
                                        LocalEntryNotFoundError, RepositoryNotFoundError)

    try:
        return Path(hub.hf_hub_download(repo_id=repo_id, filename=filename, repo_type="dataset",
                                        revision=revision))
    except EntryNotFoundError:
        # Not in the cache while offline is a failure to say; not in the repository is a
        # fact about the dataset.
        if missing_ok and not isinstance(sys.exc_info()[1], LocalEntryNotFoundError):
            return None
        raise
    except (GatedRepoError, RepositoryNotFoundError) as e:
        why = "access was refused" if isinstance(e, GatedRepoError) else "no such dataset, or no access"
        raise PermissionError(_GATED.format(file=filename, repo=repo_id, why=why,
                                            endpoint=constants.ENDPOINT)) from e


def fetch_all(sources: Tuple[HubSource, ...], paths: Iterable[str]) -> List[str]:
    """Downloads what `paths` name under any of `sources`; the files no repository had."""
    paths = list(paths)
    return [m for s in sources for m in s.fetch(paths)]


def raw_paths(runs: List[Any], which: str) -> List[str]:
    """The `results_path`s (`which="results"`), `prometheus_path`s (`"prometheus"`) or both
    (`"both"`) of `runs`."""
    out: List[str] = []
    for r in runs:
        if which in ("results", "both"):
            out.append(r.results_path)
        if which in ("prometheus", "both"):
            # Diffusion runs have no Prometheus file.
            out.append(getattr(r, "prometheus_path", ""))
    return out
