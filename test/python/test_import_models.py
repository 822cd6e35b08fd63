"""Whole models through tessera-compile --compile-to=graph.

The smallest member of every torchvision 0.14 classification family and a
TransformerEncoder (opset 13 and 17) must import into valid graph IR with
static shapes. Models are exported at test time with random weights.
"""
import re

import numpy as np
import onnx
import pytest

from conftest import run, tool
import export_model

TORCHVISION = [
    "alexnet", "vgg11", "resnet18", "resnext50_32x4d", "wide_resnet50_2",
    "densenet121", "squeezenet1_1", "shufflenet_v2_x0_5", "mobilenet_v2",
    "mobilenet_v3_small", "mnasnet0_5", "efficientnet_b0", "efficientnet_v2_s",
    "regnet_x_400mf", "googlenet", "inception_v3", "convnext_tiny", "vit_b_32",
    "swin_t", "maxvit_t",
]


def float_parameters(model):
    """Elements of float initializers with more than one element: what the
    importer turns into ml_program globals."""
    total = 0
    for t in model.graph.initializer:
        n = int(np.prod(t.dims)) if t.dims else 1
        if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16) and n > 1:
            total += n
    return total


def compile_graph(path, tmp_path, extra=()):
    out = tmp_path / "model.mlirbc"
    result = run([tool("tessera-compile"), str(path), "--compile-to=graph",
                  "--summary", "--emit-bytecode", "-o", str(out), *extra])
    assert result.returncode == 0, result.stderr
    # The output re-enters: tessera-opt parses it and confirms static shapes.
    check = run([tool("tessera-opt"), str(out), "--graph-require-static-shapes",
                 "--mlir-elide-resource-strings-if-larger=1"])
    assert check.returncode == 0, check.stderr
    assert "?x" not in check.stdout and "x?" not in check.stdout
    return result.stdout


def summary_value(summary, key):
    line = next(l for l in summary.splitlines() if l.startswith(key))
    return line.split(":", 1)[1].strip()


@pytest.mark.parametrize("name", TORCHVISION)
def test_torchvision(name, tmp_path):
    path = tmp_path / f"{name}.onnx"
    export_model.export(name, str(path))
    summary = compile_graph(path, tmp_path)
    assert summary_value(summary, "outputs").endswith("1x1000xf32"), summary
    params = int(re.search(r"\((\d+)\) in", summary).group(1))
    assert params == float_parameters(onnx.load(str(path), load_external_data=False))
    flops = summary_value(summary, "FLOPs")
    assert re.match(r"[\d.]+ [MG] per run", flops), summary


@pytest.mark.parametrize("opset", [13, 17])
def test_transformer_encoder_opset(opset, tmp_path):
    path = tmp_path / "encoder.onnx"
    export_model.export("transformer_encoder", str(path), opset)
    # Exported with symbolic batch and sequence: the shape is required.
    missing = run([tool("tessera-compile"), str(path), "--compile-to=graph"])
    assert missing.returncode != 0
    assert "--input-shape input=" in missing.stderr
    summary = compile_graph(path, tmp_path, ["--input-shape", "input=2x16x128"])
    assert summary_value(summary, "outputs") == "output: 2x16x128xf32"
    ops = summary_value(summary, "ops")
    assert "matmul" in ops and "softmax" in ops
    if opset == 17:
        assert "layer_norm" in ops
