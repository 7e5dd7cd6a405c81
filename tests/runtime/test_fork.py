"""A process forked after compiled steps ran (Note [fork] in staged/runtime/device.py):
it reads what the steps left on the device, compiles and runs steps of its own, and a
step of its parent's raises, naming the fix, where it waited forever."""

from __future__ import annotations

import atexit
import multiprocessing
import os
import threading
import time

import numpy as np
import pytest

import staged
from staged.runtime import background, compiler


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


def _reads(values, q):
    out = []
    for v in values:
        try:
            out.append(("read", v.tolist()))
        except Exception as e:  # noqa: BLE001  (reported to the parent)
            out.append((type(e).__name__, str(e)))
    q.put(out)


def test_a_failed_index_check_is_raised_in_parent_and_child_after_a_fork():
    """Values of a call whose index check failed, unread at the fork: the fork neither
    raises nor stops there (other values reach the child too: the hook used to stop at the
    first failed check, and report it where nobody saw it), and a read raises the check's
    IndexError in the child and, still, in the parent."""
    table = staged.arange(6.0)

    @staged.compile
    def pick(i):
        return table[i] * 2

    @staged.compile
    def other(i):
        return table[i] + 1

    good, bad, later = pick(staged.tensor([1])), pick(staged.tensor([9])), other(staged.tensor([2]))
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_reads, args=([good, bad, later], q))
    p.start()
    got = q.get(timeout=120)
    p.join(timeout=120)
    assert p.exitcode == 0, p.exitcode
    assert got[0] == ("read", [2.0]) and got[2] == ("read", [3.0]), got
    assert got[1][0] == "IndexError" and "index 9 is out of bounds" in got[1][1], got
    with pytest.raises(IndexError, match="index 9 is out of bounds"):
        bad.tolist()
    assert later.tolist() == [3.0]


def test_a_fork_finds_device_values_without_walking_the_heap(monkeypatch):
    """``gc.get_objects`` hands out objects other threads are still building (a tuple being
    built failed with SystemError in its thread): the fork hooks keep a registry."""
    x = staged.ones(3)

    @staged.compile
    def double():
        return x * 2

    y = double()

    def refuse():
        raise AssertionError("a fork hook walked the heap")

    monkeypatch.setattr("gc.get_objects", refuse)
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_reads, args=([y], q))
    p.start()
    got = q.get(timeout=120)
    p.join(timeout=120)
    assert p.exitcode == 0 and got == [("read", [2.0, 2.0, 2.0])], (p.exitcode, got)


def _bg_step(scale):
    w = staged.ones(3)

    def f():
        return (w * scale).sum()

    step = staged.compile(f, mode="background")
    step(), step()  # the second call starts the compile (Note [deferred compiles])
    return step


def test_a_child_forked_during_background_compiles_leaves_them_to_its_parent():
    """The child has neither the parent's ``iree-compile`` processes (its exit killed
    them, failing the parent's compile) nor its queued compiles (its worker compiled them
    before its own); its own compile runs, and the parent's both finish."""
    steps = [_bg_step(2.0), _bg_step(4.0)]  # one compiling, one waiting for the worker
    deadline = time.monotonic() + 120
    while not compiler._children and time.monotonic() < deadline:
        time.sleep(0.005)
    assert compiler._children and background._jobs.qsize() == 1, "no compile was running"
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a child that exits normally: its atexit handlers run
        code = 1
        try:
            inherited = (len(compiler._children), background._jobs.qsize())
            own = _bg_step(3.0)
            background.drain(120)
            got = float(own())
            os.write(w, repr((inherited, got, own._last.background.status.state)).encode())
            atexit._run_exitfuncs()
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    child = os.read(r, 200).decode()
    os.close(r)
    assert os.waitstatus_to_exitcode(status) == 0, status
    assert child == repr(((0, 0), 9.0, "compiled")), child
    for step, want in zip(steps, (6.0, 12.0)):
        bg = step._last.background
        assert bg.done.wait(120) and bg.error is None, bg.error
        assert float(step()) == want and bg.status.state == "compiled"


def _stderr_and_a_capture(q):
    st = os.fstat(2)
    with compiler._captured_stderr() as c:
        os.write(2, b"child's own")
    q.put(((st.st_dev, st.st_ino), c.text))


def test_a_child_forked_while_stderr_is_captured_writes_to_stderr():
    """IREE's console is captured (fd 2 redirected) while an in-process compile runs: a
    child forked meanwhile writes to the stderr it had before, and captures its own."""
    st = os.fstat(2)
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    with compiler._captured_stderr():
        p = ctx.Process(target=_stderr_and_a_capture, args=(q,))
        p.start()
        got = q.get(timeout=120)
    p.join(timeout=120)
    assert p.exitcode == 0 and got == ((st.st_dev, st.st_ino), "child's own"), (p.exitcode, got)


def _draw_and_step(parents_step, q):
    w = staged.ones(2)
    try:
        parents_step()
        refused = "ran"
    except RuntimeError as e:
        refused = "made before this process was forked" in str(e)
    q.put((staged.rand(2).shape, staged.compile(lambda: w * 3)().tolist(), refused))


def test_a_child_forked_while_a_thread_holds_staged_locks_uses_them():
    """A thread of the parent drawing random numbers or running a compiled call holds a
    lock when the process forks: the child draws, traces and compiles anyway, and a call
    of the parent's step raises as it should (each waited forever; Note [locks across a
    fork])."""
    from staged.eager.random.generator import default_generator
    from staged.tracing.capture import state_lock

    w = staged.ones(2)
    parents_step = staged.compile(lambda: w * 2)
    parents_step()
    held, release = threading.Event(), threading.Event()

    def hold():
        with default_generator.lock, state_lock, parents_step._lock:
            held.set()
            release.wait(120)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert held.wait(60)
        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=_draw_and_step, args=(parents_step, q))
        p.start()
        got = q.get(timeout=120)
        p.join(timeout=120)
    finally:
        release.set()
        t.join()
    assert p.exitcode == 0 and got == ((2,), [3.0, 3.0], True), (p.exitcode, got)


def test_a_value_of_a_failed_call_keeps_no_copy_and_raises_nothing_at_a_fork():
    """The report of a call that failed on the device raises when read: the fork hook
    raised it, and the values after it got no copy (the child could not read them)."""
    table = staged.arange(6.0)

    @staged.compile
    def pick(i):
        return table[i] * 2

    pick(staged.tensor([1]))
    bad = pick(staged.tensor([1]))._payload
    pick._last.module._timeline[0].fail("injected device failure")
    assert bad.check is not None
    bad.keep_home()
    assert bad.home is None
    with pytest.raises(RuntimeError, match="injected device failure"):
        np.asarray(bad)
