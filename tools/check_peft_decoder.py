#!/usr/bin/env python3
"""Checks that a decoder LoRA adapter saved by loupe loads in PEFT and gives loupe's logits.

tests/models/test_llama_golden (test_adapter_round_trip) takes one step on the lora_qwen2_lm
golden (all-linear LoRA on a tiny Qwen2ForCausalLM), saves the adapter with
lp_model_save_adapter into BUILD/test_model_save/lora_qwen2_lm_adapter and the logits it computes
for the golden's right-padded batch beside it (loupe_logits.safetensors). Here transformers +
PEFT load the same base model and that adapter (PeftModel.from_pretrained) and compute the
logits of the same batch: they must equal loupe's within 1e-4 relative (normwise, over real
tokens), and the adapter must hold exactly PEFT's keys for that model.
Needs torch + transformers + peft (the global python3 of the dev machine); exit 77 without.

usage: python3 tools/check_peft_decoder.py [BUILD_DIR]"""
import os
import sys

try:
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM
except ImportError as e:
    print(f"check_peft_decoder: skipped, needs torch/transformers/peft: {e}", file=sys.stderr)
    sys.exit(77)

build = sys.argv[1] if len(sys.argv) > 1 else "build"
base = "tests/golden/lora_qwen2_lm"
ad = os.path.join(build, "test_model_save", "lora_qwen2_lm_adapter")
if not os.path.exists(os.path.join(ad, "adapter_config.json")):
    sys.exit(f"{ad}: run tests/models/test_llama_golden first (it writes the adapter)")
torch.manual_seed(0)
model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, attn_implementation="eager")
model = PeftModel.from_pretrained(model, ad)
model.eval()
g = load_file(os.path.join(base, "golden.safetensors"))
ids, mask = g["right.input_ids"], g["right.attention_mask"]
with torch.no_grad():
    ref = model(input_ids=ids, attention_mask=mask).logits
ours = load_file(os.path.join(ad, "loupe_logits.safetensors"))["logits"]
real = mask.bool()
d = (ours[real] - ref[real]).abs().max().item()
rel = d / ref[real].abs().max().item()
keys = set(load_file(os.path.join(ad, "adapter_model.safetensors")).keys())
want = {k for k in load_file(os.path.join(base, "peft_adapter", "adapter_model.safetensors")).keys()}
print(f"PEFT vs loupe logits on {int(real.sum())} real tokens: max|d| {d:.3e}, rel {rel:.3e} (tolerance 1e-4)")
print(f"adapter keys: {len(keys)} (PEFT's own adapter for this model: {len(want)}), same set: {keys == want}")
ok = rel <= 1e-4 and keys == want
print("ok" if ok else "FAIL")
sys.exit(0 if ok else 1)
