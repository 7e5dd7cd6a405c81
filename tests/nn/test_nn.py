"""nn against torch with identical weights: forward values and every parameter gradient
of an MLP and of the losses; state_dict round trips and strict errors; repr."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
import staged.nn as nn
import staged.nn.functional as F
from tests.checks import assert_close, compare_with_torch


def copy_weights(module, tmodule):
    """Load ``tmodule``'s parameters and buffers into ``module`` (same names)."""
    module.load_state_dict({k: v.numpy() for k, v in tmodule.state_dict().items()})


def mlp(ns, dtype):
    return ns.nn.Sequential(
        ns.nn.Linear(4, 8, dtype=dtype),
        ns.nn.ReLU(),
        ns.nn.Linear(8, 8, dtype=dtype),
        ns.nn.Tanh(),
        ns.nn.Linear(8, 3, dtype=dtype),
        ns.nn.Sigmoid(),
    )


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_mlp_forward_and_parameter_grads_match_torch(name):
    model, tmodel = mlp(staged, getattr(staged, name)), mlp(torch, getattr(torch, name))
    copy_weights(model, tmodel)
    x = np.random.standard_normal((5, 4)).astype(name)
    out, tout = model(staged.tensor(x)), tmodel(torch.tensor(x))
    rtol = 1e-5 if name == "float32" else 1e-12
    assert_close(out, tout, rtol, rtol)
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    params, tparams = dict(model.named_parameters()), dict(tmodel.named_parameters())
    assert list(params) == list(tparams)
    for k, p in params.items():
        assert_close(p.grad, tparams[k].grad, rtol, rtol)


def test_linear_without_bias_and_3d_input():
    lin, tlin = nn.Linear(3, 2, bias=False), torch.nn.Linear(3, 2, bias=False)
    copy_weights(lin, tlin)
    assert lin.bias is None and [n for n, _ in lin.named_parameters()] == ["weight"]
    compare_with_torch(
        lin, tlin, np.random.standard_normal((2, 4, 3)).astype(np.float32), rtol=1e-5, atol=1e-6
    )


def test_linear_init_bounds():
    w = nn.Linear(16, 4).weight.numpy(force=True)
    assert np.abs(w).max() <= 1 / 4 and w.std() > 0.05


N, C = 6, 4
LOGITS = np.random.RandomState(1).standard_normal((N, C))
TARGET = np.array([0, 3, 1, 1, 2, 3])
WEIGHT = np.array([0.5, 1.0, 2.0, 0.25])


def _ce_cases():
    for reduction in ("mean", "sum", "none"):
        yield dict(reduction=reduction)
        yield dict(reduction=reduction, label_smoothing=0.2)
        yield dict(reduction=reduction, ignore_index=1)
        yield dict(reduction=reduction, weight=WEIGHT)
    yield dict(weight=WEIGHT, ignore_index=3, label_smoothing=0.1)


def _module_loss(cls, kwargs):
    """The same loss module in staged and torch, with a class-weight tensor if any."""

    def build(ns):
        kw = dict(kwargs)
        if "weight" in kw:
            kw["weight"] = ns.tensor(kw["weight"])
        return getattr(ns.nn, cls)(**kw)

    return build(staged), build(torch)


@pytest.mark.parametrize("kwargs", list(_ce_cases()), ids=str)
def test_cross_entropy_loss_matches_torch(kwargs):
    loss, tloss = _module_loss("CrossEntropyLoss", kwargs)
    compare_with_torch(loss, tloss, LOGITS, TARGET, rtol=1e-10, atol=1e-12)


