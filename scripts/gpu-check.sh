#!/usr/bin/env bash
# The GPU path, checked on a real NVIDIA GPU in a few minutes: what the NVML driver reports
# (energy counter update period, counter against integrated instantaneous and averaged
# power), llem measure around a PyTorch matmul load (sampler auto = counter, then nvml =
# integrated power), throttle state, and a transformers run on CUDA.
#
#   scripts/gpu-check.sh pack     on the build machine: the release binary and SmolLM2's config
#                                 and tokenizer into target/gpu-check/ (~32 MB, no weights)
#   scripts/gpu-check.sh          on the GPU machine (torch, transformers, nvidia-ml-py; no
#                                 network, no Rust): prints the figures, keeps the files in
#                                 $GPU_CHECK_OUT (default target/gpu-check/out)
#
# The model on the GPU machine is SmolLM2-135M's architecture with random weights: the check
# is of energy and the CUDA path, not of text.
set -euo pipefail

cd "$(dirname "$0")/.."
PACK=target/gpu-check

if [[ "${1:-run}" == pack ]]; then
    assets="${LLEM_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/llem/assets}"
    cargo build --release -p llem
    [[ -f "$assets/smollm2-hf/config.json" ]] || scripts/engines-env.sh
    rm -rf "$PACK" && mkdir -p "$PACK/model-config"
    cp target/release/llem "$PACK/llem"
    for f in config.json generation_config.json tokenizer.json tokenizer_config.json chat_template.jinja; do
        [[ -f "$assets/smollm2-hf/$f" ]] && cp "$assets/smollm2-hf/$f" "$PACK/model-config/"
    done
    du -sh "$PACK"
    echo "carry $PACK to the GPU machine and run scripts/gpu-check.sh there"
    exit 0
fi

LLEM="${LLEM:-$PACK/llem}"
[[ -x "$LLEM" ]] || LLEM=target/release/llem
[[ -x "$LLEM" ]] || { echo "gpu-check: no llem binary (run scripts/gpu-check.sh pack)" >&2; exit 2; }
PY="${PYTHON:-python3}"
OUT="${GPU_CHECK_OUT:-$PACK/out}"
rm -rf "$OUT" && mkdir -p "$OUT"
export LLEM_CONFIG_PATH="$OUT/no-user-config.yaml" LLEM_PYTHON="$PY"
step() { printf '\n== %s\n' "$*"; }

step "the GPUs"
nvidia-smi --query-gpu=index,name,uuid,driver_version,persistence_mode,power.limit,clocks.max.sm,temperature.gpu \
    --format=csv
"$LLEM" --version
"$LLEM" config | sed -n '/^Energy sensors/,$p'

# Read only: the ranges device: settings are checked against. This script never changes a
# GPU's power limit, clocks, persistence or MIG mode, and never resets it.
step "device settings llem would check against (read only)"
nvidia-smi --query-gpu=index,power.limit,power.default_limit,power.min_limit,power.max_limit,clocks.max.sm,clocks.max.memory \
    --format=csv
nvidia-smi -q -d SUPPORTED_CLOCKS | grep -m 8 -E "Memory|Graphics" || true
"$LLEM" doctor | sed -n '/^Device settings/,/^$/p' || true

step "NVML under load: counter update period, counter vs integrated power (5 s)"
"$PY" scripts/gpu_check.py probe --seconds 5

step "llem measure --sampler auto (energy counter) around 15 s of matmuls"
"$LLEM" measure --sampler auto --interval 50ms --json -o "$OUT/measure-auto" -- \
    "$PY" scripts/gpu_check.py load --seconds 15 > "$OUT/measure-auto.json"
"$PY" scripts/gpu_check.py summary measure "$OUT/measure-auto.json"

step "llem measure --sampler nvml (integrated power) around 15 s of matmuls"
"$LLEM" measure --sampler nvml --interval 50ms --json -o "$OUT/measure-nvml" -- \
    "$PY" scripts/gpu_check.py load --seconds 15 > "$OUT/measure-nvml.json"
"$PY" scripts/gpu_check.py summary measure "$OUT/measure-nvml.json"

step "transformers on CUDA: SmolLM2-135M shape, random weights, 64 prompts x 128 tokens"
"$PY" scripts/gpu_check.py make-model "$PACK/model-config" "$OUT/model"
cat > "$OUT/transformers.yaml" <<EOF
model: $(realpath "$OUT/model")
engine: transformers
dtype: bfloat16
transformers: {batch_size: 16}
dataset: {source: synthetic, n_prompts: 64, synthetic: {input_tokens: 128, output_tokens: 128}}
max_output_tokens: 128
warmup: {n_warmup: 2, thermal_floor_seconds: 0}
baseline: {duration_seconds: 10}
EOF
"$LLEM" run "$OUT/transformers.yaml" -o "$OUT/transformers"
result=$(find "$OUT/transformers" -name result.json | head -n 1)
[[ -n "$result" ]] || { echo "gpu-check: the transformers run wrote no result.json" >&2; exit 1; }
"$PY" scripts/gpu_check.py summary result "$result"

step "throttle reasons now"
nvidia-smi --query-gpu=index,clocks_throttle_reasons.active,temperature.gpu,power.draw --format=csv
echo
echo "gpu-check: done; files in $OUT"
