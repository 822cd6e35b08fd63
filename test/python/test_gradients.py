"""Every gradient rule of graph-autodiff against finite differences and
PyTorch autograd.

Each case is a module whose parameters feed the ops under test (inputs too
are parameters, so their gradients are checked), with the loss
sum(out * r) for a random r given as the model's input: its gradient is
J^T r. Tessera trains it for one SGD step with learning rate 1 on the IPU
model, so a parameter's gradient is its value before minus after. That
gradient must match PyTorch's autograd in float64 and, along random
directions, central finite differences of the float64 forward.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conftest import run, tool


class Case(torch.nn.Module):
    """Parameters from `shapes` (values from `init`), out = fn(*params)."""

    def __init__(self, fn, shapes, init=None):
        super().__init__()
        g = torch.Generator().manual_seed(len(shapes))
        self.fn = fn
        self.params = torch.nn.ParameterList(
            [torch.nn.Parameter(init(torch.randn(s, generator=g)) if init else
                                torch.randn(s, generator=g)) for s in shapes])

    def forward(self, r):
        return (self.fn(*self.params) * r).sum()


def unaries(p):
    a = p.abs() + 0.5
    rows = [-p[0], p[1].exp(), a[2].log(), a[3].sqrt(), 1 / a[4], p[5].tanh(),
            p[6].sigmoid(), p[7].relu(), p[8].abs(), torch.erf(p[9]), p[10].sin(),
            p[11].cos(), p[12].atan(), F.softplus(p[13]), F.leaky_relu(p[14], 0.1),
            F.elu(p[15]), F.hardsigmoid(p[16]), F.hardswish(p[17]),
            p[18].clamp(-0.5, 0.7), F.gelu(p[19]), a[20] ** 3, a[21].rsqrt()]
    return torch.stack(rows)


def binaries(a, b):
    pos = a.abs() + 0.5
    return torch.stack([a + b, a - b, a * b, a / (b.abs() + 0.5), pos ** b,
                        torch.maximum(a, b), torch.minimum(a, b),
                        torch.where(a > b, a * 2, b * 3)])


TOKENS = torch.tensor([[1, 3, 3], [0, 9, 1]])
COLUMNS = torch.tensor([5, 0, 5, 2])
# BERT's segment ids: many indices into a 2-row table, whose gradient the
# planner splits over slices of the indices (partial gradients, combined).
SEGMENTS = torch.randint(0, 2, (4, 256), generator=torch.Generator().manual_seed(7))

CASES = {
    "unary": (unaries, [(22, 8)]),
    "binary_broadcast": (binaries, [(3, 1, 4), (2, 4)]),
    "matmul_broadcast": (lambda a, b, v, m: torch.cat(
        [(a @ b).flatten(), v @ m, (m.t() @ v)]), [(2, 1, 3, 4), (5, 4, 2), (4,), (4, 3)]),
    "conv_grouped_strided_dilated": (lambda x, w, bias: F.conv2d(
        x, w, bias, stride=2, padding=1, dilation=2, groups=2),
        [(2, 4, 9, 9), (6, 2, 3, 3), (6,)]),
    "conv_5x5_and_1x1": (lambda x, w, w1: F.conv2d(F.conv2d(x, w, padding=2), w1),
                         [(1, 3, 6, 6), (4, 3, 5, 5), (2, 4, 1, 1)]),
    "pooling": (lambda x: torch.cat([
        F.max_pool2d(x, 3, 2, 1).flatten(),
        F.avg_pool2d(x, 3, 2, 1, count_include_pad=False).flatten(),
        F.adaptive_avg_pool2d(x, (3, 3)).flatten(),
        x.mean((2, 3)).flatten()]), [(2, 3, 6, 6)]),
    "reductions_softmax": (lambda x: torch.cat([
        x.sum(1).flatten(), x.mean(2, keepdim=True).flatten(), x.amax(1).flatten(),
        x.amin(2).flatten(), F.softmax(x, 1).flatten(), F.log_softmax(x, 2).flatten()]),
        [(3, 4, 5)]),
    "norms": (lambda x, w, b, g: torch.cat([
        F.layer_norm(x, (6,), w, b).flatten(),
        F.group_norm(x.reshape(2, 4, 3, 2), 2, g, g * 0.5).flatten(),
        F.batch_norm(x.reshape(2, 4, 6), None, None, g, g, training=True).flatten()]),
        [(2, 4, 6), (6,), (6,), (4,)]),
    "shapes": (lambda x, y: torch.cat([
        x.reshape(4, 6).t().flatten(), x.permute(2, 0, 1).flatten(),
        y.expand(3, 2, 4).flatten(), x[:, ::2, 1:].flatten(), x.flip(1).flatten(),
        torch.cat([x, x * 2], 1).flatten(), F.pad(x, (1, 2, 0, 1)).flatten(),
        x[:, 1].flatten(), x[..., -1].flatten()]),
        [(2, 3, 4), (2, 1)]),
    # Repeated indices add their gradients into one row.
    "gather_embedding": (lambda t, u: torch.cat([
        F.embedding(TOKENS, t).flatten(), u[:, COLUMNS].flatten()]), [(10, 4), (3, 6)]),
    "gather_segments": (lambda t: F.embedding(SEGMENTS, t).flatten(), [(2, 4)]),
}


def tessera_gradients(case, r, tmp_path):
    onnx_path = tmp_path / "case.onnx"
    torch.onnx.export(case, r, str(onnx_path), input_names=["r"], output_names=["loss"],
                      opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    tess = tmp_path / "case.tess"
    result = run([tool("tessera-compile"), str(onnx_path), "--train", "--loss",
                  "output:loss", "--optimizer", "sgd:lr=1", "--micro-batch-size",
                  str(r.shape[0]), "-o", str(tess)])
    assert result.returncode == 0, result.stderr
    np.savez(tmp_path / "data.npz", r=r.numpy())
    result = run([tool("tessera-run"), str(tess), "--train-data", str(tmp_path / "data.npz"),
                  "--steps", "1", "--save-weights", str(tmp_path / "w.npz")])
    assert result.returncode == 0, result.stderr
    saved = np.load(tmp_path / "w.npz")
    return {name: p.detach().numpy().astype(np.float64) - saved[name].astype(np.float64)
            for name, p in case.named_parameters()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient_rules(name, tmp_path):
    fn, shapes = CASES[name]
    case = Case(fn, shapes)
    with torch.no_grad():
        out = case.fn(*case.params)
    r = torch.randn(out.shape, generator=torch.Generator().manual_seed(99))
    got = tessera_gradients(case, r, tmp_path)

    # PyTorch autograd in float64.
    ref = Case(fn, shapes).double()
    ref.load_state_dict({k: v.double() for k, v in case.state_dict().items()})
    loss = ref(r.double())
    grads = torch.autograd.grad(loss, list(ref.parameters()))
    for (pname, _), want in zip(ref.named_parameters(), grads):
        want = want.numpy()
        scale = max(np.abs(want).max(), 1e-3)
        np.testing.assert_allclose(got[pname], want, rtol=2e-3, atol=2e-4 * scale,
                                   err_msg=f"{name}: {pname} against autograd")

    # Central finite differences along random directions, float64.
    g = torch.Generator().manual_seed(5)
    params = list(ref.parameters())
    for _ in range(3):
        dirs = [torch.randn(p.shape, generator=g, dtype=torch.float64) for p in params]
        h = 1e-6
        with torch.no_grad():
            for p, d in zip(params, dirs):
                p.add_(h * d)
            plus = ref(r.double()).item()
            for p, d in zip(params, dirs):
                p.sub_(2 * h * d)
            minus = ref(r.double()).item()
            for p, d in zip(params, dirs):
                p.add_(h * d)
        fd = (plus - minus) / (2 * h)
        directional = sum(float((got[n] * d.numpy()).sum())
                          for (n, _), d in zip(ref.named_parameters(), dirs))
        assert directional == pytest.approx(fd, rel=2e-3, abs=1e-3), name
