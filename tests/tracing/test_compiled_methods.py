"""``@staged.compile`` on a method (as ``@torch.compile`` is used): ``obj.method(x)`` passes
``obj`` as ``self``. The compiled object had no ``__get__``, so ``obj.f(x)`` called the
function with ``x`` as ``self``: ``f(self, x=None)`` returned zeros for ``[2., 2.]``, and
``g(self, x)`` raised a TypeError about a missing ``x``."""

from __future__ import annotations

import numpy as np
import pytest

import staged


class _Scaler:
    k = 2.0

    def __init__(self):
        self.s = 3.0

    @staged.compile
    def optional(self, x=None):
        return x * self.k if x is not None else self * 0

    @staged.compile
    def scaled(self, x):
        return x * self.s


def test_a_compiled_method_binds_its_instance():
    a, b = _Scaler(), _Scaler()
    np.testing.assert_array_equal(a.optional(staged.ones(2)).numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(a.scaled(staged.ones(2)).numpy(), [3.0, 3.0])
    a.s = 5.0  # what self reads is guarded: a re-trace
    np.testing.assert_array_equal(a.scaled(staged.ones(2)).numpy(), [5.0, 5.0])
    np.testing.assert_array_equal(b.scaled(staged.ones(2)).numpy(), [3.0, 3.0])
    assert _Scaler.scaled.traces == 3 and a.scaled.traces == 3  # one compiled function
    assert isinstance(_Scaler.__dict__["scaled"], type(_Scaler.scaled))


def test_reduce_lr_on_plateau_in_a_compiled_step_says_to_step_it_outside():
    """Its step reads the metric's value: the trace's generic "needs the data of a tensor"
    error named neither the scheduler nor what to do."""
    p = staged.nn.Parameter(staged.ones(2))
    opt = staged.optim.SGD([p], lr=0.1)
    sched = staged.optim.lr_scheduler.ReduceLROnPlateau(opt)

    def step():
        loss = (p * p).sum()
        loss.backward()
        opt.step()
        sched.step(loss)
        return loss

    with pytest.raises(RuntimeError, match=r"ReduceLROnPlateau.step\(metric\) .* after the"):
        staged.compile(step)()
    with pytest.warns(UserWarning, match="ReduceLROnPlateau"):
        staged.compile(step, fallback="eager")()
    assert sched.last_epoch == 1
