"""Native code for contractions, through tessera-compile and tessera-run.

codegen-vectorize-contractions turns every matmul and convolution (whole ops
on the host reference path, per-tile pieces in the IPU model's vertices) into
register tiles of vector FMAs. These shapes exercise its edge cases: rows left
over after blocks of 8, masked last vectors, gathered rows of strided
convolutions, strided inputs read through a copy split into phases, an output whose last dimension is 1, output rows and columns
merged into one vector dimension (1x1 convolutions), grouped and dilated
windows, a long reduction, and the reductions that are not products (max
pooling, sums). Both paths must match PyTorch (fp32, 1e-5 relative to the
output's scale).
"""
import warnings

import numpy as np
import pytest
import torch

from conftest import run, tool


class MatMul(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


def r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


CASES = {
    "matmul_row_and_column_tails": (MatMul(), [r(2, 11, 7), r(7, 37, seed=1)]),
    "conv_stride2_gathered_rows": (torch.nn.Conv2d(5, 11, 3, stride=2), [r(1, 5, 23, 21)]),
    # Rows of 19 split into 3 phases of 7, 6 and 6 elements.
    "conv_stride3_phase_split": (torch.nn.Conv2d(12, 24, 5, stride=3), [r(1, 12, 23, 19)]),
    "conv_unit_last_dim": (torch.nn.Conv2d(6, 10, (3, 1), padding=(1, 0)), [r(1, 6, 19, 1)]),
    "conv_depthwise_dilated": (torch.nn.Conv2d(8, 8, 3, groups=8, dilation=2, padding=2),
                               [r(1, 8, 17, 17)]),
    "conv_1x1_rows_and_columns_merged": (torch.nn.Conv2d(16, 24, 1), [r(1, 16, 7, 9)]),
    "conv_1x1_stride2": (torch.nn.Conv2d(24, 40, 1, stride=2, bias=False), [r(1, 24, 14, 14)]),
    "linear_long_reduction": (torch.nn.Linear(300, 45), [r(3, 300)]),
    # Reductions that are not products: max pooling windows, sums.
    "maxpool_strided_padded": (torch.nn.MaxPool2d(3, 2, padding=1), [r(1, 6, 15, 13)]),
    "avgpool_window": (torch.nn.AvgPool2d(3, 1), [r(1, 5, 12, 19)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_contraction_on_ipu_model_and_reference(name, tmp_path):
    torch.manual_seed(0)
    module, inputs = CASES[name]
    module.eval()
    names = [f"x{i}" for i in range(len(inputs))]
    onnx_path, tess = tmp_path / "m.onnx", tmp_path / "m.tess"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, tuple(inputs), str(onnx_path), input_names=names,
                          output_names=["y"], opset_version=17)
    with torch.no_grad():
        expected = module(*inputs).numpy()
    result = run([tool("tessera-compile"), str(onnx_path), "-o", str(tess)])
    assert result.returncode == 0, result.stderr
    args = []
    for n, x in zip(names, inputs):
        np.save(tmp_path / f"{n}.npy", x.numpy())
        args += ["--input", f"{n}={tmp_path / (n + '.npy')}"]
    scale = np.abs(expected).max()
    for flags in [[], ["--reference"]]:
        out = tmp_path / "out.npz"
        result = run([tool("tessera-run"), str(tess), *flags, *args, "--output", str(out)])
        assert result.returncode == 0, result.stderr
        np.testing.assert_allclose(np.load(out)["y"], expected, rtol=1e-5,
                                   atol=1e-5 * scale, err_msg=" ".join(flags) or "IPU model")


def test_perf_map_names_the_vertex_kernels(tmp_path):
    """TESSERA_PERF_MAP=1: the runtime writes perf's /tmp/perf-<pid>.map,
    one "address size name" line per function of the linked code."""
    import os
    import re
    import subprocess
    module, inputs = CASES["conv_stride3_phase_split"]
    onnx_path, tess = tmp_path / "m.onnx", tmp_path / "m.tess"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), tuple(inputs), str(onnx_path), input_names=["x0"],
                          output_names=["y"], opset_version=17)
    assert run([tool("tessera-compile"), str(onnx_path), "-o", str(tess)]).returncode == 0
    np.save(tmp_path / "x0.npy", inputs[0].numpy())

    def perf_map(*flags):
        process = subprocess.Popen([tool("tessera-run"), str(tess), "--input",
                                    f"x0={tmp_path / 'x0.npy'}", *flags],
                                   env={**os.environ, "TESSERA_PERF_MAP": "1"},
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _, stderr = process.communicate()
        path = f"/tmp/perf-{process.pid}.map"
        try:
            assert process.returncode == 0, stderr
            return [line.split() for line in open(path)]
        finally:
            if os.path.exists(path):
                os.remove(path)

    # The IPU model links the vertex kernels only; the host reference run
    # links the reference code it lowers and compiles from the executable's
    # MLIR.
    lines = perf_map()
    names = {name for _, _, name in lines}
    # Kernels are named by their code (vertex_ and 32 hex digits).
    assert any(re.fullmatch(r"vertex_[0-9a-f]{32}(_[0-9]+)?(_entry)?", n) for n in names), names
    assert "main" not in names
    reference = perf_map("--reference")
    assert "main" in {name for _, _, name in reference}
    lines += reference
    for address, size, _ in lines:
        assert int(address, 16) > 0 and int(size, 16) > 0


class Residual(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(32, 16, 3, padding=1)

    def forward(self, x):
        return torch.relu(x + self.conv2(torch.relu(self.conv1(x))))


def test_staging_area_changes_no_result(tmp_path):
    """Activations that live only within a run sit, on the host, in a
    compact staging area rather than in their tiles' memory; with
    TESSERA_NO_STAGING=1 everything stays in tile memory. The outputs are
    bit for bit the same, and only the profile's host_staging_bytes tells
    the two apart."""
    import json
    import os
    torch.manual_seed(0)
    module, x = Residual().eval(), r(1, 16, 24, 24)
    onnx_path, tess = tmp_path / "m.onnx", tmp_path / "m.tess"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), str(onnx_path), input_names=["x0"],
                          output_names=["y"], opset_version=17)
    assert run([tool("tessera-compile"), str(onnx_path), "-o", str(tess)]).returncode == 0
    np.save(tmp_path / "x0.npy", x.numpy())
    outputs, staged = {}, {}
    for setting in ["0", "1"]:
        out, profile = tmp_path / f"out{setting}.npz", tmp_path / f"profile{setting}"
        result = run([tool("tessera-run"), str(tess), "--input", f"x0={tmp_path / 'x0.npy'}",
                      "--output", str(out), "--profile", str(profile)],
                     env={**os.environ, "TESSERA_NO_STAGING": setting})
        assert result.returncode == 0, result.stderr
        outputs[setting] = np.load(out)["y"]
        staged[setting] = json.load(open(profile / "profile.json"))["host_staging_bytes"]
    assert staged["0"] > 0 and staged["1"] == 0, staged
    assert np.array_equal(outputs["0"], outputs["1"])
    with torch.no_grad():
        expected = module(x).numpy()
    np.testing.assert_allclose(outputs["0"], expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
