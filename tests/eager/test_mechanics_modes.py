"""Autograd mechanics: requires_grad and leaves, grad modes and inference mode, threads,
anomaly detection, memory (no reference cycles); against torch 2.13."""

from __future__ import annotations

import gc
import threading
import time
import warnings
import weakref

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close
from tests.eager.test_mechanics_inplace import both, raises_like_torch


# --- requires_grad and leaves ----------------------------------------------------------
def test_requires_grad_propagation_and_leaves():
    def run(T):
        a = T.ones(2)
        w = T.ones(2, requires_grad=True)
        y = a * w
        z = a * 2
        return (
            y.requires_grad,
            y.is_leaf,
            z.requires_grad,
            z.is_leaf,
            w.is_leaf,
            a.is_leaf,
            y.detach().is_leaf,
            y.detach().requires_grad,
        )

    ours, theirs = both(run)
    assert ours == theirs


def test_requires_grad_errors_and_freezing():
    raises_like_torch(
        lambda T: (T.ones(2, requires_grad=True) * 2).requires_grad_(False),
        "you can only change requires_grad flags of leaf variables.",
    )
    raises_like_torch(
        lambda T: T.ones(2, dtype=T.int64).requires_grad_(),
        "only Tensors of floating point dtype can require gradients",
    )

    def frozen(T):
        w = T.ones(2, requires_grad=True).requires_grad_(False)
        v = T.ones(2, requires_grad=True)
        (w * v).sum().backward()
        return w.grad, v.grad.tolist()

    assert both(frozen)[0] == both(frozen)[1] == (None, [1.0, 1.0])


def test_detach_inplace_makes_a_leaf():
    def run(T):
        y = T.ones(2, requires_grad=True) * 2
        y.detach_()
        return y.is_leaf, y.requires_grad, y.grad_fn

    assert both(run)[0] == both(run)[1] == (True, False, None)


def test_backward_with_several_roots_and_autograd_grad_options():
    def run(T):
        x = T.tensor([1.0, 2.0], requires_grad=True)
        u = T.tensor([3.0], requires_grad=True)
        a, b = x.exp(), x * x
        T.autograd.backward([a.sum(), b], [None, T.tensor([1.0, -1.0])])
        g_unused = T.autograd.grad((x * 2).sum(), [x, u], allow_unused=True)
        g_mat = T.autograd.grad((x * 2).sum(), [x, u], materialize_grads=True)
        (hx,) = T.autograd.grad((x**3).sum(), x, create_graph=True)
        (hh,) = T.autograd.grad(hx, x, grad_outputs=T.ones(2))
        return x.grad, g_unused[1], g_mat[1], hh

    ours, theirs = both(run)
    assert_close(ours[0], theirs[0], rtol=1e-6)
    assert ours[1] is None and theirs[1] is None
    assert_close(ours[2], theirs[2])
    assert_close(ours[3], theirs[3])
    raises_like_torch(
        lambda T: T.autograd.grad(
            (T.ones(1, requires_grad=True) * 2).sum(), [T.ones(1, requires_grad=True)]
        ),
        "The differentiated Tensor at index 0 appears to not have been used in the graph.",
    )


def test_non_leaf_grad_warns():
    y = staged.ones(2, requires_grad=True) * 2
    with pytest.warns(UserWarning, match="is not a leaf Tensor is being accessed"):
        assert y.grad is None


# --- grad modes ------------------------------------------------------------------------
def test_grad_modes_context_decorator_function_and_factories():
    def run(T):
        x = T.ones(2, requires_grad=True)
        out = []
        with T.no_grad():
            out.append((x * 2).requires_grad)
            out.append(T.ones(2, requires_grad=True).requires_grad)  # factories still may
            with T.enable_grad():
                out.append((x * 2).requires_grad)

        @T.no_grad()
        def f():
            return (x * 2).requires_grad

        @T.enable_grad
        def g():
            return (x * 2).requires_grad

        out += [f(), g()]
        T.set_grad_enabled(False)
        out.append((x * 2).requires_grad)
        T.set_grad_enabled(True)
        with T.set_grad_enabled(False):
            out.append(T.is_grad_enabled())
        out.append(T.is_grad_enabled())
        return out

    assert both(run)[0] == both(run)[1]


