"""``StateGuards``, a compiled step's state-tensor guards checked by a stamp (Note [state
pass] in staged/runtime/state_guards.py): after every kind of change to a state tensor it
says what checking each row in order says (the first failure, or None), so the stamp is
never weaker than the rows; and a compiled AdamW step re-traces on each such change, its
losses and parameters those of the same steps run eagerly."""

from __future__ import annotations

import numpy as np
import pytest

import staged
from staged import nn
from staged.runtime.state_guards import StateGuards, first_failure, hook_ids, stamped


def _backward(*ts):
    sum(t.sum() for t in ts).backward()


def _state():
    """Tensors as a step's state holds them: a parameter whose .grad is set (after a
    backward: a dead grad accumulator), one whose .grad is None, an optimizer buffer, a
    tensor whose .grad is read, and an owner whose .grad is read through it."""
    s = {"p": staged.randn(3, requires_grad=True), "q": staged.randn(2, 2, requires_grad=True)}
    s["buf"], s["r"] = staged.zeros(3), staged.randn(3, requires_grad=True)
    s["o"] = staged.randn(3, requires_grad=True)
    _backward(s["p"], s["r"], s["o"])
    s["q"].grad = None
    return s


def _rows(s):
    def row(t, name, owner=None, held=False):
        g = t._grad
        grad = None if g is None else (g if held else True)
        shape, dtype = tuple(t._payload.shape), t._payload.dtype
        return (t, owner, shape, dtype, t._requires_grad, grad, name, hook_ids(t))

    return [
        row(s["p"], "p"),
        row(s["q"], "q"),
        row(s["buf"], "buf"),
        row(s["r"], "r", held=True),
        row(s["o"].grad, "o.grad", owner=s["o"]),
    ]


def _grad_acc(t):
    """``t``'s grad accumulator, kept alive by the graph returned with it."""
    y = t * 2
    return y, y.grad_fn.next_functions[0][0]


CHANGES = {
    "none": lambda s: None,
    "shape (.data assigned)": lambda s: setattr(s["p"], "data", staged.randn(4)),
    "dtype (.data assigned)": lambda s: setattr(s["buf"], "data", staged.zeros(3).double()),
    ".data assigned, same shape and dtype": lambda s: setattr(s["p"], "data", staged.ones(3)),
    "requires_grad flipped off": lambda s: s["p"].requires_grad_(False),
    "requires_grad flipped on": lambda s: s["buf"].requires_grad_(True),
    ".grad set": lambda s: setattr(s["q"], "grad", staged.zeros(2, 2)),
    ".grad set to None": lambda s: setattr(s["p"], "grad", None),
    ".grad replaced": lambda s: setattr(s["p"], "grad", staged.zeros(3)),
    "a read .grad replaced": lambda s: setattr(s["r"], "grad", staged.zeros(3)),
    "a read .grad set to None": lambda s: setattr(s["r"], "grad", None),
    "an owner's .grad replaced": lambda s: setattr(s["o"], "grad", staged.zeros(3)),
    "an owner's .grad cleared": lambda s: setattr(s["o"], "grad", None),
    "a hook": lambda s: s["q"].register_hook(lambda g: g),
    "a post-accumulate hook": lambda s: s["q"].register_post_accumulate_grad_hook(print),
    "a hook on a new grad accumulator": lambda s: (
        s.__setitem__("graph", _grad_acc(s["p"])) or s["graph"][1].register_hook(lambda *a: None)
    ),
    "a prehook on a new grad accumulator": lambda s: (
        s.__setitem__("graph", _grad_acc(s["q"])) or s["graph"][1].register_prehook(lambda *a: None)
    ),
    "a hook registered and removed": lambda s: s["p"].register_hook(lambda g: g).remove(),
    "a new grad accumulator (a backward)": lambda s: _backward(s["p"]),
    "a live grad accumulator": lambda s: s.__setitem__("graph", _grad_acc(s["p"])),
}
SAME = {
    "none",
    ".data assigned, same shape and dtype",
    ".grad replaced",  # a .grad not read: the trace only saw that it was set
    "an owner's .grad replaced",
    "a hook registered and removed",
    "a new grad accumulator (a backward)",
    "a live grad accumulator",
}
SAID = {
    "shape (.data assigned)": "p: float32[3] -> float32[4]",
    "dtype (.data assigned)": "buf: float32[3] -> float64[3]",
    "requires_grad flipped off": "p: requires_grad True -> False",
    "requires_grad flipped on": "buf: requires_grad False -> True",
    ".grad set": "q.grad was set or cleared: None -> a tensor",
    ".grad set to None": "p.grad was set or cleared: a tensor -> None",
    "a read .grad replaced": "r.grad was set or cleared: a tensor -> another tensor",
    "a read .grad set to None": "r.grad was set or cleared: a tensor -> None",
    "an owner's .grad cleared": "o.grad (a .grad) was cleared",
    "a hook": "q: a hook was registered or removed",
    "a post-accumulate hook": "q: a hook was registered or removed",
    "a hook on a new grad accumulator": "p: a hook was registered or removed",
    "a prehook on a new grad accumulator": "q: a hook was registered or removed",
}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_the_stamp_says_what_the_rows_in_order_say(change):
    s = _state()
    rows = _rows(s)
    check = StateGuards(rows)
    assert len(check) == 5 and len(check.stamp[2]) == 2  # the read .grad and the owner's
    assert check.failure() is None
    CHANGES[change](s)
    got = check.failure()
    assert got == first_failure(rows)
    assert got == SAID.get(change)
    assert (got is None) == (change in SAME)
    if got is None:  # the stamp made again where it was stricter, and holding
        assert stamped(*check.stamp[:2]) and check.failure() is None


