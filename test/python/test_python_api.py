"""The Python API (python/tessera): PopTorch-style scripts against PyTorch.

Inference and training go through the same libraries as the command-line
tools and run on the IPU model; outputs and trained weights must match
PyTorch within 1e-4.
"""
import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torchvision

import tessera


def close(got, want, what):
    scale = max(float(want.abs().max()), 1e-6)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-4,
                               atol=1e-4 * scale, err_msg=what)


def test_inference_resnet18_with_device_iterations():
    torch.manual_seed(0)
    model = torchvision.models.resnet18().eval()
    opts = tessera.Options().deviceIterations(4)
    ipu = tessera.inferenceModel(model, opts)
    x = torch.randn(8, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(x)
    close(ipu(x), expected, "first call (compiles)")
    close(ipu(x * 0.5), model(x * 0.5), "second call")
    assert ipu.compilations == 1
    assert ipu.isCompiled() and ipu.isAttached()
    # The host batch is the micro-batch (2) times the device iterations.
    with pytest.raises(tessera.Error, match=r"micro-batch 2 x device iterations 4 x replicas 1 = 8"):
        ipu(torch.randn(6, 3, 32, 32))
    # The executor passes attributes through to the model.
    assert ipu.fc.out_features == 1000


class SmallCNN(torch.nn.Module):
    """Returns (logits, loss), PopTorch's convention for trainingModel."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4 * 8 * 8, 10)

    def forward(self, x, labels):
        logits = self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))
        return logits, torch.nn.functional.cross_entropy(logits, labels)


def digits_like(samples=64):
    g = torch.Generator().manual_seed(2)
    return torch.utils.data.TensorDataset(torch.randn(samples, 1, 8, 8, generator=g),
                                          torch.randint(0, 10, (samples,), generator=g))


def reference_training(model, data, micro, accumulation, lr, momentum):
    """PyTorch doing what the compiled step does: the mean of `accumulation`
    micro-batches' gradients per update."""
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    model.train()
    loader = torch.utils.data.DataLoader(data, batch_size=micro * accumulation)
    for x, y in loader:
        opt.zero_grad()
        total = 0
        for k in range(accumulation):
            _, loss = model(x[k * micro:(k + 1) * micro], y[k * micro:(k + 1) * micro])
            total = total + loss
        (total / accumulation).backward()
        opt.step()
    return opt


def test_training_matches_pytorch_with_accumulation_and_dataloader():
    torch.manual_seed(0)
    net = SmallCNN()
    ref = copy.deepcopy(net)
    opts = tessera.Options().deviceIterations(2)
    opts.Training.gradientAccumulation(2)
    # PopTorch's velocity_scaling: the momentum buffer is stored times 128.
    model = tessera.trainingModel(net, opts, tessera.optim.SGD(net.parameters(), lr=0.05,
                                                               momentum=0.9,
                                                               velocity_scaling=128))
    data = digits_like()
    loader = tessera.DataLoader(opts, data, batch_size=4)
    assert loader.combinedBatchSize == 16 and len(loader) == 4
    for x, y in loader:
        logits, loss = model(x, y)
    # Output mode Final: the last micro-batch's outputs.
    assert logits.shape == (4, 10) and loss.shape == ()
    opt = reference_training(ref, data, micro=4, accumulation=2, lr=0.05, momentum=0.9)
    buffer = model._executable.read_state()["fc.weight/momentum_buffer"]
    close(torch.from_numpy(buffer) / 128, opt.state[ref.fc.weight]["momentum_buffer"],
          "fc.weight's momentum buffer / 128")
    trained = model.state_dict()  # brings the device's weights back
    for name, value in ref.state_dict().items():
        if name.endswith("num_batches_tracked"):
            assert int(trained[name]) == int(value) == 16, name
        else:
            close(trained[name], value, name)
    # The host model itself holds them too.
    close(net.fc.weight, ref.fc.weight, "net.fc.weight")


class PlainCNN(torch.nn.Module):
    """SmallCNN without batch norm, whose statistics are per replica."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 8 * 8, 10)

    def forward(self, x, labels):
        logits = self.fc(torch.relu(self.conv(x)).flatten(1))
        return logits, torch.nn.functional.cross_entropy(logits, labels)


def test_replicas_train_as_one_replica_with_the_combined_batch():
    torch.manual_seed(0)
    net = PlainCNN()
    ref = copy.deepcopy(net)
    opts = tessera.Options().replicationFactor(2)
    opts.Training.gradientAccumulation(2)
    model = tessera.trainingModel(net, opts, tessera.optim.SGD(net.parameters(), lr=0.05,
                                                               momentum=0.9))
    data = digits_like()
    loader = tessera.DataLoader(opts, data, batch_size=4)
    assert loader.combinedBatchSize == 16 and len(loader) == 4
    for x, y in loader:
        logits, loss = model(x, y)
    # Each replica returns its own outputs (PopTorch's convention).
    assert logits.shape == (8, 10) and loss.shape == (2,)
    assert model._executable.info["replicas"] == 2
    # Two replicas of 4 = one replica of 8 (the gradients' mean).
    reference_training(ref, data, micro=8, accumulation=2, lr=0.05, momentum=0.9)
    trained = model.state_dict()
    for name, value in ref.state_dict().items():
        close(trained[name], value, name)
    # The replicas' weights are equal, their indices their own.
    replica0, replica1 = (model._executable.read_state(replica=r) for r in (0, 1))
    for name in ("conv.weight", "fc.bias"):
        np.testing.assert_array_equal(replica0[name], replica1[name])
    with pytest.raises(tessera.Error, match=r"replica 2 is not in \[0, 2\)"):
        model._executable.read_state(replica=2)


def test_replicas_draw_their_own_dropout_and_round_their_weights_alike(tmp_path):
    """Two replicas fed the same samples: dropout differs between them, but
    the weight updates, rounded stochastically to fp16 with the shared seed,
    keep their weights equal."""
    import _tessera
    from conftest import run, tool
    from test_training import DropoutMLP

    torch.manual_seed(11)
    model = DropoutMLP().train()
    torch.onnx.export(model, torch.randn(4, 12), str(tmp_path / "mlp.onnx"),
                      input_names=["x"], output_names=["logits"], opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, dynamic_axes={"x": {0: "batch"}})
    tess = tmp_path / "train.tess"
    result = run([tool("tessera-compile"), str(tmp_path / "mlp.onnx"), "--train",
                  "--optimizer", "sgd:lr=0.5", "--micro-batch-size", "4", "--replicas", "2",
                  "--precision", "fp16.16", "--stochastic-rounding", "--output-mode", "all",
                  "-o", str(tess)])
    assert result.returncode == 0, result.stderr
    exe = _tessera.Executable(str(tess))
    assert exe.info["replicas"] == 2
    assert [s["role"] for s in exe.state].count("replica_index") == 1
    g = np.random.default_rng(3)
    for _ in range(4):
        x = g.standard_normal((4, 12)).astype(np.float32)
        y = g.integers(0, 5, 4).astype(np.int64)
        loss, logits = exe.run([np.concatenate([x, x]), np.concatenate([y, y])])
        assert logits.shape == (8, 5) and loss.shape == (2,)
        assert not np.array_equal(logits[:4], logits[4:])  # dropout per replica
    first, second = exe.read_state(replica=0), exe.read_state(replica=1)
    assert first["replica.index"] == 0 and second["replica.index"] == 1
    for name in ("fc1.weight", "fc1.bias", "fc2.weight"):
        assert first[name].dtype == np.float16, name
        np.testing.assert_array_equal(first[name], second[name], err_msg=name)
    with pytest.raises(_tessera.Error, match="each replica's own index"):
        exe.write_state("replica.index", np.array(5, dtype=np.int64))


def test_set_optimizer_changes_the_learning_rate_without_recompiling():
    torch.manual_seed(0)
    net = SmallCNN()
    ref = copy.deepcopy(net)
    model = tessera.trainingModel(net, optimizer=tessera.optim.SGD(net.parameters(), lr=0.1))
    data = digits_like(16)
    x, y = data.tensors
    model(x[:8], y[:8])
    model.setOptimizer(tessera.optim.SGD(net.parameters(), lr=0.01))
    model(x[8:], y[8:])
    assert model.compilations == 1
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for k, lr in enumerate([0.1, 0.01]):
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad()
        ref(x[8 * k:8 * (k + 1)], y[8 * k:8 * (k + 1)])[1].backward()
        opt.step()
    for name, value in ref.named_parameters():
        close(dict(model.named_parameters())[name], value, name)
    # A term compiled into the update cannot appear without a recompile.
    with pytest.raises(tessera.Error, match="momentum 0.0 -> 0.9 changes the compiled update"):
        model.setOptimizer(tessera.optim.SGD(net.parameters(), lr=0.01, momentum=0.9))
    with pytest.raises(tessera.Error, match="compiled with sgd, not adam"):
        model.setOptimizer(torch.optim.Adam(net.parameters()))


def test_accumulator_types_choose_the_state_storage():
    """PopTorch's accum_type and velocity_accum_type: fp16 gradient
    accumulators and momentum for an fp32 model, stored in their types and
    training within fp16's rounding of PyTorch; the types are structural."""
    torch.manual_seed(0)
    net = PlainCNN()
    ref = copy.deepcopy(net)
    opts = tessera.Options()
    opts.Training.gradientAccumulation(2)
    optimizer = tessera.optim.SGD(net.parameters(), lr=0.05, momentum=0.9,
                                  accum_type=torch.float16, velocity_accum_type=torch.float16)
    model = tessera.trainingModel(net, opts, optimizer)
    data = digits_like(32)
    loader = tessera.DataLoader(opts, data, batch_size=4)
    for x, y in loader:
        model(x, y)
    state = model._executable.read_state()
    assert state["fc.weight/grad_accum"].dtype == np.float16
    assert state["fc.weight/momentum_buffer"].dtype == np.float16
    reference_training(ref, data, micro=4, accumulation=2, lr=0.05, momentum=0.9)
    trained = dict(model.named_parameters())
    for name, value in ref.named_parameters():
        torch.testing.assert_close(trained[name], value, rtol=0, atol=5e-4, msg=name)
    with pytest.raises(tessera.Error, match="accumulator types .* change the compiled update"):
        model.setOptimizer(tessera.optim.SGD(net.parameters(), lr=0.01, momentum=0.9))
    # The same types with another learning rate, and fp32 state named
    # explicitly (the default), change nothing compiled.
    model.setOptimizer(tessera.optim.SGD(net.parameters(), lr=0.01, momentum=0.9,
                                         accum_type=torch.float16,
                                         velocity_accum_type=torch.float16))
    assert tessera.optim.accumulator_types(tessera.optim.Adam(
        net.parameters(), first_order_momentum_accum_type=torch.float32)) == {}


class TinyBert(torch.nn.Module):
    """Token embedding, an encoder layer and a classifier: fine-tuning
    trains the embedding too (its gradient is a scatter-add)."""

    def __init__(self):
        super().__init__()
        self.tokens = torch.nn.Embedding(100, 16)
        self.layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0,
                                                      batch_first=True)
        self.head = torch.nn.Linear(16, 3)

    def forward(self, ids, labels):
        logits = self.head(self.layer(self.tokens(ids))[:, 0])
        return logits, torch.nn.functional.cross_entropy(logits, labels)


