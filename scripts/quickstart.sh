#!/usr/bin/env bash
# The main job: install, build, export a torchvision model to ONNX (random
# weights, fixed seed, nothing downloaded), compile it with tessera-compile
# (printing what it contains), run the executable's host reference code with
# tessera-run, and check the result against PyTorch.
# Usage: scripts/quickstart.sh [torchvision model name, default resnet50]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-resnet50}"
scripts/install-deps.sh
scripts/build.sh

OUT=build/quickstart
mkdir -p "$OUT"
PY=/usr/bin/python3
$PY scripts/export_model.py "$MODEL" "$OUT/$MODEL.onnx"

echo
echo "\$ tessera-compile $OUT/$MODEL.onnx --summary -o $OUT/$MODEL.tess"
start=$(date +%s%N)
build/bin/tessera-compile "$OUT/$MODEL.onnx" --summary -o "$OUT/$MODEL.tess"
echo "compiled in $(( ($(date +%s%N) - start) / 1000000 )) ms"

# A random image, seeded; the same one goes to PyTorch below.
$PY - "$OUT" <<'PYEOF'
import sys, numpy as np
rng = np.random.default_rng(0)
np.save(f"{sys.argv[1]}/image.npy", rng.standard_normal((1, 3, 224, 224), dtype=np.float32))
PYEOF

echo
echo "\$ tessera-run $OUT/$MODEL.tess --reference --input $OUT/image.npy --output $OUT/out.npz"
build/bin/tessera-run "$OUT/$MODEL.tess" --reference --input "$OUT/image.npy" \
  --output "$OUT/out.npz"

echo
$PY - "$OUT" "$MODEL" <<'PYEOF'
import sys, warnings
import numpy as np, torch
sys.path.insert(0, "scripts")
import export_model
out, name = sys.argv[1], sys.argv[2]
model, _, _ = export_model.build(name)
got = np.load(f"{out}/out.npz")["output"][0]
with torch.no_grad():
    ref = model(torch.from_numpy(np.load(f"{out}/image.npy"))).numpy()[0]
top = np.argsort(-got)[:5]
print("top-5 classes (host reference):", ", ".join(f"{c} ({got[c]:.4f})" for c in top))
print("top-5 classes (PyTorch):       ", ", ".join(f"{c} ({ref[c]:.4f})" for c in np.argsort(-ref)[:5]))
print(f"max |difference| vs PyTorch: {np.abs(got - ref).max():.3g}")
PYEOF
echo "(the IPU model, its cycle counts and images/s arrive with the tile-mapping backend)"
