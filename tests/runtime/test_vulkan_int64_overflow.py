"""int64 held in int32 on vulkan-spirv (Note [int64 held in int32] in
``lower/mlir/overflow.py``): an int64 result that wraps at 32 bits inside a step raises
OverflowError, naming the op, when a result of that call is read, and the step keeps its
state; results in int32's range are torch's. llvm-cpu, which computes in int64, gives
torch's values for all of them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from staged import nn, optim
from tests.backends import needs_vulkan

BIG = 2**30

# (op, function of (staged or torch, tensors...), inputs (NumPy), int32 wraps inside the step)
CASES = [
    ("mul", lambda m, x: x * 100000, [np.array([1, 2, 30000])], True),
    ("mul", lambda m, x: x * 1000, [np.array([1, -2, 30000])], False),
    ("add", lambda m, x, y: x + y, [np.array([BIG, 5]), np.array([BIG, -7])], True),
    ("add", lambda m, x, y: x + y, [np.array([BIG, 5]), np.array([BIG - 1, -7])], False),
    ("sub", lambda m, x, y: x - y, [np.array([-BIG - 5]), np.array([BIG])], True),
    ("sub", lambda m, x, y: x - y, [np.array([-BIG]), np.array([BIG])], False),
    ("bitwise_left_shift", lambda m, x: x << 40, [np.array([0, 1])], True),
    ("bitwise_left_shift", lambda m, x: x << 31, [np.array([1])], True),
    ("bitwise_left_shift", lambda m, x: x << 30, [np.array([0, 1, -2])], False),
    ("floor_divide", lambda m, x, y: x // y, [np.array([-(2**31), 7]), np.array([-1, 2])], True),
    ("floor_divide", lambda m, x, y: x // y, [np.array([-(2**31), -7]), np.array([1, 2])], False),
    ("neg", lambda m, x: -x, [np.array([3, -(2**31)])], True),
    ("neg", lambda m, x: -x, [np.array([3, 1 - 2**31])], False),
    ("abs", lambda m, x: x.abs(), [np.array([3, -(2**31)])], True),
    ("reduce_sum", lambda m, x: x.sum(), [np.array([BIG, BIG])], True),
    ("reduce_sum", lambda m, x: x.sum(), [np.array([2**31 - 1, 1, -1])], False),
    ("reduce_sum", lambda m, x: x.sum(1), [np.array([[1, 2], [-BIG, -BIG - 1]])], True),
    ("reduce_sum", lambda m, x: x.sum(0), [np.array([[1, -BIG], [2, -BIG]])], False),
    ("reduce_sum", lambda m, x: x.sum(), [np.full(70000, 3)], False),  # in blocks
    ("reduce_sum", lambda m, x: (x > 0).sum(), [np.array([1, -1, 2])], False),  # no check
    ("reduce_sum", lambda m, x: x.sum(), [np.full(70000, 32767, np.int16)], True),
    ("reduce_sum", lambda m, x: x.sum(), [np.full(60000, -32768, np.int16)], False),
    ("reduce_prod", lambda m, x: x.prod(), [np.array([65536, 65536])], True),
    ("reduce_prod", lambda m, x: x.prod(), [np.array([65536, 65536, 0])], False),
    ("reduce_prod", lambda m, x: x.prod(), [np.array([65536, -32768])], False),
    ("reduce_prod", lambda m, x: x.prod(), [np.array([65536, 65536], np.int32)], True),
    ("cumsum", lambda m, x: x.cumsum(0), [np.array([BIG, BIG, -BIG])], True),
    ("cumsum", lambda m, x: x.cumsum(0), [np.array([BIG, BIG - 1, -BIG])], False),
    ("cumsum", lambda m, x: x.flip(0).cumsum(0).flip(0), [np.array([-BIG, BIG, BIG])], True),
    ("cast", lambda m, x: x.to(m.int64), [np.array([1.5, 3e9], np.float32)], True),
    ("cast", lambda m, x: x.to(m.int64), [np.array([-2.5e9], np.float32)], True),
    ("cast", lambda m, x: x.to(m.int64), [np.array([-3.5, 7.9, -(2.0**31)], np.float32)], False),
]
WRAPS = [c for c in CASES if c[3]]


def together(cases):
    """One function of every case's inputs, returning every case's result."""
    counts = [len(inputs) for _, _, inputs, _ in cases]

    def fn(m, *xs):
        out, k = [], 0
        for (_, f, _, _), n in zip(cases, counts):
            out.append(f(m, *xs[k : k + n]))
            k += n
        return out

    return fn, [a for _, _, inputs, _ in cases for a in inputs]


def run(fn, inputs, backend):
    step = staged.compile(lambda *xs: fn(staged, *xs), backend=backend)
    return step(*(staged.tensor(a) for a in inputs))


def torch_values(fn, inputs):
    return [r.numpy() for r in fn(torch, *(torch.tensor(a) for a in inputs))]


@pytest.mark.parametrize(
    ("backend", "cases"),
    [
        pytest.param("vulkan-spirv", [c for c in CASES if not c[3]], marks=needs_vulkan),
        ("llvm-cpu", CASES),
    ],
    ids=["vulkan-spirv-fits", "llvm-cpu"],
)
def test_torch_values(backend, cases):
    """In one module: vulkan-spirv's results in int32's range, and llvm-cpu's for every
    case, are torch's."""
    fn, inputs = together(cases)
    got = run(fn, inputs, backend)
    for (name, *_), g, want in zip(cases, got, torch_values(fn, inputs), strict=True):
        assert g.dtype == staged.int64, name
        np.testing.assert_array_equal(g.numpy(), want, err_msg=name)


