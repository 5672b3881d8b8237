"""Where the wheel's `llem` command-line binary is (`_bin/llem`, added by
scripts/build-wheel.sh): the `llem` script and `python -m llem` become it, and a study's cells
run it."""

import os
from pathlib import Path
from typing import Optional


def cli_path() -> Path:
    """The `llem` executable this package carries."""
    return Path(__file__).resolve().parent / "_bin" / "llem"


def missing() -> Optional[str]:
    """Why the `llem` executable cannot run, or None when it can."""
    exe = cli_path()
    if os.access(exe, os.X_OK):
        return None
    return (
        f"llem: this installation has no command-line binary at {exe} "
        "(wheels built by scripts/build-wheel.sh carry one; an editable or "
        "`maturin develop` install does not)"
    )