def test_inference_mode_tensors():
    def run(T):
        n = T.ones(3)
        with T.inference_mode():
            a = T.ones(3)
            b = n * 2
            v = n.view(3, 1)  # a view of a normal tensor stays normal
            n.add_(1)  # in-place on a normal tensor inside: allowed, counted
            flags = (T.is_grad_enabled(), T.is_inference_mode_enabled())
            with T.inference_mode(False):
                c = T.ones(2)
                inner = (T.is_grad_enabled(), T.is_inference_mode_enabled())

        @T.inference_mode()
        def f():
            return T.ones(1).is_inference()

        return (
            a.is_inference(),
            b.is_inference(),
            v.is_inference(),
            n.is_inference(),
            c.is_inference(),
            n._version,
            flags,
            inner,
            f(),
            a.detach().is_inference(),
        )

    assert both(run)[0] == both(run)[1]

    def mk(T):
        with T.inference_mode():
            return T.ones(3)

    raises_like_torch(
        lambda T: mk(T).add_(1),
        "Inplace update to inference tensor outside InferenceMode is not allowed.",
    )
    raises_like_torch(lambda T: mk(T)._version, "Inference tensors do not track version counter.")
    raises_like_torch(
        lambda T: mk(T).requires_grad_(),
        "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.",
    )


def test_grad_mode_is_thread_local():
    seen = []
    with staged.no_grad():
        th = threading.Thread(target=lambda: seen.append(staged.is_grad_enabled()))
        th.start()
        th.join()
        seen.append(staged.is_grad_enabled())
    assert seen == [True, False]