def test_cross_entropy_with_probability_targets_and_extra_dims():
    probs = np.random.dirichlet(np.ones(C), N)
    compare_with_torch(
        lambda x, p: F.cross_entropy(x, p, label_smoothing=0.1),
        lambda x, p: torch.nn.functional.cross_entropy(x, p, label_smoothing=0.1),
        LOGITS,
        probs,
        rtol=1e-10,
        atol=1e-12,
    )
    x = np.random.standard_normal((2, C, 3))
    t = np.random.randint(0, C, (2, 3))
    compare_with_torch(
        F.cross_entropy, torch.nn.functional.cross_entropy, x, t, rtol=1e-10, atol=1e-12
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),
        dict(reduction="sum"),
        dict(reduction="none"),
        dict(weight=WEIGHT),
        dict(ignore_index=3),
    ],
    ids=str,
)
def test_nll_loss_matches_torch(kwargs):
    loss, tloss = _module_loss("NLLLoss", kwargs)
    logp = np.log(np.random.dirichlet(np.ones(C), N))
    compare_with_torch(loss, tloss, logp, TARGET, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_matches_torch(reduction):
    a, b = np.random.standard_normal((2, 3, 4)).astype(np.float32)
    compare_with_torch(
        nn.MSELoss(reduction=reduction),
        torch.nn.MSELoss(reduction=reduction),
        a,
        b,
        rtol=1e-5,
        atol=1e-6,
    )


def test_loss_errors():
    with pytest.raises(
        ValueError, match="Expected input batch_size \\(6\\) to match target batch_size \\(2\\)"
    ):
        F.cross_entropy(staged.tensor(LOGITS), staged.tensor([0, 1]))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.mse_loss(staged.ones(2), staged.ones(2), reduction="avg")


def test_state_dict_round_trip():
    model, other = mlp(staged, staged.float32), mlp(staged, staged.float32)
    sd = model.state_dict()
    assert list(sd) == list(mlp(torch, torch.float32).state_dict())
    assert all(not v.requires_grad for v in sd.values())
    result = other.load_state_dict(sd)
    assert result.missing_keys == [] and result.unexpected_keys == []
    for (_k, p), q in zip(model.named_parameters(), other.parameters()):
        assert_close(p, q)
    assert other[0].weight.is_leaf and other[0].weight.requires_grad


def test_load_state_dict_strict_errors_name_the_keys():
    model = mlp(staged, staged.float32)
    sd = dict(model.state_dict())
    del sd["2.bias"]
    sd["9.weight"] = staged.zeros(1)
    with pytest.raises(RuntimeError) as err:
        model.load_state_dict(sd)
    msg = str(err.value)
    assert 'Missing key(s) in state_dict: "2.bias".' in msg
    assert 'Unexpected key(s) in state_dict: "9.weight".' in msg
    result = model.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["2.bias"] and result.unexpected_keys == ["9.weight"]


def test_load_state_dict_size_mismatch():
    lin = nn.Linear(3, 2)
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        lin.load_state_dict({"weight": staged.zeros(3, 3), "bias": staged.zeros(2)})


def test_module_repr_equals_torch():
    def build(ns):
        return ns.nn.Sequential(
            ns.nn.Linear(4, 8),
            ns.nn.ReLU(),
            ns.nn.Linear(8, 3, bias=False),
            ns.nn.Tanh(),
            ns.nn.Softmax(dim=1),
        )

    assert repr(build(staged)) == repr(build(torch))


def test_parameters_modules_and_zero_grad():
    model = mlp(staged, staged.float32)
    assert len(list(model.parameters())) == 6
    assert [type(m).__name__ for m in model.children()][:2] == ["Linear", "ReLU"]
    model(staged.ones(2, 4)).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    assert model.train().training and not model.eval()[0].training


def test_forward_hooks():
    lin = nn.Linear(2, 2)
    calls = []
    lin.register_forward_pre_hook(lambda m, args: calls.append("pre"))
    h = lin.register_forward_hook(lambda m, args, out: out * 0)
    assert lin(staged.ones(2)).tolist() == [0.0, 0.0] and calls == ["pre"]
    h.remove()
    assert lin(staged.ones(2)).abs().sum().item() > 0


def test_reassigned_parameters_buffers_and_submodules_keep_their_place():
    """Assigning an existing name again keeps its position in named_parameters(),
    state_dict() and the optimizer's order, as torch (staged moved it to the end: a
    Transformer that re-assigns its decoder listed its parameters in another order)."""
    orders = []
    for lib in (staged, torch):
        nn = lib.nn
        m = nn.Module()
        m.a, m.b = nn.Linear(1, 1), nn.Linear(1, 1)
        m.a = nn.Linear(1, 1)
        m.p, m.q = nn.Parameter(lib.zeros(1)), nn.Parameter(lib.zeros(1))
        m.p = nn.Parameter(lib.ones(1))
        m.register_buffer("u", lib.zeros(1))
        m.register_buffer("v", lib.zeros(1))
        m.u = lib.ones(1)
        m.register_buffer("v", lib.ones(1))
        orders.append(([n for n, _ in m.named_parameters()], list(m.state_dict())))
    assert orders[0] == orders[1]
    assert orders[0][0] == ["p", "q", "a.weight", "a.bias", "b.weight", "b.bias"]
