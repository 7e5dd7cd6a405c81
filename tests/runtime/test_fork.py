"""A process forked after compiled steps ran (Note [fork] in staged/runtime/device.py):
it reads what the steps left on the device, compiles and runs steps of its own, and a
step of its parent's raises, naming the fix, where it waited forever."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

import staged


def _sgd_step(model, x):
    opt = staged.optim.SGD(model.parameters(), lr=0.1)

    @staged.compile
    def step():
        opt.zero_grad()
        loss = model(x).sum()
        loss.backward()
        opt.step()
        return loss

    return step


def _child(model, x, parents_step, q):
    try:
        q.put(("read", model.bias.tolist()))
        with pytest.raises(RuntimeError, match="made before this process was forked"):
            parents_step()
        step = _sgd_step(model, x)  # compiled here: a device of this process's own
        step()
        q.put(("own step", model.bias.tolist()))
    except BaseException as e:  # noqa: BLE001  (reported to the parent)
        q.put(("failed", f"{type(e).__name__}: {e}"))


def test_a_forked_child_reads_runs_its_own_steps_and_refuses_its_parents():
    model = staged.nn.Linear(3, 2)
    with staged.no_grad():
        for p in model.parameters():
            p.zero_()
    x = staged.ones(4, 3)
    step = _sgd_step(model, x)
    step()
    step()  # results and parameters left on the device, unread
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(model, x, step, q))
    p.start()
    got = [q.get(timeout=120), q.get(timeout=120)]
    p.join(timeout=120)
    assert p.exitcode == 0, p.exitcode
    assert got[0] == ("read", pytest.approx([-0.8, -0.8])), got
    assert got[1] == ("own step", pytest.approx([-1.2, -1.2])), got
    step()  # the parent's step runs on, from its own values (the child's were a copy)
    np.testing.assert_allclose(model.bias.tolist(), [-1.2, -1.2], rtol=1e-6)
