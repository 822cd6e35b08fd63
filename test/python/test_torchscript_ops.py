"""TorchScript operators built from the graph dialect's ops, against
PyTorch: activations (glu, prelu, selu, celu, softshrink, hardshrink),
cumsum (a product with a triangle of ones), one_hot, bucketize, nansum,
count_nonzero, all/any, flip, prod, addmv, indexing by one tensor, random
sampling, var/std, smooth L1, Huber, soft margin and KL losses, pairwise
distances and cosine similarity, scatter_add and scatter_reduce (sum,
mean); and a training step through
them that reaches PyTorch's weights."""
import pytest
import torch

import tessera

X = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(0))
NAN = X.clone()
NAN[0, 0, 0] = float("nan")
BOUNDS = torch.tensor([-1.0, 0.0, 0.5, 1.0])

CASES = {
    "glu": (lambda t: torch.nn.functional.glu(t, 1), [torch.randn(3, 6, 2)]),
    "selu": (torch.nn.functional.selu, [X]),
    "celu": (lambda t: torch.nn.functional.celu(t, 0.7), [X]),
    "softshrink": (lambda t: torch.nn.functional.softshrink(t, 0.3), [X]),
    "hardshrink": (lambda t: torch.nn.functional.hardshrink(t, 0.3), [X]),
    "cumsum_first": (lambda t: torch.cumsum(t, 0), [X]),
    "cumsum_last": (lambda t: torch.cumsum(t, -1), [X]),
    "one_hot": (lambda t: torch.nn.functional.one_hot(t, 7), [torch.randint(0, 7, (3, 4))]),
    "bucketize": (lambda t: torch.bucketize(t, BOUNDS), [X]),
    "bucketize_right_int32": (lambda t: torch.bucketize(t, BOUNDS, out_int32=True, right=True),
                              [torch.tensor([[-1.0, 0.0, 0.5, 0.7, 2.0]])]),
    "nansum": (torch.nansum, [NAN]),
    "nansum_dim": (lambda t: torch.nansum(t, 1, keepdim=True), [NAN]),
    "count_nonzero": (lambda t: torch.count_nonzero(t, 1), [torch.randint(0, 2, (3, 4))]),
    "all": (lambda t: torch.all(t > -3), [X]),
    "any_dim": (lambda t: torch.any(t > 0, 1), [X]),
    "flip": (lambda t: torch.flip(t, [0, 2]), [X]),
    "prod_dim": (lambda t: torch.prod(t, 1), [X]),
    "prod_int": (torch.prod, [torch.randint(1, 3, (2, 3))]),
    "addmv": (lambda a, m, v: torch.addmv(a, m, v, beta=0.5, alpha=2.0),
              [torch.randn(3), torch.randn(3, 4), torch.randn(4)]),
    "index_first": (lambda t, i: t[i], [X, torch.tensor([[0, 2], [1, 1]])]),
    "index_middle": (lambda t, i: t[:, i] * 2, [X, torch.tensor([3, 0])]),
    "index_last": (lambda t, i: t[..., i], [X, torch.tensor([4, 0, 2])]),
    "index_two": (lambda t, i, j: t[i, j], [X, torch.tensor([[0, 2], [1, -1]]),
                                            torch.tensor([3, 0])]),
    "index_two_after_a_dim": (lambda t, i, j: t[:, i, j] * 2,
                              [X, torch.tensor([[0, 2], [3, -1]]), torch.tensor([4, 1])]),
    "var": (torch.var, [X]),
    "var_dim_keepdim": (lambda t: torch.var(t, 1, keepdim=True), [X]),
    "var_biased": (lambda t: torch.var(t, (0, 2), unbiased=False), [X]),
    "std_last": (lambda t: torch.std(t, -1), [X]),
    "std_correction": (lambda t: torch.std(t, dim=1, correction=0), [X]),
    "smooth_l1_loss": (lambda x, y: torch.nn.functional.smooth_l1_loss(x, y, beta=0.5),
                       [X, X.flip(0)]),
    "huber_loss_sum": (lambda x, y: torch.nn.functional.huber_loss(x, y, reduction="sum",
                                                                    delta=0.7), [X, X.flip(0)]),
    "soft_margin_loss": (torch.nn.functional.soft_margin_loss,
                         [X, torch.sign(X.flip(2)) + (X.flip(2) == 0).float()]),
    "kl_div_sum": (lambda x, y: torch.nn.functional.kl_div(x, y, reduction="sum"),
                   [torch.log_softmax(X, 1), torch.softmax(X.flip(0), 1)]),
    "kl_div_log_target": (lambda x, y: torch.nn.functional.kl_div(x, y, log_target=True,
                                                                  reduction="none"),
                          [torch.log_softmax(X, 1), torch.log_softmax(X.flip(0), 1)]),
    "pairwise_distance": (torch.nn.functional.pairwise_distance, [X, X.flip(0)]),
    "pairwise_distance_p1": (lambda x, y: torch.nn.functional.pairwise_distance(
        x, y, p=1.0, keepdim=True), [X, X.flip(0)]),
    "cosine_similarity": (torch.nn.functional.cosine_similarity, [X, X.flip(0)]),
    "cdist": (torch.cdist, [torch.randn(2, 5, 3), torch.randn(2, 4, 3)]),
    "cdist_p1": (lambda x, y: torch.cdist(x, y, p=1), [torch.randn(5, 3), torch.randn(4, 3)]),
    "scatter_add": (lambda a, s, i: a.scatter_add(1, i, s),
                    [torch.randn(3, 5), torch.randn(4, 6), torch.tensor([[0, 1, 2], [4, 4, 0]])]),
    "scatter_reduce_sum_without_self": (
        lambda a, s, i: a.scatter_reduce(1, i, s, "sum", include_self=False),
        [torch.randn(3, 5), torch.randn(4, 6), torch.tensor([[0, 1, 2], [4, 4, 0]])]),
    "scatter_reduce_mean": (
        lambda a, s, i: a.scatter_reduce(0, i, s, "mean"),
        [torch.randn(3, 5), torch.randn(4, 6), torch.tensor([[0, 1, 2], [2, 2, 0]])]),
    "take_along_dim": (lambda t, i: torch.take_along_dim(t, i, 2),
                       [X, torch.tensor([[[4, 0]], [[1, 1]], [[2, 3]]])]),
}


