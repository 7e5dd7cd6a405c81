"""A compiled step whose index check fails leaves an argument it changes the shape of in
place (``x.unsqueeze_(0)``, ``t_()``, ``squeeze_()``) as it came in: value, shape and
strides (Note [index checks]); reading the call's loss raises eager's error, and the next
good call gives torch's result on the kept value. Torch is the oracle of the good calls,
eager staged of the error (its message names the op's line)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from staged.runtime.background import drain
from tests.backends import needs_vulkan

WAIT_S = 300  # a hang guard, not a timing: a cold compile on a loaded machine is slow
TABLE = np.arange(12.0, dtype=np.float32).reshape(3, 4)
GOOD, BAD = [0, 1], [0, 7]

# name -> (the argument's shape, what the step does to it with v, a 0-d tensor); the last
# keeps its shape: it keeps its value by the checks' select (as ``acc.add_``), and reading
# it raises, as reading the loss does
CASES = {
    "unsqueeze_": ((2, 3), lambda x, v: x.unsqueeze_(0).mul_(v)),
    "t_": ((2, 3), lambda x, v: x.t_().add_(v)),
    "transpose_": ((2, 3), lambda x, v: x.transpose_(0, 1).add_(v)),
    "squeeze_": ((2, 1, 3), lambda x, v: x.squeeze_().add_(v)),
    "a view written after unsqueeze_": ((2, 3), lambda x, v: x.unsqueeze_(0)[0, 1].add_(v)),
    "a view of a reshape written": ((2, 3), lambda x, v: x.reshape(3, 2)[0].add_(v)),
}


def make_step(case: str):
    change = CASES[case][1]

    def step(x, idx, table):
        change(x, table[idx].sum())
        return (x * x).sum()

    return step


def start(case: str, rows: int | None = None) -> np.ndarray:
    shape = CASES[case][0]
    shape = shape if rows is None else (rows, *shape[1:])
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape) - 2.0


def torch_call(case: str, x: np.ndarray, idx, base: np.ndarray | None = None):
    """Torch's loss and ``x`` after the step (``x`` a view of ``base``'s last rows, if
    given: then torch's ``base`` too)."""
    b = torch.tensor(x if base is None else base)
    t = b if base is None else b[len(base) - len(x) :]
    loss = make_step(case)(t, torch.tensor(idx), torch.tensor(TABLE))
    return loss.item(), t.numpy(), b.numpy()


def eager_error(case: str, x: np.ndarray) -> str:
    with pytest.raises(IndexError) as got:
        make_step(case)(staged.tensor(x), staged.tensor(BAD), staged.tensor(TABLE))
    return str(got.value)


def check_call_pair(f, case: str, x: staged.Tensor, base: staged.Tensor | None = None):
    """A bad call of ``f`` on ``x`` (a view of ``base``, if given) leaves both as they came
    in and its loss raises; a good call then equals torch's on that value."""
    came, shape, strides = x.numpy().copy(), x.shape, x.stride()
    base_came = None if base is None else base.numpy().copy()
    loss = f(x, staged.tensor(BAD), staged.tensor(TABLE))
    assert (x.shape, x.stride()) == (shape, strides)
    with pytest.raises(IndexError) as got:
        loss.item()
    assert str(got.value) == eager_error(case, came)
    if case == "a view of a reshape written":
        with pytest.raises(IndexError, match="index 7 is out of bounds"):
            x.numpy()
    else:
        np.testing.assert_array_equal(x.numpy(), came)
    if base is not None:
        np.testing.assert_array_equal(base.numpy(), base_came)
    want_loss, want_x, want_base = torch_call(case, came, GOOD, base_came)
    assert f(x, staged.tensor(GOOD), staged.tensor(TABLE)).item() == want_loss
    assert tuple(x.shape) == want_x.shape
    np.testing.assert_array_equal(x.numpy(), want_x)
    if base is not None:
        np.testing.assert_array_equal(base.numpy(), want_base)


@pytest.mark.parametrize("case", list(CASES))
def test_a_failed_check_keeps_the_argument_as_it_came(case):
    f = staged.compile(make_step(case))
    x = staged.tensor(start(case))
    want_loss, want_x, _ = torch_call(case, start(case), GOOD)
    assert f(x, staged.tensor(GOOD), staged.tensor(TABLE)).item() == want_loss
    np.testing.assert_array_equal(x.numpy(), want_x)
    check_call_pair(f, case, staged.tensor(start(case)))
    assert f.traces == 1


