"""``Guards``, a trace's guards checked in one pass (Note [one pass] in
staged/tracing/guards.py): after every change it says what checking each guard in order
says (the first failure, or None), so the pass is never weaker than the guards; and a
compiled step re-traces on each change a layer reads, as eager code would see it."""

from __future__ import annotations

import functools
import math
import operator
import types

import numpy as np
import pytest
import torch

import staged
from staged import nn
from staged.tracing.guards import Guard, Guards


def _in_order(guards):
    return next((why for g in guards if (why := g.failure()) is not None), None)


def _state():
    return types.SimpleNamespace(
        flag=True,
        n=4,
        x=0.5,
        nan=math.nan,
        shape=(4, 4),
        nested=(3, (1, 2)),
        mixed=(1, "a", None, 2.5),
        scale=[2.0],
        fn=math.sqrt,
        table={"k": 1},
    )


def _guards(s):
    def get(k):  # a tuple made anew, as a Module's members are (``_FLAT``)
        v = getattr(s, k, "<gone>")
        return tuple(list(v)) if type(v) is tuple else v

    gs = [Guard(k, functools.partial(get, k)) for k in vars(s) if k != "scale"]
    gs.append(Guard("scale", functools.partial(get, "scale"), value=list(s.scale)))
    gs.append(Guard("fn is", functools.partial(get, "fn"), operator.is_))
    gs.append(Guard("table keys", lambda: list(s.table), operator.eq))
    gs.append(Guard("table item", lambda: s.table["k"]))  # raises once the key is gone
    return gs


CHANGES = {
    "none": lambda s: None,
    "bool to int": lambda s: setattr(s, "flag", 1),
    "int to float": lambda s: setattr(s, "n", 4.0),
    "int to bool": lambda s: setattr(s, "n", True) or setattr(s, "flag", 1),
    "int to another equal int": lambda s: setattr(s, "n", int("4")),
    "float to an equal float": lambda s: setattr(s, "x", float("0.5")),
    "float to another": lambda s: setattr(s, "x", 0.25),
    "float to numpy float": lambda s: setattr(s, "x", np.float64(0.5)),
    "another NaN": lambda s: setattr(s, "nan", float("nan")),
    "NaN to a number": lambda s: setattr(s, "nan", 0.0),
    "tuple item to float": lambda s: setattr(s, "shape", (4.0, 4)),
    "tuple item to bool": lambda s: setattr(s, "shape", (4, True)),
    "equal tuple": lambda s: setattr(s, "shape", tuple([4, 4])),
    "tuple to list": lambda s: setattr(s, "shape", [4, 4]),
    "longer tuple": lambda s: setattr(s, "shape", (4, 4, 1)),
    "items moved between tuples": lambda s: (
        setattr(s, "shape", (4,)) or setattr(s, "mixed", (4, 1, "a", None, 2.5))
    ),
    "nested item to float": lambda s: setattr(s, "nested", (3, (1.0, 2))),
    "string item": lambda s: setattr(s, "mixed", (1, "b", None, 2.5)),
    "None item": lambda s: setattr(s, "mixed", (1, "a", 0, 2.5)),
    "list changed in place": lambda s: s.scale.__setitem__(0, 3.0),
    "function replaced": lambda s: setattr(s, "fn", math.exp),
    "attribute deleted": lambda s: delattr(s, "flag"),
    "key gone (a getter raises)": lambda s: s.table.clear(),
}


SAME = {"none", "int to another equal int", "float to an equal float", "another NaN", "equal tuple"}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_one_pass_says_what_the_guards_in_order_say(change):
    s = _state()
    guards = _guards(s)
    check = Guards(guards)
    assert check.failure() is None
    CHANGES[change](s)
    got = check.failure()
    assert got == _in_order(guards)
    assert (got is None) == (change in SAME)
    if change == "key gone (a getter raises)":  # the guard before the one that raises
        assert got == "table keys: ['k'] -> []"


def test_a_getter_that_raises_raises_where_no_guard_before_it_fails():
    s = _state()
    guards = [Guard("table item", lambda: s.table["k"])]
    check = Guards(guards)
    s.table.clear()
    with pytest.raises(KeyError, match="'k'"):
        check.failure()


def _leaky_losses(lib, slopes):
    act = lib.nn.LeakyReLU(0.1)
    x = lib.tensor(np.linspace(-2, 2, 8, dtype=np.float32))

    def f(x):
        return act(x).sum()

    step = staged.compile(f) if lib is staged else f
    out = []
    for slope in slopes:
        act.negative_slope = slope
        out.append(step(x).item())
    return out, step


def test_a_layer_attribute_changed_re_traces_as_eager_reads_it():
    slopes = [0.1, 0.1, 0.2, 0.2, 0.1, 1]  # the int 1 is another trace (same_value)
    got, step = _leaky_losses(staged, slopes)
    want, _ = _leaky_losses(torch, slopes)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert step.traces == 3
    assert step.last_retrace_reason.startswith(
        "LeakyReLU attributes/hooks: inplace=False, negative_slope=0.1 -> "
        "inplace=False, negative_slope=1"
    )


def test_a_nan_attribute_re_traces_no_call():
    lin = nn.Linear(3, 2)
    lin.scale = math.nan

    @staged.compile
    def step(x):
        return (lin(x).sum() + (0.0 if lin.scale != lin.scale else lin.scale)).detach()

    x = staged.randn(4, 3)
    first = step(x).item()
    lin.scale = float("nan")  # another NaN object: the same value
    assert step(x).item() == first
    lin.scale = 2.0
    np.testing.assert_allclose(step(x).item(), first + 2.0, rtol=1e-6)
    assert step.traces == 2 and step.last_retrace_reason == "lin.scale: nan -> 2.0"