@needs_vulkan
@pytest.mark.parametrize(
    ("name", "fn", "inputs"), [c[:3] for c in WRAPS], ids=[c[0] for c in WRAPS]
)
def test_vulkan_raises(name, fn, inputs):
    """Each wrapping case alone (its error fails the whole call) raises at every read."""
    out = run(lambda m, *xs: [fn(m, *xs)], inputs, "vulkan-spirv")[0]
    with pytest.raises(OverflowError, match=rf"^{name} at .*vulkan-spirv backend holds int64"):
        out.numpy()
    with pytest.raises(OverflowError, match="or use the llvm-cpu backend"):
        out.numpy()


def setup():
    """An SGD step on ``w`` that also returns ``n * 100000`` (int64)."""
    w = nn.Parameter(staged.tensor([1.0, -2.0, 3.0]))
    opt = optim.SGD([w], lr=0.1, momentum=0.9)

    def step(x, n):
        opt.zero_grad()
        loss = (w * x).square().sum()
        loss.backward()
        opt.step()
        return loss, n * 100000

    return step, w, opt


def state(w, opt) -> list:
    return [w.detach().numpy().copy()] + [
        v.numpy().copy() for s in opt.state.values() for v in s.values()
    ]


@needs_vulkan
def test_vulkan_step_raises_and_keeps_state():
    """A wrapped int64 result raises at the read of any result of its call, and at the
    next call when none was read (that call is dropped too); the parameter and momentum
    stay bit for bit, and good calls train along eager."""
    step, w, opt = setup()
    estep, ew, eopt = setup()
    cstep = staged.compile(step, backend="vulkan-spirv")
    x, good, bad = staged.tensor([0.5, 1.0, -1.5]), staged.tensor([7]), staged.tensor([30000])
    step(x, good), estep(x, good)  # the momentum buffers exist before the step is compiled
    for _ in range(2):
        loss, m = cstep(x, good)
        eloss, em = estep(x, good)
        assert m.tolist() == [700000]
        np.testing.assert_allclose(loss.item(), eloss.item(), rtol=1e-6)
    before = state(w, opt)
    loss, m = cstep(x, bad)
    for r in (m, loss):
        with pytest.raises(OverflowError, match=r"^mul at .*test_vulkan_int64_overflow"):
            r.tolist()  # reads the results (the loss requires grad: no numpy())
    for a, b in zip(before, state(w, opt), strict=True):
        np.testing.assert_array_equal(a, b)
    cstep(x, bad)  # not read: raised by the next call, once it has finished
    before = state(w, opt)  # (reading the state waits for it)
    with pytest.raises(OverflowError, match="vulkan-spirv backend holds int64 in"):
        cstep(x, good)
    for a, b in zip(before, state(w, opt), strict=True):
        np.testing.assert_array_equal(a, b)
    loss, _ = cstep(x, good)
    eloss, _ = estep(x, good)
    np.testing.assert_allclose(loss.item(), eloss.item(), rtol=1e-6)
    for a, b in zip(state(w, opt), state(ew, eopt), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert cstep.traces == 1
