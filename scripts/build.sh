#!/usr/bin/env bash
# Configures (once) and builds Tessera in build/ with the default preset.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
if [ ! -f build/build.ninja ]; then
  cmake --preset default
fi
cmake --build --preset default
