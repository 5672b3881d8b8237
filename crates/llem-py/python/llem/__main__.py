"""`python -m llem ...` and the `llem` script: the command line. The wheel carries llem's own
CLI binary (`_bin/llem`, added by scripts/build-wheel.sh); this process becomes it."""

import os
import sys

from ._cli import cli_path


def main() -> None:
    """Replaces this process with the `llem` command line, given this process's arguments."""
    exe = cli_path()
    if not os.access(exe, os.X_OK):
        sys.exit(
            f"llem: this installation has no command-line binary at {exe} "
            "(wheels built by scripts/build-wheel.sh carry one; an editable or "
            "`maturin develop` install does not)"
        )
    os.execv(exe, [str(exe)] + sys.argv[1:])


if __name__ == "__main__":
    main()
