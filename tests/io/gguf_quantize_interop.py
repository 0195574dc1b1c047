#!/usr/bin/env python3
"""`loupe quantize` output read by the reference readers: the PyPI `gguf` package reads
every key-value back equal to the source's (general.file_type set to llama.cpp's number
for the type), every tensor's data offset is a multiple of general.alignment, and every
Q8_0/Q4_0 tensor holds exactly the bytes gguf.quants.quantize makes of the source
tensor's dequantized values (norms: the F32 values). Over the tiny llama GGUF and, when
tools/smollm2_gguf.sh finds it, the real SmolLM2-135M-Instruct Q4_1 file; with
llama-cpp-python installed, llama.cpp loads each SmolLM2 file and generates 16 greedy
tokens (non-empty text). Exit 77 when the gguf package is not installed."""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as T
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

loupe = os.environ.get("LOUPE", "build/loupe")
bad = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        bad.append(what)


def field_value(f):
    return [bytes(p).hex() for p in f.parts[f.data[0]:]] if f.data else []


def compare(src_path, out_path, qtype):
    src, out = gguf.GGUFReader(src_path), gguf.GGUFReader(out_path)
    want_ftype = 7 if qtype == T.Q8_0 else 2
    for k, f in src.fields.items():
        if k.startswith("GGUF.") or k == "general.file_type":
            continue
        g = out.fields.get(k)
        if g is None or field_value(g) != field_value(f) or g.types != f.types:
            check(False, f"{out_path}: metadata {k} copied")
    check(int(out.fields["general.file_type"].parts[-1][0]) == want_ftype, f"{out_path}: general.file_type {want_ftype}")
    align = int(out.fields["general.alignment"].parts[-1][0]) if "general.alignment" in out.fields else 32
    st = {t.name: t for t in src.tensors}
    check(sorted(st) == sorted(t.name for t in out.tensors), f"{out_path}: the same {len(st)} tensors")
    n_q = 0
    for t in out.tensors:
        s = st[t.name]
        check_off = (t.data_offset - out.data_offset) % align == 0 if hasattr(out, "data_offset") else True
        if not check_off:
            check(False, f"{t.name} aligned to {align}")
        f = gguf.quants.dequantize(s.data, s.tensor_type).astype(np.float32)
        if list(t.shape) != list(s.shape):
            check(False, f"{t.name}: shape {list(t.shape)} vs {list(s.shape)}")
        if t.tensor_type == qtype:
            n_q += 1
            want = gguf.quants.quantize(f.reshape(-1, f.shape[-1]), qtype).reshape(-1)
            if not np.array_equal(np.asarray(t.data).reshape(-1), want):
                check(False, f"{t.name}: {qtype.name} bytes equal gguf.quants.quantize")
        elif t.tensor_type == T.F32:
            if not np.array_equal(np.asarray(t.data).reshape(-1), f.reshape(-1)):
                check(False, f"{t.name}: F32 values equal")
        else:
            check(False, f"{t.name}: unexpected type {t.tensor_type.name}")
    check(n_q > 0, f"{out_path}: {n_q} tensors in {qtype.name}, bytes equal to gguf.quants.quantize")


sources = ["tests/golden/gguf_tiny/smollm_lm.gguf", "tests/golden/gguf_tiny/qwen2_lm.gguf"]
r = subprocess.run(["bash", "tools/smollm2_gguf.sh"], capture_output=True, text=True)
smol = r.stdout.strip() if r.returncode == 0 else None
if smol:
    sources.append(smol)
with tempfile.TemporaryDirectory() as d:
    for src in sources:
        for name, qt in (("q8_0", T.Q8_0), ("q4_0", T.Q4_0)):
            out = os.path.join(d, f"{os.path.basename(src)}.{name}.gguf")
            p = subprocess.run([loupe, "quantize", "--model", src, "--type", name, "--output", out],
                               capture_output=True, text=True)
            check(p.returncode == 0 and not os.path.exists(out + ".tmp"), f"loupe quantize {src} {name}: {p.stderr.strip()}")
            if p.returncode:
                continue
            compare(src, out, qt)
            if src is smol:
                try:
                    import llama_cpp
                except ImportError:
                    print("note: llama-cpp-python not installed; llama.cpp load not checked")
                    continue
                m = llama_cpp.Llama(model_path=out, n_ctx=256, n_threads=1, verbose=False)
                text = m.create_completion("The capital of France is", max_tokens=16, temperature=0.0)["choices"][0]["text"]
                print(f"  llama.cpp on {name}: {text!r}")
                check(len(text.strip()) > 0, f"llama.cpp loads loupe's {name} file and generates")
    # a bad call: one line, no file left behind
    out = os.path.join(d, "x.gguf")
    p = subprocess.run([loupe, "quantize", "--model", "tests/golden/gguf_tiny/none.gguf", "--type", "q8_0",
                        "--output", out], capture_output=True, text=True)
    check(p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1 and "none.gguf" in p.stderr
          and not os.path.exists(out), f"missing source: one line naming it ({p.stderr.strip()})")
print("FAILED: " + "; ".join(bad) if bad else "all ok")
sys.exit(1 if bad else 0)
