"""Lists the long flags of TGI's `text-generation-launcher` at a release tag, from the clap
`Args` struct of its source (the launcher is a Rust binary shipped only in TGI's container
image, so llem's test cannot ask it for `--help`).

  python3 scripts/tgi-launcher-flags.py <text-generation-inference checkout> v3.3.6 \
      > crates/llem-engines/tests/reference/tgi-launcher-flags.txt

clap's derive names a field's long flag after the field, `_` turned into `-`, unless the
attribute sets `long = "..."`.
"""

import re
import subprocess
import sys


def flags(source: str) -> list[str]:
    start = source.index("struct Args {")
    body = source[start : source.index("\n}\n", start)]
    out, attr = [], None
    for line in body.splitlines():
        line = line.strip()
        if line.startswith(("#[clap(", "#[arg(")):
            attr = line
            continue
        field = re.match(r"(?:pub\s+)?([a-z_0-9]+)\s*:", line)
        if field and attr is not None:
            if "long" in attr:
                named = re.search(r'long\s*=\s*"([^"]+)"', attr)
                out.append("--" + (named.group(1) if named else field.group(1).replace("_", "-")))
            attr = None
    return out


def main() -> None:
    checkout, tag = sys.argv[1], sys.argv[2]
    source = subprocess.run(
        ["git", "-C", checkout, "show", f"{tag}:launcher/src/main.rs"],
        check=True, capture_output=True, text=True,
    ).stdout
    print(f"# text-generation-launcher {tag}: long flags of launcher/src/main.rs `struct Args`")
    print("# (scripts/tgi-launcher-flags.py)")
    for f in flags(source):
        print(f)


if __name__ == "__main__":
    main()
