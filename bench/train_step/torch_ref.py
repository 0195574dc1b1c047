#!/usr/bin/env python3
"""PyTorch side of bench/train_step: the same shapes loupe runs, timed the same way.

DistilBERT-shaped (6 layers, hidden 768, 12 heads, FFN 3072) and MiniLM-shaped (6 layers,
hidden 384, 12 heads, FFN 1536) sequence classifiers, random weights from a config (no
download), fp32, seq 128: a full fine-tuning step (forward, backward, AdamW) at batch 16,
optionally LoRA (PEFT, rank 8 on q and v), and inference throughput at batch 1, 8, 32.
Prints one JSON object: medians of the measured runs, samples/s, MFU against the given
peak, and the process's peak RSS.

Thread settings matter on a small machine (two spinning pools cost PyTorch up to 2.5x at
batch 1): run it as
  OMP_WAIT_POLICY=PASSIVE OPENBLAS_THREAD_TIMEOUT=4 python3 torch_ref.py --threads 2
and compare with the defaults; report the best.
"""
import argparse
import json
import resource
import statistics
import time

import torch
from transformers import (BertConfig, BertForSequenceClassification, DistilBertConfig,
                          DistilBertForSequenceClassification)


def make_model(shape):
    if shape == "distilbert":
        cfg = DistilBertConfig(vocab_size=30522, dim=768, n_layers=6, n_heads=12,
                               hidden_dim=3072, num_labels=2)
        return DistilBertForSequenceClassification(cfg), cfg
    cfg = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                     num_attention_heads=12, intermediate_size=1536, num_labels=2)
    return BertForSequenceClassification(cfg), cfg


def dims(cfg):
    if isinstance(cfg, DistilBertConfig):
        return cfg.n_layers, cfg.dim, cfg.hidden_dim
    return cfg.num_hidden_layers, cfg.hidden_size, cfg.intermediate_size


def forward_flops(cfg, batch, seq):
    """Matmul FLOPs of one forward pass (2 per multiply-add), encoder + head."""
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=["distilbert", "minilm"], default="distilbert")
    ap.add_argument("--method", choices=["full", "lora"], default="full")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--peak-gflops", type=float, default=190.0,
                    help="f32 FMA peak of the machine (loupe peak measures it)")
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--infer-batches", default="1,8,32")
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    model, cfg = make_model(args.shape)
    if args.method == "lora":
        from peft import LoraConfig, TaskType, get_peft_model
        targets = ["q_lin", "v_lin"] if args.shape == "distilbert" else ["query", "value"]
        model = get_peft_model(model, LoraConfig(task_type=TaskType.SEQ_CLS, r=8, lora_alpha=16,
                                                 lora_dropout=0.0, target_modules=targets))
    result = {"shape": args.shape, "method": args.method, "threads": args.threads,
              "torch": torch.__version__, "batch": args.batch, "seq": args.seq}
    fwd = forward_flops(cfg, args.batch, args.seq)

    if not args.skip_train:
        model.train()
        for m in model.modules():  # dropout off: loupe's bench compares compute, not RNG
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=1e-5, weight_decay=0.01)
        ids = torch.randint(0, 30522, (args.batch, args.seq))
        mask = torch.ones_like(ids)
        labels = torch.randint(0, 2, (args.batch,))

        def step():
            opt.zero_grad(set_to_none=True)
            out = model(input_ids=ids, attention_mask=mask, labels=labels)
            out.loss.backward()
            opt.step()

        t = timed(step, args.warmup, args.runs)
        med = statistics.median(t)
        # Full fine-tuning: backward is ~2x forward. LoRA skips weight gradients of the
        # frozen base (~1x forward for backward), which is what MFU should count.
        mult = 3.0 if args.method == "full" else 2.0
        result["train"] = {"step_ms_median": med * 1e3, "step_ms_min": min(t) * 1e3,
                           "samples_per_s": args.batch / med,
                           "tokens_per_s": args.batch * args.seq / med,
                           "gflop_per_step": mult * fwd / 1e9,
                           "mfu": mult * fwd / med / (args.peak_gflops * 1e9)}

    model.eval()
    infer = {}
    with torch.inference_mode():
        for b in [int(x) for x in args.infer_batches.split(",") if x]:
            ids = torch.randint(0, 30522, (b, args.seq))
            mask = torch.ones_like(ids)
            t = timed(lambda: model(input_ids=ids, attention_mask=mask), args.warmup, args.runs)
            med = statistics.median(t)
            infer[str(b)] = {"ms_median": med * 1e3, "samples_per_s": b / med,
                             "mfu": forward_flops(cfg, b, args.seq) / med / (args.peak_gflops * 1e9)}
    result["inference"] = infer
    result["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
