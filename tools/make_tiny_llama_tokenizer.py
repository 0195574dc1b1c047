#!/usr/bin/env python3
"""Trains models/tiny-llama's tokenizer: a byte-level BPE (GPT-2 style: ByteLevel
pre-tokenizer, decoder and byte alphabet) of about 1000 ids on data/sst2-mini's training
sentences, with the special tokens <pad> (0), <s> (1) and </s> (2). The post-processor wraps
every row as "<s> text </s>": BOS gives the first real token something to be predicted from,
and EOS lets a causal LM learn where a sentence ends (and is the last token a
LlamaForSequenceClassification head reads). No chat template: the model is chat-free.

Needs the `tokenizers` library (the project's .venv has it):
    .venv/bin/python tools/make_tiny_llama_tokenizer.py [models/tiny-llama]
Deterministic: the same data and library version write the same tokenizer.json.
"""
import json
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

VOCAB = 1000
SPECIALS = ["<pad>", "<s>", "</s>"]


def sentences(path):
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        col = header.index("sentence")
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) == len(header) and fields[col].strip():
                yield fields[col]


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "tiny-llama")
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, min_frequency=2, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(list(sentences(os.path.join(ROOT, "data", "sst2-mini", "train.tsv"))), trainer=trainer)
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1", special_tokens=[("<s>", bos), ("</s>", eos)])
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"))
    # what transformers' AutoTokenizer reads beside tokenizer.json (no chat_template: chat-free)
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
           "pad_token": "<pad>", "model_max_length": 256, "clean_up_tokenization_spaces": False}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    print(f"{out}/tokenizer.json: {tok.get_vocab_size()} ids (pad {tok.token_to_id('<pad>')}, bos {bos}, eos {eos})")


if __name__ == "__main__":
    main()
