"""A module's hooks guard (``Module._guard``): a compiled call re-traces when a hook is
added, removed or replaced, whether or not the trace saw hooks, and the results follow
eager's (torch's hook semantics, checked against torch)."""

from __future__ import annotations

import numpy as np
import torch

import staged
from staged import nn


def _double(module, args, out):
    return out * 2


def _triple(module, args, out):
    return out * 3


def _run(lib, changes):
    """The results of ``m(x).sum()`` after each change of ``changes`` (compiled for staged,
    with the compiled function)."""
    lin = lib.nn.Linear(3, 2)
    with lib.no_grad():
        lin.weight.copy_(lib.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3)))
        lin.bias.copy_(lib.tensor(np.array([0.5, -1.0], dtype=np.float32)))
    x = lib.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    f = staged.compile(lambda x: lin(x).sum().detach()) if lib is staged else None
    call = f if f is not None else (lambda x: lin(x).sum().detach())
    out, state = [call(x).item()], {}
    for change in changes:
        change(lin, state)
        out.append(call(x).item())
        out.append(call(x).item())
    return out, f


def _add(hook):
    def change(m, state):
        state["h"] = m.register_forward_hook(hook)

    return change


def _remove(m, state):
    state["h"].remove()


def _replace(m, state):  # the same handle id, another hook
    (k,) = m._forward_hooks
    m._forward_hooks[k] = _triple


def test_adding_removing_and_replacing_a_hook_re_traces_as_eager_reads_it():
    changes = [_add(_double), _replace, _remove, _add(_triple), _remove]
    got, f = _run(staged, changes)
    want, _ = _run(torch, changes)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert len(set(got[1::2])) > 1  # the hooks change the results
    reasons = [str(h["reason"]) for h in f.history]
    # the two removals find the first trace again
    assert f.traces == 4 and sum("Linear attributes/hooks" in r for r in reasons) == 3


def test_a_global_hook_added_and_removed_re_traces():
    lin = nn.Linear(3, 2)
    f = staged.compile(lambda x: lin(x).sum().detach())
    x = staged.randn(4, 3)
    base = f(x).item()
    h = nn.modules.module.register_module_forward_hook(_double)
    try:
        np.testing.assert_allclose(f(x).item(), 2 * base, rtol=1e-5)
        assert f.last_retrace_reason.startswith("global module hooks: none -> forward_hooks=")
    finally:
        h.remove()
    np.testing.assert_allclose(f(x).item(), base, rtol=1e-5)
    assert f.traces == 2  # the first trace again
