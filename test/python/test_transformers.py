"""Transformers with real embeddings on the IPU model, from ONNX and TorchScript.

The token tables here (8,000 x 64 and 6,000 x 64 fp32, 2 and 1.5 MB) are far
larger than a tile (624 KiB): they compile only because a gather's table is
read by columns (rows whole, columns following the output's), so no vertex
receives the whole table. The shapes are BERT's (token, position and segment
embeddings, post-norm encoder, pooler), GPT-2's (causal pre-norm blocks, the
output head tied to the token embedding) and torch.nn.Transformer's, small
enough for the test suite; benchmarks/transformers.py runs them at full size.
Outputs must match PyTorch within 1e-4 relative.
"""
import warnings

import numpy as np
import pytest
import torch

from conftest import run, tool
from transformer_models import GPT2, Bert, Transformer

SEQ = 16


def build(name):
    """(model, example inputs, input names)."""
    torch.manual_seed(0)
    ids = torch.randint(0, 6000, (2, SEQ), generator=torch.Generator().manual_seed(1))
    if name == "bert":
        model = Bert(vocab=8000, d=64, heads=4, ff=128, layers=2)
        return model, (ids, (ids % 2)), ["ids", "segments"]
    if name == "gpt2":
        return GPT2(vocab=6000, d=64, heads=4, layers=2, seq=SEQ), (ids,), ["ids"]
    model = Transformer(d=32, heads=4, ff=64, layers=2)
    g = torch.Generator().manual_seed(2)
    return model, (torch.randn(2, SEQ, 32, generator=g), torch.randn(2, 8, 32, generator=g)), \
        ["src", "tgt"]


def export(model, inputs, names, path, fmt):
    # Not under no_grad: PyTorch's inference fast path would record its fused
    # encoder-layer kernel, which neither ONNX nor Tessera has.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if fmt == "onnx":
            torch.onnx.export(model, inputs, str(path), input_names=names, opset_version=17)
        else:
            torch.jit.trace(model, inputs, check_trace=False).save(str(path))


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
@pytest.mark.parametrize("name", ["bert", "gpt2", "transformer"])
def test_matches_pytorch(name, fmt, tmp_path):
    model, inputs, names = build(name)
    model.eval()
    path = tmp_path / ("model.onnx" if fmt == "onnx" else "model.pt")
    export(model, inputs, names, path, fmt)
    flags = []
    if fmt == "torchscript":
        for n, x in zip(names, inputs):
            flags += ["--input-shape", n + "=" + "x".join(map(str, x.shape))]
            if x.dtype == torch.int64:
                flags += ["--input-type", f"{n}=i64"]
    tess = tmp_path / "model.tess"
    result = run([tool("tessera-compile"), str(path), *flags, "-o", str(tess)])
    assert result.returncode == 0, result.stderr
    args = []
    for n, x in zip(names, inputs):
        np.save(tmp_path / f"{n}.npy", x.numpy())
        args += ["--input", f"{n}={tmp_path / (n + '.npy')}"]
    out = tmp_path / "out.npz"
    result = run([tool("tessera-run"), str(tess), *args, "--output", str(out)])
    assert result.returncode == 0, result.stderr
    assert "estimated on ipu2:" in result.stdout, result.stdout
    with torch.no_grad():
        expected = model(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = np.load(out)
    assert len(got.files) == len(expected)
    for key, want in zip(got.files, expected):
        want = want.numpy()
        np.testing.assert_allclose(got[key], want, rtol=1e-4,
                                   atol=1e-4 * np.abs(want).max(), err_msg=key)


@pytest.mark.parametrize("rows", [1000, 120_000, 200_000, 200_003])
def test_embedding_lookup_is_exact(rows, tmp_path):
    """A lookup into a table whose one column is more than a tile holds
    (200,000 fp32 rows: 800,000 bytes per column) is split by the table's
    rows, in blocks of equal rows or (200,003) with a shorter last block;
    one whose column is over the memory budget but fits a tile (120,000
    rows: 480,000 bytes) keeps its columns whole. Either way the output is
    the table's rows bit for bit, negative indices (counted from the end)
    included."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    table = np.random.RandomState(0).randn(rows, 3).astype(np.float32)
    table[1] = -0.0  # the sign of zero survives the combining step
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["y"], name="lookup")], "lookup",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 6, 3])],
        [numpy_helper.from_array(table, "table")])
    path = tmp_path / "lookup.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    ids = np.random.RandomState(1).randint(-rows, rows, size=(4, 6)).astype(np.int64)
    ids[0, :4] = [0, 1, rows - 1, rows // 2]
    np.save(tmp_path / "ids.npy", ids)
    tess = tmp_path / "lookup.tess"
    result = run([tool("tessera-compile"), str(path), "--tiles-per-ipu=16", "--explain-plans",
                  "-o", str(tess)])
    assert result.returncode == 0, result.stderr
    assert ("gather split into" in result.stderr) == (rows >= 200_000), result.stderr
    out = tmp_path / "out.npz"
    result = run([tool("tessera-run"), str(tess), "--input", f"ids={tmp_path / 'ids.npy'}",
                  "--output", str(out)])
    assert result.returncode == 0, result.stderr
    got = np.load(out)["y"]
    assert np.array_equal(got.view(np.uint32), table[ids].view(np.uint32))
