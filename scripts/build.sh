#!/usr/bin/env bash
# Configures (once) and builds Tessera in build/ with the default preset.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
# Paths relative to the checkout: a fresh clone elsewhere (CI) still hits.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
if [ ! -f build/build.ninja ]; then
  cmake --preset default
fi
cmake --build --preset default