class Op(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


@pytest.mark.parametrize("name", sorted(CASES))
def test_operator_matches_pytorch(name):
    fn, args = CASES[name]
    got = tessera.inferenceModel(Op(fn))(*args)
    want = fn(*args)
    if want.dtype == torch.int64:
        want = want.to(torch.int32)  # PopTorch's int64 results come back int32
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("channels", [4, 1])
def test_prelu(channels):
    torch.manual_seed(0)
    prelu = torch.nn.PReLU(channels)
    with torch.no_grad():
        torch.nn.init.uniform_(prelu.weight, -0.5, 0.5)
        torch.testing.assert_close(tessera.inferenceModel(prelu)(X), prelu(X))


class Composite(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 6)
        self.act = torch.nn.PReLU()

    def forward(self, x, y):
        h = torch.nn.functional.glu(self.act(self.fc(x)), -1)
        h = torch.nn.functional.selu(torch.cumsum(torch.flip(h, [1]), 1))
        return h, torch.nn.functional.mse_loss(h, y)


def test_training_through_the_compositions_reaches_pytorchs_weights():
    torch.manual_seed(0)
    net, reference = Composite(), Composite()
    reference.load_state_dict(net.state_dict())
    x, y = torch.randn(4, 6), torch.randn(4, 3)
    training = tessera.trainingModel(net, tessera.Options(),
                                     tessera.optim.SGD(net.parameters(), lr=0.1))
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(3):
        training(x, y)
        optimizer.zero_grad()
        reference(x, y)[1].backward()
        optimizer.step()
    for (name, got), want in zip(net.state_dict().items(), reference.state_dict().values()):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=name)


