# Sourced by scripts/llem07-*.sh: llenergymeasure 0.7.0 from PyPI (wheel checksum pinned) in
# $work/pkgs, runnable here without a GPU. Only its "is CUDA available" pre-flight answer is
# replaced (sitecustomize, in every process it starts); everything else runs unmodified.
# Needs $repo, $work, $py (the engines venv's Python: torch + transformers).
"$py" -m pip download --quiet --no-deps --dest "$work/wheel" llenergymeasure==0.7.0
llem07_sum=$(sha256sum "$work"/wheel/*.whl | cut -d' ' -f1)
llem07_want=1222c82557ef14497faa484c08a9baf3fc6287a94eb06996435eda0cf23e8df3
if [ "$llem07_sum" != "$llem07_want" ]; then
  echo "llenergymeasure 0.7.0 wheel has SHA-256 $llem07_sum, expected $llem07_want" >&2
  exit 1
fi
"$py" -m pip install --quiet --target "$work/pkgs" "$work"/wheel/*.whl typer rich python-dotenv \
  platformdirs nvidia-ml-py
mkdir -p "$work/shim"
cat > "$work/shim/sitecustomize.py" <<'PY'
try:
    import llenergymeasure.harness.preflight as _pf
    _pf._check_cuda_available = lambda: True
except Exception:
    pass
PY
llem07() {
  PYTHONPATH="$work/shim:$work/pkgs" HOME="$work" "$py" "$work/pkgs/bin/llem" "$@"
}
