"""One measurement in its own process (so thread settings and memory are its own), printed as
JSON: PyTorch (transformers, f32: pp = one forward over the prompt, tg = generate() with its
KV cache) or llama.cpp (llama-cpp-python: pp = eval of the prompt, tg = one eval per token).
Each test: one untimed run, then `reps` timed; mean and sample sd of tokens/s.

usage: python3 workers.py torch MODEL THREADS P N REPS
       python3 workers.py llama GGUF THREADS P N REPS
MODEL: a directory (config.json only: random weights), or a .gguf (transformers' GGUF loader)."""
import json
import os
import statistics
import sys
import time


def stats(rates):
    return {"mean": statistics.mean(rates), "sd": statistics.stdev(rates) if len(rates) > 1 else 0.0}


def torch_run(model, threads, P, N, reps):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    if model.endswith(".gguf"):
        d, f = os.path.split(os.path.abspath(model))
        m = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.float32)
    else:
        m = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model), torch_dtype=torch.float32)
    m = m.eval()
    m.generation_config.eos_token_id = None
    m.generation_config.pad_token_id = 0
    V = m.config.vocab_size
    prompt = torch.randint(0, V, (1, P))
    one = prompt[:, :1]

    def pp():
        t = time.perf_counter()
        with torch.no_grad():
            m(input_ids=prompt, use_cache=True, logits_to_keep=1)
        return P / (time.perf_counter() - t)

    def tg():
        with torch.no_grad():
            t = time.perf_counter()
            m.generate(input_ids=one, attention_mask=torch.ones_like(one), do_sample=False, max_new_tokens=N,
                       min_new_tokens=N)
            return N / (time.perf_counter() - t)

    out = {}
    for name, fn, n in (("pp", pp, P), ("tg", tg, N)):
        if n <= 0:
            continue
        fn()
        out[name] = stats([fn() for _ in range(reps)])
    return out


def llama_run(gguf, threads, P, N, reps):
    import random

    import llama_cpp
    llm = llama_cpp.Llama(model_path=gguf, n_ctx=P + N + 16, n_batch=max(P, 32), n_ubatch=max(P, 32),
                          n_threads=threads, n_threads_batch=threads, verbose=False)
    random.seed(1)
    V = llm.n_vocab()
    prompt = [random.randrange(V) for _ in range(max(P, 1))]

    def pp():
        llm.reset()
        t = time.perf_counter()
        llm.eval(prompt[:P])
        return P / (time.perf_counter() - t)

    def tg():
        llm.reset()
        llm.eval(prompt[:1])
        tok = prompt[0]
        t = time.perf_counter()
        for _ in range(N):  # the token fed back does not change the cost
            llm.eval([tok])
        return N / (time.perf_counter() - t)

    out = {}
    for name, fn, n in (("pp", pp, P), ("tg", tg, N)):
        if n <= 0:
            continue
        fn()
        out[name] = stats([fn() for _ in range(reps)])
    return out


if __name__ == "__main__":
    kind, model, threads, P, N, reps = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
    r = torch_run(model, threads, P, N, reps) if kind == "torch" else llama_run(model, threads, P, N, reps)
    print(json.dumps(r))
