"""Shared helpers for the ecosystem checks: find and run examples/prof_demo into a temp
dir, locate the files it wrote, read a Kineto trace's complete events the way the tools
see them, and report skips (exit 77) with a reason."""
import atexit
import glob
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def tempdir(prefix):
    """A fresh directory under /tmp, removed when the check exits."""
    d = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, d, True)
    return d


def skip(msg):
    print("SKIP: " + msg)
    sys.exit(SKIP)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def need(module, pip_name):
    """Imports a module or skips, naming the package that could not be installed."""
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as e:
        skip(f"{pip_name} is not installed in this Python ({sys.executable}): {e}; "
             "run scripts/bootstrap.sh (installs scripts/requirements-test.txt into .venv)")


def source_dir():
    return os.environ.get("LP_SOURCE_DIR") or os.path.abspath(
        os.path.join(os.path.dirname(__file__), "..", ".."))


def prof_demo_binary():
    build = os.environ.get("LP_BUILD_DIR") or os.path.join(source_dir(), "build")
    for rel in ("prof_demo", "examples/prof_demo", "bin/prof_demo"):
        p = os.path.join(build, rel)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def run_prof_demo():
    """Runs prof_demo in a fresh temp dir (it writes reports/demo/profiler/ relative to
    its working directory) and returns that profiler directory."""
    exe = prof_demo_binary()
    if exe is None:
        skip("examples/prof_demo is not built yet (target prof_demo under LP_BUILD_DIR)")
    work = tempdir("lp_eco_")
    r = subprocess.run([exe], cwd=work, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail(f"{exe} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    prof = os.path.join(work, "reports", "demo", "profiler")
    if not os.path.isdir(prof):
        fail(f"prof_demo wrote no {prof}; it printed:\n{r.stdout}\n{r.stderr}")
    return prof


def find_trace(prof_dir):
    hits = sorted(glob.glob(os.path.join(prof_dir, "*.pt.trace.json.gz")) +
                  glob.glob(os.path.join(prof_dir, "*.pt.trace.json")))
    if not hits:
        fail(f"no *.pt.trace.json[.gz] in {prof_dir}: {os.listdir(prof_dir)}")
    return hits[0]


def load_trace(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def complete_events(trace):
    """The X events a trace tool keeps as ops/ranges (HTA drops cat 'Trace')."""
    return [e for e in trace["traceEvents"]
            if e.get("ph") == "X" and "cat" in e and e.get("cat") != "Trace"]


def trace_kind(argv):
    return argv[1] if len(argv) > 1 else "demo"


def trace_source(argv):
    """'demo' (our profiler's trace from prof_demo) or 'fixture' (PyTorch's, as a control
    that the check itself is right)."""
    which = trace_kind(argv)
    if os.path.isfile(which):  # any trace file, e.g. from a `loupe profile` run (tests/train)
        return which
    if which == "fixture":
        return os.path.join(source_dir(), "tests", "fixtures", "torch_trace", "worker0.pt.trace.json.gz")
    if which == "demo":
        return find_trace(run_prof_demo())
    fail(f"unknown trace source {which!r} (demo|fixture)")