def trains_like_pytorch(net, steps, *args, **kwargs):
    """Trains `net` for `steps` calls through trainingModel with SGD (lr 0.1,
    momentum 0.9) and a copy of it with torch.optim, on the same inputs;
    checks every parameter matches and returns the trained ones by name.
    SGD, not Adam: a gradient that is zero up to rounding (a key
    projection's bias: softmax ignores a shift shared by all keys) would be
    blown up by Adam's normalisation to +-lr steps of noise."""
    ref = copy.deepcopy(net)
    model = tessera.trainingModel(net, optimizer=torch.optim.SGD(net.parameters(), lr=0.1,
                                                                 momentum=0.9))
    for _ in range(steps):
        model(*args, **kwargs)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for _ in range(steps):
        opt.zero_grad()
        ref(*args, **kwargs)[1].backward()
        opt.step()
    trained = dict(model.named_parameters())
    for name, value in ref.named_parameters():
        close(trained[name], value, name)
    return trained, ref


def test_fine_tuning_trains_the_embedding_like_pytorch():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(0, 100, (4, 8), generator=g)
    labels = torch.randint(0, 3, (4,), generator=g)
    trained, ref = trains_like_pytorch(TinyBert(), 2, ids, labels)
    # Rows of the table no token used keep their values.
    unused = sorted(set(range(100)) - set(ids.flatten().tolist()))
    close(trained["tokens.weight"][unused], ref.tokens.weight[unused], "unused rows")


class SequenceClassifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(3, 8, batch_first=True)
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x, labels):
        y, (h, c) = self.lstm(x)
        logits = self.head(h[0])
        return logits, torch.nn.functional.cross_entropy(logits, labels)


def test_training_an_lstm_like_pytorch():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(8)
    x, labels = torch.randn(4, 5, 3, generator=g), torch.randint(0, 2, (4,), generator=g)
    trains_like_pytorch(SequenceClassifier(), 3, x, labels)


def test_detach_and_attach_keep_the_device_state():
    torch.manual_seed(0)
    net = SmallCNN()
    model = tessera.trainingModel(net, optimizer=torch.optim.SGD(net.parameters(), lr=0.1,
                                                                 momentum=0.9))
    x, y = digits_like(8).tensors
    model(x, y)
    model.detachFromDevice()
    assert not model.isAttached()
    model.attachToDevice()
    _, after_reattach = model(x, y)
    torch.manual_seed(0)
    net2 = SmallCNN()
    model2 = tessera.trainingModel(net2, optimizer=torch.optim.SGD(net2.parameters(), lr=0.1,
                                                                   momentum=0.9))
    model2(x, y)
    _, uninterrupted = model2(x, y)
    close(after_reattach, uninterrupted, "loss after detach/attach (momentum kept)")


