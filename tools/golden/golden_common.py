# Shared helpers for the golden-file generators: determinism setup, library versions,
# writing golden.safetensors / golden.json, and f32-vs-f64 difference statistics.
# Every generator imports this; nothing here is specific to one model.
import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import warnings

import numpy as np
import torch

SEED = 1234


def setup(seed=SEED):
    """Fix every RNG and make torch single-threaded and deterministic."""
    # Set iteration order depends on the string hash seed (PEFT keeps target_modules in a
    # set and writes it as a list): re-run ourselves once with a fixed seed.
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable] + sys.argv)
    warnings.filterwarnings("ignore")
    import logging
    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)
    try:
        import transformers
        transformers.utils.logging.disable_progress_bar()
        transformers.utils.logging.set_verbosity_error()
    except Exception:
        pass
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # One thread: results do not depend on how work is split between threads.
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def parse_out(desc):
    ap = argparse.ArgumentParser(description=desc)
    ap.add_argument("--out", required=True, help="golden directory to (re)create")
    return ap.parse_args().out


def fresh_dir(path):
    """Remove and recreate an output directory so reruns are idempotent."""
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(path)
    return path


def versions():
    v = {"python": sys.version.split()[0], "torch": torch.__version__, "numpy": np.__version__}
    for mod in ("transformers", "peft", "bitsandbytes", "tokenizers", "safetensors",
                "sentence_transformers"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception:  # a generator that does not need it may run without it
            v[mod] = None
    return v


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _as_saveable(t):
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.float64:
        t = t.float()
    return t


def save_golden(out, tensors, meta):
    """Write golden.safetensors (named tensors) and golden.json (metadata).

    tensors: dict name -> torch tensor (f64 is stored as f32; ints keep their dtype).
    The tensor list with dtype/shape is added to the metadata for readers.
    """
    from safetensors.torch import save_file
    clean = {k: _as_saveable(v) for k, v in tensors.items()}
    save_file(clean, os.path.join(out, "golden.safetensors"), metadata={"format": "pt"})
    meta = dict(meta)
    meta["tensor_index"] = {k: {"dtype": str(v.dtype).replace("torch.", ""),
                                "shape": list(v.shape)} for k, v in sorted(clean.items())}
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True, default=_json_default)
        f.write("\n")


def _json_default(o):
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, torch.Tensor):
        return o.tolist()
    raise TypeError(type(o))


def diff_stats(a32, a64):
    """Difference of a float32 result from the float64 run of the same reference.

    max_abs: max |a32 - a64|; ref_max_abs: max |a64|; max_rel: max_abs / ref_max_abs
    (normwise, robust to near-zero elements); max_elem_rel: max |a32-a64|/|a64| over
    elements with |a64| >= 1e-3 * ref_max_abs.
    """
    a = a32.detach().double().cpu()
    b = a64.detach().double().cpu()
    d = (a - b).abs()
    ref = b.abs().max().item() if b.numel() else 0.0
    mabs = d.max().item() if d.numel() else 0.0
    sel = b.abs() >= 1e-3 * ref
    erel = (d[sel] / b.abs()[sel]).max().item() if sel.any() else 0.0
    return {"max_abs": float("%.3e" % mabs), "ref_max_abs": float("%.4e" % ref),
            "max_rel": float("%.3e" % (mabs / ref if ref > 0 else 0.0)),
            "max_elem_rel": float("%.3e" % erel)}


def group_stats(pairs):
    """Worst-case stats over several (a32, a64) pairs."""
    worst = {"max_abs": 0.0, "max_rel": 0.0, "max_elem_rel": 0.0}
    for a32, a64 in pairs:
        s = diff_stats(a32, a64)
        for k in worst:
            worst[k] = max(worst[k], s[k])
    return worst


def gen(seed):
    g = torch.Generator().manual_seed(seed)
    return g
