#!/usr/bin/env python3
"""Adds llem's command-line binary to a built wheel as `llem/_bin/llem` (executable), and its
line to the wheel's RECORD, so the `llem` script, `python -m llem` and a study's cells run
the CLI itself: the extension module links no command line. A portable build's shared
libraries (llama.cpp and its CPU kernel modules) go in as `llem/_libs/NAME`. The wheel is
rewritten in place, through a temporary file renamed over it.

    scripts/bundle-cli.py WHEEL BINARY [LIBRARY ...]
"""

import base64
import hashlib
import os
import shutil
import sys
import tempfile
import zipfile

MEMBER = "llem/_bin/llem"


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    wheel, binary = sys.argv[1], sys.argv[2]
    added = [(MEMBER, binary, 0o100755)] + [
        (f"llem/_libs/{os.path.basename(lib)}", lib, 0o100644) for lib in sys.argv[3:]
    ]
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(wheel)), suffix=".whl")
    os.close(fd)
    try:
        with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(
            tmp, "w", compression=zipfile.ZIP_DEFLATED
        ) as out:
            names = src.namelist()
            for member, _, _ in added:
                if member in names:
                    sys.exit(f"{wheel} already holds {member}")
            records = [n for n in names if n.endswith(".dist-info/RECORD")]
            if len(records) != 1:
                sys.exit(f"{wheel} has {len(records)} RECORD files, expected one")
            for info in src.infolist():
                if info.filename == records[0]:
                    continue
                out.writestr(info, src.read(info.filename))
            lines_added = ""
            for member, path, mode in added:
                with open(path, "rb") as f:
                    data = f.read()
                entry = zipfile.ZipInfo(member, date_time=(1980, 1, 1, 0, 0, 0))
                entry.compress_type = zipfile.ZIP_DEFLATED
                # A regular file; rwxr-xr-x for the binary: pip keeps the executable bit.
                entry.external_attr = (mode & 0xFFFF) << 16
                out.writestr(entry, data)
                lines_added += record_line(member, data)
            record = src.read(records[0]).decode()
            lines = record.splitlines(keepends=True)
            # RECORD lists itself last, without a hash.
            own = [l for l in lines if l.startswith(records[0] + ",")]
            rest = [l for l in lines if not l.startswith(records[0] + ",")]
            out.writestr(
                src.getinfo(records[0]), "".join(rest) + lines_added + "".join(own)
            )
        shutil.copymode(wheel, tmp)
        os.replace(tmp, wheel)
    except BaseException:
        os.unlink(tmp)
        raise


if __name__ == "__main__":
    main()
