"""Eager optimizer steps round as torch's, step after step: its Python-float scalars
(bias corrections from ``step.item()``) and its order of operations. torch's ``sqrt`` (MKL's)
is not correctly rounded and staged's is (README, "Numerics"), so torch runs here with a
correctly rounded ``sqrt``: what remains to compare is the arithmetic of the updates."""

import numpy as np
import pytest
import torch

import staged

RNG = np.random.default_rng(7)
SHAPES = [(7, 5), (300,), (1,), ()]  # () a 0-d parameter: CLIP's logit_scale
START = [RNG.standard_normal(s) for s in SHAPES]
GRADS = [[RNG.standard_normal(s) for s in SHAPES] for _ in range(30)]
CASES = [
    ("Adam", dict(lr=1e-2)),
    ("Adam", dict(lr=1e-2, amsgrad=True, weight_decay=0.1, maximize=True)),
    ("AdamW", dict(lr=1e-2, betas=(0.5, 0.6), eps=1e-3)),
    ("Adamax", dict(lr=1e-2, weight_decay=0.1)),
    ("Adagrad", dict(lr=1e-2, lr_decay=0.01)),
    ("RAdam", dict(lr=1e-2)),  # rectified from step 6 on
    ("RAdam", dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=1e-2, betas=(0.9, 0.6))),  # rho_inf 4: never rectified (rect's 1 / 0)
    ("NAdam", dict(lr=1e-2)),
    ("NAdam", dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RMSprop", dict(lr=1e-2, momentum=0.9, centered=True)),
    ("Adadelta", dict(weight_decay=0.1)),
    ("ASGD", dict(lr=1e-2, t0=5)),
    ("SGD", dict(lr=1e-2, momentum=0.9, nesterov=True, weight_decay=0.1)),
]


@pytest.fixture
def exact_torch_sqrt(monkeypatch):
    """torch's ``sqrt`` (the only kernel of these updates that is MKL's), correctly
    rounded."""

    def sqrt(t):
        return torch.from_numpy(np.asarray(np.sqrt(t.numpy())))

    monkeypatch.setattr(torch.Tensor, "sqrt", sqrt)
    monkeypatch.setattr(torch.Tensor, "sqrt_", lambda t: t.copy_(sqrt(t)))


def _run(L, dtype, name, kw):
    params = [L.nn.Parameter(L.tensor(x, dtype=getattr(L, dtype))) for x in START]
    opt = getattr(L.optim, name)(params, **kw)
    trace = []
    for grads in GRADS:
        for p, g in zip(params, grads):
            p.grad = L.tensor(g, dtype=getattr(L, dtype))
        opt.step()
        trace.append([p.detach().numpy().copy() for p in params])
    return trace


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name, kw", CASES, ids=lambda c: str(c))
def test_thirty_steps_give_torchs_bits(exact_torch_sqrt, dtype, name, kw):
    ours, theirs = _run(staged, dtype, name, kw), _run(torch, dtype, name, kw)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y, err_msg=f"step {step + 1}")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", ["Adam", "AdamW", "RAdam", "NAdam", "Adagrad"])
def test_a_tensor_lr_gives_torchs_bits(exact_torch_sqrt, dtype, name):
    """``lr=torch.tensor(0.01)``: the step size a 0-d tensor, eagerly as in torch."""
    ours = _run(staged, dtype, name, dict(lr=staged.tensor(0.01)))
    theirs = _run(torch, dtype, name, dict(lr=torch.tensor(0.01)))
    for step, (a, b) in enumerate(zip(ours, theirs)):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y, err_msg=f"step {step + 1}")
