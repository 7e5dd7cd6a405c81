"""torch's ``_foreach_*`` functions against torch 2.13: every name torch has, its values,
in-place forms returning their list, gradients, errors, and a compiled EMA update."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged

NAMES = sorted(n for n in dir(torch) if n.startswith("_foreach_"))
_RNG = np.random.default_rng(0)
_ARRAYS = [_RNG.uniform(0.2, 0.9, s).astype(np.float32) for s in ((3,), (2, 2))]


def _lists(lib, k=1):
    return [lib.tensor(a * (1 + 0.1 * k)) for a in _ARRAYS]


def _calls(name):
    """Argument patterns of ``name`` (``lib`` -> args), tried in turn on torch."""
    lists = [lambda lib, k=k: _lists(lib, k) for k in range(4)]
    scalars = [0.5, 1.5]
    return [
        lambda lib: (lists[0](lib),),
        lambda lib: (lists[0](lib), lists[1](lib)),
        lambda lib: (lists[0](lib), 0.7),
        lambda lib: (lists[0](lib), scalars),
        lambda lib: (lists[0](lib), lib.tensor(0.3)),
        lambda lib: (lists[0](lib), lists[1](lib), lists[2](lib)),
        lambda lib: (lists[0](lib), lists[1](lib), lists[2](lib), scalars),
        lambda lib: (lists[0](lib), lists[1](lib), lists[2](lib), lib.tensor(scalars)),
        lambda lib: (lists[0](lib), lists[1](lib), 0.25),
        lambda lib: (2.0, lists[0](lib)),
    ]


def _numpy(out):
    return [t.detach().numpy() for t in out]


@pytest.mark.parametrize("name", NAMES)
def test_every_foreach_function_gives_torchs_values(name):
    if name == "_foreach_mm":
        a = [np.ones((2, 3), np.float32), _RNG.standard_normal((2, 2)).astype(np.float32)]
        b = [np.ones((3, 2), np.float32), np.eye(2, dtype=np.float32)]
        ours = staged._foreach_mm([*map(staged.tensor, a)], [*map(staged.tensor, b)])
        theirs = torch._foreach_mm([*map(torch.tensor, a)], [*map(torch.tensor, b)])
        return np.testing.assert_allclose(_numpy(ours)[1], _numpy(theirs)[1], rtol=1e-6)
    checked = 0
    for make in _calls(name):
        try:
            targs = make(torch)
            theirs = getattr(torch, name)(*targs)
        except (RuntimeError, TypeError):
            continue
        sargs = make(staged)
        ours = getattr(staged, name)(*sargs)
        if name.endswith("_"):  # in place: the list itself, its tensors written
            assert ours is sargs[0] and theirs is targs[0]
            ours, theirs = sargs[0], targs[0]
        assert type(ours) is type(theirs) and len(ours) == len(theirs)
        for a, b in zip(_numpy(ours), _numpy(theirs)):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7, equal_nan=True)
        checked += 1
    assert checked, f"no argument pattern of {name} ran in torch"


def test_gradients_flow_through_each_tensor():
    def grads(lib):
        xs = [t.requires_grad_() for t in _lists(lib)]
        ys = lib._foreach_addcmul(lib._foreach_exp(xs), xs, xs, [2.0, 3.0])
        sum(y.sum() for y in lib._foreach_norm(ys)).backward()
        return [x.grad.numpy() for x in xs]

    for a, b in zip(grads(staged), grads(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_errors_say_what_was_wrong_as_torchs():
    xs = _lists(staged)
    with pytest.raises(RuntimeError, match="same number of elements as scalar list"):
        staged._foreach_add(xs, [1.0])
    with pytest.raises(RuntimeError, match="at least one tensor"):
        staged._foreach_add([], 1.0)
    with pytest.raises(TypeError, match="must be a list or tuple of tensors"):
        staged._foreach_exp(xs[0])


def test_an_ema_by_foreach_lerp_in_a_compiled_step():
    """timm's ModelEmaV3 and ema-pytorch update their averages so."""

    def run(lib, compiled):
        lib.manual_seed(0)
        model = lib.nn.Linear(3, 2)
        ema = [p.detach().clone() for p in model.parameters()]
        opt = lib.optim.SGD(model.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            with lib.no_grad():
                lib._foreach_lerp_(ema, [p.detach() for p in model.parameters()], 0.1)
            return loss.detach()

        f = staged.compile(step) if compiled else step
        for _ in range(4):
            f(lib.ones(4, 3))
        return [e.numpy() for e in ema]

    want = run(torch, False)
    for got in (run(staged, False), run(staged, True)):
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
