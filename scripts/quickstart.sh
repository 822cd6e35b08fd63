#!/usr/bin/env bash
# The main job: install, build, train a small CNN on the 8x8 digits through
# tessera-compile --train and tessera-run --train-data; then export a
# torchvision model to ONNX (random weights, fixed seed, nothing
# downloaded), compile it with tessera-compile
# (printing what it contains) for an ipu2, run it on the IPU model with
# tessera-run (estimated cycles and images/s on the chip), run the same
# executable's host reference code, and check both against PyTorch.
# Usage: scripts/quickstart.sh [torchvision model name, default resnet50]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:-resnet50}"
scripts/install-deps.sh
scripts/build.sh

OUT=build/quickstart
mkdir -p "$OUT"
PY=/usr/bin/python3

# Training: a small CNN on scikit-learn's digits, on the IPU model; only the
# per-epoch lines are shown (tessera-run prints one line per run).
$PY scripts/train_digits.py "$OUT" | grep -v '^run '
echo
# The same from Python, PopTorch's way (the tessera package is on
# /usr/bin/python3's path after the build).
echo "\$ scripts/python_digits.py"
$PY scripts/python_digits.py
echo
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
echo "\$ tessera-run $OUT/$MODEL.tess --input $OUT/image.npy --output $OUT/out.npz"
build/bin/tessera-run "$OUT/$MODEL.tess" --input "$OUT/image.npy" --output "$OUT/out.npz" \
  | tee "$OUT/run.txt"

echo
echo "\$ tessera-run $OUT/$MODEL.tess --reference --input $OUT/image.npy --output $OUT/ref.npz"
build/bin/tessera-run "$OUT/$MODEL.tess" --reference --input "$OUT/image.npy" \
  --output "$OUT/ref.npz"

echo
$PY - "$OUT" "$MODEL" <<'PYEOF'
import sys, warnings
import numpy as np, torch
sys.path.insert(0, "scripts")
import export_model
out, name = sys.argv[1], sys.argv[2]
model, _, _ = export_model.build(name)
ipu = np.load(f"{out}/out.npz")["output"][0]
host = np.load(f"{out}/ref.npz")["output"][0]
with torch.no_grad():
    ref = model(torch.from_numpy(np.load(f"{out}/image.npy"))).numpy()[0]
def top5(v):
    return ", ".join(f"{c} ({v[c]:.4f})" for c in np.argsort(-v)[:5])
print("top-5 classes (IPU model):     ", top5(ipu))
print("top-5 classes (host reference):", top5(host))
print("top-5 classes (PyTorch):       ", top5(ref))
print(f"max |difference| IPU model vs host reference: {np.abs(ipu - host).max():.3g}")
print(f"max |difference| IPU model vs PyTorch:        {np.abs(ipu - ref).max():.3g}")
import re
run = re.search(r"estimated on (\S+): .* ([\d,]+) samples/s", open(f"{out}/run.txt").read())
print(f"estimated throughput on {run[1]}: {run[2]} images/s (batch 1)")
PYEOF
