#!/usr/bin/env python3
"""Writes tests/fixtures/torch_trace/: a Kineto trace recorded by PyTorch's own profiler
on a small CPU model, plus the key-averages table torch printed for the same run (text and
JSON), so `loupe analyze` can be checked against torch without torch in CI.

Usage: python3 tools/make_torch_trace.py [OUT_DIR]   (needs torch 2.x; CPU only)
"""
import gzip
import json
import os
import sys

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

WORKER = "worker0"
WAIT, WARMUP, ACTIVE = 1, 1, 3


class TinyMLP(nn.Module):
    """A few Linear/ReLU/softmax ops: enough op variety for the key-averages table."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 64)
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return torch.softmax(self.head(x), dim=-1)


def averages_json(avgs, with_shapes):
    rows = []
    for e in avgs:
        row = {
            "name": e.key,
            "count": e.count,
            # torch keeps these in microseconds (floats since ~2.0).
            "self_cpu_time_total_us": float(e.self_cpu_time_total),
            "cpu_time_total_us": float(e.cpu_time_total),
        }
        if with_shapes:
            row["input_shapes"] = e.input_shapes
        rows.append(row)
    return rows


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "tests", "fixtures", "torch_trace")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)  # one intra-op thread: all ops on the main thread, small trace
    model = TinyMLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 32)
    y = torch.randint(0, 10, (16,))
    saved = {}

    def on_ready(prof):
        trace = os.path.join(out, WORKER + ".pt.trace.json.gz")
        prof.export_chrome_trace(trace)
        saved["table"] = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=-1)
        saved["avgs"] = averages_json(prof.key_averages(), False)
        saved["avgs_shape"] = averages_json(prof.key_averages(group_by_input_shape=True), True)

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
                 on_trace_ready=on_ready) as prof:
        for _ in range(WAIT + WARMUP + ACTIVE + 1):
            with record_function("forward"):
                p = model(x)
            loss = nn.functional.nll_loss(torch.log(p), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()

    with open(os.path.join(out, "key_averages.txt"), "w") as f:
        f.write(saved["table"])
        if not saved["table"].endswith("\n"):
            f.write("\n")
    meta = {
        "torch_version": torch.__version__,
        "schedule": {"wait": WAIT, "warmup": WARMUP, "active": ACTIVE},
        "trace": WORKER + ".pt.trace.json.gz",
        "table_sort_by": "self_cpu_time_total",
        "key_averages": saved["avgs"],
        "key_averages_by_shape": saved["avgs_shape"],
    }
    with open(os.path.join(out, "key_averages.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(saved["table"])


if __name__ == "__main__":
    main()
