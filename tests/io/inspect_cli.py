#!/usr/bin/env python3
"""loupe inspect end to end (standard library only): tiny BERT / Llama model directories
written here, JSON output parsed back and checked against counts computed here, the
memory categories' arithmetic, --output written atomically, and failures (missing
directory, unknown architecture, corrupt weights, bad flags) exiting 1 or 2 with a
message and no output file. With --minilm, the real all-MiniLM-L6-v2 instead."""
import json
import shutil
import os
import struct
import subprocess
import sys
import tempfile

LOUPE = os.environ["LOUPE"]
failures = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)


def run(*args):
    p = subprocess.run([LOUPE, "inspect", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def write_safetensors(path, tensors):
    """tensors: {name: shape}; F32 zeros, laid out in name order."""
    hdr, off, data = {}, 0, b""
    for name in sorted(tensors):
        n = 1
        for d in tensors[name]:
            n *= d
        hdr[name] = {"dtype": "F32", "shape": list(tensors[name]), "data_offsets": [off, off + 4 * n]}
        off += 4 * n
        data += b"\0" * (4 * n)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def bert_dir(root, name, with_classifier, H=8, I=16, L=2, V=11, P=6, C=3):
    d = os.path.join(root, name)
    os.makedirs(d)
    t = {"bert.embeddings.word_embeddings.weight": (V, H), "bert.embeddings.position_embeddings.weight": (P, H),
         "bert.embeddings.token_type_embeddings.weight": (2, H), "bert.embeddings.LayerNorm.weight": (H,),
         "bert.embeddings.LayerNorm.bias": (H,), "bert.pooler.dense.weight": (H, H), "bert.pooler.dense.bias": (H,)}
    for i in range(L):
        p = f"bert.encoder.layer.{i}."
        for lin in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            t[p + lin + ".weight"] = (H, H)
            t[p + lin + ".bias"] = (H,)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[p + ln + ".weight"] = (H,)
            t[p + ln + ".bias"] = (H,)
        t[p + "intermediate.dense.weight"] = (I, H)
        t[p + "intermediate.dense.bias"] = (I,)
        t[p + "output.dense.weight"] = (H, I)
        t[p + "output.dense.bias"] = (H,)
    if with_classifier:
        t["classifier.weight"] = (C, H)
        t["classifier.bias"] = (C,)
    write_safetensors(os.path.join(d, "model.safetensors"), t)
    cfg = {"architectures": ["BertForSequenceClassification"], "vocab_size": V, "hidden_size": H,
           "num_hidden_layers": L, "num_attention_heads": 2, "intermediate_size": I, "max_position_embeddings": P,
           "id2label": {str(i): f"c{i}" for i in range(C)}}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    total = sum(int.__mul__(*s) if len(s) == 2 else s[0] for s in t.values())
    if not with_classifier:
        total += C * H + C
    return d, total


def tiny(root):
    d, total = bert_dir(root, "bert_cls", True)
    rc, out, err = run("--model", d, "--json")
    check(rc == 0, f"inspect --json exits 0 ({err.strip()})")
    j = json.loads(out)
    check(j["architecture"] == "BertForSequenceClassification" and j["task"] == "seq-cls", "architecture and task")
    check(j["parameters"]["total"] == total, f"total parameters {j['parameters']['total']} == {total}")
    check(j["parameters"]["embeddings"] == 11 * 8 + 6 * 8 + 2 * 8 + 16, "embedding parameters")
    check(j["parameters"]["per_layer"] * 2 == j["parameters"]["layers"], "per-layer x layers")
    check(j["parameters"]["head"] == 8 * 8 + 8 + 3 * 8 + 3, "head = pooler + classifier")
    check(j["weights"]["dtypes"] == {"F32": len([1 for _ in range(41)])}, f"dtypes {j['weights']['dtypes']}")
    check(j["weights"]["head_missing"] == [] and j["weights"]["unexpected"] == [], "nothing missing or extra")
    check(j["config"]["labels"] == ["c0", "c1", "c2"], "labels")
    check("memory" not in j, "no memory section without --method")
    check(os.path.getsize(os.path.join(d, "model.safetensors")) == j["weights"]["disk_bytes"], "disk bytes")

    # settings that would change nothing are refused: the prediction's without --method,
    # the adapter's with --method full
    for args, says in ((["--batch-size", "2"], "--batch-size sets up the memory prediction"),
                       (["--method", "full", "--rank", "4"], "--rank needs --method lora or qlora"),
                       (["--method", "full", "--lora-dropout", "0.1"], "--lora-dropout needs --method lora")):
        rc, out, err = run("--model", d, *args)
        check(rc == 2 and says in err and out == "", f"inspect {' '.join(args)}: exit {rc}, {err.strip()}")

    out_path = os.path.join(root, "inspect.json")
    for method in ("full", "lora", "qlora"):
        rank = [] if method == "full" else ["--rank", "4"]
        rc, out, err = run("--model", d, "--json", "--method", method, "--batch-size", "2", "--seq-len", "6",
                           *rank, "--output", out_path)
        check(rc == 0, f"--method {method} exits 0 ({err.strip()})")
        j = json.loads(out)
        with open(out_path) as f:
            check(json.load(f) == j, f"{method}: --output file holds the same JSON as stdout")
        m, b = j["memory"], j["memory"]["bytes"]
        parts = ["parameters", "gradients", "optimizer_state", "activations", "quantized_weights", "temporary",
                 "input"]
        check(b["total"] == sum(b[k] for k in parts), f"{method}: total is the sum of the categories")
        check(b["optimizer_state"] == 8 * m["trainable_parameters"], f"{method}: AdamW state = 2 x fp32 trainable")
        # each tensor starts on 64 bytes: gradients of 4 bytes each, + < 64 per tensor (< 100 tensors)
        check(0 <= b["gradients"] - 4 * m["trainable_parameters"] < 6400,
              f"{method}: fp32 gradients of trainable params")
        check(m["exec"] == "fused" and m["gradient_checkpointing"] is False, f"{method}: train's default exec")
        if method == "full":
            check(m["trainable_parameters"] == total and b["parameters"] == b["gradients"], "full: all trainable")
            check(b["quantized_weights"] == 0, "full: nothing quantized")
        else:
            # r=4 on query and value of 2 layers: 2 * 2 * 4 * (8 + 8); plus the classifier
            check(m["lora_parameters"] == 256, f"{method}: LoRA params {m['lora_parameters']}")
            check(m["trainable_parameters"] == 256 + 27, f"{method}: trainable = LoRA + classifier")
        if method == "qlora":
            check(b["quantized_weights"] > 0 and b["parameters"] < 4 * (total + 256), "qlora: weights move to NF4")
        check(b["activations"] > 2 * m["activations_per_layer"], f"{method}: activations cover both layers")
    # the classifier missing: reported, counted, not an error
    d2, total2 = bert_dir(root, "bert_base_ckpt", False)
    rc, out, err = run("--model", d2)
    check(rc == 0 and "head missing: will be initialized" in out and "classifier.weight" in out,
          "missing head reported in text output")
    rc, out, err = run("--model", d2, "--json")
    j = json.loads(out)
    check(j["parameters"]["total"] == total2 and j["parameters"]["in_checkpoint"] == total2 - 27,
          "missing head counted in total, not in checkpoint")
    check(j["weights"]["head_missing"] == ["classifier.weight", "classifier.bias"], "head_missing names")

    # failures: exit 1 with a message naming the problem, no output file
    bad_out = os.path.join(root, "bad.json")
    rc, out, err = run("--model", os.path.join(root, "nope"), "--output", bad_out)
    check(rc == 1 and "nope" in err and not os.path.exists(bad_out), "missing directory: exit 1, no output")
    d3 = os.path.join(root, "t5")
    os.makedirs(d3)
    with open(os.path.join(d3, "config.json"), "w") as f:
        json.dump({"architectures": ["T5ForConditionalGeneration"]}, f)
    rc, out, err = run("--model", d3)
    check(rc == 1 and "not supported" in err and "BertModel" in err, "unknown architecture lists the supported ones")
    with open(os.path.join(d, "model.safetensors"), "r+b") as f:
        f.truncate(os.path.getsize(os.path.join(d, "model.safetensors")) - 4)
    rc, out, err = run("--model", d, "--output", bad_out)
    check(rc == 1 and "model.safetensors" in err and not os.path.exists(bad_out), "truncated weights: exit 1")
    rc, out, err = run("--model", d2, "--output", os.path.join(root, "no", "dir", "x.json"))
    check(rc == 1 and out == "", "unwritable --output: exit 1, nothing printed")
    check(run("--model", d2, "--method", "adam")[0] == 2, "bad --method: exit 2")
    check(run("--model", d2, "--batch-size", "0")[0] == 2, "bad --batch-size: exit 2")
    check(run("--model", d2, "--method", "full", "--exec", "lazy")[0] == 2, "bad --exec: exit 2")
    check(run("--model", d2, "--method", "lora", "--lora-dropout", "1")[0] == 2, "bad --lora-dropout: exit 2")
    check(run("--model", d2, "--method", "lora", "--threads", "0")[0] == 2, "bad --threads: exit 2")

    # a config-only directory (loupe train initializes it): same layout, no weights
    d4 = os.path.join(root, "config_only")
    os.makedirs(d4)
    shutil.copy(os.path.join(d2, "config.json"), d4)
    rc, out, err = run("--model", d4, "--json", "--method", "full", "--batch-size", "2", "--seq-len", "6")
    check(rc == 0, f"config-only directory: exit 0 ({err.strip()})")
    j = json.loads(out) if rc == 0 else {}
    check(j.get("weights", {}).get("config_only") is True and j["weights"]["tensors"] == 0, "config_only flagged")
    check(j.get("parameters", {}).get("total") == total2, "config-only: the config's parameter count")
    rc, out, err = run("--model", d4, "--method", "full")
    check(rc == 0 and "config only" in out and "predicted peak" in out, "config-only text output")
    # eager keeps the attention probabilities, checkpointing keeps one layer's activations
    tot = {}
    for flags in ((), ("--exec", "eager"), ("--gradient-checkpointing",)):
        rc, out, err = run("--model", d4, "--json", "--method", "lora", "--batch-size", "4", "--seq-len", "6", *flags)
        tot[flags] = json.loads(out)["memory"]["bytes"]["activations"] if rc == 0 else 0
    check(tot[("--exec", "eager")] > tot[()] > tot[("--gradient-checkpointing",)] > 0,
          f"eager > fused > checkpointed activations {tot}")
    # rows longer than the position table: refused as loupe train refuses them
    rc, out, err = run("--model", d4, "--json", "--method", "full", "--batch-size", "2", "--seq-len", "8")
    check(rc == 1 and "max_position_embeddings" in err and out == "", f"seq len beyond the positions: exit {rc}")
    check(run()[0] == 2, "no --model: exit 2")
    check(run("--model", d2, "extra")[0] == 2, "stray argument: exit 2")


def minilm(root):
    here = os.path.dirname(os.path.abspath(__file__))
    p = subprocess.run(["bash", os.path.join(here, "..", "..", "tools", "minilm_dir.sh")], capture_output=True,
                       text=True)
    if p.returncode == 77:
        print("SKIP: " + p.stderr.strip())
        sys.exit(77)
    check(p.returncode == 0, "tools/minilm_dir.sh finds the model: " + p.stderr.strip())
    d = p.stdout.strip()
    rc, out, err = run("--model", d, "--json", "--method", "full", "--batch-size", "16", "--seq-len", "128")
    check(rc == 0, f"inspect MiniLM exits 0 ({err.strip()})")
    j = json.loads(out)
    # 22713216: tools/count_params.py (transformers BertModel, sum of p.numel()); see test_minilm.c
    check(j["parameters"]["total"] == 22713216, f"MiniLM parameters {j['parameters']['total']} == 22,713,216")
    check(j["parameters"]["embeddings"] == 11918592 and j["parameters"]["per_layer"] == 1774464,
          "MiniLM embeddings and per-layer counts")
    check(j["parameters"]["head"] == 147840, "MiniLM pooler")
    check(j["weights"]["unexpected"] == [] and j["weights"]["head_missing"] == [], "every tensor mapped")
    check(j["weights"]["dtypes"] == {"F32": 103, "I64": 1}, f"dtypes {j['weights']['dtypes']}")
    check(j["weights"]["disk_bytes"] == os.path.getsize(os.path.join(d, "model.safetensors")), "size on disk")
    # the estimate is for what loupe train builds: the encoder + a 2-label classifier (770)
    check(j["memory"]["task"] == "seq-cls" and j["memory"]["trainable_parameters"] == 22713216 + 770,
          "estimate: classifier on top")
    check(0 <= j["memory"]["bytes"]["parameters"] - 4 * (22713216 + 770) < 64 * 110, "fp32 parameters")
    rc, out, err = run("--model", d)
    check(rc == 0 and "22,713,216 total" in out, "text output shows 22,713,216")


with tempfile.TemporaryDirectory() as tmp:
    (minilm if "--minilm" in sys.argv else tiny)(tmp)
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
