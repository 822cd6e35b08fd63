"""TorchScript modules compiled by tessera-compile and run on the IPU model.

The smallest member of each torchvision classification family, traced, and a
TransformerEncoder, traced and scripted, must match PyTorch within 1e-4
relative (fp32) on the IPU model (maxvit_t, whose compile takes ~12 minutes,
is imported only). Modules are saved at test time with random
weights (nothing is downloaded); tracing runs under torch.no_grad(), as users
trace for inference, which makes PyTorch record its fused attention kernels.
The error tests check what a user sees for models Tessera cannot compile:
the source line, every unsupported operator at once, the missing shapes.
"""
import os
import re
import warnings

import numpy as np
import pytest
import torch

from conftest import run, tool
import export_model

# Each runs on the IPU model.
TORCHVISION = [
    "alexnet", "resnet18", "squeezenet1_1", "shufflenet_v2_x0_5",
    "mobilenet_v2", "mobilenet_v3_small", "mnasnet0_5", "efficientnet_b0",
    "regnet_x_400mf", "googlenet", "densenet121", "resnext50_32x4d",
    "inception_v3", "efficientnet_v2_s", "wide_resnet50_2", "vgg11",
    "convnext_tiny", "vit_b_32", "swin_t",
]


def save(module, example, path, script=False):
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        saved = torch.jit.script(module) if script else torch.jit.trace(module, example)
    saved.save(str(path))


def compile_and_run(pt, arg, example, tmp_path, expected, extra=()):
    tess = tmp_path / "model.tess"
    shape = "x".join(map(str, example.shape))
    result = run([tool("tessera-compile"), str(pt), "--input-shape",
                  f"{arg}={shape}", *extra, "-o", str(tess)])
    assert result.returncode == 0, result.stderr
    np.save(tmp_path / "x.npy", example.numpy())
    out = tmp_path / "out.npz"
    result = run([tool("tessera-run"), str(tess), "--input",
                  f"{arg}={tmp_path / 'x.npy'}", "--output", str(out)])
    assert result.returncode == 0, result.stderr
    assert "estimated on ipu2:" in result.stdout, result.stdout
    got = np.load(out)["output"]
    scale = np.abs(expected).max()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * scale)


