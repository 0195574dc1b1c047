#!/usr/bin/env python3
"""safetensors interop with the reference library (pip safetensors + numpy): a file loupe
writes loads in safetensors.numpy with the same values, and a file the reference writes
(every numpy-backed dtype, a scalar, an empty tensor) reads in loupe with the same values.
Exit 77 when the safetensors package is not installed."""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from safetensors.numpy import load_file, save_file
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

tool = os.path.join(os.environ["LP_BUILD_DIR"], "tests", "io", "st_sample")
bad = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        bad.append(what)


with tempfile.TemporaryDirectory() as d:
    ours = os.path.join(d, "ours.safetensors")
    subprocess.run([tool, "write", ours], check=True)
    got = load_file(ours)
    k = np.arange(6).reshape(2, 3)
    want = {"t.F32": (k * 3 - 5 + 0.25).astype(np.float32), "t.F64": (k * 3 - 5 + 0.125).astype(np.float64),
            "t.I8": (k * 3 - 5).astype(np.int8), "t.U8": (k * 3).astype(np.uint8),
            "t.I16": (k * 3 - 5).astype(np.int16), "t.I32": (k * 3 - 5).astype(np.int32),
            "t.I64": ((k * 3 - 5) * 1000000007).astype(np.int64), "t.BOOL": (k % 2).astype(np.bool_)}
    check(sorted(got) == sorted(want), f"reference reads our tensor names {sorted(got)}")
    for name, w in want.items():
        g = got.get(name)
        check(g is not None and g.dtype == w.dtype and g.shape == w.shape and np.array_equal(g, w),
              f"reference reads {name} with our dtype, shape and values")

    theirs = os.path.join(d, "theirs.safetensors")
    ref = {"a.f32": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), "b.f16": np.ones(5, np.float16),
           "c.i64": np.array(-42, np.int64), "d.empty": np.zeros((0, 3), np.float32),
           "e.bool": np.array([True, False, True]), "f.u8": np.arange(7, dtype=np.uint8),
           "g.i32": np.array([[-2147483648, 2147483647]], np.int32), "h.f64": np.array([1e-300, 3.5])}
    save_file(ref, theirs, metadata={"format": "np"})
    p = subprocess.run([tool, "read", theirs], capture_output=True, text=True)
    check(p.returncode == 0, "loupe reads the reference's file " + p.stderr.strip())
    rows = {r["name"]: r for r in map(json.loads, p.stdout.splitlines())}
    names = {"float32": "F32", "float16": "F16", "int64": "I64", "bool": "BOOL", "uint8": "U8", "int32": "I32",
             "float64": "F64"}
    check(sorted(rows) == sorted(ref), "every tensor present")
    for name, a in ref.items():
        r = rows.get(name, {})
        check(r.get("dtype") == names[str(a.dtype)] and r.get("shape") == list(a.shape), f"{name}: dtype and shape")
        if a.dtype != np.float16:
            check(r.get("values") == [float(x) for x in a.ravel()], f"{name}: values")
print(f"{len(bad)} failure(s)")
sys.exit(1 if bad else 0)