# --- threads ---------------------------------------------------------------------------
def _run_threads(fn, n=10):
    errors = []

    def wrapped():
        try:
            fn()
        except Exception as e:  # noqa: BLE001  (reported to the test thread)
            errors.append(e)

    threads = [threading.Thread(target=wrapped) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_hogwild_seed_example():
    grads = []

    def train_fn():
        x = staged.ones(5, 5, requires_grad=True)
        y = (x + 3) * (x + 4) * 0.5
        y.sum().backward()
        grads.append(x.grad)

    assert _run_threads(train_fn) == []
    tx = torch.ones(5, 5, requires_grad=True)
    ((tx + 3) * (tx + 4) * 0.5).sum().backward()
    assert len(grads) == 10 and all(np.array_equal(g.numpy(), tx.grad.numpy()) for g in grads)


def test_stress_shared_parameters_10_threads_x_100_backwards():
    """Accumulation into a shared .grad is locked per AccumulateGrad: the sum is exact."""
    w = staged.tensor(np.linspace(-1, 1, 12).reshape(3, 4), requires_grad=True)
    b = staged.zeros(4, dtype=staged.float64, requires_grad=True)
    x = staged.tensor(np.arange(6.0).reshape(2, 3))

    def train():
        for _ in range(100):
            ((x @ w + b).tanh() ** 2).sum().backward()

    assert _run_threads(train) == []
    tw = torch.tensor(w.numpy(force=True), requires_grad=True)
    tb = torch.zeros(4, dtype=torch.float64, requires_grad=True)
    ((torch.tensor(x.numpy()) @ tw + tb).tanh() ** 2).sum().backward()
    assert_close(w.grad, tw.grad * 1000, rtol=1e-9)
    assert_close(b.grad, tb.grad * 1000, rtol=1e-9)


def test_shared_graph_from_threads_with_retain_graph_and_freed_error():
    x = staged.tensor([1.0, 2.0], requires_grad=True)
    h = x.exp()  # the shared first part of the graph
    results = []

    def second_part():
        (g,) = staged.autograd.grad((h * h).sum(), x, retain_graph=True)
        results.append(g)

    assert _run_threads(second_part) == []
    assert all(np.allclose(g.numpy(), 2 * np.exp(2 * np.array([1.0, 2.0]))) for g in results)
    # one thread frees the shared part; the next one gets PyTorch's error
    t = threading.Thread(target=lambda: (h * 2).sum().backward())
    t.start()
    t.join()
    errors = _run_threads(lambda: (h * 3).sum().backward(), n=1)
    assert len(errors) == 1 and "Specify retain_graph=True" in str(errors[0])


def test_hooks_run_on_the_thread_running_backward():
    where = []
    x = staged.ones(2, requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: where.append(threading.get_ident()))
    th = threading.Thread(target=lambda: y.sum().backward())
    th.start()
    th.join()
    assert where == [th.ident]


# --- anomaly detection -----------------------------------------------------------------
def test_detect_anomaly_nan_names_the_node():
    def run(T):
        with T.autograd.detect_anomaly():
            a = T.tensor([0.0], requires_grad=True)
            (a / a).sum().backward()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raises_like_torch(run, "Function 'DivBackward0' returned nan values in its ")
    assert not staged.autograd.is_anomaly_enabled()


def test_anomaly_mode_reports_the_forward_traceback_of_the_failing_node():
    def failing_hook(go):
        raise RuntimeError("Some error in backward")

    def run_fn(a):
        out = a.exp()  # the forward line the warning must show
        out.grad_fn.register_prehook(failing_hook)
        return out.sum()

    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        mode = staged.autograd.detect_anomaly()
    with mode, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = run_fn(staged.rand(10, 10, requires_grad=True))
        with pytest.raises(RuntimeError, match="Some error in backward"):
            out.backward()
    text = "\n".join(str(w.message) for w in caught)
    assert (
        "Error detected in ExpBackward0. Traceback of forward call that caused the error" in text
        and "out = a.exp()" in text
        and "in run_fn" in text
    )
    # off: no traceback is kept
    staged.autograd.set_detect_anomaly(False)
    assert "traceback_" not in staged.ones(1, requires_grad=True).exp().grad_fn.metadata
    with staged.autograd.set_detect_anomaly(True):
        assert staged.autograd.is_anomaly_enabled()
        assert "traceback_" in staged.ones(1, requires_grad=True).exp().grad_fn.metadata
    assert not staged.autograd.is_anomaly_enabled()


# --- memory ----------------------------------------------------------------------------
def _no_gc(fn):
    gc.collect()
    gc.disable()
    try:
        return fn()
    finally:
        gc.enable()


def test_graph_freed_when_outputs_die_without_gc():
    def run():
        x = staged.ones(3, requires_grad=True)
        y = x.exp()  # saves its output: no cycle (the seed's Note)
        z = (y * y).sum()
        refs = [weakref.ref(y), weakref.ref(y.grad_fn), weakref.ref(z.grad_fn)]
        del y, z
        return [r() for r in refs]

    assert _no_gc(run) == [None, None, None]


def test_saved_tensors_released_after_backward_without_gc():
    def run():
        x = staged.ones(3, requires_grad=True)
        h = x * 2
        out = (h * h).sum()
        ref = weakref.ref(h)
        del h
        alive_before = ref() is not None
        out.backward()
        return alive_before, ref()

    assert _no_gc(run) == (True, None)


def test_views_and_inplace_leave_no_cycles():
    def run():
        x = staged.ones(2, 3, requires_grad=True)
        y = x * 1
        v = y.t()
        v.mul_(2)
        loss = (y * y).sum()
        refs = [weakref.ref(y), weakref.ref(v), weakref.ref(y.grad_fn), weakref.ref(v.grad_fn)]
        del y, v
        loss.backward()
        del loss
        return [r() for r in refs]

    assert _no_gc(run) == [None, None, None, None]


def test_threads_making_a_leafs_accumulator_at_once_share_one(monkeypatch):
    """Two AccumulateGrad nodes of one leaf, made by two threads at once, would accumulate
    into .grad under two locks (the stress test above lost 36 of 1000 updates under load);
    the second thread must get the first's, as torch's mutex ensures."""
    from staged.autograd.node import AccumulateGrad

    x = staged.zeros(2, requires_grad=True)
    make = AccumulateGrad.__init__

    def slow(self, variable):  # widens the window between the check and the store
        time.sleep(0.05)
        make(self, variable)

    monkeypatch.setattr(AccumulateGrad, "__init__", slow)
    got: list = []
    threads = [threading.Thread(target=lambda: got.append(x._grad_accumulator())) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got[0] is got[1]
