"""Numerics of import + convert-graph-to-linalg against PyTorch.

Each case exports a small torch module with torch.onnx.export, runs it
through Tessera's lowering on the host (see host_runner.py) and compares with
PyTorch: fp32 within rtol 1e-4 (the runner prints 6 significant digits),
integers exactly.
"""
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from host_runner import run_on_host

torch.manual_seed(0)


class Fn(torch.nn.Module):
    def __init__(self, fn, *params):
        super().__init__()
        self.fn = fn
        self.params = torch.nn.ParameterList([torch.nn.Parameter(p) for p in params])

    def forward(self, *xs):
        return self.fn(*xs, *self.params)


def r(*shape):
    return torch.randn(*shape)


CASES = {
    "conv_grouped_strided_dilated": (torch.nn.Conv2d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2), [r(2, 4, 9, 9)]),
    "conv_transpose_grouped": (torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=1), [r(1, 4, 5, 5)]),
    "conv_transpose_dilated_crop": (torch.nn.ConvTranspose1d(2, 3, 2, stride=3, padding=2, dilation=2), [r(2, 2, 6)]),
    "conv1d_depthwise": (torch.nn.Conv1d(3, 3, 3, padding=1, groups=3, bias=False), [r(1, 3, 10)]),
    "maxpool_ceil": (torch.nn.MaxPool2d(3, 2, padding=1, ceil_mode=True), [r(1, 2, 8, 8)]),
    "avgpool_exclude_pad_ceil": (torch.nn.AvgPool2d(3, 2, padding=1, ceil_mode=True, count_include_pad=False), [r(1, 2, 8, 8)]),
    "avgpool_include_pad": (torch.nn.AvgPool2d(3, 2, padding=1), [r(1, 2, 7, 7)]),
    "global_avgpool_linear": (torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(3, 5)), [r(2, 3, 4, 4)]),
    "matmul_broadcast": (Fn(lambda a, b: a @ b), [r(2, 1, 4, 5), r(3, 5, 6)]),
    "matmul_vector": (Fn(lambda a, b: a @ b), [r(4, 5), r(5)]),
    "gelu_mlp": (torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)), [r(3, 8)]),
    "layernorm": (torch.nn.LayerNorm([5]), [r(2, 3, 5)]),
    "groupnorm": (torch.nn.GroupNorm(2, 4), [r(2, 4, 3, 3)]),
    "instancenorm": (torch.nn.InstanceNorm2d(3, affine=True), [r(2, 3, 4, 4)]),
    "batchnorm": (torch.nn.BatchNorm2d(3).eval(), [r(2, 3, 4, 4)]),
    "softmax": (Fn(lambda x: F.softmax(x, dim=1)), [r(2, 5, 3)]),
    "log_softmax": (Fn(lambda x: F.log_softmax(x, dim=-1)), [r(2, 5)]),
    "resize_nearest": (Fn(lambda x: F.interpolate(x, scale_factor=2, mode="nearest")), [r(1, 2, 3, 4)]),
    "resize_bilinear": (Fn(lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)), [r(1, 2, 3, 4)]),
    "resize_bilinear_corners": (Fn(lambda x: F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=True)), [r(1, 1, 3, 4)]),
    "pad_reflect": (Fn(lambda x: F.pad(x, (2, 1, 1, 2), mode="reflect")), [r(1, 1, 4, 5)]),
    "pad_replicate": (Fn(lambda x: F.pad(x, (2, 1, 1, 2), mode="replicate")), [r(1, 1, 4, 5)]),
    "pad_constant": (Fn(lambda x: F.pad(x, (1, 2), value=0.5)), [r(2, 3)]),
    "embedding": (torch.nn.Embedding(10, 4), [torch.tensor([[1, 9, -1 + 10], [0, 3, 3]])]),
    "gather_elements": (Fn(lambda x, i: torch.gather(x, 1, i)), [r(3, 5), torch.tensor([[0, 4], [2, -1 + 5], [1, 1]])]),
    "cumsum": (Fn(lambda x: torch.cumsum(x, dim=1)), [r(2, 5, 3)]),
    "argmax": (Fn(lambda x: torch.argmax(x, dim=1, keepdim=True)), [r(3, 6)]),
    "reductions": (Fn(lambda x: (x.sum(1, keepdim=True) + x.mean(1, keepdim=True) + x.amax(1, keepdim=True) + x.amin(1, keepdim=True))), [r(2, 4, 3)]),
    "activations": (Fn(lambda x: F.hardswish(x) + F.hardsigmoid(x) + F.leaky_relu(x, 0.1) + F.elu(x) + torch.clamp(x, -0.5, 0.5) + torch.sign(x) + x.abs() + torch.tanh(x) + F.relu6(x) + torch.sigmoid(x) + F.silu(x)), [r(4, 5)]),
    "slice_flip_concat": (Fn(lambda x: torch.cat([x[:, ::2], torch.flip(x, [1]), x.transpose(0, 1).reshape(2, -1)], dim=1)), [r(2, 6)]),
    "where_compare_cast": (Fn(lambda x: torch.where(x > 0, x, torch.zeros_like(x)) + (x < 0.5).float()), [r(3, 4)]),
    "expand_mul": (Fn(lambda x, y: x.expand(3, 4) * y), [r(1, 4), r(3, 1)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_case(name, tmp_path):
    module, inputs = CASES[name]
    module.eval()
    path = tmp_path / f"{name}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, tuple(inputs), str(path), opset_version=17)
    with torch.no_grad():
        expected = module(*inputs)
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    got = run_on_host(path, [x.numpy() for x in inputs], str(tmp_path))
    for e, g in zip(expected, got):
        e = e.numpy()
        assert g.shape == e.shape
        if np.issubdtype(e.dtype, np.integer):
            np.testing.assert_array_equal(g, e)
        else:
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["resnet18", "transformer_encoder"])
def test_whole_model(name, tmp_path):
    """A whole model through import and lowering matches PyTorch."""
    import export_model
    model, example, _ = export_model.build(name)
    if name == "resnet18":
        example = torch.randn(1, 3, 64, 64)  # small: the host loops are naive
    path = tmp_path / f"{name}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, example, str(path), opset_version=17)
    with torch.no_grad():
        expected = model(example).numpy()
    got = run_on_host(path, [example.numpy()], str(tmp_path))[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
