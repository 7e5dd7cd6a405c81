"""Indexing semantics the sweep does not cover: errors as PyTorch's, views, __setitem__
gradients and versions, capture of writes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close


def pair(shape=(3, 4), requires_grad=False):
    a = np.random.standard_normal(shape)
    return staged.tensor(a, requires_grad=requires_grad), torch.tensor(
        a, requires_grad=requires_grad
    )


@pytest.mark.parametrize(
    "index, error, message",
    [
        (5, IndexError, "index 5 is out of bounds for dimension 0 with size 3"),
        ((0, -5), IndexError, "index -5 is out of bounds for dimension 1 with size 4"),
        ((0, 0, 0), IndexError, "too many indices for tensor of dimension 2"),
        (slice(None, None, -1), ValueError, "step must be greater than zero"),
        ([0, 3], IndexError, "index 3 is out of bounds for dimension 0 with size 3"),
        (1.5, IndexError, "only integers, slices"),
    ],
)
def test_getitem_errors_as_torch(index, error, message):
    x, tx = pair()
    with pytest.raises(error, match=message):
        tx[index if not isinstance(index, list) else torch.tensor(index)]
    with pytest.raises(error, match=message.replace("(", r"\(")):
        x[index if not isinstance(index, list) else staged.tensor(index)]


def test_repeated_ellipsis_as_torch():
    x, tx = pair((2, 3, 4))
    for index in ((Ellipsis, Ellipsis), (0, Ellipsis, Ellipsis)):
        assert_close(x[index], tx[index])


def test_mask_shape_error():
    x, tx = pair()
    with pytest.raises(
        IndexError,
        match=r"The shape of the mask \[2\] at index 0 does not "
        r"match the shape of the indexed tensor \[3\]",
    ):
        x[staged.tensor([True, False])]
    with pytest.raises(IndexError, match="does not match the shape of the indexed tensor"):
        tx[torch.tensor([True, False])]


def test_gather_and_index_select_errors():
    x = staged.ones(3, 4)
    with pytest.raises(RuntimeError, match="index 4 is out of bounds for dimension 1 with size 4"):
        x.gather(1, staged.tensor([[4]]))
    with pytest.raises(IndexError, match="index out of range in self"):
        x.index_select(0, staged.tensor([3]))
    with pytest.raises(RuntimeError, match="Index tensor must have the same number of dimensions"):
        x.gather(1, staged.tensor([1]))
    with pytest.raises(RuntimeError, match="Sizes of tensors must match except in dimension 0"):
        staged.cat([x, staged.ones(2, 3)])
    with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum exactly"):
        x.split([1, 1])
    with pytest.raises(RuntimeError, match="shape mismatch: value tensor of shape \\[2\\]"):
        x[0] = staged.ones(2)


def test_basic_index_is_a_view():
    x = staged.zeros(3, 4)
    row, col = x[1], x[:, 2]
    assert row._base is x and col._base is x
    x.add_(1)
    assert row._version == x._version == col._version == 1
    assert_close(row, staged.ones(4))  # shares x's memory
    parts = x.split(2)
    assert all(p._base is x for p in parts)


def test_setitem_gradients_match_torch():
    x, tx = pair(requires_grad=True)
    v, tv = pair((2, 4), requires_grad=True)
    s, ts = pair((), requires_grad=True)
    for mod, a, b, c in ((staged, x, v, s), (torch, tx, tv, ts)):
        y = a * 2
        y[1:] = b  # a slice, values require grad
        y[0, mod.tensor([0, 3])] = c  # advanced, a 0-d value broadcast
        y[y > 100] = 0.0  # a mask, no grad to the value
        (y * y).sum().backward()
    for got, want in ((x.grad, tx.grad), (v.grad, tv.grad), (s.grad, ts.grad)):
        assert_close(got, want)


def test_setitem_bumps_version_and_checks_saved_tensors():
    for mod in (staged, torch):
        x = mod.ones(3, requires_grad=True)
        y = x * 1
        z = y.exp()  # saves its output
        v = z._version
        z[0] = 5.0
        assert z._version == v + 1
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.sum().backward()


def test_setitem_on_leaf_requiring_grad_raises():
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        staged.ones(3, requires_grad=True)[0] = 1.0


def test_setitem_captures_and_compiles():
    def f(x, i):
        y = x.clone()
        y[0, 1:3] = 7.0
        y[i, 0] = staged.tensor([1.0, 2.0])
        y[y < -1] = -1.0
        return y

    x, i = (
        staged.tensor(np.random.standard_normal((3, 4)).astype(np.float32)),
        staged.tensor([2, 1]),
    )
    step = staged.capture(f, x, i).compile()
    assert_close(step(x, i), f(x, i))


# --- indices and targets out of range (Note [index checks]) ---------------------------------
def _bad_index_cases(lib, F):
    """gather, index_select, x[i] and scatter_add: test_getitem_errors_as_torch and
    test_gather_and_index_select_errors; under capture: tests/runtime/test_bounds.py."""
    w = lib.ones(10, 3)
    t = lib.tensor
    return {
        "embedding 1000": lambda: F.embedding(t([1, 1000]), w),
        "embedding -1": lambda: F.embedding(t([[1, -1]]), w),
        "cross_entropy 5 of 3": lambda: F.cross_entropy(lib.ones(2, 3), t([0, 5])),
        "cross_entropy -1": lambda: F.cross_entropy(lib.ones(2, 3), t([0, -1])),
        "cross_entropy weight": lambda: F.cross_entropy(
            lib.ones(2, 3), t([0, 5]), weight=lib.ones(3)
        ),
        "cross_entropy smoothing": lambda: F.cross_entropy(
            lib.ones(2, 3), t([3, 0]), label_smoothing=0.1
        ),
        "cross_entropy none": lambda: F.cross_entropy(lib.ones(2, 3), t([0, 5]), reduction="none"),
        "cross_entropy other ignore_index": lambda: F.cross_entropy(
            lib.ones(2, 3), t([-100, -1]), ignore_index=-1
        ),
        "nll_loss 5 of 3": lambda: F.nll_loss(lib.ones(2, 3), t([0, 5])),
        "nll_loss -1": lambda: F.nll_loss(lib.ones(2, 3), t([0, -1])),
        "nll_loss 2-d": lambda: F.nll_loss(lib.ones(2, 3, 4), t([[0, 1, 5, 0], [0] * 4])),
    }


@pytest.mark.parametrize("case", sorted(_bad_index_cases(torch, torch.nn.functional)))
def test_index_out_of_range_raises_as_torch(case):
    with pytest.raises((IndexError, RuntimeError)) as expected:
        _bad_index_cases(torch, torch.nn.functional)[case]()
    with pytest.raises(expected.type) as got:
        _bad_index_cases(staged, staged.nn.functional)[case]()
    assert str(expected.value) in str(got.value)


@pytest.mark.parametrize(
    "index",
    [
        lambda lib: True,
        lambda lib: False,
        lambda lib: (0, True),
        lambda lib: (True, 1),
        lambda lib: (Ellipsis, True),
        lambda lib: (slice(None), False),
        lambda lib: (True, Ellipsis, False),
        lambda lib: lib.tensor(True),
        lambda lib: (lib.tensor([1, 0]), lib.tensor(True)),
    ],
)
def test_bool_scalars_in_an_index_are_a_new_unit_dim_as_torchs(index):
    """``x[True]`` is ``x[None]`` and ``x[False]`` an empty new dim (was an IndexError, and
    a 0-d bool tensor a NumPy error), read and written."""
    got, want = (lib.arange(6.0).reshape(2, 3)[index(lib)] for lib in (staged, torch))
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    xs = [lib.arange(6.0).reshape(2, 3) for lib in (staged, torch)]
    for lib, x in zip((staged, torch), xs):
        x[index(lib)] = 7.0
    np.testing.assert_array_equal(xs[0].numpy(), xs[1].numpy())
