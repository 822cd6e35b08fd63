"""PopTorch's calling conventions: what a model takes and returns, and the
user's module kept in sync with the device.

Inputs: tuples, lists and dicts of tensors (LSTM's (h0, c0)), None, Python
numbers, keyword arguments in any order, 0-d tensors, no inputs at all;
outputs with None among the tensors. A module trained by trainingModel
shows the device's weights when read, called on the CPU, saved or copied.
"""
import copy
import io

import pytest
import torch

import tessera


def close(got, want, what):
    if isinstance(want, dict):
        assert got.keys() == want.keys(), what
        for k in want:
            close(got[k], want[k], f"{what}[{k!r}]")
    elif isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want), what
        for i, (g, w) in enumerate(zip(got, want)):
            close(g, w, f"{what}[{i}]")
    elif isinstance(want, torch.Tensor):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=what)
    else:
        assert got == want, what


class Nested(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, pair, scale=1.0, extra=None, options={"k": 2}):
        a, b = pair
        y = self.fc(a) * scale + b.sum(-1, keepdim=True) * options["k"]
        if extra is not None:
            y = y + extra["bias"]
        return y, None, {"double": y * 2, "rows": [y[:, 0], y[:, 1]]}


def test_nested_inputs_constants_and_outputs_with_none():
    torch.manual_seed(0)
    model = Nested().eval()
    pair = (torch.randn(2, 4), torch.randn(2, 5))
    ipu = tessera.inferenceModel(model)
    with torch.no_grad():
        close(ipu(pair), model(pair), "a tuple")
        # Another number compiles again; the same one does not.
        close(ipu(pair, scale=2.0), model(pair, scale=2.0), "a number")
        close(ipu(pair, scale=2.0), model(pair, scale=2.0), "the same number")
        assert ipu.compilations == 2
        bias = {"bias": torch.ones(2, 3)}
        close(tessera.inferenceModel(model)(pair, 0.5, bias, options={"k": 3}),
              model(pair, 0.5, bias, options={"k": 3}), "a dict and keywords")
    # Tensors where the compiled model had none are another model.
    with pytest.raises(tessera.Error, match=r"compiled for the inputs pair_0, pair_1; got "
                                            r"pair_0, pair_1, extra_bias"):
        ipu(pair, 2.0, bias)
    with pytest.raises(tessera.Error, match=r"argument extra\['bias'\] is a object"):
        tessera.inferenceModel(model)(pair, 1.0, {"bias": object()})


def test_lstm_state_keyword_order_zero_dim_and_no_inputs():
    torch.manual_seed(0)

    class WithState(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(4, 8, batch_first=True)

        def forward(self, x, state):
            return self.lstm(x, state)

    model = WithState().eval()
    x, state = torch.randn(1, 3, 4), (torch.randn(1, 1, 8), torch.randn(1, 1, 8))
    with torch.no_grad():
        close(tessera.inferenceModel(model)(x, state), model(x, state), "(h0, c0)")
        # Keywords in any order are bound to the forward's parameters.
        close(tessera.inferenceModel(model)(state=state, x=x), model(x, state), "keywords")

    class Scale(torch.nn.Module):
        def forward(self, x, factor):
            return x * factor

    x2, factor = torch.randn(2, 3), torch.tensor(3.0)
    close(tessera.inferenceModel(Scale())(x2, factor), x2 * factor, "a 0-d tensor")
    opts = tessera.Options().deviceIterations(2)
    with pytest.raises(tessera.Error, match="input 'factor' is a 0-d tensor: with device "
                                            "iterations 2 x replicas 1 = 2"):
        tessera.inferenceModel(Scale(), opts)(x2, factor)

    class Constant(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3))

        def forward(self):
            return self.w * 2

    c = Constant()
    with torch.no_grad():
        close(tessera.inferenceModel(c)(), c(), "no inputs")


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.bn = torch.nn.BatchNorm1d(3)

    def forward(self, x, y):
        out = self.bn(self.fc(x))
        return out, torch.nn.functional.cross_entropy(out, y)


def test_the_users_module_sees_the_devices_weights():
    torch.manual_seed(0)
    net = Classifier()
    before = net.fc.weight.detach().clone()
    held = net.fc.weight  # a reference taken before training
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    training = tessera.trainingModel(net, tessera.Options(),
                                     tessera.optim.SGD(net.parameters(), lr=0.5))
    for _ in range(3):
        training(x, y)
    device = {k: torch.from_numpy(v) for k, v in training._executable.trained_weights()}
    # Read through the module: the device's values, in the same tensors.
    assert not torch.equal(net.fc.weight, before)
    torch.testing.assert_close(net.fc.weight.detach(), device["fc.weight"])
    assert torch.equal(held, net.fc.weight)
    assert int(net.bn.num_batches_tracked) == 3
    training(x, y)
    torch.testing.assert_close(net.state_dict()["bn.running_mean"],
                               torch.from_numpy(dict(training._executable.trained_weights())
                                                ["bn.running_mean"]))
    # A CPU call, saving and copying see them too, as the user's own class.
    training(x, y)
    expected = {k: v.clone() for k, v in training.state_dict().items()}
    net.eval()
    out, _ = net(x, y)
    net.train()
    reference = Classifier()
    reference.load_state_dict(expected)
    reference.eval()
    torch.testing.assert_close(out, reference(x, y)[0])
    buffer = io.BytesIO()
    torch.save(net, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)
    assert type(loaded) is Classifier and type(copy.deepcopy(net)) is Classifier
    torch.testing.assert_close(loaded.fc.weight, expected["fc.weight"])
    assert isinstance(net, Classifier)
    # destroy() gives the module back as it was, with the last weights.
    training(x, y)
    training.destroy()
    assert type(net) is Classifier and "_tessera_executor" not in net.__dict__
    assert not torch.equal(net.fc.weight, expected["fc.weight"])
