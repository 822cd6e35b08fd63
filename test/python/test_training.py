"""Training steps compiled with tessera-compile --train against torch.optim.

A small CNN (convolution with stride, padding and groups, max and average
pooling, a linear layer) and an MLP with layer norm are exported to ONNX with
random weights, trained for a few steps on random data through tessera-run
--train-data, on the IPU model and on the host reference path, and the saved
weights must match PyTorch's after the same steps from the same weights
within 1e-4 relative (fp32). Each optimizer's update rule (SGD with momentum
and Nesterov, Adam, AdamW with amsgrad, RMSprop centered with momentum) is
checked this way; losses too. The error tests pin what a user sees for a
wrong data set or option.
"""
import copy

import numpy as np
import pytest
import torch

from conftest import run, tool

torch.manual_seed(0)


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 4, 3, stride=1, padding=1)
        self.conv2 = torch.nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=2)
        self.pool = torch.nn.MaxPool2d(2)
        self.avg = torch.nn.AvgPool2d(2, stride=1, padding=1, count_include_pad=False)
        self.fc = torch.nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = self.pool(x)
        x = torch.tanh(self.conv2(x))
        x = self.avg(x)
        return self.fc(torch.flatten(x, 1))


class BatchNormCNN(torch.nn.Module):
    """The issue's small CNN: convolution, batch norm, pooling, linear."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 6, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(6, momentum=0.2)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(6 * 4 * 4, 10)
        self.bn1d = torch.nn.BatchNorm1d(10)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn(self.conv(x))))
        return self.bn1d(self.fc(torch.flatten(x, 1)))


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.fc2 = torch.nn.Linear(32, 5)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.norm(self.fc1(x))))


def export(model, example, path):
    torch.onnx.export(model, example, str(path), input_names=["x"],
                      output_names=["logits"], opset_version=17,
                      dynamic_axes={"x": {0: "batch"}})


OPTIMIZERS = {
    "sgd": ("sgd:lr=0.05,momentum=0.9,weight-decay=0.01",
            lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01)),
    "nesterov": ("sgd:lr=0.05,momentum=0.8,nesterov=true",
                 lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True)),
    "adam": ("adam:lr=0.01,weight-decay=0.001",
             lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.001)),
    "adamw": ("adamw:lr=0.01,amsgrad=true",
              lambda p: torch.optim.AdamW(p, lr=0.01, amsgrad=True)),
    "rmsprop": ("rmsprop:lr=0.01,momentum=0.5,centered=true",
                lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.5, centered=True)),
}


def torch_training(model, optimizer, xs, ys, batch, loss_fn, max_grad_norm=None):
    losses = []
    for i in range(0, len(xs), batch):
        optimizer.zero_grad()
        loss = loss_fn(model(xs[i:i + batch]), ys[i:i + batch])
        loss.backward()
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        losses.append(loss.item())
    return losses


def train_with_tessera(tmp_path, onnx_path, optimizer, xs, ys, batch, extra=(),
                       reference=False, compile_extra=()):
    tess = tmp_path / "train.tess"
    result = run([tool("tessera-compile"), str(onnx_path), "--train", "--optimizer",
                  optimizer, "--micro-batch-size", str(batch), *compile_extra,
                  "-o", str(tess)])
    assert result.returncode == 0, result.stderr
    data = tmp_path / "data.npz"
    np.savez(data, x=xs.numpy(), labels=ys.numpy())
    weights = tmp_path / "weights.npz"
    result = run([tool("tessera-run"), str(tess), "--train-data", str(data),
                  "--epochs", "1", "--save-weights", str(weights), *extra]
                 + (["--reference"] if reference else []))
    assert result.returncode == 0, result.stderr
    losses = [float(line.split("loss ")[1].split()[0])
              for line in result.stdout.splitlines() if line.startswith("run ")]
    return np.load(weights), losses, result.stdout


def check_weights(model, saved):
    for name, p in model.state_dict().items():
        if name.endswith("num_batches_tracked"):
            continue  # not in the ONNX export, and unused with a momentum
        assert name in saved.files, (name, saved.files)
        want = p.detach().numpy()
        scale = max(np.abs(want).max(), 1e-3)
        np.testing.assert_allclose(saved[name], want, rtol=1e-4, atol=1e-4 * scale,
                                   err_msg=name)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_cnn_matches_torch_optim(name, tmp_path):
    spec, make = OPTIMIZERS[name]
    torch.manual_seed(1)
    model = SmallCNN()
    xs = torch.randn(12, 1, 12, 12)
    ys = torch.randint(0, 10, (12,))
    export(model, xs[:4], tmp_path / "cnn.onnx")
    saved, losses, _ = train_with_tessera(tmp_path, tmp_path / "cnn.onnx", spec, xs, ys, 4)
    want = torch_training(model, make(model.parameters()), xs, ys, 4,
                          torch.nn.functional.cross_entropy)
    np.testing.assert_allclose(losses, want, rtol=1e-3)
    check_weights(model, saved)


@pytest.mark.parametrize("reference", [False, True], ids=["ipu-model", "host"])
def test_batch_norm_in_training_mode_matches_torch(reference, tmp_path):
    # Batch statistics in the forward and the gradient; running mean and
    # (unbiased) variance updated as buffers and saved with the weights.
    torch.manual_seed(5)
    model = BatchNormCNN()
    xs = torch.randn(16, 1, 8, 8) * 2 + 0.5
    ys = torch.randint(0, 10, (16,))
    model.train()
    torch.onnx.export(model, xs[:4], str(tmp_path / "bn.onnx"), input_names=["x"],
                      output_names=["logits"], opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    saved, losses, _ = train_with_tessera(tmp_path, tmp_path / "bn.onnx",
                                          "sgd:lr=0.1,momentum=0.9", xs, ys, 4,
                                          reference=reference)
    want = torch_training(model, torch.optim.SGD(model.parameters(), lr=0.1,
                                                 momentum=0.9),
                          xs, ys, 4, torch.nn.functional.cross_entropy)
    np.testing.assert_allclose(losses, want, rtol=1e-3)
    assert "bn.running_var" in saved.files
    check_weights(model, saved)


def test_torchscript_module_in_training_mode_matches_torch(tmp_path):
    # A traced train() module: parameters stay apart (no batch norm folded
    # into the convolution), batch norm uses the batch's statistics and
    # updates its buffers, and checkpoints use the module's own names.
    torch.manual_seed(6)
    model = BatchNormCNN()
    xs = torch.randn(12, 1, 8, 8)
    ys = torch.randint(0, 10, (12,))
    traced = torch.jit.trace(copy.deepcopy(model).train(), xs[:4])
    traced.load_state_dict(model.state_dict())  # undo the tracing run's update
    traced.save(str(tmp_path / "bn.pt"))
    saved, losses, _ = train_with_tessera(
        tmp_path, tmp_path / "bn.pt", "sgd:lr=0.05,momentum=0.9", xs, ys, 4,
        compile_extra=["--input-shape", "x=4x1x8x8"])
    # (Not Adam: the bias before a batch norm has a zero gradient up to
    # rounding, which Adam's normalisation would magnify into noise.)
    want = torch_training(model.train(),
                          torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                          xs, ys, 4, torch.nn.functional.cross_entropy)
    np.testing.assert_allclose(losses, want, rtol=1e-3)
    check_weights(model, saved)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_gradient_accumulation_matches_a_larger_batch(reduction, tmp_path):
    # Micro-batch 4, 2 accumulated, 2 device iterations: 16 samples per run
    # and 2 updates, each as torch's on a batch of 8 (mean) or on the sum of
    # the two micro-batches' mean losses (sum).
    torch.manual_seed(7)
    model = MLP()
    xs = torch.randn(32, 12)
    ys = torch.randint(0, 5, (32,))
    export(model, xs[:4], tmp_path / "mlp.onnx")
    saved, losses, out = train_with_tessera(
        tmp_path, tmp_path / "mlp.onnx", "adam:lr=0.01", xs, ys, 4,
        compile_extra=["--gradient-accumulation", "2", "--accumulation-reduction",
                       reduction, "--device-iterations", "2", "--output-mode", "all"])
    assert "micro-batch 4 x gradient accumulation 2 x device iterations 2 x replicas 1 = 16 " \
        "samples per run, 2 runs (4 weight updates of 8 samples), output mode all" in out
    scale = 1.0 if reduction == "mean" else 2.0
    want = torch_training(model, torch.optim.Adam(model.parameters(), lr=0.01), xs, ys,
                          8, lambda out, y: scale * torch.nn.functional.cross_entropy(out, y))
    # A run's loss is the mean of its micro-batches' losses.
    np.testing.assert_allclose(losses, np.array(want).reshape(2, 2).mean(1) / scale,
                               rtol=1e-3)
    check_weights(model, saved)
    assert saved["optimizer.micro_step"] == 0 and "fc1.weight/grad_accum" in saved.files


@pytest.mark.parametrize("mode", ["all", "final", "sum", "every-2"])
def test_output_modes(mode, tmp_path):
    # Four iterations per run (2 device iterations x 2 accumulated
    # micro-batches of 4); the outputs the run returns follow PopTorch's
    # outputMode, and so does the loss tessera-run reports.
    torch.manual_seed(11)
    model = MLP()
    xs = torch.randn(16, 12)
    ys = torch.randint(0, 5, (16,))
    export(model, xs[:4], tmp_path / "mlp.onnx")
    tess = tmp_path / "train.tess"
    result = run([tool("tessera-compile"), str(tmp_path / "mlp.onnx"), "--train",
                  "--optimizer", "sgd:lr=0", "--micro-batch-size", "4",
                  "--gradient-accumulation", "2", "--device-iterations", "2",
                  "--output-mode", mode, "-o", str(tess)])
    assert result.returncode == 0, result.stderr
    np.savez(tmp_path / "data.npz", x=xs.numpy(), labels=ys.numpy())
    result = run([tool("tessera-run"), str(tess), "--train-data",
                  str(tmp_path / "data.npz"), "--steps", "2"])
    assert result.returncode == 0, result.stderr
    assert f"output mode {mode}" in result.stdout
    loss = float(result.stdout.split("run 1/1  loss ")[1].split()[0])
    # lr 0: every micro-batch sees the initial weights.
    with torch.no_grad():
        micro = [torch.nn.functional.cross_entropy(model(xs[i:i + 4]), ys[i:i + 4]).item()
                 for i in range(0, 16, 4)]
    want = {"all": np.mean(micro), "final": micro[-1], "sum": np.mean(micro),
            "every-2": np.mean(micro[1::2])}[mode]
    assert loss == pytest.approx(want, rel=1e-4)


def test_output_mode_errors(tmp_path):
    model = MLP()
    export(model, torch.randn(4, 12), tmp_path / "mlp.onnx")
    result = run([tool("tessera-compile"), str(tmp_path / "mlp.onnx"), "--output-mode",
                  "every-0", "-o", str(tmp_path / "x.tess")])
    assert result.returncode != 0
    assert "output mode 'every-0' is not all, final, sum or every-N" in result.stderr
    result = run([tool("tessera-compile"), str(tmp_path / "mlp.onnx"), "--input-shape",
                  "x=4x12", "--device-iterations", "3", "--output-mode", "every-2", "-o",
                  str(tmp_path / "x.tess")])
    assert result.returncode != 0
    assert "--output-mode every-2 must divide the 3 iterations of a run" in result.stderr


def lamb_reference(params, grads, state, step, lr=1e-3, beta1=0.9, beta2=0.999,
                   eps=1e-8, weight_decay=0.01):
    """PopTorch's LAMB (bias correction on), one step, in float64."""
    for name, w in params.items():
        g = grads[name]
        m, v = state.setdefault(name, (np.zeros_like(w), np.zeros_like(w)))
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        state[name] = (m, v)
        direction = (m / (1 - beta1 ** step)) / (np.sqrt(v / (1 - beta2 ** step)) + eps) \
            + weight_decay * w
        r1, r2 = np.linalg.norm(w), np.linalg.norm(direction)
        trust = r1 / r2 if r1 > 0 and r2 > 0 else 1.0
        params[name] = w - lr * trust * direction


