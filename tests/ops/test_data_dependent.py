"""nonzero, unique and tensor-count repeat_interleave: output shapes that depend on the
input's values. Eagerly as torch; under capture a clear error, unless the data is known
(a tensor made before the trace) or, for repeat_interleave, output_size is given."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close

X = np.array([[0, 2, 0], [1, 0, 3]])
INPUTS = [
    X,
    X.astype(np.float32),
    X.astype(bool),
    np.array(5),
    np.array(0.0),
    np.zeros((0, 3)),
    np.array([np.nan, 0.0, -0.0, 1.0]),
]


def _pairs(out, tout):
    outs = out if isinstance(out, tuple) else (out,)
    touts = tout if isinstance(tout, tuple) else (tout,)
    assert len(outs) == len(touts)
    for o, t in zip(outs, touts):
        assert_close(o, t, rtol=0, atol=0)


@pytest.mark.parametrize("a", INPUTS, ids=str)
@pytest.mark.parametrize("as_tuple", [False, True])
def test_nonzero(a, as_tuple):
    _pairs(staged.tensor(a).nonzero(as_tuple=as_tuple), torch.tensor(a).nonzero(as_tuple=as_tuple))
    _pairs(
        staged.nonzero(staged.tensor(a), as_tuple=as_tuple),
        torch.nonzero(torch.tensor(a), as_tuple=as_tuple),
    )


U = np.array([[3, 1, 2], [1, 3, 3]])
UNIQUE = [
    (U, {}),
    (U, {"return_inverse": True}),
    (U, {"return_counts": True}),
    (U.astype(np.float64), {"return_inverse": True, "return_counts": True}),
    (U, {"sorted": False, "return_inverse": True}),
    (np.array(5), {"return_inverse": True, "return_counts": True}),
    (np.array([np.nan, 1.0, np.nan]), {"return_counts": True}),
    (np.array([True, False, True]), {"return_inverse": True}),
    (np.zeros((0,)), {"return_counts": True}),
    (U[[0, 1, 0]], {"dim": 0, "return_inverse": True, "return_counts": True}),
    (U[:, [0, 1, 0]], {"dim": -1, "return_inverse": True}),
]


@pytest.mark.parametrize("a,kwargs", UNIQUE, ids=str)
def test_unique(a, kwargs):
    _pairs(staged.unique(staged.tensor(a), **kwargs), torch.unique(torch.tensor(a), **kwargs))
    _pairs(staged.tensor(a).unique(**kwargs), torch.tensor(a).unique(**kwargs))


def test_results_are_not_differentiable():
    x = staged.tensor([1.0, 0.0, 1.0], requires_grad=True)
    assert not x.unique().requires_grad and not x.nonzero().requires_grad


@pytest.mark.parametrize(
    "fn,what",
    [
        (lambda t: t.nonzero(), "nonzero()"),
        (lambda t: staged.nonzero(t, as_tuple=True), "nonzero()"),
        (lambda t: t.unique(return_counts=True), "unique()"),
        (
            lambda t: staged.repeat_interleave(t, (t > 0).long()),
            "repeat_interleave() with tensor repeats",
        ),
    ],
)
def test_capture_names_the_data_dependent_shape(fn, what):
    with pytest.raises(RuntimeError) as err:
        staged.capture(fn, staged.tensor([1.0, -2.0, 3.0]))
    site, _, message = str(err.value).partition(": ")  # the user's line (the lambda's)
    assert site.startswith("tests/ops/test_data_dependent.py:")
    assert message.startswith(f"{what} has a data-dependent output shape")
    assert "Call it outside the compiled function" in str(err.value)


def test_known_data_is_used_under_capture():
    """A tensor made before the trace has data: its nonzero() is a constant of the graph."""
    mask = staged.tensor([True, False, True])
    step = staged.compile(lambda x: x[mask.nonzero().reshape(-1)] * 2)
    x = staged.tensor([1.0, 2.0, 3.0])
    assert_close(step(x), staged.tensor([2.0, 6.0]))


def test_repeat_interleave_output_size_compiles():
    step = staged.compile(lambda x, r: staged.repeat_interleave(x, r, dim=0, output_size=4))
    x, r = staged.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), staged.tensor([2, 0, 2])
    assert_close(
        step(x, r),
        torch.repeat_interleave(torch.tensor(np.asarray(x)), torch.tensor([2, 0, 2]), dim=0),
    )
    with pytest.raises(RuntimeError, match="allocated size does not match required size"):
        step(x, staged.tensor([1, 0, 2])).numpy()  # 3 < output_size: the recorded check
