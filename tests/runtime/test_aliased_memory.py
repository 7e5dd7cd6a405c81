"""A compiled step's writes reach every object that sees the written memory, as eager
in-place writes do (Note [aliased memory] in staged/runtime/compiled.py): views,
``.data`` and ``detach()`` aliases and ``numpy()`` arrays of parameters and optimizer
state, taken before the first call or between calls; arguments whose memory is shared
with each other and written raise rather than compute on stale copies."""

from __future__ import annotations

import numpy as np
import pytest

import staged
from staged.runtime.device import DeviceValue
from staged.tracing.symbolic import CaptureError

# every way to hold a parameter's memory, each read after the steps
ALIASES = {
    "data": lambda p: p.data,
    "detach": lambda p: p.detach(),
    "view": lambda p: p[0],
    "data view": lambda p: p.data[1],
    "transpose": lambda p: p.detach().t(),
    "numpy": lambda p: p.detach().numpy(),
}


def _train(compiled: bool, take_after: int, steps: int = 4):
    """SGD with momentum on a Linear layer; aliases of its weight and of the momentum
    buffer taken after ``take_after`` steps, read after ``steps``."""
    staged.manual_seed(0)
    m = staged.nn.Linear(3, 2)
    opt = staged.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    x = staged.arange(12.0).reshape(4, 3) / 10

    def step(x):
        opt.zero_grad()
        loss = m(x).pow(2).sum()
        loss.backward()
        opt.step()
        return loss

    f = staged.compile(step) if compiled else step
    held = {}
    for i in range(steps):
        if i == take_after:
            held = {k: make(m.weight) for k, make in ALIASES.items()}
            held["momentum"] = opt.state[m.weight]["momentum_buffer"].detach()
        f(x)
    values = {
        k: np.array(v.detach() if isinstance(v, staged.Tensor) else v) for k, v in held.items()
    }
    return values, m, opt


@pytest.mark.parametrize(
    "take_after", [1, 2], ids=["before the first compiled call", "between calls"]
)
def test_aliases_of_parameters_and_state_see_the_compiled_writes(take_after):
    eager = _train(False, take_after)[0]
    compiled = _train(True, take_after)[0]
    assert eager.keys() == compiled.keys()
    for k in eager:
        np.testing.assert_allclose(compiled[k], eager[k], rtol=1e-5, atol=1e-6, err_msg=k)
    assert not np.array_equal(
        compiled["data"], _train(True, take_after, steps=take_after + 1)[0]["data"]
    )


def test_parameters_and_state_without_aliases_stay_on_the_device():
    """The copy into shared memory is only for memory something else sees: not SGD's
    momentum buffer either, ``clone(grad).detach()``, whose clone only the buffer holds."""
    _, m, opt = _train(True, take_after=99)
    for p in m.parameters():
        assert type(p._payload) is DeviceValue
        assert type(opt.state[p]["momentum_buffer"]._payload) is DeviceValue


def test_an_argument_from_numpy_sees_its_in_place_write():
    a = np.zeros(3, np.float32)
    x = staged.from_numpy(a)
    staged.compile(lambda t: t.add_(1))(x)
    np.testing.assert_array_equal(a, [1, 1, 1])


def test_data_rebound_outside_the_step_leaves_old_aliases_on_the_old_memory():
    """``p.data = u`` starts a new memory in torch: aliases taken before keep the old."""
    results = []
    for compiled in (False, True):
        w = staged.ones(2)
        f = staged.compile(lambda: w.mul_(2)) if compiled else (lambda: w.mul_(2))
        f()
        old = w.detach()
        w.data = staged.full((2,), 10.0)
        f()
        results.append((old.tolist(), w.tolist()))
    assert results[0] == results[1] == ([2.0, 2.0], [20.0, 20.0])


def _same(x):
    return x, x


def _row_and_base(x):
    return x[0], x


def _base_and_row(x):
    return x, x[0]


def _overlapping(x):
    return x.reshape(-1)[:4], x.reshape(-1)[2:]


def _numpy_twice(x):
    a = x.numpy()
    return staged.from_numpy(a), staged.from_numpy(a[1:])


