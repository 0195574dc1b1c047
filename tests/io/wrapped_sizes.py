#!/usr/bin/env python3
"""Configs whose sizes are each within their limits but whose parameter count overflows:
`loupe inspect` and `loupe train` both refuse them (exit 1) with the same one-line message
naming config.json and the key, before allocating anything.

The cases are (1) the issue's config (every size 2^30, two layers: the count wraps 64 bits
to a small number that inspect printed with exit 0 before the fix), and (2) every config
under tests/io/fixtures and tests/golden, written by transformers, not by hand, with its
layer count, hidden size and FFN width raised (each alone is valid), plus (3) random sizes
drawn log-uniformly on those same configs: whatever inspect accepts has a parameter count
that Python's exact integers put at or below 2^59 and that inspect reports unwrapped, and
whatever it refuses has one above 2^59 / 64 (the check adds terms it need not be exact on:
biases, a head; 64 is far more than their share)."""
import glob
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

LOUPE = os.environ["LOUPE"]
LIMIT = 1 << 59
fails = 0


def fail(msg):
    global fails
    fails += 1
    print("FAIL:", msg)


def run(*args):
    p = subprocess.run([LOUPE, *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr.strip().splitlines()


def keys_of(cfg):
    """The config's (layers, hidden, intermediate, heads) key names, as its family spells them."""
    if "dim" in cfg and "n_layers" in cfg:
        return "n_layers", "dim", "hidden_dim", "n_heads"
    return "num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads"


def write_dir(tmp, name, cfg, tok_from=None):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    if tok_from:  # train reads the tokenizer before the model: give it the fixture's own
        for t in ("vocab.txt", "tokenizer.json", "tokenizer_config.json"):
            if os.path.exists(os.path.join(tok_from, t)):
                shutil.copy(os.path.join(tok_from, t), d)
    return d


def expect_refused(d, key, train):
    """inspect (and train when asked) exit 1 with one line naming d/config.json and key; the
    two messages agree word for word after the command's own prefix."""
    path = os.path.join(d, "config.json")
    rc, _, err = run("inspect", "--model", d)
    if rc != 1 or len(err) != 1 or path not in err[0] or f'"{key}"' not in err[0]:
        fail(f"inspect {d}: exit {rc}, stderr {err}; wanted exit 1 naming {path} and \"{key}\"")
        return
    msg = err[0].split(": ", 1)[1]
    if train:
        rc, _, err = run("train", "--model", d, "--train", "data/sst2-mini/train.tsv", "--eval", "none",
                         "--max-steps", "1", "--quiet", "--output-dir", os.path.join(d, "runs"))
        last = err[-1] if err else ""
        if rc != 1 or not last.startswith("loupe train: ") or last.split(": ", 1)[1] != msg:
            fail(f"train {d}: exit {rc}, stderr {err}; wanted exit 1 with inspect's message: {msg}")
            return
        if os.path.exists(os.path.join(d, "runs")):
            fail(f"train {d}: a run directory was created before the refusal")
            return
    print(f"ok: {os.path.basename(d)} refused naming \"{key}\"")


def exact_count(j, layers):
    """inspect lists layer 0's tensors once (every layer has the same) and those outside."""
    n = 0
    for t in j["tensors"]:
        numel = 1
        for d in t["shape"]:
            numel *= d
        n += numel * (layers if t["layer"] == 0 else 1)
    return n


def main():
    tmp = tempfile.mkdtemp(prefix="lp_wrapped_")
    try:
        # (1) the issue's config
        issue = {"architectures": ["BertForSequenceClassification"], "model_type": "bert",
                 "hidden_size": 1 << 30, "num_attention_heads": 1, "num_hidden_layers": 2,
                 "intermediate_size": 1 << 30, "vocab_size": 1 << 30,
                 "max_position_embeddings": 1 << 30, "type_vocab_size": 1 << 30}
        expect_refused(write_dir(tmp, "issue", issue, "models/default"), "vocab_size", True)

        # (2) and (3) on configs transformers wrote
        srcs = sorted(glob.glob("tests/io/fixtures/*/config.json") + glob.glob("tests/golden/*/config.json"))
        if len(srcs) < 8:
            fail(f"only {len(srcs)} fixture configs found")
        rng = random.Random(16)
        n_acc = n_ref = 0
        for k, src in enumerate(srcs):
            base = json.load(open(src))
            kl, kh, ki, kn = keys_of(base)
            fam = os.path.basename(os.path.dirname(src))
            rc, _, err = run("inspect", "--model", write_dir(tmp, f"plain{k}", base))
            if rc != 0:
                fail(f"{src} unchanged: inspect exit {rc} {err}")
                continue
            big = dict(base)
            heads = base[kn]
            # llama's head_dim is at most 65536: a narrower hidden size, a wider FFN
            big[kl], big[kh], big[ki] = 100000, heads << 16, 1 << 24
            if "head_dim" in big:
                big["head_dim"] = 1 << 16
            bert = "llama" not in json.dumps(base.get("model_type", "")) and kn != "" and not any(
                a.startswith(("Llama", "Qwen2", "Mistral")) for a in base.get("architectures", []))
            tok = os.path.dirname(src) if os.path.exists(os.path.join(os.path.dirname(src), "vocab.txt")) else None
            expect_refused(write_dir(tmp, f"big{k}_{fam}", big, tok), kl, bert and tok is not None)
            for r in range(8):
                c = dict(base)
                for key in (kl, kh, ki, "vocab_size"):
                    top = 30 if key != kl else 16.6  # each key's own limit (2^30; 100000 layers)
                    c[key] = max(1, int(2 ** rng.uniform(0 if r < 4 else 0.6 * top, top)))
                c[kh] = max(heads, min(c[kh], heads << 16) // heads * heads)
                if "head_dim" in c:
                    c["head_dim"] = c[kh] // heads
                d = write_dir(tmp, f"rand{k}_{r}", c)
                rc, out, err = run("inspect", "--model", d, "--json")
                L, H, I, V = c[kl], c[kh], c[ki], c["vocab_size"]
                dominant = max(V * H, L * H * H, L * H * I)
                if rc == 0:
                    n_acc += 1
                    j = json.loads(out)
                    exact = exact_count(j, L)
                    # JSON numbers are doubles: above 2^53 the total is exact to 1 part in 2^52
                    if exact > LIMIT or abs(j["parameters"]["total"] - exact) > exact / 2**52:
                        fail(f"{src} {L=} {H=} {I=} {V=}: accepted with {j['parameters']['total']} "
                             f"parameters, exactly {exact}")
                else:
                    n_ref += 1
                    if rc != 1 or len(err) != 1 or not re.search(r'"[a-z_]+" = \d+ makes the parameter count', err[0]):
                        fail(f"{src} {L=} {H=} {I=} {V=}: exit {rc} {err}")
                    elif dominant * 64 <= LIMIT:
                        fail(f"{src} {L=} {H=} {I=} {V=}: refused though its largest term is {dominant}")
        print(f"random sizes: {n_acc} accepted (exact count checked), {n_ref} refused")
        if n_acc < 10 or n_ref < 10:
            fail("the random sizes did not exercise both sides of the limit")
    finally:
        shutil.rmtree(tmp)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
