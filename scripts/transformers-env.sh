#!/usr/bin/env bash
# The Python the transformers-engine tests run their worker with: torch, transformers,
# accelerate, gguf and peft (LoRA adapters) from PyPI, in target/pyenv-transformers
# (ignored by git). PyPI's Linux x86-64 torch is the CUDA build, which runs on a CPU-only
# machine as well; it pulls the NVIDIA runtime wheels (about 3.5 GB to download, 5.6 GB
# installed), so it lives apart from the small pandas/polars venv.
# Idempotent: an environment that already imports everything is kept. Prints nothing but
# errors and one line when it had to install.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/pyenv-transformers
wheels=target/wheels-transformers
want='import torch, transformers, gguf, accelerate, peft'
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$want" 2>/dev/null; then
  exit 0
fi
python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null; then
  echo "scripts/transformers-env.sh: $python not found; the transformers tests need Python 3.10+" >&2
  exit 1
fi
# Pinned so a test failure means llem changed, not the library; the worker itself accepts
# transformers 4.40+ and 5.x.
pins=('torch==2.15.0' 'transformers==5.23.0' 'accelerate==1.15.0' 'gguf==0.19.0' 'peft==0.21.2')
mkdir -p "$wheels"
rm -rf "$venv"
"$python" -m venv "$venv"
pip=("$venv/bin/pip" --disable-pip-version-check --no-input)

# A connection PyPI drops in the middle of a gigabyte wheel is not retried by pip (its
# retries cover connecting only), so the wheels are fetched into a folder first, a few times
# over if need be: each attempt keeps the wheels that finished and fetches only the rest.
attempt=1
until "${pip[@]}" download --quiet --progress-bar off --no-cache-dir --timeout 60 --retries 5 \
  --dest "$wheels" "${pins[@]}" 2>"$wheels.log"; do
  if [ "$attempt" -ge 3 ]; then
    tail -n 20 "$wheels.log" >&2
    echo "scripts/transformers-env.sh: could not fetch the wheels from PyPI after $attempt attempts" \
      "(free space under target/: $(df -h --output=avail target | tail -n 1 | tr -d ' '))" >&2
    exit 1
  fi
  echo "scripts/transformers-env.sh: fetching wheels failed (attempt $attempt): $(tail -n 1 "$wheels.log")" >&2
  attempt=$((attempt + 1))
  sleep $((attempt * 5))
done
# One file at a time, largest first, each removed once installed: the disk then holds the
# environment plus one wheel at the peak, not the environment and every wheel (~9 GB), which
# once filled CI's disk. The download above resolved the dependencies; `pip check` confirms
# the installed set is complete.
find "$wheels" -maxdepth 1 -type f -printf '%s %p\n' | sort -rn | while read -r _ file; do
  "${pip[@]}" install --quiet --no-index --no-cache-dir --no-deps "$file"
  rm -f "$file"
done
"${pip[@]}" check >/dev/null
"$venv/bin/python" -c "$want"
rm -rf "$wheels" "$wheels.log"
echo "scripts/transformers-env.sh: torch, transformers, accelerate, gguf and peft ready in $venv"