def test_compile_and_export_then_load_in_a_fresh_process(tmp_path):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).eval()
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    path = tmp_path / "resnet18.tess"
    tessera.inferenceModel(model).compileAndExport(path, x)
    np.save(tmp_path / "x.npy", x.numpy())
    script = (f"import numpy, torch, tessera\n"
              f"m = tessera.load({str(path)!r})\n"
              f"y = m(torch.from_numpy(numpy.load({str(tmp_path / 'x.npy')!r})))\n"
              f"numpy.save({str(tmp_path / 'y.npy')!r}, y.numpy())\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    with torch.no_grad():
        close(torch.from_numpy(np.load(tmp_path / "y.npy")), model(x), "loaded executable")


def test_options_round_trip_and_poptorch_files(tmp_path):
    opts = tessera.Options().deviceIterations(4).randomSeed(7)
    opts.Training.gradientAccumulation(3).accumulationAndReplicationReductionType(
        tessera.ReductionType.Sum)
    opts.outputMode(tessera.OutputMode.EveryN, 2)
    opts.setAvailableMemoryProportion({"IPU0": 0.4})
    path = tmp_path / "opts.json"
    path.write_text(opts.toJSON())
    back = tessera.Options().loadFromFile(path)
    assert back.toDict() == opts.toDict()
    assert json.loads(back.toJSON())["output_mode"] == "EveryN"
    lines = tmp_path / "opts.txt"
    lines.write_text("deviceIterations(4)\nrandomSeed(7)  # a comment\n"
                     "Training.gradientAccumulation(3)\n"
                     "Training.accumulationAndReplicationReductionType(ReductionType.Sum)\n"
                     "outputMode(OutputMode.EveryN, 2)\n"
                     "setAvailableMemoryProportion({'IPU0': 0.4})\n")
    assert tessera.Options().loadFromFile(lines).toDict() == opts.toDict()


def test_half_models_take_float_partials_unless_set():
    # model.half(): matmuls and convolutions add in f32 and round once
    # (PopTorch's default partials type), or in fp16 with
    # Precision.setPartialsType(torch.float16). Long sums of positive values
    # show which: the reference is each op exact (float64) on fp16 values,
    # rounded once to fp16.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(128, 8, 3), torch.nn.Flatten(),
                                torch.nn.Linear(8 * 4 * 4, 4))
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(0, 1)
    model = model.half()
    x = torch.rand(1, 128, 6, 6).half()
    f16 = lambda a: np.asarray(a, np.float64).astype(np.float16).astype(np.float64)  # noqa: E731
    conv, _, linear = model
    w, b = conv.weight.detach().double().numpy(), conv.bias.detach().double().numpy()
    z = np.zeros((1, 8, 4, 4))
    for i in range(4):
        for j in range(4):
            z[:, :, i, j] = np.einsum("ncrs,fcrs->nf", x.double().numpy()[:, :, i:i + 3, j:j + 3], w)
    z = f16(f16(z) + b[None, :, None, None])
    y = f16(f16(z.reshape(1, -1) @ linear.weight.detach().double().numpy().T) +
            linear.bias.detach().double().numpy())

    def error(options):
        got = tessera.inferenceModel(model, options)(x)
        assert got.dtype == torch.float16
        return float((np.abs(got.double().numpy() - y) / np.abs(y)).max())

    float_partials = error(tessera.Options())
    opts = tessera.Options()
    opts.Precision.setPartialsType(torch.float16)
    half_partials = error(opts)
    # One fp16 step either way where f32 sums round differently, no more.
    assert float_partials <= 2.0 ** -10, float_partials
    assert half_partials > 2 * float_partials, (float_partials, half_partials)
    # optimum-graphcore's enable_half_partials (True by default) is the same switch.
    assert tessera.IPUConfig().to_options().toDict()["partials_type"] == "half"
    assert tessera.IPUConfig(enable_half_partials=False).to_options().toDict()[
        "partials_type"] == "float"


