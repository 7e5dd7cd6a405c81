"""A compiled step that advances an iterator in its body (``x, y = next(it)``) takes the
next batch at every call, as eager code does, instead of replaying the traced one: the
trace is one-shot and warns once (Note [iterators the body advances] in
staged/tracing/guards.py). The oracle is the same step run eagerly, call for call."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import staged
import staged.nn.functional as F
from staged import nn, optim
from staged.tracing.capture import capture
from staged.utils.data import DataLoader, TensorDataset

CALLS = 4


def _batches() -> list:
    staged.manual_seed(0)
    return [(staged.randn(4, 3), staged.randn(4, 2)) for _ in range(6)]


def _loader(b):
    xs, ys = zip(*b)
    return iter(DataLoader(TensorDataset(staged.cat(xs), staged.cat(ys)), batch_size=4))


def _yielding(b):
    yield from b


# kind -> (the iterator over the batches, how a batch is taken from what it yields)
KINDS = {
    "list": (iter, None),
    "tuple": (lambda b: iter(tuple(b)), None),
    "range": (lambda b: iter(range(len(b))), lambda b, i: b[i]),
    "generator": (_yielding, None),
    "genexpr": (lambda b: (xy for xy in b), None),
    "dataloader": (_loader, None),
    "enumerate": (lambda b: enumerate(b), lambda b, ixy: ixy[1]),
    "zip": (lambda b: zip(b, range(10)), lambda b, xyi: xyi[0]),
    "map": (lambda b: map(tuple, b), None),
    "islice": (lambda b: itertools.islice(b, 5), None),
    "cycle": (lambda b: itertools.cycle(b), None),
    "enumerate_loader": (lambda b: enumerate(_loader(b)), lambda b, ixy: ixy[1]),
}


def _model():
    staged.manual_seed(1)
    m = nn.Linear(3, 2)
    return m, optim.SGD(m.parameters(), lr=0.1, momentum=0.9)


def _train(m, opt, x, y):
    opt.zero_grad()
    loss = F.mse_loss(m(x), y)
    loss.backward()
    opt.step()
    return loss


def _run(kind: str, compiled: bool):
    """Losses and parameters after each of CALLS calls; the compiled step's trace count."""
    m, opt = _model()
    b = _batches()
    make, take = KINDS[kind]
    it = make(b)

    def step():
        got = next(it)
        x, y = got if take is None else take(b, got)
        return _train(m, opt, x, y)

    return _calls(step, m, compiled)


def _calls(step, m, compiled):
    f = staged.compile(step) if compiled else step
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the warning has its own test
        seen = [_after(f, m) for _ in range(CALLS)]
    return seen, getattr(f, "traces", None)


def _after(f, m) -> tuple:
    loss = float(f())
    return loss, [p.detach().numpy().copy() for p in m.parameters()]


def _same(ours, eager) -> None:
    losses = [loss for loss, _ in eager]
    assert len(set(losses)) == CALLS  # each call trained on another batch
    np.testing.assert_allclose([loss for loss, _ in ours], losses, rtol=1e-6)
    for (_, ps), (_, qs) in zip(ours, eager):
        for p, q in zip(ps, qs):
            np.testing.assert_allclose(p, q, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_an_iterator_the_step_advances_gives_the_next_batch_at_every_call(kind):
    ours, traces = _run(kind, True)
    eager, _ = _run(kind, False)
    _same(ours, eager)
    assert traces == CALLS  # one-shot: each call traced and run as eager code would


# the reaches of Note [source guards]: a global, an attribute of self, a default argument
BATCHES = iter(())


def _global_step(m, opt):
    def step():
        x, y = next(BATCHES)
        return _train(m, opt, x, y)

    return step


class _Trainer:
    def __init__(self, m, opt, it):
        self.m, self.opt, self.batches = m, opt, it

    def step(self):
        x, y = next(self.batches)
        return _train(self.m, self.opt, x, y)


def _default_step(m, opt, it):
    def step(batches=it):
        x, y = next(batches)
        return _train(m, opt, x, y)

    return step


@pytest.mark.parametrize("reach", ["global", "self", "default"])
def test_an_iterator_reached_as_source_guards_reach_values_is_seen(reach):
    global BATCHES
    results = []
    for compiled in (True, False):
        m, opt = _model()
        BATCHES = iter(_batches())
        if reach == "global":
            step = _global_step(m, opt)
        elif reach == "self":
            step = _Trainer(m, opt, iter(_batches())).step
        else:
            step = _default_step(m, opt, iter(_batches()))
        results.append(_calls(step, m, compiled))
    (ours, traces), (eager, _) = results
    _same(ours, eager)
    assert traces == CALLS


def test_the_warning_names_the_iterator_and_says_to_pass_the_batch():
    m, opt = _model()
    loader = iter(_batches())

    def train_step():
        x, y = next(loader)
        return _train(m, opt, x, y)

    f = staged.compile(train_step)
    with pytest.warns(UserWarning) as record:
        f()
        f()
    said = [str(w.message) for w in record if "iterator" in str(w.message)]
    assert said == [  # once per step and iterator
        "staged.compile: test_the_warning_names_the_iterator_and_says_to_pass_the_batch."
        "<locals>.train_step advanced the iterator loader while it was traced. A compiled "
        "call would replay the traced batch, not take the next one, so every call is traced "
        "again and run without compiling, as eager code would. Pass the batch as an "
        "argument instead: `for x, y in loader: step(x, y)`"
    ]
    assert [w.filename for w in record if "iterator" in str(w.message)] == [__file__]


def test_a_step_reading_a_list_it_does_not_advance_still_compiles():
    """A list of batches indexed by a tensor-free constant, and an iterator left alone:
    no position moves, so the trace is kept and replayed."""
    m, opt = _model()
    b = _batches()
    untouched = iter(b)

    def step():
        x, y = b[2]
        assert untouched is not None  # reached, never advanced
        return _train(m, opt, x, y)

    step()  # the optimizer's buffers and the .grad exist before the trace: not one-shot
    f = staged.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        ours = [f().item() for _ in range(CALLS)]  # (float() of a loss warns, as torch)
    assert f.traces == 1
    m2, opt2 = _model()
    _train(m2, opt2, *b[2])
    eager = [float(_train(m2, opt2, *b[2])) for _ in range(CALLS)]
    np.testing.assert_allclose(ours, eager, rtol=1e-6)
    np.testing.assert_allclose(m.weight.detach().numpy(), m2.weight.detach().numpy(), rtol=1e-6)
    assert next(untouched) is b[0]
    # positions are compared at the trace only: no guard on them for every call to check
    assert "untouched" not in [g.name for g in capture(step).guards]