def test_lamb_and_gradient_clipping_match_their_definitions(tmp_path):
    torch.manual_seed(8)
    model = MLP()
    xs = torch.randn(24, 12)
    ys = torch.randint(0, 5, (24,))
    export(model, xs[:8], tmp_path / "mlp.onnx")
    saved, _, _ = train_with_tessera(tmp_path, tmp_path / "mlp.onnx",
                                     "lamb:lr=0.02,weight-decay=0.05", xs, ys, 8)
    params = {k: v.detach().double().numpy() for k, v in model.named_parameters()}
    state = {}
    for step, i in enumerate(range(0, 24, 8), start=1):
        for name, p in model.named_parameters():
            p.data = torch.from_numpy(params[name]).float()
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(xs[i:i + 8]), ys[i:i + 8]).backward()
        grads = {k: p.grad.double().numpy() for k, p in model.named_parameters()}
        lamb_reference(params, grads, state, step, lr=0.02, weight_decay=0.05)
    for name, want in params.items():
        np.testing.assert_allclose(saved[name], want, rtol=1e-4,
                                   atol=1e-4 * np.abs(want).max(), err_msg=name)

    # Clipping by the global norm (0.05 is well below this model's gradient
    # norms, so every step clips).
    torch.manual_seed(8)
    model = MLP()
    export(model, xs[:8], tmp_path / "mlp.onnx")
    saved, _, _ = train_with_tessera(tmp_path, tmp_path / "mlp.onnx",
                                     "sgd:lr=0.5,momentum=0.9,max-grad-norm=0.05", xs, ys, 8)
    torch_training(model, torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9),
                   xs, ys, 8, torch.nn.functional.cross_entropy, max_grad_norm=0.05)
    check_weights(model, saved)


