"""Ctrl-C during a compiled or deployed call (Note [interrupts] in staged/_interrupts.py):
the call's state is applied whole or not at all, and later calls go on from it."""

from __future__ import annotations

import inspect
import os
import signal
import sys
import threading

import numpy as np
import pytest

import staged
from models.common import classification_step
from staged import nn
from staged._interrupts import deferred_interrupts
from staged.runtime import compiled as compiled_mod
from staged.runtime import device as device_mod


@pytest.fixture(autouse=True)
def _python_handles_sigint():
    """SIGINT raising KeyboardInterrupt, as in a user's program (pytest-xdist's workers
    ignore it)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def test_an_interrupt_inside_the_block_is_raised_where_it_ends():
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupts():
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(3):  # calls: where Python would run the handler
                reached.append(len(reached))
    assert reached == [0, 1, 2]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_block_without_an_interrupt_leaves_the_handler_as_it_was():
    def mine(signum, frame):
        raise RuntimeError("mine")

    old = signal.signal(signal.SIGINT, mine)
    try:
        with deferred_interrupts():
            assert signal.getsignal(signal.SIGINT) is not mine  # held
        assert signal.getsignal(signal.SIGINT) is mine
        with pytest.raises(RuntimeError, match="mine"):  # the user's handler, at the end
            with deferred_interrupts():
                os.kill(os.getpid(), signal.SIGINT)
                len([])
    finally:
        signal.signal(signal.SIGINT, old)


def test_other_threads_hold_nothing():
    seen = []

    def run():
        with deferred_interrupts():
            seen.append(signal.getsignal(signal.SIGINT))

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert seen == [signal.default_int_handler]


def _line(fn, text: str) -> tuple:
    """(file, line number) of the line of ``fn``'s source that contains ``text``."""
    lines, first = inspect.getsourcelines(fn)
    (i,) = [i for i, s in enumerate(lines) if text in s]
    return inspect.getsourcefile(fn), first + i


def _interrupt_at(where: tuple, nth: int):
    """A trace function that sends this process SIGINT as ``where``'s line is reached for
    the ``nth`` time."""
    hits = []

    def trace(frame, event, arg):
        if frame.f_code.co_filename != where[0]:
            return None

        def local(frame, event, arg):
            if event == "line" and frame.f_lineno == where[1]:
                hits.append(1)
            if len(hits) == nth:
                sys.settrace(None)
                os.kill(os.getpid(), signal.SIGINT)
            return local

        return local

    return trace


def _adam_step():
    staged.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = staged.optim.Adam(m.parameters(), lr=1e-2)
    return m, opt, classification_step(m, opt)


def _trained(n, x, y):
    m, opt, body = _adam_step()
    for _ in range(n):
        body(x, y)
    return [p.detach().numpy() for p in m.parameters()]


@pytest.mark.parametrize(
    "where,nth",
    [
        # the third state tensor's write: two written before it
        pytest.param(
            lambda: _line(compiled_mod.CompiledGraph, "_store(undo, w.tensor"), 3, id="state-writes"
        ),
        pytest.param(
            lambda: _line(device_mod.Module._invoke, "q._timeline[1] = value + 1"),
            1,
            id="enqueue-record",
        ),
    ],
)
def test_ctrl_c_during_a_compiled_call_applies_all_of_it_or_none(where, nth):
    """Interrupted while writing its results back, a call left some parameters at step k
    + 1 and the rest, and Adam's state, at step k; interrupted after the enqueue, before
    its record, every later call failed on the module's timeline."""
    x, y = staged.randn(4, 8), staged.randint(0, 3, (4,))
    m, opt, body = _adam_step()
    step = staged.compile(body)
    for _ in range(3):
        step(x, y).item()
    sys.settrace(_interrupt_at(where(), nth))
    try:
        with pytest.raises(KeyboardInterrupt):
            step(x, y).item()
    finally:
        sys.settrace(None)
    steps = {int(s["step"]) for s in opt.state.values()}
    assert len(steps) == 1, f"optimizer states at different steps: {steps}"
    (k,) = steps
    assert k in (3, 4)
    for got, want in zip(m.parameters(), _trained(k, x, y)):
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-5, atol=1e-6)
    for _ in range(2):  # and the step goes on from there
        step(x, y).item()
    for got, want in zip(m.parameters(), _trained(k + 2, x, y)):
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-5, atol=1e-6)
