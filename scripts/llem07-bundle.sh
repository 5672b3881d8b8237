#!/usr/bin/env bash
# Regenerates crates/llem-records/tests/fixtures/llem07-study/: a real result bundle (bundle
# 2.0) of the Python llenergymeasure 0.7.0, run here on a machine without a GPU, for the tests
# of llem's reader of llem 0.7 results. What stands in for what:
#   - the GPU driver: llem's NVML stand-in (crates/llem-testkit/src/nvml_standin.c),
#     one 300 W "H100", read through nvidia-ml-py as the real driver would be;
#   - CUDA: the 0.7 pre-flight's "is CUDA available" answer only (sitecustomize below); the
#     model runs on CPU (device_map: cpu);
#   - the model: a 2-layer random Llama with SmolLM2's tokenizer, made with transformers.
# Everything else is llenergymeasure 0.7.0 from PyPI, unmodified: its study runner, sweep,
# cells in child processes, energy integration, sidecars and manifest.
# Needs the engines venv (torch + transformers; scripts/engines-env.sh) and network to PyPI.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-$repo/target/pyenv-engines/bin/python}
out=$repo/crates/llem-records/tests/fixtures/llem07-study
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

. "$repo/scripts/llem07-env.sh"
cc -shared -fPIC -O1 -o "$work/libnvidia-ml.so.1" \
  "$repo/crates/llem-testkit/src/nvml_standin.c" -lm
printf 'driver 550.54.15\ngpu uuid=GPU-aaaa-1111 name=NVIDIA_H100_80GB_HBM3 power_w=300 temp_c=50 mem_total_mib=81559 mem_used_mib=2048 sm_clock_mhz=1980\n' \
  > "$work/nvml-script"
tokenizer=${LLEM_ASSETS:-$HOME/.cache/llem/assets}/smollm2-hf
"$py" - "$work/tiny" "$tokenizer" <<'PY'
import shutil, sys, glob
from transformers import LlamaConfig, LlamaForCausalLM
import torch
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
LlamaForCausalLM(cfg).save_pretrained(sys.argv[1])
for f in glob.glob(sys.argv[2] + "/tokenizer*") + glob.glob(sys.argv[2] + "/*.jinja"):
    shutil.copy(f, sys.argv[1])
PY
cat > "$work/study.yaml" <<YAML
study_name: tiny-sweep
serving_mode: offline
task:
  model: $work/tiny
  dataset: {source: aienergyscore, n_prompts: 24}
  max_input_tokens: 32
  max_output_tokens: 16
measurement:
  energy_sampler: nvml
  baseline: {enabled: true, duration_seconds: 5, strategy: fresh}
offline:
  warmup: {enabled: false}
study_execution: {n_cycles: 2, experiment_order: sequential, experiment_gap_seconds: 0, cycle_gap_seconds: 0}
output: {save_timeseries: true}
sweep:
  transformers.llem_execution.batch_size: [1, 4]
engine: transformers
transformers:
  engine_params: {dtype: float32, device_map: cpu}
YAML
(cd "$work" && LD_LIBRARY_PATH="$work" NVML_STANDIN_SCRIPT="$work/nvml-script" \
  llem07 run study.yaml -o "$work/results" --no-lock --quiet)
study=$(ls -d "$work"/results/tiny-sweep_*)
rm -rf "$out"
mkdir -p "$out"
# The bundle as written; the temporary paths it records are kept (they are what a user's
# bundle holds), the runtime_observations log is not part of the bundle.
cp -r "$study"/. "$out"/
rm -f "$out/runtime_observations.jsonl"
echo "wrote $out"
