# Replicas train as one replica with their combined batch: a small CNN
# (conv, pooling, linear; Adam) over 4 replicas of micro-batch 2 against
# one replica of micro-batch 8, and a transformer encoder layer (SGD with
# momentum, gradient accumulation 2) over 2 replicas, reach the same
# weights (fp32, 1e-4). Random numbers differ per replica, replica 0's are
# those of an unreplicated run, and a run repeats exactly.
# RUN: rm -rf %t && %python %s %t
# RUN: tessera-compile %t/cnn.onnx --train --loss cross-entropy --optimizer adam:lr=0.01 --micro-batch-size 8 -o %t/cnn1.tess
# RUN: tessera-compile %t/cnn.onnx --train --loss cross-entropy --optimizer adam:lr=0.01 --micro-batch-size 2 --replicas 4 --summary -o %t/cnn4.tess | FileCheck %s --check-prefix=SUMMARY
# RUN: tessera-run %t/cnn1.tess --train-data %t/cnn.npz --epochs 1 --save-weights %t/cnn1.npz
# RUN: tessera-run %t/cnn4.tess --train-data %t/cnn.npz --epochs 1 --save-weights %t/cnn4.npz | FileCheck %s --check-prefix=TRAIN
# RUN: %python %s %t same cnn1.npz cnn4.npz
# RUN: tessera-compile %t/encoder.onnx --train --loss mse --optimizer sgd:lr=0.01,momentum=0.9 --micro-batch-size 4 --gradient-accumulation 2 -o %t/enc1.tess
# RUN: tessera-compile %t/encoder.onnx --train --loss mse --optimizer sgd:lr=0.01,momentum=0.9 --micro-batch-size 2 --gradient-accumulation 2 --replicas 2 -o %t/enc2.tess
# RUN: tessera-run %t/enc1.tess --train-data %t/encoder.npz --epochs 1 --save-weights %t/enc1.npz
# RUN: tessera-run %t/enc2.tess --train-data %t/encoder.npz --epochs 1 --save-weights %t/enc2.npz
# RUN: %python %s %t same enc1.npz enc2.npz
# RUN: tessera-compile %t/noise.onnx -o %t/noise1.tess
# RUN: tessera-compile %t/noise.onnx --replicas 2 -o %t/noise2.tess
# RUN: tessera-run %t/noise1.tess --input x=%t/x1.npy --output %t/noise1.npz
# RUN: tessera-run %t/noise2.tess --input x=%t/x2.npy --output %t/noise2.npz
# RUN: tessera-run %t/noise2.tess --input x=%t/x2.npy --output %t/noise2b.npz
# RUN: %python %s %t noise
# RUN: not tessera-run %t/cnn4.tess --train-data %t/cnn.npz --epochs 1 --reference 2>&1 | FileCheck %s --check-prefix=REFERENCE
# RUN: tessera-compile %t/cnn.onnx --train --loss cross-entropy --optimizer adam:lr=0.01 --micro-batch-size 2 --replicas 2 --compile-to=training -o %t/cnn-train2.mlir
# RUN: not tessera-compile %t/cnn-train2.mlir --train --loss cross-entropy --optimizer adam:lr=0.01 --micro-batch-size 2 -o %t/bad.tess 2>&1 | FileCheck %s --check-prefix=FEDBACK
# RUN: not test -e %t/bad.tess

# SUMMARY: estimated on ipu2: 1 IPU x 1472 tiles x 624 KiB, {{.*}} x 4 replicas
# SUMMARY-NEXT: one iteration (batch 8):
# SUMMARY: sync {{[0-9,]+}} ({{.*}}), all-reduce {{[0-9,]+}} ({{.*}})
# SUMMARY: allreduce0     cross_replica_sum
# TRAIN: micro-batch 2 x gradient accumulation 1 x device iterations 1 x replicas 4 = 8 samples per run
# REFERENCE: the host reference runs one replica; this executable has 4
# FEDBACK: this training step was made for 2 replica(s), not 1: compile the model itself with --replicas 1

import os
import sys
import warnings

import numpy as np
from onnx_gen import assert_same_arrays

out = sys.argv[1]
path = lambda name: os.path.join(out, name)  # noqa: E731
if sys.argv[2:3] == ["same"]:
    assert_same_arrays(path(sys.argv[3]), path(sys.argv[4]))
    sys.exit(0)
if sys.argv[2:3] == ["noise"]:
    one, two, again = (np.load(path(f))["y"] for f in ("noise1.npz", "noise2.npz", "noise2b.npz"))
    assert two.shape == (8, 16), two.shape
    np.testing.assert_array_equal(two, again)  # deterministic
    np.testing.assert_array_equal(two[:4], one)  # replica 0 keeps the seed
    assert np.mean(two[:4] == two[4:]) < 0.01  # replica 1 draws its own
    sys.exit(0)

import onnx  # noqa: E402
import torch  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

warnings.filterwarnings("ignore")
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
training = torch.onnx.TrainingMode.TRAINING


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 4 * 4, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
        return self.fc(x.flatten(1))


torch.onnx.export(CNN(), torch.randn(2, 1, 8, 8), path("cnn.onnx"), input_names=["x"],
                  output_names=["y"], opset_version=17, dynamic_axes={"x": {0: "n"}},
                  training=training, do_constant_folding=False)
layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
torch.onnx.export(layer.train(), torch.randn(2, 4, 16), path("encoder.onnx"),
                  input_names=["x"], output_names=["y"], opset_version=17,
                  dynamic_axes={"x": {0: "n"}}, training=training, do_constant_folding=False)
rng = np.random.default_rng(0)
np.savez(path("cnn.npz"), x=rng.standard_normal((64, 1, 8, 8)).astype(np.float32),
         labels=rng.integers(0, 10, 64).astype(np.int64))
np.savez(path("encoder.npz"), x=rng.standard_normal((32, 4, 16)).astype(np.float32),
         labels=rng.standard_normal((32, 4, 16)).astype(np.float32))

# y = x + uniform noise: each replica's noise is its own.
graph = helper.make_graph(
    [helper.make_node("RandomUniformLike", ["x"], ["u"]), helper.make_node("Add", ["x", "u"], ["y"])],
    "noise", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path("noise.onnx"))
np.save(path("x1.npy"), np.zeros((4, 16), np.float32))
np.save(path("x2.npy"), np.zeros((8, 16), np.float32))
