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
