# Golden: QLoRA with bitsandbytes' compute dtype bf16 under PyTorch's CPU autocast (the usual
# QLoRA recipe's arithmetic), on tests/golden/qlora_llama_lm's float32 model and PEFT adapter
# (read there, not copied): the right-padded batch's logits, loss and every LoRA gradient. The
# same model with compute dtype float32 and no autocast is run beside it, so the bf16 spread
# (per tensor, normwise) is recorded and the test can base its tolerances on it.
# Usage: python3 tools/golden/gen_qlora_bf16_llama_lm.py --out tests/golden/qlora_bf16_llama_lm
import copy
import json
import os

import torch

import decoder_golden as dg
import decoder_models as dm
import golden_common as gc

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden", "qlora_llama_lm")


def load(src, compute, w32):
    """The float32 model of src loaded 4-bit as the qlora_llama_lm golden loads it, with compute
    dtype compute, and the golden's PEFT adapter on it, trainable. Each NF4 weight is checked
    to dequantize as plain quantize_4bit of the float32 one (blocks of 64 over the flattened
    weight): the NF4 loupe makes by default. That holds on a CPU without AVX512_BF16 (this
    golden was made on Zen 3); on one with it, bitsandbytes 0.50.2's CPU kernel reads
    down_proj's scales per row (in_features 160 is not a multiple of 64: qlora_llama_lm's
    dequant.*, made there, and loupe's bnb_cpu_dequant), and the check stops the script."""
    import bitsandbytes as bnb
    import bitsandbytes.functional as F
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig
    qcfg = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=compute, llm_int8_skip_modules=["lm_head"])
    qm = AutoModelForCausalLM.from_pretrained(src, quantization_config=qcfg, device_map="cpu",
                                              attn_implementation="eager")
    n4 = 0
    for n, m in qm.named_modules():
        if isinstance(m, bnb.nn.Linear4bit):
            assert m.compute_dtype == compute, n
            q, st = F.quantize_4bit(w32[n + ".weight"], blocksize=64, quant_type="nf4", compress_statistics=True)
            assert torch.equal(F.dequantize_4bit(m.weight.data, m.weight.quant_state), F.dequantize_4bit(q, st)), n
            n4 += 1
    assert n4 == 7 * dm.LAYERS, n4
    return PeftModel.from_pretrained(qm, os.path.join(src, "peft_adapter"), is_trainable=True)


def run(pm, batch, bf16):
    pm.train()  # every dropout is 0; train() keeps bnb's dequantize-then-matmul path
    pm.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = pm(**dm.forward_kwargs(batch))
    logits = out.logits.float()  # the loss in f32, as autocast runs cross_entropy
    loss = dg.own_loss("lm", logits, batch["labels"])
    loss.backward()
    return {"logits": logits.detach().clone(), "loss": loss.detach().reshape(1).clone(),
            "grads": {n.replace(".default", ""): p.grad.detach().float().clone()
                      for n, p in pm.named_parameters() if p.requires_grad}}


def spread(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp(min=1e-30))


def main():
    out = gc.parse_out("qlora_bf16_llama_lm golden")
    gc.setup()
    os.makedirs(out, exist_ok=True)
    from safetensors.torch import load_file
    w32 = load_file(os.path.join(SRC, "model.safetensors"))
    batch = dm.make_batch("right", "lm")
    rb = run(load(SRC, torch.bfloat16, w32), batch, True)
    rf = run(load(SRC, torch.float32, w32), batch, False)
    t = {"right." + k: v for k, v in dm.batch_tensors(batch).items()}
    t["right.logits"] = rb["logits"]
    t["right.loss"] = rb["loss"]
    t["f32.right.loss"] = rf["loss"]
    t["f32.right.logits"] = rf["logits"]
    for n, g in rb["grads"].items():
        t["right.grad." + n] = g
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in t.items()}, os.path.join(out, "golden.safetensors"))
    meta = {
        "golden": "qlora_bf16_llama_lm", "cpu_flags_avx512_bf16": "avx512_bf16" in open("/proc/cpuinfo").read(), "source": "tests/golden/qlora_llama_lm (config.json, "
                                                     "model.safetensors, peft_adapter/)", "versions": gc.versions(), "seed": gc.SEED,
        "how": "the float32 model here loaded 4-bit (BitsAndBytesConfig nf4, double quant, blocksize 64, "
               "lm_head skipped; each weight plain quantize_4bit of the float32 one) with bnb_4bit_compute_dtype = "
               "torch.bfloat16, peft_adapter/ on it (PeftModel, "
               "trainable), model.train(), forward under torch.autocast('cpu', dtype=torch.bfloat16), "
               "the causal-LM loss (shifted labels, mean over counted tokens) on the float32 logits, "
               "backward; bitsandbytes dequantizes each NF4 weight to float32 and casts it to bf16 "
               "(matmul_4bit), the input is bf16, the output bf16",
        "bf16_vs_f32": {"loss": spread(rb["loss"], rf["loss"]),
                        "logits": spread(rb["logits"], rf["logits"]),
                        "grads_max": max(spread(rb["grads"][n], rf["grads"][n]) for n in rb["grads"])},
        "grads": sorted(rb["grads"]),
    }
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    print(json.dumps(meta["bf16_vs_f32"]))


if __name__ == "__main__":
    main()
