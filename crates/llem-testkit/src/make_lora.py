"""Makes a small LoRA adapter for the LoRA tests: PEFT on SmolLM2 (loaded from its GGUF by
transformers), rank 8 on every layer's v_proj and o_proj, with random weights on both A and
B (`init_lora_weights=False`), so that applying it changes the model's output.

Usage: make_lora.py MODEL_DIR GGUF_FILE OUT_DIR
Writes OUT_DIR/base/config.json (the Hugging Face config llama.cpp's converter reads) and
OUT_DIR/peft/ (adapter_config.json, adapter_model.safetensors).
"""
import json
import os
import sys

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

model_dir, gguf_file, out = sys.argv[1:4]
torch.manual_seed(1234)
model = AutoModelForCausalLM.from_pretrained(model_dir, gguf_file=gguf_file, dtype=torch.float32)

base = os.path.join(out, "base")
model.config.save_pretrained(base)
# The converter finds the architecture by its class name; the weights came from a GGUF file,
# whose quantisation note does not apply to the adapter.
path = os.path.join(base, "config.json")
with open(path) as f:
    config = json.load(f)
config["architectures"] = [type(model).__name__]
config.pop("quantization_config", None)
with open(path, "w") as f:
    json.dump(config, f, indent=1)

lora = LoraConfig(r=8, lora_alpha=16, target_modules=["v_proj", "o_proj"], init_lora_weights=False)
# Random B as well as A: PEFT's default B = 0 would make the adapter a no-op.
peft_model = get_peft_model(model, lora)
peft_model.save_pretrained(os.path.join(out, "peft"))
print("adapter written to", out)
