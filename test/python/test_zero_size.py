"""Zero-size tensors are ordinary: every op family over an empty dimension.

Each case is a one- or two-node ONNX model whose input or weight has a
dimension of size 0. It either compiles and computes what ONNX defines (an
empty result, or, where an op reduces over nothing, its identity: a sum over
nothing is 0, a product 1, a matmul over a 0-long reduction adds nothing to
its bias), on the IPU model and on the host reference path, or it is refused
with an error that names the node, as ONNX Runtime refuses a max over
nothing. Never a signal. The training case trains a model with a 0-row
weight, a contraction over nothing and an empty concatenated operand against
torch.optim.
"""
import numpy as np
import pytest
import torch

import onnx_gen as G
from conftest import run, tool

F = G.T.FLOAT
# A small target: every case compiles and runs in well under a second.
SMALL_TARGET = ["--tiles-per-ipu", "16"]


def rand(*shape, seed=0):
    return np.random.RandomState(seed).randn(*shape).astype(np.float32)


def ints(values):
    return np.asarray(values, dtype=np.int64)


# name -> (nodes, {input: value}, {initializer: value}, {output: expected})
CASES = {
    # Contractions over a 0-long reduction: all zeros (plus the bias).
    "matmul_empty_reduction": (
        [G.node("MatMul", ["x", "w"], ["y"])],
        {"x": rand(4, 0)}, {"w": rand(0, 5)}, {"y": np.zeros((4, 5), np.float32)}),
    "matmul_empty_rows": (
        [G.node("MatMul", ["x", "w"], ["y"])],
        {"x": rand(0, 3)}, {"w": rand(3, 5)}, {"y": np.zeros((0, 5), np.float32)}),
    "batched_matmul_empty_batch": (
        [G.node("MatMul", ["x", "w"], ["y"])],
        {"x": rand(0, 2, 3)}, {"w": rand(3, 4)}, {"y": np.zeros((0, 2, 4), np.float32)}),
    "gemm_empty_reduction_adds_bias": (
        [G.node("Gemm", ["x", "w", "b"], ["y"])],
        {"x": rand(3, 0)}, {"w": rand(0, 4), "b": rand(4, seed=1)},
        {"y": np.broadcast_to(rand(4, seed=1), (3, 4)).copy()}),
    "conv_empty_batch": (
        [G.node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3])],
        {"x": rand(0, 2, 6, 6)}, {"w": rand(3, 2, 3, 3)},
        {"y": np.zeros((0, 3, 4, 4), np.float32)}),
    "conv_no_input_channels_adds_bias": (
        [G.node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3])],
        {"x": rand(1, 0, 5, 5)}, {"w": rand(4, 0, 3, 3), "b": rand(4, seed=2)},
        {"y": np.broadcast_to(rand(4, seed=2)[None, :, None, None], (1, 4, 3, 3)).copy()}),
    # Reductions: over nothing, the identity; over something into nothing,
    # an empty result.
    "reduce_sum_over_nothing": (
        [G.node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)],
        {"x": rand(2, 0, 3)}, {"axes": ints([1])}, {"y": np.zeros((2, 1, 3), np.float32)}),
    "reduce_prod_over_nothing": (
        [G.node("ReduceProd", ["x"], ["y"], axes=[1], keepdims=0)],
        {"x": rand(2, 0, 3)}, {}, {"y": np.ones((2, 3), np.float32)}),
    "reduce_sum_square_over_nothing": (
        [G.node("ReduceSumSquare", ["x"], ["y"], axes=[0], keepdims=0)],
        {"x": rand(0, 3)}, {}, {"y": np.zeros((3,), np.float32)}),
    "reduce_max_into_nothing": (
        [G.node("ReduceMax", ["x"], ["y"], axes=[1], keepdims=1)],
        {"x": rand(0, 4)}, {}, {"y": np.zeros((0, 1), np.float32)}),
    "reduce_mean_into_nothing": (
        [G.node("ReduceMean", ["x"], ["y"], axes=[0], keepdims=0)],
        {"x": rand(3, 0)}, {}, {"y": np.zeros((0,), np.float32)}),
    "softmax_empty_rows": (
        [G.node("Softmax", ["x"], ["y"], axis=-1)],
        {"x": rand(0, 7)}, {}, {"y": np.zeros((0, 7), np.float32)}),
    # Normalisations of an empty batch.
    "batch_norm_empty_batch": (
        [G.node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
        {"x": rand(0, 3, 4, 4)},
        {"s": rand(3), "b": rand(3, seed=1), "m": rand(3, seed=2),
         "v": np.abs(rand(3, seed=3)) + 1},
        {"y": np.zeros((0, 3, 4, 4), np.float32)}),
    "layer_norm_empty_rows": (
        [G.node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1)],
        {"x": rand(0, 8)}, {"s": rand(8), "b": rand(8, seed=1)},
        {"y": np.zeros((0, 8), np.float32)}),
    # Gathers of no indices, and from a table of no rows.
    "gather_no_indices": (
        [G.node("Gather", ["t", "i"], ["y"], axis=0)],
        {"i": ints(np.zeros((0,)))}, {"t": rand(10, 4)}, {"y": np.zeros((0, 4), np.float32)}),
    "gather_empty_columns": (
        [G.node("Gather", ["t", "i"], ["y"], axis=0)],
        {"i": ints([1, 0, 2])}, {"t": rand(3, 0)}, {"y": np.zeros((3, 0), np.float32)}),
    # Elementwise and shape ops.
    "add_relu_empty": (
        [G.node("Add", ["x", "z"], ["s"]), G.node("Relu", ["s"], ["y"])],
        {"x": rand(2, 0, 3), "z": rand(2, 0, 3, seed=1)}, {},
        {"y": np.zeros((2, 0, 3), np.float32)}),
    "reshape_empty": (
        [G.node("Reshape", ["x", "shape"], ["y"], allowzero=1)],
        {"x": rand(2, 0, 3)}, {"shape": ints([0, 6])}, {"y": np.zeros((0, 6), np.float32)}),
    "transpose_empty": (
        [G.node("Transpose", ["x"], ["y"], perm=[2, 0, 1])],
        {"x": rand(2, 0, 3)}, {}, {"y": np.zeros((3, 2, 0), np.float32)}),
    "concat_with_an_empty_operand": (
        [G.node("Concat", ["x", "z"], ["y"], axis=1)],
        {"x": rand(2, 0), "z": rand(2, 3, seed=1)}, {}, {"y": rand(2, 3, seed=1)}),
    "slice_to_nothing": (
        [G.node("Slice", ["x", "starts", "ends"], ["y"])],
        {"x": rand(4, 5)}, {"starts": ints([2]), "ends": ints([2])},
        {"y": np.zeros((0, 5), np.float32)}),
    "pad_an_empty_tensor": (
        [G.node("Pad", ["x", "pads", "c"], ["y"])],
        {"x": rand(0, 3)}, {"pads": ints([1, 0, 1, 0]), "c": np.float32(2.5)},
        {"y": np.full((2, 3), 2.5, np.float32)}),
    "max_pool_empty_batch": (
        [G.node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2])],
        {"x": rand(0, 2, 4, 4)}, {}, {"y": np.zeros((0, 2, 3, 3), np.float32)}),
}


