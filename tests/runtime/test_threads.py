"""Compiled steps called from several threads (Note [one trace at a time] in
staged/tracing/capture.py): calls that share state serialize their read-modify-write, so
no update is lost, and concurrent first calls trace once."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

import staged
from tests.threads import in_threads, switching_often
from staged import optim

CALLS = 50


@pytest.fixture(autouse=True)
def _switch_often():
    with switching_often():
        yield


def _sgd_step(w, opt, body_runs=None):
    """One SGD step on loss = sum(w * x): the gradient is x, so each call subtracts
    lr * x from w whatever the order of calls."""

    def step(x):
        if body_runs is not None:
            body_runs.append(threading.get_ident())
        (w * x).sum().backward()
        opt.step()
        opt.zero_grad()  # last: every call starts with .grad None, so one trace serves all

    return step


def _calls(fn, x, n=CALLS):
    return lambda: [fn(x) for _ in range(n)]


def test_two_threads_calling_one_step_make_every_update_and_trace_once():
    w = staged.zeros(4, requires_grad=True)
    opt = optim.SGD([w], lr=0.5)
    runs = []
    step = staged.compile(_sgd_step(w, opt, runs))
    x = staged.tensor([1.0, 2.0, 3.0, 4.0])
    in_threads(_calls(step, x), _calls(step, x))  # the first calls race to trace
    np.testing.assert_array_equal(w.detach().numpy(), -0.5 * 2 * CALLS * x.numpy())
    assert w.grad is None
    assert step.traces == 1 and len(runs) == 1


def test_two_steps_sharing_parameters_on_two_threads_make_every_update():
    w = staged.zeros(4, requires_grad=True)
    opt = optim.SGD([w], lr=0.25)
    step_a = staged.compile(_sgd_step(w, opt))
    step_b = staged.compile(_sgd_step(w, opt))
    xa, xb = staged.tensor([1.0, 0.0, 2.0, 0.0]), staged.tensor([0.0, 4.0, 0.0, 8.0])
    in_threads(_calls(step_a, xa), _calls(step_b, xb))
    np.testing.assert_array_equal(w.detach().numpy(), -0.25 * CALLS * (xa.numpy() + xb.numpy()))


def test_a_compiled_function_called_while_another_traces_is_inlined_without_deadlock():
    inner = staged.compile(lambda x: x * 2)
    outer = staged.compile(lambda x: inner(x) + 1)  # torch.compile inlines it too
    x = staged.tensor([1.0, 2.0])
    got = {}
    in_threads(
        lambda: got.setdefault("outer", [outer(x).tolist() for _ in range(5)]),
        lambda: got.setdefault("inner", [inner(x).tolist() for _ in range(5)]),
    )
    assert got == {"outer": [[3.0, 5.0]] * 5, "inner": [[2.0, 4.0]] * 5}
    assert outer.traces == 1


def test_steps_compiled_run_and_dropped_in_threads_at_once(tmp_path):
    """Three threads each compile (cold cache), run and drop steps while the others
    compile: a dropped step's module frees the argument lists of its calls before its VM
    context (in the other order the process crashed, on 3 runs in 4)."""
    import os
    import subprocess

    script = (
        "import threading, numpy as np, staged\n"
        "def work(i):\n"
        "    for r in range(2):\n"
        "        n = 3 + i + 7 * r\n"
        "        step = staged.compile(lambda x: (x.exp() * x.sin() + x.tanh().cumsum(0)).sum(0))\n"
        "        got = step(staged.tensor(np.ones((n, n + 1), np.float32))).numpy()\n"
        "        assert np.allclose(got, n * (np.e * np.sin(1.0)) + np.tanh(1.0) * n * (n + 1) / 2)\n"
        "        del step\n"
        "ts = [threading.Thread(target=work, args=(i,)) for i in range(3)]\n"
        "[t.start() for t in ts]\n[t.join() for t in ts]\nprint('done')\n"
    )
    for k in range(2):
        env = {**os.environ, "STAGED_CACHE_DIR": str(tmp_path / str(k))}
        run = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env
        )
        assert run.returncode == 0 and run.stdout.split() == ["done"], (
            run.returncode,
            run.stderr[-2000:],
        )


def test_threads_asking_for_the_device_at_once_share_one(tmp_path):
    """Two threads whose first calls come at once share one device: made twice, the copy
    not kept was freed under the modules loaded on it (SIGSEGV, 3 runs in 3, of two threads
    each loading, calling and dropping a module)."""
    import os
    import subprocess

    script = (
        "import threading, numpy as np, staged\n"
        "from staged.runtime.device import device\n"
        "go, got = threading.Barrier(2), []\n"
        "def work(i):\n"
        "    go.wait()\n"
        "    got.append(device())\n"
        "    step = staged.compile(lambda x: (x.exp() * x.sin()).sum(0))\n"
        "    for n in range(3, 6):\n"
        "        out = step(staged.tensor(np.ones((n, 4 + i), np.float32))).numpy()\n"
        "        assert np.allclose(out, n * np.e * np.sin(1.0))\n"
        "ts = [threading.Thread(target=work, args=(i,)) for i in range(2)]\n"
        "[t.start() for t in ts]\n[t.join() for t in ts]\n"
        "print(got[0] is got[1])\n"
    )
    env = {**os.environ, "STAGED_CACHE_DIR": str(tmp_path)}
    for _ in range(2):
        run = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env
        )
        assert run.returncode == 0 and run.stdout.split() == ["True"], (
            run.returncode,
            run.stdout,
            run.stderr[-2000:],
        )
