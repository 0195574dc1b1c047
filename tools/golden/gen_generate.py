# Golden for loupe's KV-cache generation against transformers' generate (do_sample=False,
# its own KV cache), on the tiny decoder goldens: Llama (GQA), Qwen2 (MQA, q/k/v biases),
# Mistral (sliding window 5, shorter than the sequences) and SmolLM (tied embeddings). Per
# model and prompt: the prompt ids, the greedy continuation (N_NEW tokens, EOS disabled so
# every model runs the full length) and the raw logits at each step (out.logits, before any
# processor). Each prompt runs alone (no padding: transformers' own batching conventions are
# not what is under test; loupe's batching is held to full recompute in test_generate_cache).
# Run: python3 tools/golden/gen_generate.py --out tests/golden/generate_lm
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_common as gc  # noqa: E402

MODELS = ["llama_lm", "qwen2_lm", "mistral_lm", "smollm_lm"]
PROMPT_LENS = [1, 4, 9, 13]
N_NEW = 20


def main():
    gc.setup()
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch
    from transformers import AutoModelForCausalLM
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden")
    tensors = {}
    meta = {"versions": gc.versions(), "models": MODELS, "prompt_lens": PROMPT_LENS, "n_new": N_NEW,
            "what": {"<model>_ids_<i>": "prompt token ids",
                     "<model>_tokens_<i>": "transformers' greedy continuation (EOS disabled)",
                     "<model>_logits_<i>": "(n_new, V) raw logits of each generated position"}}
    g = torch.Generator().manual_seed(gc.SEED)
    for name in MODELS:
        model = AutoModelForCausalLM.from_pretrained(os.path.join(root, name), torch_dtype=torch.float32).eval()
        model.generation_config.eos_token_id = None  # run every model the full length
        model.generation_config.pad_token_id = 0
        V = model.config.vocab_size
        for i, n in enumerate(PROMPT_LENS):
            ids = torch.randint(3, V, (1, n), generator=g)
            with torch.no_grad():
                out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                     max_new_tokens=N_NEW, min_new_tokens=N_NEW, output_logits=True,
                                     return_dict_in_generate=True)
            new = out.sequences[0, n:]
            assert new.numel() == N_NEW, (name, i, new.numel())
            logits = torch.stack([x[0] for x in out.logits]).float()
            # the greedy picks are the raw logits' argmax (no processor changed them)
            assert torch.equal(logits.argmax(-1), new), (name, i)
            tensors[f"{name}_ids_{i}"] = ids[0].to(torch.int64)
            tensors[f"{name}_tokens_{i}"] = new.to(torch.int64)
            tensors[f"{name}_logits_{i}"] = logits.contiguous()
            print(name, i, n, new.tolist())
    gc.fresh_dir(a.out)
    gc.save_golden(a.out, tensors, meta)


if __name__ == "__main__":
    main()
