#!/usr/bin/env python3
"""PyTorch side of bench/train_step and bench/peft_step: the same shapes bench_step runs,
timed the same way, one configuration per process (so the peak RSS belongs to it).

DistilBERT-shaped (6 layers, hidden 768, 12 heads, FFN 3072) and MiniLM-shaped (6 layers,
hidden 384, 12 heads, FFN 1536) sequence classifiers, random weights from a config (no
download), fp32, dropout off: a training step (zero grad, forward, backward, clip_grad_norm
1.0, AdamW: what HF Trainer and `loupe train` do) with full fine-tuning, PEFT LoRA (rank 8,
alpha 16 on q and v) or QLoRA (PEFT + bitsandbytes Linear4bit, NF4 with double quantization,
fp32 compute, head kept fp32), or inference (torch.inference_mode) at one batch size.
Prints one JSON object with the same fields as bench_step.

Thread settings matter on a small machine (two spinning pools cost PyTorch up to 2.5x at
batch 1): run it as
  OMP_WAIT_POLICY=PASSIVE OPENBLAS_THREAD_TIMEOUT=4 python3 torch_ref.py --threads 2
and compare with the defaults; report the best (run.py does both).
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from transformers import (BertConfig, BertForSequenceClassification, DistilBertConfig,
                          DistilBertForSequenceClassification, LlamaConfig, LlamaForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM)

DECODERS = ("qwen2.5-0.5b", "smollm2-135m")


def make_config(shape):
    """The shapes bench_step writes (bench_step.c write_config), dropout 0."""
    if shape == "qwen2.5-0.5b":
        return Qwen2Config(vocab_size=151936, hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
                           num_key_value_heads=2, intermediate_size=4864, max_position_embeddings=32768,
                           rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
                           attention_dropout=0.0, use_sliding_window=False)
    if shape == "smollm2-135m":
        return LlamaConfig(vocab_size=49152, hidden_size=576, num_hidden_layers=30, num_attention_heads=9,
                           num_key_value_heads=3, intermediate_size=1536, max_position_embeddings=8192,
                           rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True,
                           initializer_range=0.041666666666666664, pad_token_id=2)
    if shape == "distilbert":
        return DistilBertConfig(vocab_size=30522, dim=768, n_layers=6, n_heads=12, hidden_dim=3072,
                                num_labels=2, dropout=0.0, attention_dropout=0.0, seq_classif_dropout=0.0)
    return BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                      intermediate_size=1536, num_labels=2, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0)


def model_class(shape):
    if shape == "qwen2.5-0.5b":
        return Qwen2ForCausalLM
    if shape == "smollm2-135m":
        return LlamaForCausalLM
    return DistilBertForSequenceClassification if shape == "distilbert" else BertForSequenceClassification


def dims(cfg):
    if isinstance(cfg, DistilBertConfig):
        return cfg.n_layers, cfg.dim, cfg.hidden_dim
    return cfg.num_hidden_layers, cfg.hidden_size, cfg.intermediate_size


def decoder_forward_flops(cfg, batch, seq):
    """As loupe's llama family counts them (llama_forward_flops): 2 per multiply-add of every
    layer Linear, causal attention over the visible half of the scores, and the LM head."""
    hd = cfg.hidden_size // cfg.num_attention_heads
    qd, kd = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd
    h, ffn = cfg.hidden_size, cfg.intermediate_size
    per_layer_w = h * qd + 2 * h * kd + qd * h + 3 * h * ffn
    tokens = batch * seq
    return (2 * tokens * per_layer_w * cfg.num_hidden_layers
            + cfg.num_hidden_layers * 2 * batch * seq * seq * qd + 2 * tokens * h * cfg.vocab_size)


def forward_flops(cfg, batch, seq):
    """Matmul FLOPs of one forward pass (2 per multiply-add), encoder + head."""
    if isinstance(cfg, (LlamaConfig, Qwen2Config)):
        return decoder_forward_flops(cfg, batch, seq)
    layers, h, ffn = dims(cfg)
    tokens = batch * seq
    per_layer = 2 * tokens * (4 * h * h + 2 * h * ffn) + 2 * 2 * batch * seq * seq * h
    head = 2 * batch * (h * h + h * 2)
    return layers * per_layer + head


def timed(fn, warmup, runs):
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def load_qlora_base(shape, compute=torch.float32):
    """bitsandbytes quantizes while from_pretrained loads, so the random fp32 model is saved
    first by a child process (its memory never counts in this process's peak RSS). compute:
    bnb_4bit_compute_dtype (bf16 with --dtype bf16, as the QLoRA recipe)."""
    from transformers import BitsAndBytesConfig
    tmp = tempfile.mkdtemp(prefix="torch_ref_")
    try:
        subprocess.run([sys.executable, os.path.abspath(__file__), "--save-random", tmp, "--shape", shape],
                       check=True)
        q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                               bnb_4bit_compute_dtype=compute,
                               llm_int8_skip_modules=["pre_classifier", "classifier", "pooler.dense", "lm_head"])
        return model_class(shape).from_pretrained(tmp, quantization_config=q, device_map="cpu",
                                                  dtype=torch.float32)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def quantized_bytes(model):
    """Storage of the Linear4bit weights (packed codes + absmax, double-quantized) and their count."""
    import bitsandbytes as bnb
    nbytes = nparams = 0
    for mod in model.modules():
        if not isinstance(mod, bnb.nn.Linear4bit):  # (PEFT's wrappers expose the same weight)
            continue
        w = mod.weight
        qs = w.quant_state
        nparams += mod.in_features * mod.out_features
        nbytes += w.numel() * w.element_size() + qs.absmax.numel() * qs.absmax.element_size()
        if qs.state2 is not None:
            nbytes += qs.state2.absmax.numel() * qs.state2.absmax.element_size()
    return nbytes, nparams


def blas_info():
    for part in torch.__config__.show().replace("\n", ",").split(","):
        if "BLAS_INFO=" in part:
            return part.split("=", 1)[1].strip()
    return "unknown"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=["distilbert", "minilm", *DECODERS], default="distilbert")
    ap.add_argument("--gradient-checkpointing", action="store_true")
    ap.add_argument("--mode", choices=["train", "infer"], default="train")
    ap.add_argument("--method", choices=["full", "lora", "qlora"], default="full")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32",
                    help="bf16: torch.autocast('cpu', dtype=torch.bfloat16) around forward and loss")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--peak-gflops", type=float, default=190.0,
                    help="f32 FMA peak of the machine (bench_step --mode peak or loupe peak measures it)")
    ap.add_argument("--save-random", metavar="DIR", help=argparse.SUPPRESS)
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    cfg = make_config(args.shape)
    if args.save_random:
        model_class(args.shape)(cfg).save_pretrained(args.save_random)
        return 0
    model = (load_qlora_base(args.shape, torch.bfloat16 if args.dtype == "bf16" else torch.float32)
             if args.method == "qlora" else model_class(args.shape)(cfg))
    decoder = args.shape in DECODERS
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if args.method != "full":
        from peft import LoraConfig, TaskType, get_peft_model
        targets = (["q_proj", "v_proj"] if decoder else ["q_lin", "v_lin"] if args.shape == "distilbert"
                   else ["query", "value"])
        model = get_peft_model(model, LoraConfig(task_type=TaskType.CAUSAL_LM if decoder else TaskType.SEQ_CLS,
                                                 r=8, lora_alpha=16, lora_dropout=0.0, target_modules=targets))
    train = args.mode == "train"
    for m in model.modules():  # dropout off: the bench compares compute, not RNG
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    ids = torch.randint(0, cfg.vocab_size, (args.batch, args.seq))
    mask = torch.ones_like(ids)
    if train:
        model.train()
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=1e-5, weight_decay=0.01)
        labels = ids.clone() if decoder else torch.randint(0, 2, (args.batch,))

        bf16 = args.dtype == "bf16"

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                out = model(input_ids=ids, attention_mask=mask, labels=labels)
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()

        t = timed(step, args.warmup, args.runs)
    else:
        model.eval()
        with torch.inference_mode():
            t = timed(lambda: model(input_ids=ids, attention_mask=mask), args.warmup, args.runs)

    med = statistics.median(t)
    # Full fine-tuning: backward is ~2x forward. LoRA skips weight gradients of the frozen
    # base (~1x forward for backward), which is what MFU should count. Inference: 1x.
    mult = 1.0 if not train else 3.0 if args.method == "full" else 2.0
    flop = mult * forward_flops(cfg, args.batch, args.seq)
    qbytes, qparams = quantized_bytes(model) if args.method == "qlora" else (0, 0)
    n_params = qparams + sum(p.numel() for p in model.parameters() if getattr(p, "quant_state", None) is None)
    result = {"tool": "torch", "shape": args.shape, "mode": args.mode, "method": args.method, "dtype": args.dtype,
              "gradient_checkpointing": args.gradient_checkpointing,
              "batch": args.batch, "seq": args.seq, "threads": torch.get_num_threads(),
              "torch": torch.__version__, "blas_core": blas_info(), "dropout": 0.0,
              "warmup": args.warmup, "runs": args.runs,
              "env": {k: os.environ.get(k, "") for k in ("OMP_WAIT_POLICY", "OPENBLAS_THREAD_TIMEOUT",
                                                         "OPENBLAS_CORETYPE")},
              "step_ms_median": med * 1e3, "step_ms_min": min(t) * 1e3, "runs_ms": [x * 1e3 for x in t],
              "samples_per_s": args.batch / med, "tokens_per_s": args.batch * args.seq / med,
              "gflop_per_step": flop / 1e9,
              "flop_convention": {1.0: "1x forward", 2.0: "2x forward", 3.0: "3x forward"}[mult],
              "gflops": flop / med / 1e9, "peak_gflops": args.peak_gflops,
              "mfu": flop / med / (args.peak_gflops * 1e9),
              "n_params": n_params, "n_trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
              "quantized_params": qparams, "quantized_bytes": qbytes,
              "qlora_base_bytes_per_param": qbytes / qparams if qparams else 0.0,
              "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
