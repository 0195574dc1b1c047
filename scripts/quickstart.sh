#!/usr/bin/env bash
# Installs, builds, and runs loupe's main job on the bundled defaults.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
LP_SKIP_PYTHON=1 scripts/bootstrap.sh
scripts/build.sh
if ./build/loupe profile --help 2>/dev/null | grep -q "Not built yet"; then
  # Until the trainer lands, profile the synthetic workload (arguments are ignored).
  ./build/examples/prof_demo
  echo "quickstart: profiler outputs in reports/demo/profiler/"
else
  ./build/loupe profile "$@"
fi