@pytest.mark.parametrize("make", [_same, _row_and_base, _base_and_row, _overlapping, _numpy_twice])
def test_arguments_sharing_written_memory_raise_instead_of_reading_a_stale_copy(make):
    def step(a, b):
        a.mul_(2)
        return b + 0  # eager reads a's write through b

    x = staged.arange(6.0).reshape(2, 3)
    stale = make(x.clone())[1] + 0
    assert not np.array_equal(step(*make(x.clone())), stale)  # eager sees the write
    with pytest.raises(
        staged.runtime.shared_inputs.SharedInputsError,
        match="share memory and the step writes a in place",
    ):
        staged.compile(step)(*make(x.clone()))


def test_arguments_sharing_memory_that_no_one_writes_run():
    data = staged.arange(10.0)
    f = staged.compile(lambda x, y: (x * y).sum())
    assert f(data[:5], data[1:6]).item() == (data[:5] * data[1:6]).sum().item()


def test_a_parameter_passed_as_an_argument_to_a_step_that_updates_it_raises():
    m = staged.nn.Linear(2, 1)
    opt = staged.optim.SGD(m.parameters(), lr=0.1)

    def step(x, w):
        opt.zero_grad()
        m(x).sum().backward()
        opt.step()
        return w.sum()  # eager: the updated weight

    # the trace sees the optimizer reach the argument's own tensor (Note [argument
    # originals]), before the runtime would see the two inputs share memory
    with pytest.raises(
        CaptureError, match="w is an argument of the compiled step and is also reached"
    ):
        staged.compile(step)(staged.ones(3, 2), m.weight)


def test_an_argument_an_optimizer_holds_raises_not_left_untrained():
    """An optimizer given the argument itself read its ``.grad``, which the trace's
    backward never set (it fills the argument's stand-in's): eagerly x trains, compiled
    it stayed 0 with the loss 3.0 at every call."""
    x = staged.zeros(3, requires_grad=True)
    opt = staged.optim.SGD([x], lr=0.1)

    def step(x):
        loss = ((x - 1) ** 2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    with pytest.raises(CaptureError, match="x is an argument of the compiled step"):
        staged.compile(step)(x)
    assert type(x) is staged.Tensor and x.grad is None  # the caller's tensor as it was
    assert float(step(x)) == 3.0 and x.grad is not None  # and eager trains it


def test_parameters_tied_through_data_raise():
    """``dec.weight.data = enc.weight.data`` makes one memory of two parameters: eager
    applies both updates to it, a graph would compute each from the old value."""
    enc, dec = staged.nn.Linear(3, 3), staged.nn.Linear(3, 3)
    dec.weight.data = enc.weight.data
    opt = staged.optim.SGD([*enc.parameters(), *dec.parameters()], lr=0.1)

    def step(x):
        opt.zero_grad()
        dec(enc(x)).sum().backward()
        opt.step()

    with pytest.raises(staged.runtime.shared_inputs.SharedInputsError, match="share memory"):
        staged.compile(step)(staged.ones(2, 3))


def test_a_view_whose_base_was_written_before_the_trace_is_read_not_refused():
    """A view of a data set, the data set then written in place (normalised, rescaled
    between steps): the view's data is current (one memory), so the trace reads it as
    state; it refused it as memory shared with a written input (SharedInputsError)."""

    def run(compiled: bool):
        staged.manual_seed(0)
        model = staged.nn.Linear(4, 1)
        opt = staged.optim.SGD(model.parameters(), lr=0.05)
        full = staged.randn(80, 4)
        data, target = full[:64], staged.randn(64, 1)
        full.sub_(full.mean(0))  # before the first trace

        def step(idx):
            opt.zero_grad()
            loss = staged.nn.functional.mse_loss(model(data[idx]), target[idx])
            loss.backward()
            opt.step()
            return loss

        step = staged.compile(step) if compiled else step
        losses = []
        for i in range(6):
            losses.append(step(staged.arange(i, 64, 4)).item())
            full.mul_(1.01)  # between calls: the second call traces again (.grad is set)
        return losses, model.weight.detach().numpy().copy()

    (ours, w), (eager, w_eager) = run(True), run(False)
    np.testing.assert_allclose(ours, eager, rtol=1e-5)
    np.testing.assert_allclose(w, w_eager, rtol=1e-5)