def test_half_model_trains_from_its_own_running_statistics():
    # A model.half() with batch norm, trained: it is traced through an fp32
    # copy, whose two runs update the copy's statistics; the trained step
    # must start from the model's own (one update counted after one step,
    # the running mean one momentum step from zero, kept in fp16).
    torch.manual_seed(0)
    net = SmallCNN().half()
    x, labels = torch.randn(8, 1, 8, 8).half(), torch.randint(0, 10, (8,))
    with torch.no_grad():
        batch_mean = torch.nn.functional.conv2d(
            x.float(), net.conv.weight.float(), net.conv.bias.float(), padding=1).mean((0, 2, 3))
    model = tessera.trainingModel(net, optimizer=torch.optim.SGD(net.parameters(), lr=0.01))
    model(x, labels)
    model.copyWeightsToHost()
    assert int(net.bn.num_batches_tracked) == 1
    assert net.bn.running_mean.dtype == torch.float16
    np.testing.assert_allclose(net.bn.running_mean.float().numpy(), 0.1 * batch_mean.numpy(),
                               atol=2e-3)


@pytest.mark.parametrize("call,message", [
    (lambda: tessera.Options().deviceIterations(0), "deviceIterations must be a positive"),
    (lambda: tessera.Options().replicationFactor(1025), r"replicationFactor\(1025\): at most 1024"),
    (lambda: tessera.Options().Precision.enableStochasticRounding(1), "takes True or False"),
    (lambda: tessera.Options().setAvailableMemoryProportion({"IPU0": 1.5}), r"must be in \(0, 1\]"),
    (lambda: tessera.Options().setAvailableMemoryProportion({"GPU0": 0.5}), "not an IPU name"),
    (lambda: tessera.Options().fromDict({"deviceIterationz": 2}), "unknown option deviceIterationz"),
    (lambda: tessera.Options().outputMode(tessera.OutputMode.EveryN), "needs output_return_period"),
    (lambda: tessera.optim.SGD(torch.nn.Linear(2, 2).parameters(), loss_scaling=-1),
     "loss_scaling must be a positive number"),
    (lambda: tessera.optim.SGD(torch.nn.Linear(2, 2).parameters(), velocity_scaling=0),
     "velocity_scaling must be a positive number"),
    (lambda: tessera.optim.Adam(torch.nn.Linear(2, 2).parameters(),
                                first_order_momentum_accum_type=torch.bfloat16),
     r"first_order_momentum_accum_type=torch.bfloat16: use torch.float32 or torch.float16"),
    (lambda: tessera.optim.LAMB(torch.nn.Linear(2, 2).parameters(), accum_type="half"),
     r"accum_type=half: use torch.float32 or torch.float16"),
    (lambda: tessera.trainingModel(torch.nn.Linear(2, 2), optimizer="sgd"),
     "must be a torch.optim optimizer"),
    (lambda: tessera.BeginBlock(torch.nn.Linear(2, 2), ipu_id=-1),
     "ipu_id must be a non-negative integer"),
    (lambda: tessera.Block(ipu_id=-1).__enter__(), "Block: ipu_id must be a non-negative"),
    (lambda: tessera.Stage(), "Stage takes the user ids"),
    (lambda: tessera.Options().setExecutionStrategy("pipelined"),
     "setExecutionStrategy takes tessera.PipelinedExecution"),
])
def test_option_errors(call, message):
    with pytest.raises(tessera.Error, match=message):
        call()


def test_blocks_on_ipu0_compile_as_the_whole_model():
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 3)
    model = torch.nn.Sequential(tessera.BeginBlock(layer, "first", ipu_id=0), torch.nn.ReLU())

    @tessera.BlockFunction(ipu_id=0)
    def double(x):
        return tessera.recomputationCheckpoint(x * 2)

    x = torch.randn(2, 4)
    close(tessera.inferenceModel(model)(x), model(x), "BeginBlock on IPU 0")
    assert torch.equal(double(x), x * 2)


