"""Where the wheel's `llem` command-line binary is (`_bin/llem`, added by
scripts/build-wheel.sh): the `llem` script and `python -m llem` become it, and a study's cells
run it."""

from pathlib import Path


def cli_path() -> Path:
    """The `llem` executable this package carries."""
    return Path(__file__).resolve().parent / "_bin" / "llem"
