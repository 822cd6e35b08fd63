"""`import poptorch` on Tessera: a script written for PopTorch runs unchanged.

The first test is the shape of Graphcore's PopTorch MNIST tutorial on
scikit-learn's 8x8 digits (nothing downloaded): poptorch.Options with the
setters such scripts call, poptorch.DataLoader loading asynchronously,
poptorch.optim, a trainingModel, then an inferenceModel of the trained
module measuring accuracy. The others check PopTorch's names and
behaviours one by one.
"""
import os

import numpy as np
import pytest
import torch

import poptorch


class ClassificationModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.pool = torch.nn.MaxPool2d(2)
        self.relu = torch.nn.ReLU()
        self.fc = torch.nn.Linear(16 * 4 * 4, 10)
        self.loss = torch.nn.CrossEntropyLoss()

    def forward(self, x, labels=None):
        x = self.pool(self.relu(self.conv1(x)))
        x = self.relu(self.conv2(x))
        x = self.fc(torch.flatten(x, 1))
        if self.training:
            return x, self.loss(x, labels)
        return x


def digits():
    from sklearn.datasets import load_digits
    data = load_digits()
    images = torch.tensor(data.images[:, None] / 16.0, dtype=torch.float32)
    return torch.utils.data.TensorDataset(images, torch.tensor(data.target))


def test_a_poptorch_training_script_runs_unchanged():
    assert poptorch.__tessera__ and poptorch.ipuHardwareIsAvailable()
    torch.manual_seed(0)
    dataset = digits()
    train = torch.utils.data.Subset(dataset, range(0, 1440))
    test = torch.utils.data.Subset(dataset, range(1440, len(dataset)))

    opts = poptorch.Options()
    opts.deviceIterations(4)
    opts.randomSeed(0)
    opts.Training.gradientAccumulation(2)
    opts.Training.setMeanAccumulationAndReplicationReductionStrategy(
        poptorch.MeanReductionStrategy.Running)
    opts.Precision.runningStatisticsAlwaysFloat(True)
    opts.useIpuModel(True)
    opts.logCycleCount(True)
    loader = poptorch.DataLoader(opts, train, batch_size=8, shuffle=True,
                                 mode=poptorch.DataLoaderMode.Async)
    assert loader.combinedBatchSize == 64 and len(loader) == 1440 // 64

    model = ClassificationModel()
    optimizer = poptorch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    training = poptorch.trainingModel(model, options=opts, optimizer=optimizer)
    for epoch in range(10):
        for data, labels in loader:
            output, loss = training(data, labels)
    # Output mode Final, training's default: the last micro-batch's.
    assert output.shape == (8, 10), output.shape
    assert training.cycleCount() > 0
    training.detachFromDevice()

    # The module itself holds the trained weights: an inference model of
    # it, on another loader, as the tutorial validates.
    model.eval()
    test_opts = poptorch.Options().deviceIterations(5)
    inference = poptorch.inferenceModel(model, test_opts)
    test_loader = poptorch.DataLoader(test_opts, test, batch_size=5)
    correct = total = 0
    for data, labels in test_loader:
        correct += int((inference(data).argmax(1) == labels).sum())
        total += len(labels)
    assert total == 350
    print(f"digits test accuracy {correct / total:.3f}")
    assert correct / total > 0.9, correct / total
    # The CPU agrees with the device on the same weights.
    with torch.no_grad():
        data, labels = next(iter(test_loader))
        torch.testing.assert_close(inference(data), model(data), rtol=1e-4, atol=1e-4)


def test_is_running_on_ipu_for_loop_and_hints():
    seen = []

    class Branches(torch.nn.Module):
        def forward(self, x):
            seen.append(poptorch.isRunningOnIpu())
            y = poptorch.for_loop(3, lambda t: t * 2 + 1, [x])[0]
            y = poptorch.nop(y)
            return y if poptorch.isRunningOnIpu() else y * 0

    x = torch.randn(2, 3)
    out = poptorch.inferenceModel(Branches())(x)
    assert True in seen
    torch.testing.assert_close(out, ((x * 2 + 1) * 2 + 1) * 2 + 1)
    assert torch.equal(Branches()(x), torch.zeros(2, 3))
    assert not poptorch.isRunningOnIpu()
    with pytest.warns(UserWarning, match="set_available_memory"):
        assert poptorch.set_available_memory(x, 0.3) is x
    with pytest.raises(poptorch.Error, match="body returns 2 tensors for 1 inputs"):
        poptorch.for_loop(2, lambda t: (t, t), [x])


