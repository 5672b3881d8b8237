"""`python -m llem ...` and the `llem` script: the command line. The wheel carries llem's own
CLI binary (`_bin/llem`, added by scripts/build-wheel.sh); this process becomes it."""

import os
import sys

from ._cli import cli_path, missing


def main() -> None:
    """Replaces this process with the `llem` command line, given this process's arguments."""
    why = missing()
    if why is not None:
        sys.exit(why)
    exe = cli_path()
    os.execv(exe, [str(exe)] + sys.argv[1:])


if __name__ == "__main__":
    main()
