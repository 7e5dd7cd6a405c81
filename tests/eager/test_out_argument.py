"""``out=`` of the public functions against torch 2.13: the result written into ``out``
(resized with torch's warning, cast to its dtype or refused with torch's error), its
version bumped, ``out`` returned; refused where an argument requires grad; under
staged.compile a write into state or an argument, as torch's eager step."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import staged
from tests.checks import message


def _x(L, *shape, grad=False, seed=0):
    v = np.random.default_rng(seed).uniform(-1, 1, shape)
    return L.tensor(v, dtype=L.float64, requires_grad=grad)


def _plain(v):
    if isinstance(v, (staged.Tensor, torch.Tensor)):
        return (str(v.dtype).split(".")[-1], v.detach().numpy().round(10).tolist())
    if isinstance(v, (tuple, list)):
        return [_plain(a) for a in v]
    return v


def _outcome(case, L):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got = ("ok", _plain(case(L)))
        except Exception as e:  # noqa: BLE001 -- compared with torch's
            text = message(e) if L is staged else str(e)
            got = ("raised", type(e).__name__, text.replace("aten::", ""))
    said = [str(w.message).split(" (Triggered internally")[0] for w in caught]
    return got, said


def check(case):
    assert _outcome(case, staged) == _outcome(case, torch)


def _written(call):
    """``call(L, out)``'s result is ``out``; then out and its version."""

    def case(L):
        out = L.full((2, 3), 7.0, dtype=L.float64)
        r = call(L, out)
        rs = r if isinstance(r, tuple) else (r,)
        outs = out if isinstance(out, tuple) else (out,)
        return [all(a is b for a, b in zip(rs, outs)), r, [o._version for o in outs]]

    return case


CALLS = {
    "add": lambda L, o: L.add(_x(L, 2, 3), _x(L, 3, seed=1), alpha=2, out=o),
    "mul_scalar": lambda L, o: L.mul(_x(L, 2, 3), 3, out=o),
    "matmul": lambda L, o: L.matmul(_x(L, 2, 4), _x(L, 4, 3, seed=1), out=o),
    "mm": lambda L, o: L.mm(_x(L, 2, 4), _x(L, 4, 3, seed=1), out=o),
    "cat": lambda L, o: L.cat([_x(L, 1, 3), _x(L, 1, 3, seed=1)], out=o),
    "stack": lambda L, o: L.stack([_x(L, 3), _x(L, 3, seed=1)], out=o),
    "sum_dim": lambda L, o: L.sum(_x(L, 4, 2, 3), 0, out=o),
    "exp": lambda L, o: L.exp(_x(L, 2, 3), out=o),
    "clamp": lambda L, o: L.clamp(_x(L, 2, 3), min=0, out=o),
    "where": lambda L, o: L.where(_x(L, 2, 3) > 0, _x(L, 2, 3, seed=1), _x(L, 3, seed=2), out=o),
    "resized": lambda L, o: L.add(_x(L, 3), 1, out=o),
    "int_into_float": lambda L, o: L.add(L.arange(6).reshape(2, 3), 1, out=o),
    "float32_into_float64": lambda L, o: L.mul(L.ones(2, 3), 2, out=o),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_out_written(name):
    check(_written(CALLS[name]))


def test_out_of_several_results():
    def case(L):
        v, i = L.empty(0, dtype=L.float64), L.empty(0, dtype=L.int64)
        r = L.max(_x(L, 3, 4), 1, out=(v, i))
        s = L.sort(_x(L, 3, 4), 1, out=(L.empty(3, 4, dtype=L.float64), L.empty(0, dtype=L.int64)))
        return [r[0] is v, r[1] is i, r, s, v._version]

    check(case)


def test_out_into_a_view_bumps_its_base():
    def case(L):
        base = L.zeros(3, 4, dtype=L.float64)
        L.add(_x(L, 4), 1, out=base[1])
        L.mul(base[:, 1], 2, out=base[:, 0])
        return base, base._version

    check(case)


ERRORS = {
    "float_into_long": lambda L: L.add(_x(L, 3), 1, out=L.empty(3, dtype=L.int64)),
    "float_into_bool": lambda L: L.mul(_x(L, 3), 2, out=L.empty(3, dtype=L.bool)),
    "input_requires_grad": lambda L: L.exp(_x(L, 3, grad=True), out=L.empty(3)),
    "list_input_requires_grad": lambda L: L.cat([_x(L, 3, grad=True)], out=L.empty(3)),
    "out_requires_grad": lambda L: L.sum(_x(L, 3), 0, out=L.zeros((), requires_grad=True)),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_out_refused(name):
    check(ERRORS[name])


def test_out_under_no_grad_into_a_parameter():
    def case(L):
        p = _x(L, 3, grad=True)
        with L.no_grad():
            L.add(p, 1, out=p)
        return p, p._version, p.requires_grad, p.grad_fn is None

    check(case)


def test_views_take_no_out():
    with pytest.raises(TypeError):
        staged.transpose(staged.ones(2, 3), 0, 1, out=staged.empty(3, 2))
    with pytest.raises(TypeError):
        torch.transpose(torch.ones(2, 3), 0, 1, out=torch.empty(3, 2))


def _compiled_step(L):
    w = _x(L, 4, 3, grad=True)
    buf = L.zeros(2, 3, dtype=L.float64)
    acc = L.zeros(3, dtype=L.float64)

    def step(x, out):
        h = x @ w
        loss = (h * h).sum()
        loss.backward()
        with L.no_grad():
            L.mean(h, 0, out=buf[0])
            L.add(acc, w.grad.sum(0), out=acc)
        L.mul(x.sum(0)[:3], 2, out=out)
        return loss

    return step, w, buf, acc


def test_out_under_compile_writes_state_and_arguments():
    """Three compiled calls write ``buf``, ``acc`` (state) and ``out`` (an argument) as
    torch's eager steps do."""
    seen = {}
    for lib in (staged, torch):
        step, w, buf, acc = _compiled_step(lib)
        f = staged.compile(step) if lib is staged else step
        x, out = _x(lib, 5, 4, seed=1), lib.zeros(3, dtype=lib.float64)
        got = []
        for _ in range(3):
            w.grad = None
            got.append(_plain([f(x, out), buf, acc, out]))
        seen[lib] = got
    np.testing.assert_equal(seen[staged], seen[torch])
