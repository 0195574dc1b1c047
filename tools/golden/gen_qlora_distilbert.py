# Golden: QLoRA on the tiny DistilBERT: transformer linears quantized to NF4 by bitsandbytes
# (transformers BitsAndBytesConfig, double quant, float32 compute) + the LoRA of
# lora_distilbert: logits, loss, trainable gradients, 3 AdamW steps, saved 4-bit model.
# Usage: python3 tools/golden/gen_qlora_distilbert.py --out tests/golden/qlora_distilbert
import copy
import os

import torch

import golden_common as gc
import lora_golden as lg
import tiny_models as tm

SKIP = ["pre_classifier", "classifier"]


def main():
    out = gc.parse_out("qlora_distilbert golden")
    gc.setup()
    gc.fresh_dir(out)
    import bitsandbytes as bnb
    import bitsandbytes.functional as F
    from transformers import AutoModelForSequenceClassification, BitsAndBytesConfig

    tok = tm.make_tokenizer(out)
    batch = tm.make_batch(tok, pairs=False)
    base = tm.build("distilbert")
    tm.save_model(base, out)

    qcfg = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                              bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=torch.float32,
                              llm_int8_skip_modules=SKIP)
    qm = AutoModelForSequenceClassification.from_pretrained(
        out, quantization_config=qcfg, device_map="cpu", attn_implementation="eager")
    quantized = [n for n, m in qm.named_modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert quantized, "no Linear4bit layer"
    deq, qstate = {}, {}
    for n, m in qm.named_modules():
        if isinstance(m, bnb.nn.Linear4bit):
            qs = m.weight.quant_state
            assert qs.quant_type == "nf4" and qs.blocksize == 64 and qs.nested
            deq[n + ".weight"] = F.dequantize_4bit(m.weight.data, qs).float()
            qstate[n] = {"shape": list(qs.shape), "offset": qs.offset.item(),
                         "blocks": int(qs.absmax.numel())}
    qm.save_pretrained(os.path.join(out, "quantized_model"))
    # The saved 4-bit model reloads to the same weights, and transformers' quantization is
    # plain quantize_4bit of the float32 weights.
    rq = AutoModelForSequenceClassification.from_pretrained(os.path.join(out, "quantized_model"),
                                                            device_map="cpu")
    sd32 = base.state_dict()
    for n, m in rq.named_modules():
        if isinstance(m, bnb.nn.Linear4bit):
            assert torch.equal(F.dequantize_4bit(m.weight.data, m.weight.quant_state),
                               deq[n + ".weight"]), n
            q, s = F.quantize_4bit(sd32[n + ".weight"], blocksize=64, quant_type="nf4",
                                   compress_statistics=True)
            assert torch.equal(F.dequantize_4bit(q, s), deq[n + ".weight"]), n
    del rq

    # Loaded from a path, the model would put that (machine-specific) path into the
    # adapter's base_model_name_or_path; leave it null as in the lora_* goldens.
    qm.name_or_path = None
    qm.config._name_or_path = None
    pm = lg.make_peft(qm, "distilbert", rslora=False)
    pm.peft_config["default"].base_model_name_or_path = None
    init_trainable = {lg.saved_name(n): p.detach().clone()
                      for n, p in pm.named_parameters() if p.requires_grad}
    lg.save_adapter(pm, os.path.join(out, "peft_adapter"))
    # Training mode on purpose: in eval mode with no grad, bitsandbytes' CPU Linear4bit
    # switches (on AVX512-BF16 CPUs) to a repacked bf16 kernel; train() keeps the
    # dequantize-then-float32-matmul path that QLoRA training uses.
    r32 = lg.run_reference(pm, batch)

    # Reference without bitsandbytes: the same model with the dequantized weights in plain
    # nn.Linear and the same LoRA weights, in float32 and float64.
    dq_base = tm.build("distilbert")
    sd = dq_base.state_dict()
    for n, w in deq.items():
        sd[n] = w
    dq_base.load_state_dict(sd)
    pm_dq = lg.make_peft(dq_base, "distilbert", rslora=False)
    with torch.no_grad():
        for n, p in pm_dq.named_parameters():
            if p.requires_grad:
                assert torch.equal(p, init_trainable[lg.saved_name(n)]), n
    pm_dq64 = copy.deepcopy(pm_dq).double()
    rdq = lg.run_reference(pm_dq, batch)
    r64 = lg.run_reference(pm_dq64, batch)

    t = dict(batch)
    t.update({"logits": r32["logits"], "loss": r32["loss"], "losses": r32["losses"]})
    for n, g in r32["grads"].items():
        t["grad." + n] = g
    for n, w in r32["step3"].items():
        t["step3." + n] = w
    for n, w in deq.items():
        t["dequant." + n] = w

    meta = {
        "golden": "qlora_distilbert", "versions": gc.versions(), "seed": gc.SEED,
        "base_model": "config.json + model.safetensors here: the float32 tiny DistilBERT of "
                      "cls_distilbert (same generator and seed); %s" % tm.INIT_NOTE,
        "quantization": {"how": "AutoModelForSequenceClassification.from_pretrained(dir, "
                                "quantization_config=BitsAndBytesConfig(load_in_4bit=True, "
                                "bnb_4bit_quant_type='nf4', bnb_4bit_use_double_quant=True, "
                                "bnb_4bit_compute_dtype=torch.float32, "
                                "llm_int8_skip_modules=%s), device_map='cpu')" % SKIP,
                         "quantized_modules": quantized,
                         "kept_float32": "embeddings, LayerNorms, biases, pre_classifier, "
                                         "classifier (skip list: by default transformers would "
                                         "quantize the head too, which PEFT's modules_to_save "
                                         "cannot train)",
                         "blocksize": 64, "double_quant": True, "nested_blocksize": 256,
                         "per_module": qstate,
                         "rules": "see tests/golden/nf4/golden.json (same bitsandbytes calls)",
                         "saved": "quantized_model/ = save_pretrained of the 4-bit model: "
                                  "config.json with quantization_config; model.safetensors with "
                                  "<m>.weight (u8 packed), <m>.weight.absmax (u8), "
                                  "<m>.weight.nested_absmax, <m>.weight.quant_map, "
                                  "<m>.weight.nested_quant_map, "
                                  "<m>.weight.quant_state.bitsandbytes__nf4 (u8 JSON)"},
        "lora": {"r": lg.R, "lora_alpha": lg.ALPHA, "target_modules": lg.TARGETS["distilbert"],
                 "scaling": lg.ALPHA / lg.R, "lora_dropout": 0.0, "task_type": "SEQ_CLS",
                 "init": "identical to lora_distilbert (same seeds): lora_A kaiming-uniform, "
                         "lora_B N(0, %g^2), so logits differ from lora_distilbert only by the "
                         "NF4 error of the base weights" % lg.B_STD,
                 "prepare_model_for_kbit_training": "not called (it would only add gradient "
                                                    "checkpointing and fp32 casts: no numerical "
                                                    "change in float32 without dropout)"},
        "mode": "model.train() (all dropout is 0): bitsandbytes' CPU Linear4bit takes the "
                "dequantize_4bit + float32 F.linear path. In eval()+no_grad on an AVX512-BF16 "
                "CPU it instead repacks the weight and runs a bf16 gemm (different numbers), and "
                "that repacking fails for in_features < blocksize (shape [32, 0] error in "
                "bitsandbytes 0.50.2 with this 32-wide model)",
        "optimizer": {"name": "torch.optim.AdamW over the trainable parameters only",
                      "lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01,
                      "steps": 3},
        "adapter_dir": "peft_adapter/ = PeftModel.save_pretrained output (initial adapter)",
        "tensors": {
            "input_ids/attention_mask/labels": "the batch of cls_distilbert (int64)",
            "logits": "[B, 2] QLoRA model forward (train mode)", "loss": "mean cross-entropy",
            "losses": "[3] loss before AdamW step 1, 2, 3",
            "grad.<adapter key>": "gradients of lora_A/lora_B/head, named as in the adapter file",
            "step3.<adapter key>": "trainable parameters after 3 AdamW steps",
            "dequant.<module>.weight": "float32 dequantize_4bit of each quantized weight (with "
                                       "double quant): the weights the QLoRA forward really uses"},
        "qlora_vs_lora_on_dequantized_f32": {
            "logits": gc.diff_stats(r32["logits"], rdq["logits"]),
            "grad_all": gc.group_stats((r32["grads"][n], rdq["grads"][n]) for n in r32["grads"]),
            "how": "bitsandbytes QLoRA vs plain PEFT LoRA whose base weights are the dequantized "
                   "NF4 weights, both float32: QLoRA is exactly LoRA on dequantized weights"},
        "f32_vs_f64": {"logits": gc.diff_stats(r32["logits"], r64["logits"]),
                       "loss": gc.diff_stats(r32["loss"], r64["loss"]),
                       "losses": gc.diff_stats(r32["losses"], r64["losses"]),
                       "grad_all": gc.group_stats((r32["grads"][n], r64["grads"][n])
                                                  for n in r32["grads"]),
                       "step3_all": gc.group_stats((r32["step3"][n], r64["step3"][n])
                                                   for n in r32["step3"]),
                       "how": "float64 run = LoRA on the dequantized weights (bitsandbytes has no "
                              "float64 path), same adapter"},
    }
    gc.save_golden(out, t, meta)


if __name__ == "__main__":
    main()
