"""Shared pieces of bench/train_step/run.py and bench/peft_step/run.py: running bench_step
and torch_ref.py one configuration per process, PyTorch under both thread settings (its
best kept), the machine peak measured once, and the table printer."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TORCH_REF = os.path.join(HERE, "torch_ref.py")
# PyTorch's two thread settings: its defaults (active OpenMP waiting), and passive waiting
# with OpenBLAS' pool parked after 4 idle units (issue 4 asks for the better of the two).
TORCH_ENVS = {"default": {}, "passive": {"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_THREAD_TIMEOUT": "4"}}


def bench_exe(build):
    exe = os.path.join(build, "bench", "train_step", "bench_step")
    if not os.path.exists(exe):
        sys.exit(f"{exe} not found: build it first (cmake --build {build} --target bench_step)")
    return exe


def run_json(cmd, env_extra=None, label=""):
    """Runs one configuration in its own process and parses its JSON; None (with the reason on
    stderr) when it fails, so one broken configuration does not hide the others."""
    env = dict(os.environ)
    for k, v in (env_extra or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if p.returncode != 0:
        tail = "\n".join(p.stderr.strip().splitlines()[-6:])
        print(f"  ! {label or ' '.join(cmd)}: exit {p.returncode}\n{tail}", file=sys.stderr)
        return None
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError as e:
        print(f"  ! {label}: output is not JSON ({e})", file=sys.stderr)
        return None


def loupe_env(blas_coretype):
    return {"LP_BLAS_CORETYPE": blas_coretype} if blas_coretype else {}


def measure_peak(exe, threads, blas_coretype):
    """The best of three readings: a reading taken while the VM is disturbed comes out low
    (seen: 305 against 484-491 GFLOP/s), which would inflate every MFU."""
    best = 0.0
    for _ in range(3):
        r = run_json([exe, "--mode", "peak", "--threads", str(threads)], loupe_env(blas_coretype), "peak")
        if not r or not r.get("peak_gflops"):
            sys.exit("bench_step --mode peak failed")
        best = max(best, r["peak_gflops"])
    return best


def loupe_run(exe, a, blas_coretype, **kw):
    cmd = [exe, "--threads", str(a.threads), "--peak-gflops", f"{a.peak_gflops:.3f}"]
    for k, v in kw.items():
        cmd += ["--" + k.replace("_", "-")] + ([str(v)] if v != "" else [])  # "": a boolean flag
    label = "loupe " + " ".join(f"{k}={v}" for k, v in kw.items())
    print(f"  {label}", file=sys.stderr, flush=True)
    return run_json(cmd, loupe_env(blas_coretype), label)


def torch_best(a, **kw):
    """torch_ref.py under each thread setting in its own process; the fastest is kept, with the
    setting's name and every setting's samples/s."""
    best, tried = None, {}
    for name, env in TORCH_ENVS.items():
        cmd = [sys.executable, TORCH_REF, "--threads", str(a.threads), "--peak-gflops", f"{a.peak_gflops:.3f}"]
        for k, v in kw.items():
            cmd += ["--" + k.replace("_", "-")] + ([str(v)] if v != "" else [])  # "": a boolean flag
        label = f"torch[{name}] " + " ".join(f"{k}={v}" for k, v in kw.items())
        print(f"  {label}", file=sys.stderr, flush=True)
        full_env = {"OMP_WAIT_POLICY": None, "OPENBLAS_THREAD_TIMEOUT": None, **env}
        r = run_json(cmd, full_env, label)
        if r is None:
            tried[name] = None
            continue
        tried[name] = r["samples_per_s"]
        if best is None or r["samples_per_s"] > best["samples_per_s"]:
            best = dict(r, thread_setting=name)
    if best is not None:
        best["samples_per_s_by_setting"] = tried
    return best


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def verdict(value, target, higher=True):
    """'>= 1.25 ok' / '>= 1.25 NO' (target met or not); '' without a target or a value."""
    if target is None or value is None:
        return ""
    ok = value >= target if higher else value <= target
    return f"{'>=' if higher else '<='}{target:g} {'ok' if ok else 'NO'}"


def print_table(headers, rows):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(headers)]
    line = "  ".join(str(h).rjust(w) if i else str(h).ljust(w) for i, (h, w) in enumerate(zip(headers, widths)))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))))


def write_json(path, obj):
    """Atomically (temp file + rename), so a killed run leaves no half-written results."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
