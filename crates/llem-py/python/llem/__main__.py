"""`python -m llem ...` and the `llem` script: the command line, from this package's core."""

import sys

from . import _native


def main() -> None:
    """Runs the `llem` command line with this process's arguments and exits with its code."""
    sys.exit(_native.cli(["llem"] + sys.argv[1:]))


if __name__ == "__main__":
    main()
