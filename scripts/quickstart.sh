#!/usr/bin/env bash
# The main job: install, build, export a torchvision model to ONNX (random
# weights, fixed seed, nothing downloaded), import and optimize it with
# tessera-compile, and print what it contains.
# Usage: scripts/quickstart.sh [torchvision model name, default resnet50]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-resnet50}"
scripts/install-deps.sh
scripts/build.sh

OUT=build/quickstart
mkdir -p "$OUT"
/usr/bin/python3 scripts/export_model.py "$MODEL" "$OUT/$MODEL.onnx"
echo "tessera-compile $OUT/$MODEL.onnx --compile-to=graph --summary --emit-bytecode -o $OUT/$MODEL.graph.mlirbc"
start=$(date +%s%N)
build/bin/tessera-compile "$OUT/$MODEL.onnx" --compile-to=graph --summary \
  --emit-bytecode -o "$OUT/$MODEL.graph.mlirbc"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "compiled in ${ms} ms -> $OUT/$MODEL.graph.mlirbc"
