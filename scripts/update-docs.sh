#!/usr/bin/env bash
# Regenerates the dialect and pass references in docs/dialects from ODS.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build --target tessera-docs
mkdir -p docs/dialects
cp build/docs/{GraphDialect,GraphPasses,ConversionPasses,IPUDialect,IPUPasses,CodegenPasses}.md docs/dialects/
echo "updated docs/dialects"
