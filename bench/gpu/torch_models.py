#!/usr/bin/env python3
"""PyTorch's side of bench/gpu's model-level table (issue 19): one training step of a
DistilBERT-shaped classifier (batch 32 x seq 128) and a Qwen2.5-0.5B-shaped causal LM
(batch 8 x seq 512), full fine-tuning, LoRA (PEFT: r 8 on q_lin, v_lin for DistilBERT as train_models.sh; r 16 all linears for Qwen)
and QLoRA (the same adapters over bitsandbytes' Linear4bit: NF4 with double quantization, the
layer Linears only, computing in f32 for f32 / TF32 and in bf16 under bf16), in f32, TF32 or
bf16 autocast (f32 master weights), AdamW, eager and torch.compile. Random weights (the shapes, not the values,
set the time). Prints one JSON line per configuration: samples/s over --steps timed steps
after --warmup, peak allocated and reserved memory, and the step's model FLOPs.

  python3 bench/gpu/torch_models.py [--device cuda] [--steps 10] [--warmup 3] [--only distilbert-full-eager-tf32,...]
                                    [--layers N]   (N layers instead of the shape's: a quick check)
"""
import argparse, json, sys, time

import torch


def distilbert(vocab=30522, layers=6):
    from transformers import DistilBertConfig, DistilBertForSequenceClassification
    cfg = DistilBertConfig(vocab_size=vocab, dim=768, n_layers=layers, n_heads=12, hidden_dim=3072,
                           max_position_embeddings=512, num_labels=2, dropout=0.1, attention_dropout=0.1)
    return DistilBertForSequenceClassification(cfg), ["q_lin", "v_lin"], (32, 128)


def qwen(vocab=151936, layers=24):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    cfg = Qwen2Config(vocab_size=vocab, hidden_size=896, intermediate_size=4864, num_hidden_layers=layers,
                      num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                      rope_theta=1e6, tie_word_embeddings=True, attn_implementation="sdpa")
    return Qwen2ForCausalLM(cfg), ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], (8, 512)


def linear_params(model):
    return sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))


HEADS = ("pre_classifier", "classifier", "lm_head", "score")


def to_nf4(model, compute_dtype):
    """Every layer Linear (not the heads) as bitsandbytes' Linear4bit: NF4 blocks of 64 with
    double quantization, quantized when the model moves to the GPU, as QLoRA loads it."""
    import bitsandbytes as bnb
    for mod in list(model.modules()):
        for cname, child in list(mod.named_children()):
            if type(child) is torch.nn.Linear and cname not in HEADS:
                q = bnb.nn.Linear4bit(child.in_features, child.out_features, bias=child.bias is not None,
                                      compute_dtype=compute_dtype, compress_statistics=True, quant_type="nf4")
                q.weight = bnb.nn.Params4bit(child.weight.data, requires_grad=False, compress_statistics=True,
                                             quant_type="nf4")
                if child.bias is not None:
                    q.bias = torch.nn.Parameter(child.bias.data, requires_grad=False)
                setattr(mod, cname, q)
    return model


def step_flops(name, model, method, B, T):
    """Model FLOPs of one step: linears 2*N per token forward, attention 4*T*d per token per
    layer forward; backward twice the forward for full fine-tuning, once (dX only) for LoRA."""
    n = linear_params(model)
    cfg = model.config
    layers = getattr(cfg, "n_layers", None) or cfg.num_hidden_layers
    d = getattr(cfg, "dim", None) or cfg.hidden_size
    causal = 0.5 if name == "qwen" else 1.0
    fwd = 2.0 * n * B * T + 4.0 * B * T * T * d * layers * causal
    return fwd * (3.0 if method == "full" else 2.0)


def run(name, method, impl, prec, args):
    torch.manual_seed(0)
    model, targets, (B, T) = (distilbert(layers=args.layers or 6) if name == "distilbert"
                              else qwen(layers=args.layers or 24))
    flops = step_flops(name, model, method, B, T)
    if method == "qlora":
        model = to_nf4(model, torch.bfloat16 if prec == "bf16" else torch.float32)
    if method in ("lora", "qlora"):
        from peft import LoraConfig, get_peft_model
        # as bench/gpu/train_models.sh runs loupe: DistilBERT r 8 on q_lin, v_lin, dropout 0.1
        r, drop = (8, 0.1) if name == "distilbert" else (16, 0.05)
        model = get_peft_model(model, LoraConfig(r=r, lora_alpha=2 * r, lora_dropout=drop, target_modules=targets,
                                                 task_type="SEQ_CLS" if name == "distilbert" else "CAUSAL_LM"))
    dev = torch.device(args.device)
    model.to(dev).train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5,
                            fused=dev.type == "cuda")
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (B, T), device=dev)
    mask = torch.ones(B, T, dtype=torch.long, device=dev)
    if name == "distilbert":
        labels = torch.randint(0, 2, (B,), device=dev)
    else:
        labels = ids.clone()

    def step():
        if prec == "bf16":
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                out = model(input_ids=ids, attention_mask=mask, labels=labels)
        else:  # f32 weights and activations; tf32: f32 GEMMs on TF32 tensor cores
            out = model(input_ids=ids, attention_mask=mask, labels=labels)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return out.loss

    fn = torch.compile(step) if impl == "compile" else step
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    t_compile = time.perf_counter()
    for _ in range(args.warmup):
        fn()
    sync()
    t_compile = time.perf_counter() - t_compile
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = fn()
    sync()
    dt = (time.perf_counter() - t0) / args.steps
    rec = {"model": name, "method": method, "impl": impl, "precision": prec, "batch": B, "seq": T, "ms_per_step": round(dt * 1e3, 3),
           "samples_per_s": round(B / dt, 2), "step_flops": flops, "tflops": round(flops / dt / 1e12, 2),
           "warmup_s": round(t_compile, 1), "loss": float(loss), "torch": torch.__version__}
    if dev.type == "cuda":
        rec["gpu"] = torch.cuda.get_device_name()
        rec["peak_allocated"] = torch.cuda.max_memory_allocated()
        rec["peak_reserved"] = torch.cuda.max_memory_reserved()
    print(json.dumps(rec), flush=True)
    del model, opt
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--layers", type=int, default=0)
    ap.add_argument("--only", default="distilbert-full-eager-tf32,distilbert-lora-eager-tf32,distilbert-full-eager-bf16,"
                    "distilbert-lora-eager-bf16,distilbert-full-compile-tf32,distilbert-lora-compile-tf32,"
                    "distilbert-qlora-eager-tf32,distilbert-qlora-eager-bf16,qwen-lora-eager-tf32,qwen-lora-compile-tf32,"
                    "qwen-qlora-eager-tf32,qwen-lora-eager-bf16,qwen-lora-compile-bf16,qwen-qlora-eager-bf16",
                    help="model-method-impl-precision list (precision f32, tf32 or bf16 autocast)")
    args = ap.parse_args()
    for cfg in args.only.split(","):
        name, method, impl, prec = cfg.split("-")
        torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
        torch.backends.cudnn.allow_tf32 = prec == "tf32"
        try:
            run(name, method, impl, prec, args)
        except Exception as e:  # one configuration failing must not lose the others
            print(json.dumps({"model": name, "method": method, "impl": impl, "precision": prec,
                              "error": repr(e)[:300]}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
