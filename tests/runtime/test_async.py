"""Note [asynchronous steps]: llvm-cpu and vulkan-spirv calls enqueue their step and
return; reading a result waits for it, other compiled steps order themselves after it,
at most MAX_IN_FLIGHT calls are queued, and a failure surfaces where results are read."""

from __future__ import annotations

import numpy as np
import pytest

import staged
from staged.runtime import compiler
from staged.runtime.device import MAX_IN_FLIGHT
from tests.backends import needs_vulkan

N = 384


def _slow(x):
    """About 0.4 GFLOP: long enough that a reader not waiting would see a stale buffer."""
    for _ in range(4):
        x = (x @ x) * (1.0 / N)
    return x


def _slow_ref(a):
    for _ in range(4):
        a = (a @ a) * np.float32(1.0 / N)
    return a


BACKENDS = ["llvm-cpu", pytest.param("vulkan-spirv", marks=needs_vulkan)]


@pytest.fixture(scope="module", params=BACKENDS)
def slow(request):
    return staged.compile(_slow, backend=request.param)


def _data(seed):
    return np.random.default_rng(seed).standard_normal((N, N)).astype(np.float32)


def test_results_carry_their_step_until_read(slow):
    a = _data(0)
    r = slow(staged.tensor(a))
    value = r._payload
    assert value.ready is not None  # the call returned with the step enqueued
    np.testing.assert_allclose(r.numpy(), _slow_ref(a), rtol=1e-4, atol=1e-5)
    assert value.ready is None


@pytest.mark.parametrize("other", BACKENDS)
def test_a_result_fed_to_another_step_or_an_eager_op_is_waited_for(slow, other):
    a = _data(1)
    twice = staged.compile(lambda y: y * 2 + 1, backend=other)
    twice(staged.tensor(a))  # compiled before the race below
    ref = _slow_ref(a)
    np.testing.assert_allclose(
        twice(slow(staged.tensor(a))).numpy(), ref * 2 + 1, rtol=1e-4, atol=1e-5
    )
    np.testing.assert_allclose((slow(staged.tensor(a)) - 1).numpy(), ref - 1, rtol=1e-4, atol=1e-5)


def test_calls_in_flight_are_bounded(slow):
    arrays = [_data(10 + i) for i in range(8)]
    results = []
    for a in arrays:
        results.append(slow(staged.tensor(a)))
        module = slow._last.module
        sem, value = module._timeline
        assert module.max_in_flight == MAX_IN_FLIGHT
        assert value - sem.query() <= MAX_IN_FLIGHT
        assert len(module._in_flight) <= MAX_IN_FLIGHT
    for a, r in zip(arrays, results):
        np.testing.assert_allclose(r.numpy(), _slow_ref(a), rtol=1e-4, atol=1e-5)


def test_a_failed_step_raises_where_read_then_the_next_call_starts_afresh():
    f = staged.compile(lambda x: x + 1)
    x = staged.arange(4.0)
    f(x).numpy()
    r = f(x)
    sem = f._last.module._timeline[0]
    sem.fail("injected device failure")
    with pytest.raises(RuntimeError, match="injected device failure"):
        r.numpy()
    with pytest.raises(RuntimeError, match="injected device failure"):
        f(x)
    assert f(x).tolist() == [1.0, 2.0, 3.0, 4.0]


def _regression_steps(backend, dynamic):
    """An SGD step on a linear least-squares problem (a contraction: rounding differences do
    not grow over calls) compiled, and the same model for an eager run."""
    import staged.nn.functional as F
    from models.common import classification_step
    from staged import nn, optim

    def make():
        staged.manual_seed(0)
        model = nn.Linear(64, 16)
        return model, classification_step(model, optim.SGD(model.parameters(), lr=0.05), F.mse_loss)

    (cm, cstep), (em, estep) = make(), make()
    return cm, staged.compile(cstep, backend=backend, dynamic=dynamic), em, estep


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_many_unread_calls_equal_eager(backend, dynamic):
    """60 calls whose results are never read (a dynamic step's second call made while the
    first ran failed: 'transient buffer has not been committed'), then the state equals an
    eager run's."""
    rng = np.random.default_rng(0)
    x = staged.tensor(rng.standard_normal((256, 64)).astype(np.float32))
    y = staged.tensor(rng.standard_normal((256, 16)).astype(np.float32))
    cm, cstep, em, estep = _regression_steps(backend, dynamic)
    losses = [cstep(x, y) for _ in range(60)]
    for _ in range(60):
        last = estep(x, y)
    # float32 rounding per step, damped by the contraction: a few ulps of the values
    np.testing.assert_allclose(losses[-1].item(), last.item(), rtol=1e-5)
    for c, e in zip(cm.parameters(), em.parameters()):
        np.testing.assert_allclose(c.detach().numpy(), e.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_a_large_step_keeps_one_call_in_flight(monkeypatch):
    """Note [pool growth] in runtime/device.py: behind a queued call IREE 3.13's pools grew
    without bound for a large step, so a llvm-cpu step of 2**30 multiply-adds or more in
    matmuls is enqueued only once the call before it has finished; unread, it still ends
    where eager does."""

    def graph(k):
        return staged.capture(lambda a, b: a @ b, staged.ones(1024, k), staged.ones(k, 1024)).graph

    assert compiler.one_call_in_flight(graph(1024), "llvm-cpu")
    assert not compiler.one_call_in_flight(graph(1023), "llvm-cpu")
    assert not compiler.one_call_in_flight(graph(1024), "vulkan-spirv")
    monkeypatch.setattr(compiler, "ONE_IN_FLIGHT_MACS", 0)
    rng = np.random.default_rng(0)
    x = staged.tensor(rng.standard_normal((256, 64)).astype(np.float32))
    y = staged.tensor(rng.standard_normal((256, 16)).astype(np.float32))
    cm, cstep, em, estep = _regression_steps("llvm-cpu", False)
    for i in range(20):
        cstep(x, y)
        estep(x, y)
        if i >= 2:  # the first call is a one-shot trace (the optimizer's state appears)
            module = cstep._last.module
            assert module.max_in_flight == 1 and len(module._in_flight) == 1
    assert "one call in flight" in cstep.explanation()
    for c, e in zip(cm.parameters(), em.parameters()):
        np.testing.assert_allclose(c.detach().numpy(), e.detach().numpy(), rtol=1e-5, atol=1e-6)
