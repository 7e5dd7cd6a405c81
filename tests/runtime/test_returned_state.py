"""A compiled step returning state (a parameter, its ``detach()``, ``.data`` or a view, an
optimizer buffer, a BatchNorm buffer, a ``.grad``) returns what eager code returns: the tensor itself,
or an alias of its memory that later calls update in place (Note [returned state] in
staged/tracing/returned.py), checked call for call against eager staged and torch; a
deployed step returns the state's value at each call."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
import staged.nn.functional as F
from staged import optim
from tests.checks import batches

PICKS = {
    "parameter": lambda m, opt: m[0].bias,
    "detach": lambda m, opt: m[0].bias.detach(),
    "data": lambda m, opt: m[0].weight.data,
    "view": lambda m, opt: m[0].weight[0],
    "view of a detach": lambda m, opt: m[0].weight.detach()[:, 1],
    "momentum buffer": lambda m, opt: opt.state[m[0].weight]["momentum_buffer"],
    "running mean": lambda m, opt: m[1].running_mean,
    "grad": lambda m, opt: [m[0].bias.grad, m[3].weight.grad.detach()],
    "nested": lambda m, opt: {"b": (m[3].bias, m[3].weight.t()), "n": 2},
}


def _model(lib):
    return lib.nn.Sequential(
        lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.Tanh(), lib.nn.Linear(4, 2)
    )


def _names(m, opt) -> dict:
    """id -> name of the model's and the optimizer's state tensors and of the .grads."""
    names = {id(t): k for k, t in m.state_dict(keep_vars=True).items()}
    names.update({id(p.grad): k + ".grad" for k, p in m.named_parameters()})
    for i, s in enumerate(opt.state.values()):
        names.update({id(t): f"opt{i}.{k}" for k, t in s.items() if hasattr(t, "shape")})
    return names


def _leaves(tree) -> list:
    if isinstance(tree, dict):
        return [x for k in sorted(tree) for x in _leaves(tree[k])]
    if isinstance(tree, (list, tuple)):
        return [x for t in tree for x in _leaves(t)]
    return [tree]


def _run(pick, lib, how=None, sizes=(4, 4, 4), write=None):
    """The step returning ``pick(m, opt)`` run on ``sizes`` batches, eagerly (``how``
    None) or compiled with ``how``; ``write(kept)`` between calls. Returns per call the
    picked leaves' (state name or None, requires_grad, is_leaf, has grad_fn) and, after
    the last call, every call's leaves' values and the losses."""
    staged.manual_seed(0)
    m, opt = _model(staged), None
    if lib is torch:  # the same initial state, in torch
        t = _model(torch)
        t.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()})
        m = t
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss.detach(), pick(m, opt)

    f = step if how is None else staged.compile(step, **how)
    flags, kept, losses = [], [], []
    for x, y in batches(sizes):
        if lib is torch:
            x, y = torch.tensor(x.numpy()), torch.tensor(y.numpy())
        loss, out = f(x, y)
        names = _names(m, opt)
        leaves = [t for t in _leaves(out) if not isinstance(t, int)]
        flags.append(
            [(names.get(id(t)), t.requires_grad, t.is_leaf, t.grad_fn is not None) for t in leaves]
        )
        kept.append(leaves)
        losses.append(loss.item())
        if write is not None:
            write(leaves)
    values = [[t.detach().numpy().copy() for t in leaves] for leaves in kept]
    return flags, values, losses


def _same(ours, theirs, rtol=1e-6) -> None:
    flags, values, losses = ours
    assert flags == theirs[0]
    np.testing.assert_allclose(losses, theirs[2], rtol=rtol)
    for a, b in zip(values, theirs[1]):
        for u, v in zip(a, b):
            np.testing.assert_allclose(u, v, rtol=rtol, atol=1e-7)


@pytest.mark.parametrize("pick", PICKS)
def test_eager_returns_what_torch_returns(pick):
    """The oracle of the compiled checks below: eager staged is torch here."""
    _same(_run(PICKS[pick], staged), _run(PICKS[pick], torch), rtol=1e-5)


@pytest.fixture(scope="module")
def every_pick_dynamic() -> dict:
    """{pick: (compiled run, eager run)} of one dynamic step returning every pick: one
    module, not one a pick (a compile is most of a case's time); the static steps below
    return one pick each."""
    counts: list[int] = []

    def every(m, opt):
        return [PICKS[k](m, opt) for k in PICKS]

    def counted(m, opt):  # eager: how many tensors each pick is
        picked = every(m, opt)
        counts[:] = [sum(not isinstance(t, int) for t in _leaves(p)) for p in picked]
        return picked

    sizes = (4, 5, 6)
    runs = [_run(every, staged, {"dynamic": True}, sizes), _run(counted, staged, sizes=sizes)]
    ends = np.cumsum([0, *counts])
    assert all(len(f) == ends[-1] for flags, _, _ in runs for f in flags)
    return {
        k: [
            ([f[a:b] for f in flags], [v[a:b] for v in values], losses)
            for flags, values, losses in runs
        ]
        for k, a, b in zip(PICKS, ends, ends[1:])
    }


@pytest.mark.parametrize("pick", PICKS)
def test_a_compiled_step_returns_the_state_eager_returns(pick):
    """Each call's results are the state tensor itself (named the same) or an alias with
    eager's flags, and the results of earlier calls see the later updates."""
    sizes = (4, 4, 4)
    _same(_run(PICKS[pick], staged, {}, sizes), _run(PICKS[pick], staged, sizes=sizes))


@pytest.mark.parametrize("pick", PICKS)
def test_a_dynamic_step_returns_the_state_eager_returns(pick, every_pick_dynamic):
    """The same with a batch size that changes each call."""
    _same(*every_pick_dynamic[pick])


def _write_detached(leaves):
    with staged.no_grad() if isinstance(leaves[0], staged.Tensor) else torch.no_grad():
        leaves[0].mul_(0.5)


@pytest.mark.parametrize("pick", ["detach", "data", "view", "view of a detach"])
def test_a_write_through_a_returned_alias_reaches_the_parameter(pick):
    """Halving the alias a call returned halves that part of the parameter, which the
    next call (compiled as eagerly) trains on."""
    ours = _run(PICKS[pick], staged, {}, write=_write_detached)
    _same(ours, _run(PICKS[pick], staged, write=_write_detached))
    _same(ours, _run(PICKS[pick], torch, write=_write_detached), rtol=1e-5)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_state_returned_to_a_backward_outside(compiled):
    """A step that runs no backward (Note [autograd boundary]) returns the parameter
    itself, and a view of it that requires grad, whose backward reaches the parameter."""
    staged.manual_seed(0)
    m = staged.nn.Linear(3, 2)

    def step(x):
        return m(x), m.weight, m.weight[0]

    f = staged.compile(step) if compiled else step
    for x, _ in batches((4, 4)):
        out, w, v = f(x)
        assert w is m.weight and v.requires_grad and v.grad_fn is not None
        (out.sum() + 2 * v.sum()).backward()
    t = torch.nn.Linear(3, 2)
    t.load_state_dict({k: torch.tensor(a.numpy()) for k, a in m.state_dict().items()})
    for x, _ in batches((4, 4)):
        (t(torch.tensor(x.numpy())).sum() + 2 * t.weight[0].sum()).backward()
    np.testing.assert_allclose(m.weight.grad.numpy(), t.weight.grad.numpy(), rtol=1e-6)


def test_a_returned_argument_is_the_argument():
    def step(x, w):
        return (x * w).sum(), x, w.detach()

    f = staged.compile(step)
    w = staged.ones(3)
    for _ in range(2):
        x = staged.arange(3.0)
        _, rx, rw = f(x, w)
        assert rx is x
        assert not rw.requires_grad and rw.is_leaf
        w.add_(1.0)  # seen through the alias, as eagerly
        np.testing.assert_array_equal(rw.numpy(), w.numpy())


def _sgd_step(picks):
    """A model, its SGD with momentum and a training step returning the loss and
    ``picks(m, opt)``."""
    staged.manual_seed(0)
    m = _model(staged)
    opt = optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return (loss.detach(), *picks(m, opt))

    return m, opt, step


def test_a_deployed_step_returns_the_state_value_at_each_call(tmp_path):
    """A deployed step holds no caller's tensors: a returned parameter comes back as its
    value at the end of that call (a new tensor each call, never a stale one), as the
    step's state_dict() then holds it."""
    _, _, step = _sgd_step(lambda m, opt: (m[0].bias,))
    f = staged.compile(step)
    data = batches((4,) * 5)
    for x, y in data[:2]:
        f(x, y)
    f.save(tmp_path)
    loaded = staged.runtime.load(tmp_path)
    got = []
    for x, y in data[2:]:
        _, b = loaded(x, y)
        got.append(b.numpy().copy())
        np.testing.assert_array_equal(got[-1], loaded.state_dict()["0.bias"])
        _, eager_b = step(x, y)  # the live model, trained eagerly alongside
        np.testing.assert_allclose(got[-1], eager_b.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert not np.array_equal(got[0], got[-1])


def test_returned_state_does_not_change_what_is_compiled():
    """Returning a parameter keeps the step's trace count and cache key: one trace for
    its buffers' creation, one for the steady step."""
    m, opt, step = _sgd_step(lambda m, opt: (m[0].bias, opt.state[m[0].bias]["momentum_buffer"]))
    f = staged.compile(step)
    for x, y in batches((4,) * 4):
        _, b, buf = f(x, y)
        assert b is m[0].bias and buf is opt.state[m[0].bias]["momentum_buffer"]
    assert f.traces == 2


def test_a_dynamic_step_returning_a_slice_of_state_by_the_batch_size():
    """The slice's bounds follow the batch: it comes back as a value of the call's size,
    not remade with the bounds of the trace."""
    table = staged.arange(10.0)

    def step(x):
        return x.sum(), table[: x.shape[0]]

    f = staged.compile(step, dynamic=True)
    for n in (4, 5, 7):
        x = staged.ones(n)
        np.testing.assert_array_equal(f(x)[1].numpy(), step(x)[1].numpy())
    assert f.traces == 1