def test_begin_block_keeps_the_modules_names_and_stages_name_their_ipus():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    keys = list(model.state_dict())
    assert poptorch.BeginBlock(model[0], "first") is model[0]
    assert poptorch.BeginBlock(model[2], "second") is model[2]
    assert list(model.state_dict()) == keys
    with pytest.raises(poptorch.Error, match="already begins a block"):
        poptorch.BeginBlock(model[2], "again")
    opts = poptorch.Options().deviceIterations(2)
    opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.Stage("first").ipu(0),
                                                          poptorch.Stage("second").ipu(1)))
    x = torch.randn(4, 8)
    pipelined = poptorch.inferenceModel(model, opts)
    torch.testing.assert_close(pipelined(x), model(x), rtol=1e-4, atol=1e-5)
    assert pipelined._executable.info["pipeline_stages"] == 2
    poptorch.removeBlocks(model)
    assert poptorch.inferenceModel(model, poptorch.Options().deviceIterations(2))(x).shape == (4, 4)


def test_options_as_poptorch_reads_and_refuses_them(monkeypatch):
    opts = poptorch.Options()
    opts.from_json('{"deviceIterations": 2, "Training.gradientAccumulation": 3, '
                   '"outputMode": "OutputMode.All"}')
    assert opts.device_iterations == 2 and opts.Training.gradient_accumulation == 3
    assert poptorch.OutputMode.Final == 0 and poptorch.OutputMode.All == 2
    assert poptorch.enums.VariableRetrievalMode.AllReplicas == 2
    clone = opts.clone().deviceIterations(5)
    assert opts.device_iterations == 2 and clone.device_iterations == 5
    # Distributed is PopTorch's (tessera-launch's instances; see test_distributed.py).
    clone.Distributed.configureProcessId(1, 2)
    assert (clone.Distributed.processId, clone.Distributed.numProcesses) == (1, 2)
    assert opts.Distributed.numProcesses == 1
    # What Tessera cannot do is an error naming it.
    for refused, match in [
            (lambda: opts.enableSyntheticData(True), "enableSyntheticData"),
            (lambda: opts.TensorLocations.numIOTiles(32), "TensorLocations.numIOTiles"),
            (lambda: opts._Popart.set("saveInitializersToFile", "x.onnx"), "_Popart.set"),
            (lambda: opts.anchorTensor("grad", "Gradient___x"), "anchorTensor")]:
        with pytest.raises(poptorch.Error, match=match) as info:
            refused()
        assert info.value.message == str(info.value)
        assert info.value.type == "tessera_error"
    # connectionType(Never) compiles without running, as PopTorch's.
    never = poptorch.Options().connectionType(poptorch.ConnectionType.Never)
    model = poptorch.inferenceModel(torch.nn.Linear(3, 2), never)
    model.compile(torch.randn(1, 3))
    assert model.isCompiled() and not model.isAttachedToDevice()
    monkeypatch.setenv("POPTORCH_IPU_MODEL", "1")
    assert not poptorch.ipuHardwareIsAvailable()
    with pytest.raises(AssertionError, match="No IPU hardware"):
        poptorch.ipuHardwareVersion()


