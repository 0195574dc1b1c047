# Tiny random BERT / DistilBERT classifiers, their WordPiece vocabulary and one padded
# batch: the shared fixture of the classification, LoRA and QLoRA goldens. Same seed ->
# same weights and batch in every golden, so results can be cross-checked between them.
import json
import os

import torch

import golden_common as gc

HIDDEN = 32
LAYERS = 2
HEADS = 4
FFN = 64
MAX_POS = 32
NUM_LABELS = 2

_WORDS = """the a an and or but not no is was are were be it this that i you he she we they
movie film story plot actor acting scene music ending great good bad awful boring fun
funny love loved hate like liked really very too so much more most best worst twist
stars time watch watched again never always ok nice sad dark long short un ##s ##ed ##ing
##ly ##er ##est ##able""".split()
_PUNCT = list(".,!?:;'\"-()")


def vocab_list():
    """Special tokens, words, single letters/digits/punctuation and their ## forms."""
    v = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    for w in _WORDS + _PUNCT + list("abcdefghijklmnopqrstuvwxyz0123456789"):
        if w not in v:
            v.append(w)
    for ch in "abcdefghijklmnopqrstuvwxyz0123456789":
        if "##" + ch not in v:
            v.append("##" + ch)
    return v


VOCAB = vocab_list()

# Four rows of different lengths: real padding in every batch.
SENTS_A = ["the movie was great !", "i did not like the acting , sadly .", "ok",
           "a twist : 42 stars , wow"]
SENTS_B = ["loved it", "too long", "the music was fun", "why"]
LABELS = [1, 0, 1, 0]


def make_tokenizer(out_dir=None):
    from transformers import BertTokenizer
    tok = BertTokenizer(vocab={w: i for i, w in enumerate(VOCAB)}, do_lower_case=True)
    if out_dir is not None:
        tok.save_pretrained(out_dir)
        with open(os.path.join(out_dir, "vocab.txt"), "w") as f:
            f.write("\n".join(VOCAB) + "\n")
    return tok


def make_batch(tok, pairs):
    """Padded batch as int64 tensors; pairs=True uses sentence pairs (token_type_ids)."""
    if pairs:
        enc = tok(SENTS_A, SENTS_B, padding=True, return_tensors="pt")
    else:
        enc = tok(SENTS_A, padding=True, return_tensors="pt")
    batch = {"input_ids": enc["input_ids"].long(),
             "attention_mask": enc["attention_mask"].long(),
             "labels": torch.tensor(LABELS, dtype=torch.long)}
    if pairs:
        batch["token_type_ids"] = enc["token_type_ids"].long()
    lens = batch["attention_mask"].sum(1).tolist()
    assert len(set(lens)) == len(lens), "rows must have different lengths"
    return batch


def config(arch, act=None):
    """HF config with every dropout probability 0 so forward/backward is deterministic."""
    if arch == "distilbert":
        from transformers import DistilBertConfig
        return DistilBertConfig(vocab_size=len(VOCAB), dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS,
                                hidden_dim=FFN, max_position_embeddings=MAX_POS,
                                dropout=0.0, attention_dropout=0.0, seq_classif_dropout=0.0,
                                qa_dropout=0.0, activation=act or "gelu", pad_token_id=0,
                                num_labels=NUM_LABELS, architectures=["DistilBertForSequenceClassification"])
    if arch == "bert":
        from transformers import BertConfig
        return BertConfig(vocab_size=len(VOCAB), hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                          num_attention_heads=HEADS, intermediate_size=FFN,
                          max_position_embeddings=MAX_POS, type_vocab_size=2,
                          hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                          classifier_dropout=0.0, hidden_act=act or "gelu", pad_token_id=0,
                          num_labels=NUM_LABELS, architectures=["BertForSequenceClassification"])
    raise ValueError(arch)


def build(arch, act=None, seed=gc.SEED):
    """Deterministic tiny model with every parameter random (f32, eager attention).

    HF init leaves biases at 0 and LayerNorm at (1, 0); we redraw them too, so a C
    engine that forgot a bias or a LayerNorm affine would not pass by luck.
    """
    from transformers import BertForSequenceClassification, DistilBertForSequenceClassification
    cls = {"distilbert": DistilBertForSequenceClassification,
           "bert": BertForSequenceClassification}[arch]
    cfg = config(arch, act)
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = cls(cfg)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name:
                base = 1.0 if name.endswith("weight") else 0.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
    model.eval()
    return model


INIT_NOTE = ("weights: matrices and embeddings ~ N(0, 0.2^2); biases ~ N(0, 0.1^2); LayerNorm "
             "weight ~ 1 + N(0, 0.1^2), bias ~ N(0, 0.1^2) (torch.Generator seed SEED+1); the "
             "padding row of word_embeddings is random too (padding_idx only zeroes its gradient)")


def save_model(model, out_dir):
    """config.json + model.safetensors as transformers writes them."""
    model.save_pretrained(out_dir, safe_serialization=True)
    # Keep config.json free of paths/time so reruns are byte-identical.
    p = os.path.join(out_dir, "config.json")
    with open(p) as f:
        cfg = json.load(f)
    cfg.pop("_name_or_path", None)
    with open(p, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def forward_kwargs(batch):
    kw = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    if "token_type_ids" in batch:
        kw["token_type_ids"] = batch["token_type_ids"]
    return kw


def analytically_zero_grad(name):
    """Attention key biases: q.(k+b) shifts every score of a query by the same q.b, which
    softmax ignores, so d loss/d b_k = 0 exactly; float results are rounding noise."""
    return name.endswith("k_lin.bias") or name.endswith("attention.self.key.bias")