class Gathers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 6)

    def forward(self, x, i, y):
        h = self.fc(x)
        g = torch.gather(h, 1, i) + torch.take_along_dim(h, i[:, :2], 1).sum(1, keepdim=True)
        rows = torch.gather(h[:3], 0, torch.tensor([[2, 0, 1, 1, 0, 2]]))[:, :3]
        g = torch.cat([g, rows.expand(4, 3)], 1)
        return g, torch.nn.functional.mse_loss(g, y)


def test_training_through_gathers_reaches_pytorchs_weights():
    """gather_elements' gradient (graph-autodiff), repeated and partial
    indices included."""
    torch.manual_seed(0)
    net, reference = Gathers(), Gathers()
    reference.load_state_dict(net.state_dict())
    x, y = torch.randn(4, 6), torch.randn(4, 6)
    i = torch.tensor([[0, 5, 5], [1, 1, 2], [3, 5, 0], [4, 4, 4]])
    training = tessera.trainingModel(net, tessera.Options(),
                                     tessera.optim.SGD(net.parameters(), lr=0.1))
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(3):
        training(x, i, y)
        optimizer.zero_grad()
        reference(x, i, y)[1].backward()
        optimizer.step()
    for (name, got), want in zip(net.state_dict().items(), reference.state_dict().values()):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=name)


def test_what_depends_on_the_data_is_refused_by_name():
    with pytest.raises(tessera.Error, match="one_hot without num_classes"):
        tessera.inferenceModel(Op(lambda t: torch.nn.functional.one_hot(t)))(
            torch.randint(0, 3, (4,)))
    with pytest.raises(tessera.Error, match="scatter_reduce with reduce 'amax'"):
        tessera.inferenceModel(Op(lambda a, s, i: a.scatter_reduce(0, i, s, "amax")))(
            torch.randn(3, 5), torch.randn(2, 3), torch.tensor([[0, 1, 2], [2, 2, 0]]))
    with pytest.raises(tessera.Error, match="dimensions that are not next to each other"):
        tessera.inferenceModel(Op(lambda t, i: t[i, :, i]))(X, torch.tensor([0, 1]))
    with pytest.raises(tessera.Error, match="indexing with a boolean mask"):
        tessera.inferenceModel(Op(lambda t: t[t > 0]))(X)
    with pytest.raises(tessera.Error, match="cumsum of integers"):
        tessera.inferenceModel(Op(lambda t: torch.cumsum(t, 0)))(torch.arange(4))


class Random(torch.nn.Module):
    def forward(self, mean, std):
        return (torch.rand(400, 250), torch.randn_like(mean), torch.normal(mean, std),
                torch.bernoulli(torch.full((400, 250), 0.3)),
                torch.empty(400, 250).uniform_(2, 5),
                torch.distributions.Normal(mean, std).sample())


def test_random_sampling_draws_from_the_programs_generator():
    """rand, randn_like, normal, bernoulli, uniform_ and a distribution's
    sample: their statistics (100,000 draws each), fresh numbers every run,
    the same numbers for the same seed."""
    mean, std = torch.full((400, 250), 3.0), torch.full((400, 250), 2.0)
    model = tessera.inferenceModel(Random(), tessera.Options().randomSeed(7))
    u, n, normal, b, uniform, sample = model(mean, std)
    assert 0 <= float(u.min()) and float(u.max()) < 1 and abs(float(u.mean()) - 0.5) < 0.01
    assert abs(float(n.mean())) < 0.02 and abs(float(n.std()) - 1) < 0.02
    assert abs(float(normal.mean()) - 3) < 0.03 and abs(float(normal.std()) - 2) < 0.03
    assert abs(float(sample.mean()) - 3) < 0.03 and abs(float(sample.std()) - 2) < 0.03
    assert set(b.unique().tolist()) == {0.0, 1.0} and abs(float(b.mean()) - 0.3) < 0.01
    assert 2 <= float(uniform.min()) and float(uniform.max()) < 5
    again = model(mean, std)
    assert not torch.equal(again[0], u)
    same = tessera.inferenceModel(Random(), tessera.Options().randomSeed(7))(mean, std)
    assert torch.equal(same[0], u) and torch.equal(same[2], normal)