@pytest.mark.parametrize(
    "case",
    [
        "unsqueeze_",
        "squeeze_",
        "a view written after unsqueeze_",
        "t_",
    ],
)
def test_a_view_argument_and_its_base_are_kept(case):
    """``x`` a view of ``base`` (its writes reach ``base``'s memory): neither changes."""
    f = staged.compile(make_step(case))
    base = staged.tensor(np.concatenate([start(case) + 10.0, start(case)]))
    check_call_pair(f, case, base[len(start(case)) :], base)


def test_background_mode_once_compiled():
    case = "unsqueeze_"
    f = staged.compile(make_step(case), mode="background")
    for _ in range(2):  # call 1 runs untraced; call 2 traces and starts the compile
        f(staged.tensor(start(case)), staged.tensor(GOOD), staged.tensor(TABLE))
    assert drain(WAIT_S)
    check_call_pair(f, case, staged.tensor(start(case)))  # a call that returns: compiled


@pytest.mark.parametrize("case", ["unsqueeze_", "t_"])
def test_dynamic_batch(case):
    f = staged.compile(make_step(case), dynamic=True)
    for rows in (4, 5, 6):  # (not 2 or 3: idx and table hold no batch)
        check_call_pair(f, case, staged.tensor(start(case, rows)))


@needs_vulkan
def test_vulkan():
    case = "unsqueeze_"
    f = staged.compile(make_step(case), backend="vulkan-spirv")
    check_call_pair(f, case, staged.tensor(start(case)))


def test_a_step_that_writes_its_argument_cannot_be_saved(tmp_path):
    """A saved step takes arrays, not the caller's tensors: it says so at save."""
    f = staged.compile(make_step("unsqueeze_"))
    f(staged.tensor(start("unsqueeze_")), staged.tensor(GOOD), staged.tensor(TABLE))
    with pytest.raises(ValueError, match="writes its argument x in place"):
        f.save(tmp_path)


class _Ema:
    """A Module of ``lib`` (staged or torch) whose step reads and sets a tensor attribute
    (``self.ema``) and sets another (``self.last``): Note [tensor attributes]."""

    def __init__(self, lib):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.ema = lib.zeros(4)

            def forward(self, idx, table):
                h = table[idx]
                self.ema = 0.5 * self.ema + h.sum(0)
                self.last = h.sum(0) * 2.0
                return h.sum()

        self.m, self.lib = M(), lib

    def calls(self, f, idxs) -> list:
        """Each call's loss, or its error's message where reading it raises."""
        out = []
        for idx in idxs:
            try:
                out.append(f(self.lib.tensor(idx), self.lib.tensor(TABLE)).item())
            except IndexError as err:
                out.append(str(err).split(": ")[-1])
        return out


def test_tensor_attributes_keep_their_value_on_a_bad_index():
    """The attribute the step read keeps its value where a check fails, readable, and the
    calls after go on from it: as torch's, whose bad call raised before changing anything
    (before the fix it held the sums of the clamped rows, which the next call read). The
    one it only sets raises when read."""
    idxs = [GOOD, GOOD, BAD, GOOD, [2, 1]]
    ours, theirs = _Ema(staged), _Ema(torch)
    f = staged.compile(ours.m)
    got = []
    for idx in idxs:
        got += ours.calls(f, [idx])
        if idx is BAD:
            np.testing.assert_array_equal(ours.m.ema.numpy(), [6.0, 9.0, 12.0, 15.0])
            with pytest.raises(IndexError, match="index 7 is out of bounds"):
                ours.m.last.numpy()
    assert got == theirs.calls(theirs.m, idxs)
    np.testing.assert_array_equal(ours.m.ema.numpy(), theirs.m.ema.numpy())
    np.testing.assert_array_equal(ours.m.last.numpy(), theirs.m.last.numpy())


@pytest.mark.parametrize("rows", [2, 4])  # 4: a square view, its shape unchanged by t_()
@pytest.mark.parametrize("mode", ["blocking", "background"])
def test_a_view_argument_transposed_in_place_writes_its_base_as_torchs(rows, mode):
    """``x.t_().add_(100)`` of ``x = base[2:]``: the data lands at base's own positions and
    ``x`` has torch's shape and strides, at every call (compiled.py, ``_store``)."""

    def step(x):
        x.t_().add_(100)
        return x.sum()

    f = staged.compile(step, mode=mode)
    for k in range(3):
        tb = torch.arange(float(4 * rows)).reshape(4, rows) * (k + 1)
        sb = staged.tensor(tb.numpy())
        tx, sx = tb[2:], sb[2:]
        np.testing.assert_array_equal(f(sx).item(), step(tx).item())
        np.testing.assert_array_equal(sb.numpy(), tb.numpy())
        assert tuple(sx.shape) == tuple(tx.shape) and sx.stride() == tx.stride()
        np.testing.assert_array_equal(sx.numpy(), tx.numpy())