@pytest.mark.parametrize("name", TORCHVISION)
def test_torchvision_traced(name, tmp_path):
    model, example, _ = export_model.build(name)
    with torch.no_grad():
        # Zero-initialised layers (vit's head) would make the output 0, and
        # googlenet's std-0.01 weights make it its classifier's bias.
        for p in model.parameters():
            if not p.any():
                p.normal_(0, 0.02)
        if name == "googlenet":
            for m in model.modules():
                if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
                    torch.nn.init.kaiming_normal_(m.weight)
    pt = tmp_path / f"{name}.pt"
    save(model, example, pt)
    x = torch.randn(*example.shape, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(x).numpy()
    compile_and_run(pt, "x", x, tmp_path, expected)


def test_maxvit_t_imports(tmp_path):
    # Its relative-position attention uses einsum. Compiled to the graph
    # phase only: the whole pipeline takes ~12 minutes on two cores.
    model, example, _ = export_model.build("maxvit_t")
    pt = tmp_path / "maxvit_t.pt"
    save(model, example, pt)
    result = run([tool("tessera-compile"), str(pt), "--input-shape", "x=1x3x224x224",
                  "--compile-to=graph", "--summary", "--no-output"])
    assert result.returncode == 0, result.stderr
    outputs = next(l for l in result.stdout.splitlines() if l.startswith("outputs"))
    assert outputs.endswith("1x1000xf32"), result.stdout


@pytest.mark.parametrize("script", [False, True], ids=["traced", "scripted"])
def test_transformer_encoder(script, tmp_path):
    model, example, _ = export_model.build("transformer_encoder")
    pt = tmp_path / "encoder.pt"
    save(model, example, pt, script=script)
    x = torch.randn(2, 16, 128, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(x).numpy()
    compile_and_run(pt, "src", x, tmp_path, expected)


#===------------------------------------------------------------------------===#
# Small modules: naming, control flow, errors
#===------------------------------------------------------------------------===#

class Branchy(torch.nn.Module):
    """Python control flow on shapes and attributes folds away; a loop over
    a ModuleList unrolls."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(3))
        self.scale = 2.0

    def forward(self, x, bias: float = 0.5):
        if x.dim() == 2 and x.size(1) == 8:
            for layer in self.layers:
                x = torch.relu(layer(x))
        else:
            x = x * 0
        outs = []
        for i in range(x.size(0)):
            outs.append(x[i] * self.scale + bias)
        return torch.stack(outs), x.shape[0]


def test_scripted_control_flow_folds_and_weights_are_named(tmp_path):
    model = Branchy().eval()
    pt = tmp_path / "branchy.pt"
    save(model, None, pt, script=True)
    result = run([tool("tessera-compile"), str(pt), "--input-shape", "x=4x8",
                  "--compile-to=graph", "-o", "-"])
    assert result.returncode == 0, result.stderr
    ir = result.stdout
    # Parameters are globals named after their attribute path (freezing
    # stores the linear layers' weights transposed, as "<path>.weight.T").
    assert len(re.findall(r"ml_program.global private @\"?[\w.]*weight", ir)) == 3, ir
    # No control flow survives; the number output is a constant.
    assert "scf." not in ir and "cf." not in ir
    assert '{graph.name = "output_0"}' in ir and '{graph.name = "output_1"}' in ir
    # Locations point at this file's lines.
    assert "test_torchscript.py" in run(
        [tool("tessera-compile"), str(pt), "--input-shape", "x=4x8",
         "--compile-to=graph", "--mlir-print-debuginfo", "-o", "-"]).stdout

    x = torch.randn(4, 8)
    with torch.no_grad():
        expected = model(x)[0].numpy()
    tess = tmp_path / "branchy.tess"
    assert run([tool("tessera-compile"), str(pt), "--input-shape", "x=4x8",
                "-o", str(tess)]).returncode == 0
    np.save(tmp_path / "x.npy", x.numpy())
    result = run([tool("tessera-run"), str(tess), "--input",
                  f"x={tmp_path / 'x.npy'}", "--output", str(tmp_path / "o.npz")])
    assert result.returncode == 0, result.stderr
    outputs = np.load(tmp_path / "o.npz")
    np.testing.assert_allclose(outputs["output_0"], expected, rtol=1e-5, atol=1e-6)
    assert int(outputs["output_1"]) == 4


class DataDependent(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x
        return -x


def test_data_dependent_branch_names_the_source_line(tmp_path):
    pt = tmp_path / "dd.pt"
    save(DataDependent(), None, pt, script=True)
    result = run([tool("tessera-compile"), str(pt), "--input-shape", "x=3",
                  "-o", str(tmp_path / "dd.tess")])
    assert result.returncode == 1
    err = result.stderr
    assert "test_torchscript.py:" in err, err
    assert "depends on the values of tensors" in err, err
    assert "Traceback" not in err and "INTERNAL ASSERT" not in err
    assert not (tmp_path / "dd.tess").exists()


class TwoUnsupported(torch.nn.Module):
    def forward(self, x):
        y = torch.cumprod(x, 0)
        z = torch.topk(y, 2).values
        return torch.fft.fft(z).real


def test_unsupported_operators_are_listed_at_once(tmp_path):
    pt = tmp_path / "u.pt"
    save(TwoUnsupported(), None, pt, script=True)
    result = run([tool("tessera-compile"), str(pt), "--input-shape", "x=5",
                  "-o", str(tmp_path / "u.tess")])
    assert result.returncode == 1
    err = result.stderr
    # topk, fft and real read cumprod's result, which cannot be computed:
    # they are still reported, so one compile names everything missing.
    assert "aten::cumprod" in err, err
    assert "aten::topk" in err and "aten::fft_fft" in err, err
    assert err.count("is used here") == 4, err  # and aten::real
    assert "test_torchscript.py:" in err, err


def test_missing_shape_and_unknown_names(tmp_path):
    pt = tmp_path / "b.pt"
    save(Branchy().eval(), None, pt, script=True)
    result = run([tool("tessera-compile"), str(pt), "-o", str(tmp_path / "b.tess")])
    assert result.returncode == 1
    assert "--input-shape x=" in result.stderr, result.stderr
    result = run([tool("tessera-compile"), str(pt), "--input-shape", "y=4x8",
                  "-o", str(tmp_path / "b.tess")])
    assert result.returncode == 1
    assert "'y'" in result.stderr and "x" in result.stderr, result.stderr


class TokenBag(torch.nn.Module):
    """Takes int64 token ids: an embedding, a linear layer, a sum."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.proj = torch.nn.Linear(16, 4)

    def forward(self, ids):
        return self.proj(self.embed(ids)).sum(1)


def test_integer_input_with_input_type(tmp_path):
    torch.manual_seed(0)
    model = TokenBag().eval()
    ids = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(3))
    pt = tmp_path / "tokens.pt"
    save(model, ids, pt)
    with torch.no_grad():
        expected = model(ids).numpy()
    # TorchScript records no dtypes: without --input-type the ids are f32.
    compile_and_run(pt, "ids", ids, tmp_path, expected, ["--input-type", "ids=i64"])
    tess = tmp_path / "tokens.tess"
    result = run([tool("tessera-compile"), str(pt), "--input-shape", "ids=2x8",
                  "--input-type", "tokens=i64", "-o", str(tess)])
    assert result.returncode == 1
    assert "--input-type names 'tokens'" in result.stderr, result.stderr


def test_damaged_archive_is_a_clear_error(tmp_path):
    pt = tmp_path / "r.pt"
    save(torch.nn.Linear(4, 4).eval(), torch.randn(1, 4), pt)
    data = pt.read_bytes()
    damaged = tmp_path / "damaged.pt"
    damaged.write_bytes(data[: len(data) // 2])
    result = run([tool("tessera-compile"), str(damaged), "--input-shape",
                  "input=1x4", "-o", str(tmp_path / "d.tess")])
    assert result.returncode == 1
    assert "cannot load the TorchScript module" in result.stderr, result.stderr
    assert not (tmp_path / "d.tess").exists()


def test_operator_list():
    result = run([tool("tessera-compile"), "--list-torchscript-ops"])
    assert result.returncode == 0
    ops = result.stdout.split()
    for op in ["aten::_convolution", "aten::linear", "aten::layer_norm",
               "aten::_transformer_encoder_layer_fwd"]:
        assert op in ops


def test_cache_key_covers_the_importer_plugin(tmp_path):
    """The executable cache keys on every library that shapes the code: a
    changed TorchScript importer plugin is a miss, not a stale hit."""
    import shutil
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    pt = tmp_path / "m.pt"
    save(model, torch.randn(2, 4), pt)
    cache = tmp_path / "cache"

    def compile_(env=None):
        result = run([tool("tessera-compile"), str(pt), "--input-shape", "input=2x4",
                      "--cache-dir", str(cache), "-o", str(tmp_path / "m.tess")],
                     env=env)
        assert result.returncode == 0, result.stderr
        return result.stderr

    assert "cache miss" in compile_()
    assert "cache hit" in compile_()
    plugin = os.path.join(os.path.dirname(tool("tessera-compile")), "..", "lib",
                          "libTesseraTorchScriptPlugin.so")
    changed = tmp_path / "libTesseraTorchScriptPlugin.so"
    shutil.copy(plugin, changed)
    with open(changed, "ab") as f:
        f.write(b"\0")  # another build of the plugin, as far as its bytes go
    env = dict(os.environ, TESSERA_TORCHSCRIPT_PLUGIN=str(changed))
    assert "cache miss" in compile_(env)
    assert "cache hit" in compile_(env)


class Decoder(torch.nn.Module):
    """What segmentation heads and generators use: transposed convolutions
    (groups, dilation, output padding, 1-d) and F.interpolate."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.ConvTranspose2d(4, 6, 4, stride=2, padding=1, groups=2)
        self.odd = torch.nn.ConvTranspose2d(6, 3, 3, stride=2, padding=1, output_padding=1,
                                            dilation=1)
        self.dilated = torch.nn.ConvTranspose2d(3, 2, 3, dilation=2)
        self.line = torch.nn.ConvTranspose1d(2, 2, 3, stride=3)

    def forward(self, x):
        y = self.dilated(self.odd(torch.relu(self.up(x))))
        y = y + torch.nn.functional.interpolate(y, scale_factor=1, mode="nearest")
        z = torch.nn.functional.interpolate(y, size=(9, 13), mode="bilinear")
        z = z + torch.nn.functional.interpolate(y, size=(9, 13), mode="bilinear",
                                                align_corners=True)
        z = z + torch.nn.functional.interpolate(y, size=(9, 13), mode="nearest")
        w = torch.nn.functional.interpolate(z, scale_factor=2, mode="nearest-exact")
        return w.sum((2, 3)) + self.line(z.flatten(2)[:, :2, :8]).sum(2)


def test_transposed_convolutions_and_interpolation(tmp_path):
    torch.manual_seed(0)
    model = Decoder().eval()
    x = torch.randn(2, 4, 5, 6, generator=torch.Generator().manual_seed(5))
    pt = tmp_path / "decoder.pt"
    save(model, x, pt)
    with torch.no_grad():
        expected = model(x).numpy()
    compile_and_run(pt, "x", x, tmp_path, expected)


class Recurrent(torch.nn.Module):
    """nn.LSTM (stacked, bidirectional), nn.GRU (batch first, no bias) and
    nn.RNN (relu), with given and default initial states."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(4, 5, num_layers=2, bidirectional=True)
        self.gru = torch.nn.GRU(10, 3, batch_first=True, bias=False)
        self.rnn = torch.nn.RNN(3, 4, nonlinearity="relu")

    def forward(self, x):
        h0 = torch.ones(4, x.shape[1], 5) * 0.1
        y, (h, c) = self.lstm(x, (h0, h0 * 2))
        z, g = self.gru(y.transpose(0, 1))
        w, r = self.rnn(z.transpose(0, 1))
        return w, h, c, g, r


def test_recurrent_layers(tmp_path):
    torch.manual_seed(0)
    model = Recurrent().eval()
    x = torch.randn(6, 2, 4, generator=torch.Generator().manual_seed(6))
    pt = tmp_path / "recurrent.pt"
    save(model, x, pt)
    tess = tmp_path / "recurrent.tess"
    result = run([tool("tessera-compile"), str(pt), "--input-shape", "x=6x2x4", "-o", str(tess)])
    assert result.returncode == 0, result.stderr
    np.save(tmp_path / "x.npy", x.numpy())
    out = tmp_path / "out.npz"
    result = run([tool("tessera-run"), str(tess), "--input", f"x={tmp_path / 'x.npy'}",
                  "--output", str(out)])
    assert result.returncode == 0, result.stderr
    got = np.load(out)
    with torch.no_grad():
        expected = model(x)
    for key, want in zip(got.files, expected):
        np.testing.assert_allclose(got[key], want.numpy(), rtol=1e-4, atol=1e-5, err_msg=key)


class SegmentationOut(torch.nn.Module):
    """torchvision's segmentation models return a dict; its 'out'."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


@pytest.mark.parametrize("name", ["lraspp_mobilenet_v3_large",
                                  "deeplabv3_mobilenet_v3_large", "r3d_18"])
def test_dense_and_video_families(name, tmp_path):
    """Segmentation heads (bilinear upsampling of the logits) and a 3-d
    video network, traced, on the IPU model."""
    import torchvision
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(9)
    if name == "r3d_18":
        model = torchvision.models.video.r3d_18(weights=None).eval()
        x = torch.randn(1, 3, 4, 32, 32, generator=g)
    else:
        model = SegmentationOut(getattr(torchvision.models.segmentation, name)(
            weights=None, weights_backbone=None, num_classes=4)).eval()
        x = torch.randn(1, 3, 64, 64, generator=g)
    pt = tmp_path / f"{name}.pt"
    save(model, x, pt)
    with torch.no_grad():
        expected = model(x).numpy()
    compile_and_run(pt, "x", x, tmp_path, expected)


class Marked(torch.nn.Module):
    """Placement marks as tessera.Block traces them, a profiling scope, and
    a malformed mark."""

    def __init__(self, mark="tessera.block ipu=1"):
        super().__init__()
        self.mark = mark

    def forward(self, x):
        y = torch.tanh(x)
        with torch.autograd.profiler.record_function("a profiling scope"):
            y = y + 1
        with torch.autograd.profiler.record_function(self.mark):
            y = y * 3
        return torch.relu(y)


def test_block_marks_place_operations(tmp_path):
    pt = tmp_path / "marked.pt"
    save(Marked(), torch.randn(2, 4), pt)
    result = run([tool("tessera-compile"), str(pt), "--input-shape", "x=2x4",
                  "--compile-to=graph", "-o", "-"])
    assert result.returncode == 0, result.stderr
    # Only the op inside the mark is placed; a profiling scope places nothing.
    placed = [line for line in result.stdout.splitlines() if "graph.ipu" in line]
    assert len(placed) == 1 and "graph.mul" in placed[0], result.stdout
    assert "graph.ipu = 1" in placed[0] and "graph.stage = 1" in placed[0]
    # Compiled for 2 IPUs, sharded: what follows the mark stays on IPU 1.
    x = torch.randn(2, 4)
    compile_and_run(pt, "x", x, tmp_path, Marked()(x).numpy(),
                    extra=["--num-ipus", "2", "--execution", "sharded"])
    bad = tmp_path / "bad.pt"
    save(Marked("tessera.block ipu=one"), torch.randn(2, 4), bad)
    result = run([tool("tessera-compile"), str(bad), "--input-shape", "x=2x4", "-o",
                  str(tmp_path / "bad.tess")])
    assert result.returncode != 0
    assert "placement mark 'tessera.block ipu=one' is not 'tessera.block ipu=N [stage=S]'" \
        in result.stderr, result.stderr
    assert not (tmp_path / "bad.tess").exists()


class Stacked(torch.nn.Module):
    """Layers in a container reached through another module, called in a
    loop: the inliner records only "0", "1"; the importer names the path."""

    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Module()
        self.encoder.layer = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))
        self.decoder = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(2))

    def forward(self, x):
        for layer in self.encoder.layer:
            x = torch.relu(layer(x))
        for layer in self.decoder:
            x = layer(x)
        return x


def test_module_paths_through_containers(tmp_path):
    pt = tmp_path / "stacked.pt"
    save(Stacked(), torch.randn(2, 4), pt)
    ir = run([tool("tessera-compile"), str(pt), "--input-shape", "x=2x4",
              "--compile-to=graph", "--mlir-print-debuginfo", "-o", "-"]).stdout
    # "2" names one Linear: its path. "0" and "1" name a Linear in both
    # containers: ambiguous, left as recorded.
    assert 'loc("encoder.layer.2"' in ir, ir
    assert 'loc("0"' in ir and 'loc("1"' in ir and "encoder.layer.0" not in ir, ir
