#!/usr/bin/env bash
# The Python the transformers-engine tests run their worker with: torch, transformers,
# accelerate and gguf from PyPI, in target/pyenv-transformers (ignored by git). PyPI's Linux
# x86-64 torch is the CUDA build, which runs on a CPU-only machine as well; it pulls the
# NVIDIA runtime wheels (a few GB), so it lives apart from the small pandas/polars venv.
# Idempotent: an environment that already imports everything is kept. Prints nothing but
# errors and one line when it had to install.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/pyenv-transformers
want='import torch, transformers, gguf, accelerate'
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$want" 2>/dev/null; then
  exit 0
fi
python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null; then
  echo "scripts/transformers-env.sh: $python not found; the transformers tests need Python 3.10+" >&2
  exit 1
fi
mkdir -p target
rm -rf "$venv"
"$python" -m venv "$venv"
# Pinned so a test failure means llem changed, not the library; the worker itself accepts
# transformers 4.40+ and 5.x.
"$venv/bin/pip" install --quiet --disable-pip-version-check \
  'torch==2.15.0' 'transformers==5.23.0' 'accelerate==1.15.0' 'gguf==0.19.0'
"$venv/bin/python" -c "$want"
echo "scripts/transformers-env.sh: torch, transformers, accelerate and gguf ready in $venv"