class WithMseLoss(torch.nn.Module):
    """`net`'s output and its mse loss: a trainingModel's model."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, y):
        out = self.net(x)
        return out, torch.nn.functional.mse_loss(out, y)


def check_pipelined_and_sharded(model, x, ipus):
    """Inference of `model` placed on `ipus` IPUs equals PyTorch's, pipelined
    (one stage per IPU, `ipus` device iterations of x's batch split evenly)
    and sharded (one micro-batch walking the IPUs in turn)."""
    pipelined = tessera.inferenceModel(model, tessera.Options().deviceIterations(ipus))
    close(pipelined(x), model(x), f"pipelined over {ipus} IPUs")
    info = pipelined._executable.info
    assert info["num_ipus"] == ipus and info["pipeline_stages"] == ipus, info
    micro = x[:len(x) // ipus]
    sharded = tessera.inferenceModel(
        model, tessera.Options().setExecutionStrategy(tessera.ShardedExecution()))
    close(sharded(micro), model(micro), f"sharded over {ipus} IPUs")
    assert sharded._executable.info["pipeline_stages"] == 1


def train_with_sgd(net, data, accumulation):
    """`net` trained on `data` (pairs of batches) with SGD (lr 0.1) and a
    gradient accumulation; returns the executor and the trained weights."""
    opts = tessera.Options()
    opts.Training.gradientAccumulation(accumulation)
    trainer = tessera.trainingModel(WithMseLoss(net), opts,
                                    tessera.optim.SGD(net.parameters(), lr=0.1))
    for xb, yb in data:
        trainer(xb, yb)
    trainer.copyWeightsToHost()
    return trainer, [p.detach().clone() for p in net.parameters()]


def test_begin_block_places_layers_on_ipus():
    # A BeginBlock on IPU 1: pipelined (the default; two device iterations
    # for two stages) and sharded, both PyTorch's outputs; trained
    # pipelined, the weights of training on one IPU.
    torch.manual_seed(0)

    def build():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                    torch.nn.Linear(16, 16), torch.nn.Tanh(),
                                    torch.nn.Linear(16, 4))
        model[2] = tessera.BeginBlock(model[2], "second", ipu_id=1)
        return model

    model = build()
    x = torch.randn(8, 8)
    check_pipelined_and_sharded(model, x, 2)
    with pytest.raises(tessera.Error, match="needs at least 2 micro-batches"):
        tessera.inferenceModel(model)(x[:4])

    data = [(torch.randn(8, 8), torch.randn(8, 4)) for _ in range(5)]
    weights = []
    for blocks in (False, True):
        net = build()
        if not blocks:
            tessera.removeBlocks(net)
        weights.append(train_with_sgd(net, data, 2)[1])
    for a, b in zip(*weights):
        close(b, a, "pipelined training")


def test_block_and_block_function_place_operations_on_ipus():
    # Blocks inside forward (PopTorch's poptorch.Block and BlockFunction):
    # the operations traced inside one run on its IPU, and what follows
    # with them until the next block. Pipelined and sharded, PyTorch's
    # outputs; trained pipelined, the weights of training on one IPU.
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.first = torch.nn.Linear(8, 16)
            self.second = torch.nn.Linear(16, 16)
            self.third = torch.nn.Linear(16, 4)

        def forward(self, x):
            h = torch.tanh(self.first(x))
            with tessera.Block("middle", ipu_id=1):
                h = torch.tanh(self.second(h))
            return self.head(h)

        @tessera.BlockFunction("head", ipu_id=2)
        def head(self, h):
            return self.third(h) * 2

    model = Net()
    x = torch.randn(6, 8)
    check_pipelined_and_sharded(model, x, 3)
    # Stages from the execution strategy, by the blocks' user ids: "middle"
    # (IPU 1) as stage 0, where the ops before any block run (IPU 0), is a
    # stage on two IPUs, which is an error.
    with pytest.raises(tessera.Error, match="a stage runs on one IPU"):
        tessera.inferenceModel(model, tessera.Options().deviceIterations(3).setExecutionStrategy(
            tessera.PipelinedExecution("middle", tessera.Stage("head", "middle"))))(x)

    data = [(torch.randn(6, 8), torch.randn(6, 4)) for _ in range(4)]
    weights = []
    for blocks in (False, True):
        net = Net()
        if not blocks:
            net.forward = lambda x, net=net: net.third(torch.tanh(net.second(
                torch.tanh(net.first(x))))) * 2
        trainer, trained = train_with_sgd(net, data, 3)
        assert trainer._executable.info["pipeline_stages"] == (3 if blocks else 1)
        weights.append(trained)
    for a, b in zip(*weights):
        close(b, a, "pipelined training with blocks")


def test_bad_options_file_names_the_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("deviceIterations(2)\nbogusOption(3)\n")
    with pytest.raises(tessera.Error, match=r"bad.txt:2: unknown option 'bogusOption'"):
        tessera.Options().loadFromFile(path)


class Tagged(torch.nn.Module):
    """A Hugging Face-style forward: optional inputs by keyword."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(20, 4)
        self.kinds = torch.nn.Embedding(3, 4)

    def forward(self, ids, mask=None, kinds=None):
        h = self.embed(ids)
        if kinds is not None:
            h = h + self.kinds(kinds)
        if mask is not None:
            h = h * mask.unsqueeze(-1)
        return h.sum(1)


def test_keyword_inputs():
    torch.manual_seed(0)
    model = Tagged().eval()
    ids = torch.randint(0, 20, (2, 5))
    kinds = torch.randint(0, 3, (2, 5))
    # A later input by keyword, skipping `mask`: traced through a wrapper.
    ipu = tessera.inferenceModel(model)
    with torch.no_grad():
        close(ipu(ids, kinds=kinds), model(ids, kinds=kinds), "ids, kinds=")
    with pytest.raises(tessera.Error, match="compiled for the inputs ids, kinds; got ids, mask"):
        ipu(ids, mask=torch.ones(2, 5))
    # Leading inputs by keyword are the positional call.
    leading = tessera.inferenceModel(model)
    mask = torch.ones(2, 5)
    with torch.no_grad():
        close(leading(ids=ids, mask=mask), model(ids, mask), "ids=, mask=")
    close(leading(ids, mask), leading(ids=ids, mask=mask), "positional")


class TaggedLoss(Tagged):
    def forward(self, ids, mask=None, kinds=None, target=None):
        out = super().forward(ids, mask, kinds)
        return out, torch.nn.functional.mse_loss(out, target)


def test_training_with_keyword_inputs_trains_the_models_weights():
    torch.manual_seed(0)
    trains_like_pytorch(TaggedLoss(), 2, torch.randint(0, 20, (2, 5)),
                        target=torch.randn(2, 4))


def test_outputs_keep_the_models_nesting():
    class Nested(torch.nn.Module):
        def forward(self, x):
            return {"double": x * 2, "half": x / 2}, [x - 1, x]

    x = torch.randn(2, 3)
    out = tessera.inferenceModel(Nested())(x)
    assert isinstance(out, tuple) and isinstance(out[0], dict) and isinstance(out[1], list)
    assert list(out[0]) == ["double", "half"]
    close(out[0]["half"], x / 2, "dict output")
    close(out[1][0], x - 1, "list output")


def test_training_model_needs_a_scalar_loss():
    model = tessera.trainingModel(torch.nn.Linear(4, 3))
    with pytest.raises(tessera.Error, match="must return its loss, a scalar"):
        model(torch.randn(2, 4))


def test_compile_errors_name_the_python_line():
    class Unsupported(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.svd(x)[1]  # no converter for svd

    with pytest.raises(tessera.Error, match=r"test_python_api.py:\d+.*svd"):
        tessera.inferenceModel(Unsupported())(torch.randn(2, 3, 3))


CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "ipu_config")


@pytest.mark.parametrize("name", ["bert-base-ipu", "gpt2-ipu", "vit-base-ipu"])
def test_ipu_config_files_load_and_round_trip(name, tmp_path):
    config = tessera.IPUConfig.from_json_file(os.path.join(CONFIGS, f"{name}.json"))
    assert config.layers_per_ipu == [0, 4, 4, 4] and config.ipus_per_replica == 4
    assert config.batch_size_factor() == config.gradient_accumulation_steps
    config.save_pretrained(tmp_path)
    assert tessera.IPUConfig.from_pretrained(tmp_path) == config
    # The training placement: optimum's layers over four IPUs.
    options = config.to_options()._compile_options(training=True)
    assert options["layers_per_ipu"] == [0, 4, 4, 4] and options["num_ipus"] == 4


class TwelveLayerBert(torch.nn.Module):
    """A BERT-shaped model small enough to train in a test: embeddings,
    twelve encoder layers (module paths encoder.layer.0 ... 11, which
    layers_per_ipu counts), a classifier reading the first token."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embeddings = torch.nn.Embedding(50, 16)
        self.encoder = torch.nn.Module()
        self.encoder.layer = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
            for _ in range(12))
        self.classifier = torch.nn.Linear(16, 3)

    def forward(self, ids, labels):
        h = self.embeddings(ids)
        for layer in self.encoder.layer:
            h = layer(h)
        logits = self.classifier(h[:, 0])
        return logits, torch.nn.functional.cross_entropy(logits, labels)


def test_bert_ipu_config_drives_pipelined_training(tmp_path):
    # optimum-graphcore's bert-base config as published: layers_per_ipu
    # [0, 4, 4, 4] over 4 IPUs (embeddings alone on IPU 0), recomputation
    # of every layer, matmul_proportion 0.1. A smaller gradient accumulation
    # than its 512 keeps the test short. Trained pipelined, the weights equal
    # those of the same training on one IPU.
    config = tessera.IPUConfig.from_json_file(os.path.join(CONFIGS, "bert-base-ipu.json"))
    config.update_from_string(f"gradient_accumulation_steps=4,executable_cache_dir={tmp_path}")
    g = torch.Generator().manual_seed(5)
    data = [(torch.randint(0, 50, (8, 6), generator=g), torch.randint(0, 3, (8,), generator=g))
            for _ in range(3)]
    weights = []
    for opts in (config.to_options(), tessera.Options()):
        if not weights:
            assert config.batch_size_factor() == 4
        else:
            opts.Training.gradientAccumulation(4)
        net = TwelveLayerBert()
        model = tessera.trainingModel(net, opts, torch.optim.SGD(net.parameters(), lr=0.05))
        for ids, labels in data:
            model(ids, labels)
        info = model._executable.info
        assert (info["num_ipus"], info["pipeline_stages"]) == ((4, 4) if not weights else (1, 1))
        model.copyWeightsToHost()
        weights.append({k: v.detach().clone() for k, v in net.named_parameters()})
    for name, value in weights[1].items():
        close(weights[0][name], value, name)


def test_ipu_config_values_become_options():
    config = tessera.IPUConfig.from_json_file(os.path.join(CONFIGS, "vit-base-ipu.json"))
    # ViT's inference runs on one IPU: its options are real.
    opts = config.to_options(for_inference=True)
    assert opts.device_iterations == 8 and opts.random_seed == 43
    assert opts.toDict()["available_memory_proportion"] == 0.6
    assert opts.toDict()["cache_dir"] == "./exe_cache"
    assert config.batch_size_factor(for_inference=True) == 8
    single = tessera.IPUConfig(gradient_accumulation_steps=4, device_iterations=2,
                               matmul_proportion=0.3, output_mode="all")
    opts = single.to_options(compile_only=True)
    assert opts.Training.gradient_accumulation == 4 and opts.device_iterations == 2
    assert opts.output_mode == tessera.OutputMode.All
    assert opts.toDict()["compile_only"] is True
    assert single.batch_size_factor() == 8
    single.update_from_string("device_iterations=3,seed=7,matmul_proportion=[0.1 0.2],"
                              "recompute_checkpoint_every_layer=true")
    assert (single.device_iterations, single.seed, single.matmul_proportion,
            single.recompute_checkpoint_every_layer) == (3, 7, [0.1, 0.2], True)


def test_ipu_config_errors(tmp_path):
    with pytest.warns(UserWarning, match="unknown key layers_per_gpu"):
        tessera.IPUConfig(layers_per_gpu=[1])
    with pytest.raises(tessera.Error, match="key bogus isn't in the original config"):
        tessera.IPUConfig().update_from_string("bogus=1")
    with pytest.raises(tessera.Error, match="gradient_accumulation_steps must be a positive"):
        tessera.IPUConfig(gradient_accumulation_steps=0)
    assert tessera.IPUConfig(replication_factor=2).to_options().replication_factor == 2
    with pytest.raises(tessera.Error, match="no ipu_config.json"):
        tessera.IPUConfig.from_pretrained(tmp_path)


class Versioned(torch.nn.Module):
    """A module that checks its state dict's version metadata on load, as
    torchvision's MNASNet does."""
    _version = 2

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, *args):
        if local_metadata.get("version") != 2:
            raise ValueError(f"version should be 2, got {local_metadata.get('version')}")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, *args)

    def forward(self, x):
        return torch.relu(self.fc(x))


def test_a_module_whose_state_dict_carries_metadata_compiles():
    torch.manual_seed(0)
    model = Versioned().eval()
    x = torch.randn(2, 4)
    close(tessera.inferenceModel(model)(x), model(x), "versioned module")