def test_a_hook_on_a_live_grad_accumulator_is_seen_after_a_new_stamp():
    s = _state()
    check = StateGuards(_rows(s))
    graph = _grad_acc(s["p"])  # a live accumulator: p is left to the loop
    assert check.failure() is None and len(check.stamp[2]) == 3
    graph[1].register_hook(lambda *a: None)
    assert check.failure() == "p: a hook was registered or removed"
    del graph  # the accumulator, and its hook, gone
    assert check.failure() is None
    s["q"].register_hook(lambda g: g)
    assert check.failure() == "q: a hook was registered or removed"


def _adamw_run(compiled, change):
    staged.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))
    opt = staged.optim.AdamW(m.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = staged.compile(step) if compiled else step
    x, y = staged.randn(8, 4), staged.randn(8, 2)
    losses = [fn(x, y).item() for _ in range(3)]
    STEP_CHANGES[change](m, opt)
    losses += [fn(x, y).item() for _ in range(3)]
    return losses, [p.detach().numpy().copy() for p in m.parameters()], fn


def _state_of(opt, m):
    return opt.state[m[0].weight]


def _halve_grad(p):  # a post-accumulate hook returns None (torch refuses a value)
    p.grad.mul_(0.5)


STEP_CHANGES = {
    ".data assigned": lambda m, opt: setattr(m[0].weight, "data", m[0].weight * 0.5),
    "requires_grad flipped": lambda m, opt: m[2].bias.requires_grad_(False),
    "a hook on a parameter": lambda m, opt: m[0].weight.register_hook(lambda g: g * 3),
    "a post-accumulate hook": lambda m, opt: m[2].weight.register_post_accumulate_grad_hook(
        _halve_grad
    ),
    "exp_avg replaced": lambda m, opt: _state_of(opt, m).__setitem__(
        "exp_avg", _state_of(opt, m)["exp_avg"] * 2
    ),
    "exp_avg_sq.data assigned": lambda m, opt: setattr(
        _state_of(opt, m)["exp_avg_sq"], "data", _state_of(opt, m)["exp_avg_sq"] * 4
    ),
}
RETRACED = {
    "requires_grad flipped": "requires_grad True -> False",
    "a hook on a parameter": "a hook was registered or removed",
    "a post-accumulate hook": "a hook was registered or removed",
    "exp_avg replaced": "optimizer state",
}


@pytest.mark.parametrize("change", STEP_CHANGES)
def test_a_compiled_adamw_step_follows_each_change_to_its_state(change):
    (want, want_params, _), (got, params, fn) = _adamw_run(False, change), _adamw_run(True, change)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for a, b in zip(params, want_params):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    reasons = [str(h["reason"]) for h in fn.history]
    if change in RETRACED:
        assert any(RETRACED[change] in r for r in reasons), reasons
    else:  # new values in the tensors the step holds: no re-trace
        assert not any("state tensor" in r for r in reasons), reasons