def test_asynchronous_data_accessor_keeps_the_order():
    dataset = torch.utils.data.TensorDataset(torch.arange(40.0).reshape(20, 2))
    opts = poptorch.Options()
    loader = poptorch.DataLoader(opts, dataset, batch_size=4)
    accessor = poptorch.AsynchronousDataAccessor(loader, buffer_size=2)
    assert len(accessor) == 5
    for _ in range(2):  # two epochs
        batches = [b[0] for b in accessor]
        assert torch.equal(torch.cat(batches), dataset.tensors[0])
    # Leaving an epoch early stops the loading thread.
    for batch in accessor:
        break
    accessor.terminate()
    # A failing dataset's error reaches the caller.

    class Broken(torch.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            raise ValueError("bad sample")

    with pytest.raises(ValueError, match="bad sample"):
        list(poptorch.DataLoader(opts, Broken(), mode=poptorch.DataLoaderMode.Async))


def test_dynamic_slice_and_update_read_their_start_on_the_device():
    class Slicer(torch.nn.Module):
        def forward(self, t, start):
            return poptorch.dynamic_slice(t, 0, start, 3, 2) * 2

    class Updater(torch.nn.Module):
        def forward(self, t, src, start):
            return poptorch.dynamic_update(t, src, 1, start, 2)

    t = torch.arange(24.0).reshape(8, 3)
    slicer = poptorch.inferenceModel(Slicer())
    # Compiled with one start, run with another: the start is an input.
    slicer.compile(t, torch.tensor([0]))
    torch.testing.assert_close(slicer(t, torch.tensor([2])), t[2:5:2] * 2)
    torch.testing.assert_close(slicer(t, torch.tensor([1])), t[1:4:2] * 2)
    x, src = torch.zeros(2, 5), torch.ones(2, 2)
    updater = poptorch.inferenceModel(Updater())
    for start in (0, 3):
        want = x.clone()
        want[:, start:start + 2] = src
        torch.testing.assert_close(updater(x, src, torch.tensor([start])), want)
    with pytest.raises(poptorch.Error, match="start and end of a slice must be different"):
        poptorch.dynamic_slice(t, 0, torch.tensor([1]), 0, 1)


def test_adamw_without_bias_correction_uses_the_moments_as_they_are():
    """poptorch.optim.AdamW(bias_correction=False) (PopART's ADAMW_NO_BIAS):
    w <- w (1 - lr wd) - lr m / (sqrt(v) + eps), against that update by hand."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    x, y = torch.randn(8, 4), torch.randn(8, 2)

    class WithLoss(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x, y):
            out = self.net(x)
            return out, torch.nn.functional.mse_loss(out, y)

    lr, betas, eps, wd = 0.01, (0.9, 0.999), 1e-8, 0.01
    optimizer = poptorch.optim.AdamW(model.parameters(), lr=lr, betas=betas, eps=eps,
                                     weight_decay=wd, bias_correction=False)
    training = poptorch.trainingModel(WithLoss(model), poptorch.Options(), optimizer)
    reference = torch.nn.Linear(4, 2)
    reference.load_state_dict(weights)
    moments = {n: (torch.zeros_like(p), torch.zeros_like(p))
               for n, p in reference.named_parameters()}
    for _ in range(3):
        training(x, y)
        reference.zero_grad()
        torch.nn.functional.mse_loss(reference(x), y).backward()
        with torch.no_grad():
            for n, p in reference.named_parameters():
                m, v = moments[n]
                m.mul_(betas[0]).add_((1 - betas[0]) * p.grad)
                v.mul_(betas[1]).add_((1 - betas[1]) * p.grad * p.grad)
                p.mul_(1 - lr * wd).sub_(lr * m / (v.sqrt() + eps))
    for name, want in reference.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], want, rtol=1e-4, atol=1e-6,
                                   msg=name)


def test_compile_hooks_run_around_each_compile():
    calls = []
    pre = poptorch.registerPreCompileHook(lambda: calls.append("pre"))
    post = poptorch.registerPostCompileHook(lambda: calls.append("post"))
    try:
        model = poptorch.inferenceModel(torch.nn.Linear(3, 2))
        model(torch.randn(1, 3))
        model(torch.randn(1, 3))  # no compile: no hooks
        assert calls == ["pre", "post"]
        pre.remove()
        poptorch.inferenceModel(torch.nn.Linear(3, 4))(torch.randn(1, 3))
        assert calls == ["pre", "post", "post"]
    finally:
        pre.remove()
        post.remove()
    with pytest.raises(RuntimeError, match="Pre-compile hook must be callable"):
        poptorch.registerPreCompileHook(3)