def elem(array):
    return {np.dtype(np.float32): F, np.dtype(np.int64): G.T.INT64}[array.dtype]


def save_case(tmp_path, name):
    nodes, inputs, inits, outputs = CASES[name]
    return G.save(name, nodes,
                  [G.vi(n, elem(v), list(v.shape)) for n, v in inputs.items()],
                  [G.vi(n, F, list(v.shape)) for n, v in outputs.items()],
                  [G.init(n, v) for n, v in inits.items()], outdir=str(tmp_path))


@pytest.mark.parametrize("name", sorted(CASES))
def test_zero_size_op_computes_what_onnx_defines(name, tmp_path):
    _, inputs, _, outputs = CASES[name]
    model, tess = save_case(tmp_path, name), tmp_path / "m.tess"
    result = run([tool("tessera-compile"), model, *SMALL_TARGET, "-o", str(tess)])
    assert result.returncode == 0, result.stderr
    args = []
    for n, v in inputs.items():
        np.save(tmp_path / f"{n}.npy", v)
        args += ["--input", f"{n}={tmp_path / (n + '.npy')}"]
    for flags in [[], ["--reference"]]:
        out = tmp_path / "out.npz"
        result = run([tool("tessera-run"), str(tess), *flags, *args, "--output", str(out)])
        assert result.returncode == 0, (flags, result.stderr)
        got = np.load(out)
        for n, want in outputs.items():
            assert got[n].shape == want.shape, (flags, n)
            np.testing.assert_allclose(got[n], want, rtol=1e-6, atol=1e-6,
                                       err_msg=" ".join(flags) or "IPU model")


