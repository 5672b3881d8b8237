"""SmolLM2 from the asset cache's GGUF as a Hugging Face directory, for servers that load
Hugging Face checkpoints (vLLM): every weight dequantised by transformers, stored bf16, with
the tokenizer and chat template. Deterministic for a given GGUF and transformers.

Usage: smollm2_to_hf.py GGUF OUT_DIR
"""
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

gguf, out = sys.argv[1:3]
directory, name = os.path.split(os.path.abspath(gguf))
tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=name)
model = AutoModelForCausalLM.from_pretrained(
    directory,
    gguf_file=name,
    dtype=torch.bfloat16,
    quantization_config=GgufConfig(dequantize=True),
)
# A plain checkpoint now: the GGUF quantisation note does not apply, and loaders find the
# architecture by its class name.
if hasattr(model.config, "quantization_config"):
    del model.config.quantization_config
model.config.architectures = [type(model).__name__]
model.save_pretrained(out)
tokenizer.save_pretrained(out)
print(out)
