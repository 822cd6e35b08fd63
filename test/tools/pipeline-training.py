# Pipelined training reaches the weights of training on one IPU: a
# 4-layer TransformerEncoder and a ResNet-18 (batch norm in training mode),
# each cut automatically into 4 stages on 4 IPUs, after 10 weight updates
# of 4 micro-batches (fp32, compared to 1e-4).
# RUN: rm -rf %t && %python %s %t
# RUN: tessera-compile %t/encoder.onnx --train --loss mse --optimizer sgd:lr=0.01 --micro-batch-size 4 --gradient-accumulation 4 -o %t/encoder1.tess
# RUN: tessera-compile %t/encoder.onnx --train --loss mse --optimizer sgd:lr=0.01 --micro-batch-size 4 --gradient-accumulation 4 --num-ipus 4 --pipeline auto --summary -o %t/encoder4.tess | FileCheck %s
# RUN: tessera-run %t/encoder1.tess --train-data %t/encoder.npz --epochs 1 --save-weights %t/encoder1.npz
# RUN: tessera-run %t/encoder4.tess --train-data %t/encoder.npz --epochs 1 --save-weights %t/encoder4.npz
# RUN: %python %s %t same encoder1.npz encoder4.npz
# RUN: tessera-compile %t/resnet18.onnx --train --loss cross-entropy --optimizer sgd:lr=0.01,momentum=0.9 --micro-batch-size 2 --gradient-accumulation 4 -o %t/resnet1.tess
# RUN: tessera-compile %t/resnet18.onnx --train --loss cross-entropy --optimizer sgd:lr=0.01,momentum=0.9 --micro-batch-size 2 --gradient-accumulation 4 --num-ipus 4 --pipeline auto -o %t/resnet4.tess
# RUN: tessera-run %t/resnet1.tess --train-data %t/resnet18.npz --epochs 1 --save-weights %t/resnet1.npz
# RUN: tessera-run %t/resnet4.tess --train-data %t/resnet18.npz --epochs 1 --save-weights %t/resnet4.npz
# RUN: %python %s %t same resnet1.npz resnet4.npz

# CHECK: per IPU (its steps, one iteration): IPU 0 {{[0-9,]+}}, IPU 1 {{[0-9,]+}}, IPU 2 {{[0-9,]+}}, IPU 3 {{[0-9,]+}}
# CHECK: pipelined over 4 stages

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

import torch  # noqa: E402
import torchvision  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from transformer_models import distinct_layers  # noqa: E402

warnings.filterwarnings("ignore")
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
training = torch.onnx.TrainingMode.TRAINING
layer = torch.nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, batch_first=True)
encoder = distinct_layers(torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False))
torch.onnx.export(encoder.train(), torch.randn(4, 8, 32), path("encoder.onnx"), input_names=["x"],
                  output_names=["y"], opset_version=17, training=training,
                  do_constant_folding=False)
resnet = torchvision.models.resnet18(num_classes=10).train()
torch.onnx.export(resnet, torch.randn(2, 3, 32, 32), path("resnet18.onnx"), input_names=["x"],
                  output_names=["y"], opset_version=17, training=training,
                  do_constant_folding=False)
rng = np.random.default_rng(0)
np.savez(path("encoder.npz"), x=rng.standard_normal((160, 8, 32)).astype(np.float32),
         labels=rng.standard_normal((160, 8, 32)).astype(np.float32))
np.savez(path("resnet18.npz"), x=rng.standard_normal((80, 3, 32, 32)).astype(np.float32),
         labels=rng.integers(0, 10, 80).astype(np.int64))
