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
# The Python package: /usr/bin/python3 finds `tessera` (python/) and its
# extension (build/python/) through a .pth file in its site directory, so
# `import tessera` works right after the build, with no install step.
if [ "$(id -u)" -eq 0 ]; then
  site=$(/usr/bin/python3 -c 'import site; print(site.getsitepackages()[0])')
else
  site=$(/usr/bin/python3 -c 'import site; print(site.getusersitepackages())')
fi
if [ -n "$site" ]; then
  mkdir -p "$site"
  if ! cmp -s build/python/tessera.pth "$site/tessera.pth" 2>/dev/null; then
    cp build/python/tessera.pth "$site/tessera.pth"
    echo "build: the tessera Python package is on /usr/bin/python3's path ($site/tessera.pth)"
  fi
fi