class WideConvs(torch.nn.Module):
    """Two 3x3 convolutions with 2.4 MB weights: the input gradient of the
    second reverses a weight larger than a tile's memory."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(8, 256, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(256, 256, 3, padding=1)
        self.fc = torch.nn.Linear(256, 10)

    def forward(self, x):
        x = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.fc(x.mean((2, 3)))


def test_convolution_weights_larger_than_a_tile_train(tmp_path):
    torch.manual_seed(9)
    model = WideConvs()
    xs = torch.randn(4, 8, 4, 4)
    ys = torch.randint(0, 10, (4,))
    export(model, xs[:2], tmp_path / "wide.onnx")
    saved, losses, _ = train_with_tessera(tmp_path, tmp_path / "wide.onnx",
                                          "sgd:lr=0.1", xs, ys, 2)
    want = torch_training(model, torch.optim.SGD(model.parameters(), lr=0.1), xs, ys, 2,
                          torch.nn.functional.cross_entropy)
    np.testing.assert_allclose(losses, want, rtol=1e-3)
    check_weights(model, saved)


class DropoutMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 64)
        self.drop = torch.nn.Dropout(0.25)
        self.fc2 = torch.nn.Linear(64, 5)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


def test_dropout_masks_are_random_uniform_and_reproducible(tmp_path):
    class Drop(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.dropout(x, 0.3, training=True)

    torch.onnx.export(Drop(), torch.ones(64, 512), str(tmp_path / "drop.onnx"),
                      input_names=["x"], output_names=["y"], opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING)
    tess = tmp_path / "drop.tess"
    assert run([tool("tessera-compile"), str(tmp_path / "drop.onnx"), "-o",
                str(tess)]).returncode == 0
    np.save(tmp_path / "ones.npy", np.ones((64, 512), np.float32))

    def draw(*extra):
        out = tmp_path / "out.npz"
        result = run([tool("tessera-run"), str(tess), "--input",
                      f"x={tmp_path / 'ones.npy'}", "--output", str(out), *extra])
        assert result.returncode == 0, result.stderr
        return np.load(out)["y"]

    first = draw()
    # Kept elements are scaled by 1 / (1 - p); 32768 draws: p within 4 sigma.
    assert set(np.unique(first)) == {0.0, np.float32(1 / 0.7)}
    assert abs((first == 0).mean() - 0.3) < 0.011
    # Rows (spread over tiles) draw independently: agreement as for
    # independent masks, 0.7^2 + 0.3^2.
    agree = (first[:32] == first[32:]).mean()
    assert abs(agree - 0.58) < 0.02
    np.testing.assert_array_equal(draw("--reference"), first)  # the host draws the same
    np.testing.assert_array_equal(draw("--seed", "0"), first)
    assert (draw("--seed", "7") != first).mean() > 0.3
    # Every run advances the generator's counter: the second run differs.
    assert (draw("--iterations", "2") != first).mean() > 0.3


def test_onnx_random_ops_draw_from_the_generator(tmp_path):
    from onnx import TensorProto as T, helper
    n = (64, 512)
    nodes = [helper.make_node("RandomNormalLike", ["x"], ["normal"], mean=1.0, scale=2.0),
             helper.make_node("RandomUniform", [], ["uniform"], low=-3.0, high=5.0,
                              shape=list(n)),
             helper.make_node("Bernoulli", ["p"], ["coin"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, n),
                     helper.make_tensor_value_info("p", T.FLOAT, n)],
        [helper.make_tensor_value_info(name, T.FLOAT, n)
         for name in ("normal", "uniform", "coin")])
    import onnx
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              str(tmp_path / "random.onnx"))
    tess = tmp_path / "random.tess"
    result = run([tool("tessera-compile"), str(tmp_path / "random.onnx"), "-o", str(tess)])
    assert result.returncode == 0, result.stderr
    p = np.tile(np.linspace(0, 1, n[1], dtype=np.float32), (n[0], 1))
    np.savez(tmp_path / "in.npz", x=np.zeros(n, np.float32), p=p)
    outs = []
    for extra in ([], ["--reference"]):
        result = run([tool("tessera-run"), str(tess), "--input", str(tmp_path / "in.npz"),
                      "--output", str(tmp_path / "out.npz"), *extra])
        assert result.returncode == 0, result.stderr
        outs.append({k: v for k, v in np.load(tmp_path / "out.npz").items()})
    got = outs[0]
    for k in got:
        np.testing.assert_array_equal(outs[1][k], got[k], err_msg=k)  # IPU == host
    # 32768 draws each: moments within 5 standard errors.
    assert abs(got["normal"].mean() - 1.0) < 5 * 2 / 181
    assert abs(got["normal"].std() - 2.0) < 0.05
    assert got["uniform"].min() >= -3 and got["uniform"].max() < 5
    assert abs(got["uniform"].mean() - 1.0) < 5 * 8 / np.sqrt(12) / 181
    assert set(np.unique(got["coin"])) == {0.0, 1.0}
    assert abs(got["coin"].mean() - p.mean()) < 0.01
    assert got["coin"][:, 0].max() == 0 and got["coin"][:, -1].min() == 1  # p = 0 and 1


def test_training_with_dropout_is_deterministic_for_a_seed(tmp_path):
    torch.manual_seed(10)
    model = DropoutMLP().train()
    xs = torch.randn(32, 12)
    ys = torch.randint(0, 5, (32,))
    torch.onnx.export(model, xs[:8], str(tmp_path / "mlp.onnx"), input_names=["x"],
                      output_names=["logits"], opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, dynamic_axes={"x": {0: "batch"}})
    onnx_path = tmp_path / "mlp.onnx"
    a, losses_a, _ = train_with_tessera(tmp_path, onnx_path, "sgd:lr=0.1", xs, ys, 8,
                                        extra=["--seed", "3"])
    a = {k: a[k] for k in a.files}
    b, losses_b, _ = train_with_tessera(tmp_path, onnx_path, "sgd:lr=0.1", xs, ys, 8,
                                        extra=["--seed", "3"], reference=True)
    np.testing.assert_allclose(losses_b, losses_a, rtol=1e-5)
    for k, v in a.items():
        np.testing.assert_allclose(b[k], v, rtol=1e-5, atol=1e-6, err_msg=k)
    c, losses_c, _ = train_with_tessera(tmp_path, onnx_path, "sgd:lr=0.1", xs, ys, 8,
                                        extra=["--seed", "4"])
    assert not np.allclose(losses_c, losses_a)
    # The counter is saved: two runs, then two more resumed, equal four.
    np.savez(tmp_path / "half.npz", **a)
    d, _, _ = train_with_tessera(tmp_path, onnx_path, "sgd:lr=0.1", xs, ys, 8,
                                 extra=["--seed", "3", "--load-weights",
                                        str(tmp_path / "half.npz")])
    assert d["rng.counter"] == 8
    # A TorchScript module's dropout draws the same way when compiled with
    # --train (and is refused in an inference compile of a train() module).
    torch.jit.trace(model, xs[:8]).save(str(tmp_path / "mlp.pt"))
    e, losses_e, _ = train_with_tessera(tmp_path, tmp_path / "mlp.pt", "sgd:lr=0.1",
                                        xs, ys, 8, extra=["--seed", "3"],
                                        compile_extra=["--input-shape", "x=8x12"])
    f, losses_f, _ = train_with_tessera(tmp_path, tmp_path / "mlp.pt", "sgd:lr=0.1",
                                        xs, ys, 8, extra=["--seed", "3"], reference=True,
                                        compile_extra=["--input-shape", "x=8x12"])
    np.testing.assert_allclose(losses_e, losses_f, rtol=1e-5)
    assert np.all(np.isfinite(losses_e))
    result = run([tool("tessera-compile"), str(tmp_path / "mlp.pt"), "--input-shape",
                  "x=8x12", "-o", str(tmp_path / "inference.tess")])
    assert result.returncode != 0
    assert "dropout in training mode in an inference model" in result.stderr


def test_mlp_layer_norm_gelu_on_the_host_reference(tmp_path):
    torch.manual_seed(2)
    model = MLP()
    xs = torch.randn(16, 12)
    ys = torch.randint(0, 5, (16,))
    export(model, xs[:8], tmp_path / "mlp.onnx")
    ipu, ipu_losses, out = train_with_tessera(
        tmp_path, tmp_path / "mlp.onnx", "adam:lr=0.01", xs, ys, 8)
    assert "estimated on ipu2:" in out
    ref, ref_losses, _ = train_with_tessera(
        tmp_path, tmp_path / "mlp.onnx", "adam:lr=0.01", xs, ys, 8, reference=True)
    want = torch_training(model, torch.optim.Adam(model.parameters(), lr=0.01), xs, ys,
                          8, torch.nn.functional.cross_entropy)
    np.testing.assert_allclose(ipu_losses, want, rtol=1e-3)
    np.testing.assert_allclose(ref_losses, want, rtol=1e-3)
    check_weights(model, ipu)
    check_weights(model, ref)


def test_label_smoothing_and_learning_rate_at_run_time(tmp_path):
    torch.manual_seed(3)
    model = MLP()
    xs = torch.randn(16, 12)
    ys = torch.randint(0, 5, (16,))
    export(model, xs[:8], tmp_path / "mlp.onnx")
    # Compiled with lr 0.1; run with 0.02: no recompile, torch uses 0.02.
    saved, _, _ = train_with_tessera(
        tmp_path, tmp_path / "mlp.onnx", "sgd:lr=0.1", xs, ys, 8,
        extra=["--lr", "0.02"],
        compile_extra=["--loss", "cross-entropy:label-smoothing=0.1"])
    torch_training(model, torch.optim.SGD(model.parameters(), lr=0.02), xs, ys, 8,
                   lambda out, y: torch.nn.functional.cross_entropy(
                       out, y, label_smoothing=0.1))
    check_weights(model, saved)


def test_resume_from_saved_weights_is_exact(tmp_path):
    torch.manual_seed(4)
    model = MLP()
    xs = torch.randn(16, 12)
    ys = torch.randint(0, 5, (16,))
    export(model, xs[:8], tmp_path / "mlp.onnx")
    both, _, _ = train_with_tessera(tmp_path, tmp_path / "mlp.onnx",
                                    "adam:lr=0.01", xs, ys, 8)
    both = {k: both[k] for k in both.files}
    # The same two steps as one step, saved, then one step resumed.
    first, _, _ = train_with_tessera(tmp_path, tmp_path / "mlp.onnx",
                                     "adam:lr=0.01", xs[:8], ys[:8], 8)
    np.savez(tmp_path / "first.npz", **{k: first[k] for k in first.files})
    second, _, _ = train_with_tessera(tmp_path, tmp_path / "mlp.onnx", "adam:lr=0.01",
                                      xs[8:], ys[8:], 8,
                                      extra=["--load-weights", str(tmp_path / "first.npz")])
    for k, v in both.items():
        np.testing.assert_array_equal(second[k], v, err_msg=k)


def test_export_onnx_holds_the_trained_weights(tmp_path):
    import onnx
    from onnx import numpy_helper
    torch.manual_seed(12)
    model = BatchNormCNN()
    xs = torch.randn(8, 1, 8, 8)
    ys = torch.randint(0, 10, (8,))
    torch.onnx.export(model.train(), xs[:4], str(tmp_path / "bn.onnx"), input_names=["x"],
                      output_names=["logits"], opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    trained = tmp_path / "trained.onnx"
    saved, _, out = train_with_tessera(tmp_path, tmp_path / "bn.onnx", "adam:lr=0.01", xs,
                                       ys, 4, extra=["--export-onnx", str(trained)])
    assert f"trained model written to {trained}" in out
    before = {i.name: numpy_helper.to_array(i)
              for i in onnx.load(str(tmp_path / "bn.onnx")).graph.initializer}
    after = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(trained)).graph.initializer}
    assert before.keys() == after.keys()
    for name in ["conv.weight", "fc.bias", "bn.running_mean", "bn1d.running_var"]:
        np.testing.assert_array_equal(after[name], saved[name], err_msg=name)
        assert not np.array_equal(after[name], before[name]), name
    # A TorchScript source cannot be exported to ONNX: an error before training.
    traced = torch.jit.trace(MLP(), torch.randn(4, 12))
    traced.save(str(tmp_path / "mlp.pt"))
    tess = tmp_path / "ts.tess"
    assert run([tool("tessera-compile"), str(tmp_path / "mlp.pt"), "--train",
                "--input-shape", "x=4x12", "-o", str(tess)]).returncode == 0
    np.savez(tmp_path / "d.npz", x=np.zeros((4, 12), np.float32),
             labels=np.zeros(4, np.int64))
    result = run([tool("tessera-run"), str(tess), "--train-data", str(tmp_path / "d.npz"),
                  "--steps", "1", "--export-onnx", str(tmp_path / "x.onnx")])
    assert result.returncode != 0
    assert "is a TorchScript module: --export-onnx writes ONNX models" in result.stderr
    assert not (tmp_path / "x.onnx").exists()


def test_errors(tmp_path):
    model = MLP()
    export(model, torch.randn(8, 12), tmp_path / "mlp.onnx")
    tess = tmp_path / "train.tess"
    result = run([tool("tessera-compile"), str(tmp_path / "mlp.onnx"), "--train",
                  "--optimizer", "adam:learning-rate=1", "--micro-batch-size", "8",
                  "-o", str(tess)])
    assert result.returncode != 0
    assert "has no hyperparameter 'learning-rate'" in result.stderr
    result = run([tool("tessera-compile"), str(tmp_path / "mlp.onnx"), "--train",
                  "--loss", "hinge", "--micro-batch-size", "8", "-o", str(tess)])
    assert result.returncode != 0 and "unknown loss 'hinge'" in result.stderr
    result = run([tool("tessera-compile"), str(tmp_path / "mlp.onnx"), "--train",
                  "--replicas", "0", "-o", str(tess)])
    assert result.returncode != 0
    assert "--replicas 0 of 1 IPU(s) each: replicas must be at least 1" in result.stderr
    result = run([tool("tessera-compile"), str(tmp_path / "mlp.onnx"), "--train",
                  "--replicas", "512", "--num-ipus", "4", "-o", str(tess)])
    assert result.returncode != 0
    assert "at most 1024 (a Bow Pod1024)" in result.stderr
    result = run([tool("tessera-compile"), str(tmp_path / "mlp.onnx"),
                  "--gradient-accumulation", "4", "-o", str(tess)])
    assert result.returncode != 0
    assert "--gradient-accumulation applies to a training step: add --train" in result.stderr
    result = run([tool("tessera-compile"), str(tmp_path / "mlp.onnx"), "--train",
                  "--gradient-accumulation", "0", "-o", str(tess)])
    assert result.returncode != 0
    assert "--gradient-accumulation must be 1 to 16777216, got 0" in result.stderr
    result = run([tool("tessera-compile"), str(tmp_path / "mlp.onnx"), "--train",
                  "--micro-batch-size", "8", "-o", str(tess)])
    assert result.returncode == 0, result.stderr
    data = tmp_path / "data.npz"
    np.savez(data, x=np.zeros((12, 12), np.float32), labels=np.zeros(12, np.int64))
    result = run([tool("tessera-run"), str(tess), "--train-data", str(data),
                  "--epochs", "1"])
    assert result.returncode != 0
    assert "12 samples, not a multiple of the 8 each run takes (micro-batch 8 x " \
        "gradient accumulation 1 x device iterations 1 x replicas 1)" in result.stderr
    np.savez(data, x=np.zeros((8, 12), np.float32))
    result = run([tool("tessera-run"), str(tess), "--train-data", str(data),
                  "--epochs", "1"])
    assert result.returncode != 0 and "no array 'labels'" in result.stderr

