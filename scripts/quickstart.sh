#!/usr/bin/env bash
# Installs, builds, and runs loupe's main job on the bundled defaults.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
LP_SKIP_PYTHON=1 scripts/bootstrap.sh
scripts/build.sh
./build/loupe profile "$@"
