"""ParameterList, ParameterDict and DataParallel against torch 2.13: the names parameters
are registered under (``named_parameters``, ``state_dict``), the list and dict behaviour,
repr, errors, and training steps with an optimizer."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, assert_raises_like_torch

RNG = np.random.RandomState(3)
ARRAYS = {
    k: RNG.standard_normal(shape).astype(np.float32)
    for k, shape in {
        "w0": (4, 5),
        "w1": (5, 5),
        "w2": (5, 3),
        "scale": (3,),
        "bias": (3,),
        "shift": (1,),
        "x": (6, 4),
    }.items()
}


def _net(ns):
    """A model holding its weights in a ParameterList and a ParameterDict, both filled by
    every way torch allows (plain tensors become Parameters)."""
    t = lambda k: ns.tensor(ARRAYS[k])  # noqa: E731

    class Net(ns.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = ns.nn.ParameterList([t("w0")])
            self.layers.append(ns.nn.Parameter(t("w1")))
            self.layers += [t("w2")]
            self.extra = ns.nn.ParameterDict({"scale": t("scale"), "bias": t("bias")})
            self.extra["shift"] = t("shift")

        def forward(self, x):
            for w in self.layers:
                x = ns.tanh(x @ w)
            return x * self.extra["scale"] + self.extra["bias"] + self.extra["shift"]

    return Net()


def _names(m):
    return [n for n, _ in m.named_parameters()], list(m.state_dict())


def _train(ns, model, opt_name, steps=3):
    """``steps`` optimizer steps on a squared loss; the losses and the parameters after
    (a small learning rate: Adam's first steps are about ``lr * sign(grad)``, which turns
    float32 round-off in a gradient near 0 into a step difference up to ``lr``)."""
    opt = getattr(ns.optim, opt_name)(model.parameters(), lr=0.01)
    x = ns.tensor(ARRAYS["x"])
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().numpy() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("wrap", [False, True], ids=["plain", "DataParallel"])
@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_containers_register_train_and_step_as_torch(opt_name, wrap):
    def build(ns):
        m = _net(ns)
        return ns.nn.DataParallel(m) if wrap else m

    m, tm = build(staged), build(torch)
    assert _names(m) == _names(tm)
    assert all(isinstance(p, staged.nn.Parameter) for p in m.parameters())
    assert len(list(m.parameters())) == 6
    losses, params = _train(staged, m, opt_name)
    tlosses, tparams = _train(torch, tm, opt_name)
    np.testing.assert_allclose(losses, tlosses, rtol=1e-5)
    assert list(params) == list(tparams)
    for k, v in params.items():
        np.testing.assert_allclose(v, tparams[k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_state_dict_from_torch_loads():
    tm = torch.nn.DataParallel(_net(torch))
    with torch.no_grad():
        for p in tm.parameters():
            p.mul_(-0.5)
    m = staged.nn.DataParallel(_net(staged))
    m.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
    x = ARRAYS["x"]
    assert_close(m(staged.tensor(x)), tm(torch.tensor(x)).detach(), rtol=1e-6, atol=1e-6)


def test_parameter_list_behaves_as_torchs():
    def use(ns):
        pl = ns.nn.ParameterList([ns.zeros(2), ns.nn.Parameter(ns.ones(3, 4)), "a", 1.5])
        pl.extend((ns.zeros(1, dtype=ns.float64),))
        pl[0] = ns.ones(2)  # a tensor becomes a Parameter
        pl.append(ns.nn.Linear(2, 2))  # a module is registered as one
        sub = pl[1:5:2]
        return (
            len(pl),
            [type(v).__name__ for v in pl],
            [tuple(p.shape) for p in pl.parameters()],
            _names(pl),
            type(sub).__name__,
            len(sub),
            tuple(pl[-1].weight.shape),
            pl[2],
            isinstance(pl[0], ns.nn.Parameter),
            "0" in dir(pl),
            repr(pl).replace("torch.", "staged."),
        )

    ours, theirs = use(staged), use(torch)
    assert ours == theirs
    assert ours[-1] == (
        "ParameterList(\n"
        "    (0): Parameter containing: [staged.float32 of size 2]\n"
        "    (1): Parameter containing: [staged.float32 of size 3x4]\n"
        "    (2): Object of type: str\n"
        "    (3): Object of type: float\n"
        "    (4): Parameter containing: [staged.float64 of size 1]\n"
        "    (5): Object of type: Linear\n"
        "  (5): Linear(in_features=2, out_features=2, bias=True)\n"
        ")"
    )
    single = staged.nn.ParameterList([staged.zeros(3, 4)])
    assert (
        repr(single) == "ParameterList(  (0): Parameter containing: [staged.float32 of size 3x4])"
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda ns: ns.nn.ParameterList([ns.zeros(1)])[1],
        lambda ns: ns.nn.ParameterList([ns.zeros(1)])[-2],
        lambda ns: ns.nn.ParameterList([ns.zeros(1)])["0"],
        lambda ns: ns.nn.ParameterList().extend(ns.zeros(2)),
        lambda ns: ns.nn.ParameterList([ns.zeros(1)])(ns.zeros(1)),
        lambda ns: ns.nn.ParameterDict()(ns.zeros(1)),
        lambda ns: ns.nn.ParameterDict()[0],
        lambda ns: ns.nn.ParameterDict().update(3),
        lambda ns: ns.nn.ParameterDict().update([("a", ns.zeros(1), 3)]),
        lambda ns: ns.nn.ParameterDict().update([3]),
        lambda ns: ns.nn.ParameterDict({"a": ns.zeros(1)}).pop("b"),
    ],
)
def test_container_errors_as_torchs(call):
    assert_raises_like_torch(call)


def test_parameter_dict_behaves_as_torchs():
    def use(ns):
        z = ns.zeros
        pd = ns.nn.ParameterDict({"b": z(2), "a": z(3)})  # a plain dict: sorted keys
        pd.update(OrderedDict([("d", z(1)), ("c", ns.nn.Parameter(z(4)))]))  # kept in order
        pd.update([("e", 2.0), ["f", z(2, 2)]])
        pd["g"] = z(5, dtype=ns.float64)
        got = [list(pd), _names(pd), repr(pd)]
        got.append([pd.pop("a").shape[0], pd.popitem()[0], pd.setdefault("h", z(6)).shape[0]])
        got.append([pd.setdefault("b").shape[0], pd.get("zz", 7), pd.get("e"), "c" in pd])
        del pd["d"]
        got.append([list(reversed(pd)), list(pd.keys()), [type(v).__name__ for v in pd.values()]])
        merged = pd | ns.nn.ParameterDict({"x": z(1)})
        pd |= OrderedDict(y=z(2))
        copy = pd.copy()
        got.append([list(merged), list(pd), list(copy), copy["b"] is pd["b"]])
        got.append([list(pd.fromkeys(["p", "q"], z(1)).items())[1][0], len(pd)])
        pd.clear()
        got.append([len(pd), _names(pd)])
        return got

    assert use(staged) == use(torch)


def test_parameter_dict_repr_matches_torch():
    def build(ns):
        return ns.nn.Sequential(
            ns.nn.ParameterDict({"w": ns.zeros(3, 4), "n": 1}),
            ns.nn.ParameterList([ns.zeros(2)]),
        )

    assert repr(build(staged)) == repr(build(torch)).replace("torch.float32", "staged.float32")


def test_data_parallel_without_gpus_calls_its_module():
    class Scaled(staged.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = staged.nn.Linear(4, 2)

        def forward(self, x, scale=1.0):
            return self.lin(x) * scale

    inner = Scaled()
    dp = staged.nn.DataParallel(inner, device_ids=[0, 1], output_device=0, dim=1)
    tdp = torch.nn.DataParallel(torch.nn.Linear(4, 2), device_ids=[0, 1], output_device=0, dim=1)
    assert dp.module is inner and dp.device_ids == tdp.device_ids == []
    assert hasattr(dp, "dim") == hasattr(tdp, "dim")  # torch keeps no options without GPUs
    assert list(dp.state_dict()) == ["module.lin.weight", "module.lin.bias"]
    x = staged.tensor(ARRAYS["x"])
    assert_close(dp(x, scale=2.0), inner(x) * 2.0, rtol=0, atol=0)
    assert staged.nn.parallel.DataParallel is staged.nn.DataParallel
    assert repr(staged.nn.DataParallel(staged.nn.Linear(2, 3))) == repr(
        torch.nn.DataParallel(torch.nn.Linear(2, 3))
    )


def _model():
    """DataParallel around parameter containers and the new layers, seeded."""
    nn = staged.nn
    staged.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.act = nn.Conv2d(2, 4, 3, padding=1), nn.PReLU(4)
            self.pool, self.max_pool = nn.AdaptiveAvgPool2d((3, 2)), nn.AdaptiveMaxPool2d(2)
            self.norm = nn.RMSNorm(24)
            self.heads = nn.ParameterList([staged.randn(24, 3) * 0.1, staged.randn(16, 3) * 0.1])
            self.bias = nn.ParameterDict({"b": staged.zeros(3)})

        def forward(self, x):
            h = self.act(self.conv(x))
            a = self.norm(self.pool(h).flatten(1)) @ self.heads[0]
            return a + self.max_pool(h).flatten(1) @ self.heads[1] + self.bias["b"]

    return nn.DataParallel(Net())


def _steps(compiled):
    model = _model()
    opt = staged.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    F = staged.nn.functional

    def step(x, y):
        opt.zero_grad()
        out = model(x)
        loss = F.multi_margin_loss(out, y) + F.triplet_margin_loss(out, model(x * 0.5), model(-x))
        loss.backward()
        opt.step()
        return loss

    step = staged.compile(step) if compiled else step
    rng = np.random.RandomState(0)
    losses = [
        step(
            staged.tensor(rng.standard_normal((4, 2, 7, 5)).astype(np.float32)),
            staged.tensor(rng.randint(0, 3, 4)),
        ).item()
        for _ in range(3)
    ]
    return losses, {k: v.numpy() for k, v in model.state_dict().items()}


def test_compiled_training_step_with_containers_and_new_layers_equals_eager():
    losses, params = _steps(compiled=False)
    closses, cparams = _steps(compiled=True)
    np.testing.assert_allclose(closses, losses, rtol=1e-5)
    for k, v in params.items():
        np.testing.assert_allclose(cparams[k], v, rtol=1e-5, atol=1e-6, err_msg=k)


def _parametrized_linear(ns):
    m = ns.nn.Linear(2, 2)
    ns.nn.utils.parametrize.register_parametrization(m, "weight", ns.nn.Identity())
    return m


@pytest.mark.parametrize(
    "call",
    [
        # was silently shadowed: the parametrization kept computing the old weight
        lambda ns: setattr(_parametrized_linear(ns), "weight", ns.nn.Parameter(ns.ones(2, 2))),
        lambda ns: ns.nn.Linear(2, 2).register_parameter("forward", None),
        lambda ns: ns.nn.Linear(2, 2).register_buffer("weight", ns.ones(1)),
        lambda ns: ns.nn.Linear(2, 2).add_module("bias", ns.nn.ReLU()),
        lambda ns: ns.nn.Linear(2, 2).register_buffer("a.b", ns.ones(1)),
        lambda ns: ns.nn.Linear(2, 2).register_parameter("", None),
        lambda ns: ns.nn.Linear(2, 2).add_module("a.b", ns.nn.ReLU()),
        lambda ns: ns.nn.Linear(2, 2).register_buffer(3, ns.ones(1)),
    ],
)
def test_registering_a_taken_or_bad_name_raises_as_torch(call):
    assert_raises_like_torch(call)


def test_assigning_over_a_plain_attribute_registers_as_torch():
    for ns in (torch, staged):
        m = ns.nn.Module()
        m.w = 3
        m.w = ns.nn.Parameter(ns.ones(1))
        m.b = None
        m.b = ns.nn.Linear(1, 1)
        assert [n for n, _ in m.named_parameters()] == ["w", "b.weight", "b.bias"]
