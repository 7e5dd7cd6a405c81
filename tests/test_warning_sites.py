"""Warnings of tensors, autograd and the factories name the user's line, as torch's do,
whether the eager hot path runs compiled or as Python (Note [native modules] in
staged/_native.py: compiled functions have no frames, so a counted ``stacklevel`` named
the caller's caller there; ``tests/test_native.py`` runs this file as Python too)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import staged


def _full_backward_hook_without_inputs():
    m = staged.nn.Linear(2, 2)
    m.register_full_backward_hook(lambda *args: None)
    return m(staged.ones(1, 2)).sum().backward()


def _float_warned_again():
    """``float`` of a tensor requiring grad warns once a process, as torch's."""
    staged.set_warn_always(True)
    try:
        return float(x.sum())
    finally:
        staged.set_warn_always(False)


x = staged.ones(2, requires_grad=True)
CALLS = {
    "float of a tensor requiring grad": _float_warned_again,
    "grad of a non-leaf": lambda: (x * 2).grad,
    "autograd.grad only_inputs": lambda: staged.autograd.grad((x * 2).sum(), x, only_inputs=False),
    "tensor(t)": lambda: staged.tensor(x),
    "t.new_tensor(t)": lambda: x.new_tensor(x),
    "from_numpy of a read-only array": lambda: staged.from_numpy(
        np.broadcast_to(np.ones(1, np.float32), (2,))
    ),
    "frombuffer of a read-only buffer": lambda: staged.frombuffer(bytes(8), dtype=staged.float32),
    "range": lambda: staged.range(0, 3),
    "full backward hook, no input requires grad": _full_backward_hook_without_inputs,
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_warning_names_the_callers_line(call):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        call()
    assert seen, "no warning"
    lines = {line for _, _, line in call.__code__.co_lines()}  # the call's own lines
    if call is _float_warned_again:
        lines = {_float_warned_again.__code__.co_firstlineno + 4}
    assert all(w.filename == __file__ and w.lineno in lines for w in seen), [
        (w.filename, w.lineno, str(w.message)[:60]) for w in seen
    ]
