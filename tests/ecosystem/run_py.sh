#!/bin/sh
# Runs a Python check with the repo's .venv interpreter (scripts/bootstrap.sh makes it),
# falling back to python3 on PATH; the check itself skips (77) if its packages are missing.
py="${LP_SOURCE_DIR:-.}/.venv/bin/python"
[ -x "$py" ] || py=python3
exec "$py" "$@"