# Reductions with no identity over nothing: refused, naming the node, as
# ONNX Runtime refuses them.
UNDEFINED = {
    "ReduceMax": ({"axes": [1], "keepdims": 1}, [2, 1, 3]),
    "ReduceMin": ({"axes": [1], "keepdims": 0}, [2, 3]),
    "ArgMax": ({"axis": 1}, [2, 1, 3]),
}


@pytest.mark.parametrize("op", sorted(UNDEFINED))
def test_reduction_without_identity_over_nothing_is_refused(op, tmp_path):
    out_type = G.T.INT64 if op == "ArgMax" else F
    attributes, out_shape = UNDEFINED[op]
    model = G.save(op, [G.node(op, ["x"], ["y"], name="empty_" + op, **attributes)],
                   [G.vi("x", F, [2, 0, 3])], [G.vi("y", out_type, out_shape)],
                   outdir=str(tmp_path))
    result = run([tool("tessera-compile"), model, *SMALL_TARGET,
                  "-o", str(tmp_path / "m.tess")])
    assert result.returncode == 1, result.stderr
    assert "empty_" + op in result.stderr, result.stderr
    assert "which is empty" in result.stderr, result.stderr
    assert not (tmp_path / "m.tess").exists()


class WithEmptyParts(torch.nn.Module):
    """A 0-row weight read through a contraction over nothing, and an empty
    operand of a concatenation: they change nothing, and train."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 16)
        self.empty = torch.nn.Parameter(torch.randn(0, 16))
        self.norm = torch.nn.LayerNorm(16)
        self.fc2 = torch.nn.Linear(16, 5)

    def forward(self, x):
        nothing = x[:, :0]
        h = self.fc1(x) + nothing @ self.empty
        h = torch.cat([h, nothing], 1)
        return self.fc2(torch.relu(self.norm(h)))


@pytest.mark.parametrize("reference", [False, True], ids=["ipu-model", "host"])
def test_training_with_zero_size_parts_matches_torch(reference, tmp_path):
    from test_training import check_weights, export, torch_training, train_with_tessera
    torch.manual_seed(3)
    model = WithEmptyParts()
    xs = torch.randn(8, 12)
    ys = torch.randint(0, 5, (8,))
    export(model, xs[:4], tmp_path / "m.onnx")
    saved, losses, _ = train_with_tessera(
        tmp_path, tmp_path / "m.onnx", "sgd:lr=0.1,momentum=0.9", xs, ys, 4,
        reference=reference, compile_extra=SMALL_TARGET)
    want = torch_training(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                          xs, ys, 4, torch.nn.functional.cross_entropy)
    np.testing.assert_allclose(losses, want, rtol=1e-3)
    # The 0-row weight holds no values: the importer folds the contraction
    # over nothing, so the program (and its checkpoint) does without it.
    assert "empty" not in saved.files
    del model.empty
    check_weights(model, saved)
