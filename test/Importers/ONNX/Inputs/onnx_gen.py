"""Small ONNX models for importer tests, built with onnx.helper at test time.

Each lit test calls `save(name, nodes, inputs, outputs, ...)` to write
`<outdir>/<name>.onnx`; nothing binary is committed.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

T = TensorProto


def vi(name, elem, shape):
    """A graph input/output description; dims may be ints or strings."""
    return helper.make_tensor_value_info(name, elem, shape)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def node(op, inputs, outputs, name=None, **attrs):
    return helper.make_node(op, inputs, outputs, name=name or outputs[0], **attrs)


def save(name, nodes, inputs, outputs, initializers=(), opset=17, outdir=None,
         check=True):
    outdir = outdir or sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)],
        producer_name="tessera-tests")
    model.ir_version = 8
    if check:
        onnx.checker.check_model(model)
    path = os.path.join(outdir, name + ".onnx")
    onnx.save(model, path)
    return path


def tanh_mlp(name, rng, batch=16, features=32, hidden=64, outputs=8):
    """x @ w1 -> tanh -> @ w2, weights from `rng` (the training tests'
    model); returns the path."""
    return save(name, [node("MatMul", ["x", "w1"], ["h"]), node("Tanh", ["h"], ["t"]),
                       node("MatMul", ["t", "w2"], ["y"])],
                [vi("x", T.FLOAT, [batch, features])], [vi("y", T.FLOAT, [batch, outputs])],
                [init("w1", (rng.randn(features, hidden) * 0.2).astype(np.float32)),
                 init("w2", (rng.randn(hidden, outputs) * 0.2).astype(np.float32))])


def tanh_regression(rng, samples, features=32, outputs=8):
    """Samples and targets tanh(x @ w) of a random w: data tanh_mlp fits."""
    x = rng.randn(samples, features).astype(np.float32)
    return x, np.tanh(x @ (rng.randn(features, outputs) * 0.2)).astype(np.float32)


def assert_same_arrays(a_path, b_path, rtol=1e-4, atol=1e-6):
    """The tools tests' check that two .npz files (saved weights and state)
    hold the same arrays under the same names, within tolerance."""
    a, b = np.load(a_path), np.load(b_path)
    assert sorted(a.files) == sorted(b.files), (sorted(a.files), sorted(b.files))
    for k in a.files:
        np.testing.assert_allclose(b[k], a[k], rtol=rtol, atol=atol, err_msg=k)
