#!/usr/bin/env python3
"""Writes tests/report/data/torch_with_stack.pt.trace.json.gz: a real PyTorch trace recorded
with with_stack=True (python_function frames around every op, as PyTorch 2.x writes them),
profile_memory and record_shapes, of two training steps of a small transformer encoder on
the CPU. analyze_pystack.sh checks loupe analyze's (op, call stack) rows on it.

  python3 tools/traces/gen_torch_stack_trace.py [OUT]
"""
import gzip, os, shutil, sys, tempfile

import torch


class Classifier(torch.nn.Module):
    def __init__(self, vocab=500, d=64, heads=4, layers=2, labels=3):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        layer = torch.nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, batch_first=True, dropout=0.0)
        self.enc = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(d, labels)

    def forward(self, ids):
        return self.head(self.enc(self.emb(ids)).mean(dim=1))


def train_step(model, opt, ids, labels):
    loss = torch.nn.functional.cross_entropy(model(ids), labels)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "..", "tests", "report", "data", "torch_with_stack.pt.trace.json.gz")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Classifier()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    ids = torch.randint(0, 500, (4, 16))
    labels = torch.randint(0, 3, (4,))
    train_step(model, opt, ids, labels)  # warm-up outside the trace
    acts = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=acts, with_stack=True, record_shapes=True, profile_memory=True) as prof:
        for _ in range(2):
            train_step(model, opt, ids, labels)
            prof.step()
    with tempfile.TemporaryDirectory() as d:
        raw = os.path.join(d, "trace.json")
        prof.export_chrome_trace(raw)
        tmp = out + ".tmp"
        with open(raw, "rb") as f, gzip.open(tmp, "wb", compresslevel=9) as g:
            shutil.copyfileobj(f, g)
        os.replace(tmp, out)
    print("wrote", out, os.path.getsize(out), "bytes; torch", torch.__version__)


if __name__ == "__main__":
    main()
