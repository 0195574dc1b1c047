#!/usr/bin/env python3
"""Writes tiny checkpoints with transformers' own save_pretrained, one per architecture
loupe reads, into tests/io/fixtures/<name>/ (config.json, model.safetensors) plus
expected.json holding what transformers says: the parameter count (sum of p.numel() over
model.parameters(), tied weights once) and the tensor names saved. tests/io/test_fixtures.c
then checks loupe's name map against them without needing Python.

usage: python3 tools/make_io_fixtures.py [--out tests/io/fixtures]
Needs torch + transformers (the global python3 on the development machine).
"""
import argparse
import json
import os

import torch
from safetensors import safe_open
from transformers import (BertConfig, BertForSequenceClassification, BertModel, DistilBertConfig,
                          DistilBertForSequenceClassification, LlamaConfig, LlamaForCausalLM,
                          LlamaForSequenceClassification, MistralConfig, MistralForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM, Qwen2ForSequenceClassification)

LABELS = {"id2label": {0: "neg", 1: "pos", 2: "mixed"}, "label2id": {"neg": 0, "pos": 1, "mixed": 2}}
DEC = dict(vocab_size=64, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
           num_key_value_heads=2, max_position_embeddings=64)


def fixtures():
    enc = dict(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32,
               max_position_embeddings=24, type_vocab_size=2)
    yield "bert_model", BertModel(BertConfig(**enc))
    yield "bert_cls", BertForSequenceClassification(BertConfig(**enc, **LABELS))
    yield "distilbert_cls", DistilBertForSequenceClassification(
        DistilBertConfig(vocab_size=50, dim=16, n_layers=2, n_heads=4, hidden_dim=32, max_position_embeddings=24,
                         **LABELS))
    yield "llama_lm", LlamaForCausalLM(LlamaConfig(**DEC, tie_word_embeddings=False))
    yield "llama_cls", LlamaForSequenceClassification(LlamaConfig(**DEC, pad_token_id=0, **LABELS))
    yield "qwen2_lm_tied", Qwen2ForCausalLM(Qwen2Config(**DEC, tie_word_embeddings=True, rope_theta=1e6))
    yield "qwen2_cls", Qwen2ForSequenceClassification(Qwen2Config(**DEC, pad_token_id=0, **LABELS))
    yield "mistral_lm", MistralForCausalLM(MistralConfig(**DEC, tie_word_embeddings=False))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/io/fixtures")
    a = ap.parse_args()
    torch.manual_seed(0)
    for name, model in fixtures():
        d = os.path.join(a.out, name)
        model.save_pretrained(d, safe_serialization=True)
        with safe_open(os.path.join(d, "model.safetensors"), "pt") as f:
            names = sorted(f.keys())
        total = sum(p.numel() for p in model.parameters())
        with open(os.path.join(d, "expected.json"), "w") as f:
            json.dump({"class": type(model).__name__, "total_params": total, "tensors": names}, f, indent=1)
        os.remove(os.path.join(d, "generation_config.json")) if os.path.exists(
            os.path.join(d, "generation_config.json")) else None
        print(name, type(model).__name__, total, len(names))


if __name__ == "__main__":
    main()
