"""Joins bench_cuda_ops' lines (loupe) with torch_ops.py's (PyTorch eager / fused) by
(op, shape) and prints a Markdown table: each side's ms per call and the speed ratio
(PyTorch ms / loupe ms: above 1 means loupe is faster). Usage:
compare.py loupe.jsonl torch.jsonl"""
import json
import sys


def load(path):
    rows = []
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            rows.append(json.loads(line))
    return rows


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ours, theirs = load(sys.argv[1]), load(sys.argv[2])
    ref = {}
    for r in theirs:
        ref.setdefault((r["op"], r["shape"]), []).append(r)
    gpu = ours[0]["gpu"] if ours else "?"
    print(f"GPU: {gpu}\n")
    print("| op | shape | loupe ms | PyTorch ms | PyTorch / loupe |")
    print("|---|---|---|---|---|")
    for r in ours:
        for t in ref.get((r["op"], r["shape"]), []):
            impl = "" if t["impl"] == "eager" else f" ({t['impl']})"
            extra = f" ({r['tflops']} vs {t['tflops']} TFLOP/s)" if "tflops" in r and "tflops" in t else ""
            print(f"| {r['op']}{impl} | {r['shape']} | {r['ms']:.4f} | {t['ms']:.4f} | {t['ms'] / r['ms']:.2f}x{extra} |")


if __name__ == "__main__":
    main()
