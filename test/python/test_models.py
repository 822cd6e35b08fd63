"""Whole models compiled for ipu2 and run on the IPU model and the host
reference path.

Both the IPU model (the tile-mapped program: exchanges, vertices, tile memory)
and the host reference path (the same graph without tile decomposition) must
match PyTorch within 1e-4 relative (fp32), and each other, for the models of
the IPU-model issue: torchvision resnet18, mobilenet_v2, efficientnet_b0 and a
TransformerEncoder (opset 13 and 17). Models are exported at test time with
random weights (nothing is downloaded).
"""
import numpy as np
import pytest
import torch

from conftest import run, tool
import export_model


@pytest.mark.parametrize("name,opset", [
    ("resnet18", 17), ("mobilenet_v2", 17), ("efficientnet_b0", 17),
    ("transformer_encoder", 13), ("transformer_encoder", 17),
])
def test_ipu_model_and_reference_match_pytorch(name, opset, tmp_path):
    model, example, _ = export_model.build(name)
    onnx_path, tess = tmp_path / "model.onnx", tmp_path / "model.tess"
    export_model.export(name, str(onnx_path), opset)
    extra = ["--input-shape", "input=2x16x128"] if name == "transformer_encoder" else []
    result = run([tool("tessera-compile"), str(onnx_path), "-o", str(tess), *extra])
    assert result.returncode == 0, result.stderr

    x = torch.randn(*example.shape, generator=torch.Generator().manual_seed(1))
    np.save(tmp_path / "x.npy", x.numpy())
    with torch.no_grad():
        expected = model(x).numpy()
    scale = np.abs(expected).max()
    outputs = {}
    for device, flags in [("ipu", []), ("reference", ["--reference"])]:
        out = tmp_path / f"{device}.npz"
        result = run([tool("tessera-run"), str(tess), *flags, "--input",
                      f"input={tmp_path / 'x.npy'}", "--output", str(out)])
        assert result.returncode == 0, result.stderr
        if device == "ipu":
            assert "estimated on ipu2:" in result.stdout, result.stdout
        outputs[device] = np.load(out)["output"]
        np.testing.assert_allclose(outputs[device], expected, rtol=1e-4,
                                   atol=1e-4 * scale, err_msg=f"{device} vs PyTorch")
    np.testing.assert_allclose(outputs["ipu"], outputs["reference"], rtol=1e-4,
                               atol=1e-4 * scale, err_msg="IPU model vs reference")


def test_out_of_tile_memory_names_the_tile_and_the_variables(tmp_path):
    """resnet18 on a 64-tile chip does not fit: the compile fails with the
    report (tile, bytes needed vs available, largest variables by category),
    writes the report page of what each tile would need, and leaves no
    executable behind."""
    onnx_path, tess = tmp_path / "resnet18.onnx", tmp_path / "resnet18.tess"
    report = tmp_path / "report"
    export_model.export("resnet18", str(onnx_path), 17)
    result = run([tool("tessera-compile"), str(onnx_path), "--tiles-per-ipu", "64",
                  "--report", str(report), "-o", str(tess)])
    assert result.returncode == 1, result.stderr
    err = result.stderr
    assert "out of tile memory" in err, err
    assert "tile " in err and "needs" in err and "624 KiB" in err, err
    # A weight is named, with the categories' totals.
    assert "weights 'onnx::Conv_" in err, err
    for category in ["weights", "activations", "temporaries", "code"]:
        assert category in err, err
    assert not tess.exists()
    assert (report / "report.html").exists() and (report / "report.json").exists()
