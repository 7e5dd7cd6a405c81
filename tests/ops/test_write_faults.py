"""Writes the fourth trust probe found wrong, each against torch: Python ints outside an
integer dtype's range (wrapped as an operand, checked as a fill value), sources that
partly overlap the written tensor, writes into a view of an expanded tensor, fill_'s
value and the dtype of scatter_add's and index_add's source."""

from __future__ import annotations

import pytest

from tests.checks import compare, raises_like_torch

_OVERFLOW = "without overflow"
_PARTIAL = "some elements of the input tensor and the written-to tensor refer to a single"
_INTERNAL = "more than one element of the written-to tensor refers to a single memory"


def _u8(L, *v):
    return L.tensor(list(v) or [1, 2], dtype=L.uint8)


def _i8(L, *v):
    return L.tensor(list(v) or [1, 2], dtype=L.int8)


def _set(x, index, value):
    x[index] = value
    return x


# an operand wraps modulo 2**bits; comparisons compare with the wrapped number
OPERANDS = {
    "uint8 + 300": lambda L: _u8(L) + 300,
    "uint8 - 300": lambda L: _u8(L) - 300,
    "300 - uint8": lambda L: 300 - _u8(L),
    "int8 * 1000": lambda L: _i8(L) * 1000,
    "uint8 * -1": lambda L: _u8(L) * -1,
    "0-d int8 + 200": lambda L: L.tensor(1, dtype=L.int8) + 200,
    "int16 + 70000": lambda L: L.tensor([1], dtype=L.int16) + 70000,
    "int8 + 2**40": lambda L: _i8(L) + 2**40,
    "int64 + 2**63": lambda L: L.tensor([1]) + 2**63,
    "uint8 + 2**64 - 1": lambda L: _u8(L) + (2**64 - 1),
    "uint8 > -1": lambda L: _u8(L) > -1,
    "uint8 < 256": lambda L: _u8(L) < 256,
    "uint8 == 257": lambda L: _u8(L) == 257,
    "int8 == 129": lambda L: _i8(L, 1, -127) == 129,
    "uint8 ^ -1": lambda L: _u8(L, 5) ^ -1,
    "uint8.add(300)": lambda L: _u8(L).add(300),
    "uint8.add_(300)": lambda L: _u8(L).add_(300),
    # a fill value: in range, or for uint8 down to -255 (wrapped)
    "uint8.fill_(-1)": lambda L: _u8(L).fill_(-1),
    "uint8.fill_(-255)": lambda L: _u8(L).fill_(-255),
    "int8.fill_(-128)": lambda L: _i8(L).fill_(-128),
    "uint8.masked_fill(-1)": lambda L: _u8(L).masked_fill(L.tensor([True, False]), -1),
    "uint8.index_fill_(-1)": lambda L: _u8(L).index_fill_(0, L.tensor([0]), -1),
    "uint8[0] = -1": lambda L: _set(_u8(L, 1, 1, 2), 0, -1),
    "clamp(uint8, min=-1)": lambda L: L.clamp(_u8(L, 1, 5, 9), min=-1),
    "clamp(uint8, max=-1)": lambda L: L.clamp(_u8(L, 1, 5, 9), max=-1),
}


@pytest.mark.parametrize("name", OPERANDS)
def test_int_outside_the_dtype_range_as_torch(name):
    compare(OPERANDS[name])


REFUSED = {
    "uint8.fill_(300)": lambda L: _u8(L).fill_(300),
    "uint8.fill_(-256)": lambda L: _u8(L).fill_(-256),
    "uint8.fill_(-1.0)": lambda L: _u8(L).fill_(-1.0),
    "int8.fill_(200)": lambda L: _i8(L).fill_(200),
    "int8.fill_(inf)": lambda L: _i8(L).fill_(float("inf")),
    "int64.fill_(2**63)": lambda L: L.tensor([1]).fill_(2**63),
    "int64.fill_(nan)": lambda L: L.tensor([1]).fill_(float("nan")),
    "int64[0] = nan": lambda L: _set(L.tensor([1, 1, 2]), 0, float("nan")),
    "uint8[0] = 300": lambda L: _set(_u8(L, 1, 1, 2), 0, 300),
    "uint8.masked_fill(300)": lambda L: _u8(L).masked_fill(L.tensor([True, False]), 300),
}


@pytest.mark.parametrize("name", REFUSED)
def test_unrepresentable_fill_value_raises_torch_s_error(name):
    raises_like_torch(REFUSED[name], _OVERFLOW)


@pytest.mark.parametrize(
    "fn",
    [
        lambda L: L.tensor([1]) + 2**64,  # beyond torch's Scalar: its argument parser
        lambda L: L.tensor([1]).fill_(2**70),
    ],
)
def test_int_beyond_64_bits_raises_overflow_error(fn):
    raises_like_torch(fn)


@pytest.mark.parametrize("bound", [{"max": 300}, {"min": 200}, {"min": -300}])
def test_unrepresentable_clamp_bound_raises_torch_s_error(bound):
    raises_like_torch(lambda L: L.clamp(_i8(L, 1, 5, 9), **bound), _OVERFLOW)


def _after(fn, make=lambda L: L.tensor([1.0, 2, 3])):
    """``fn(L, x)`` on a fresh ``x = make(L)``, then ``x``."""

    def run(L):
        x = make(L)
        fn(L, x)
        return x

    return run


def _matrix(L):
    return L.tensor([[1.0, 2], [3, 4]])


def _arange(L):
    return L.arange(3.0)


PARTIAL = {
    "x[1:].copy_(x[:-1])": _after(lambda L, x: x[1:].copy_(x[:-1])),
    "x[:-1].copy_(x[1:])": _after(lambda L, x: x[:-1].copy_(x[1:])),
    "x[1:].add_(x[:-1])": _after(lambda L, x: x[1:].add_(x[:-1])),
    "x[:-1].mul_(x[1:])": _after(lambda L, x: x[:-1].mul_(x[1:])),
    "x.add_(x[0])": _after(lambda L, x: x.add_(x[0])),
    "x.copy_(x[0])": _after(lambda L, x: x.copy_(x[0])),
    "x.view(1, 3).add_(x)": _after(lambda L, x: x.view(1, 3).add_(x)),
    "x[1:].clamp_(min=x[:-1])": _after(lambda L, x: x[1:].clamp_(min=x[:-1])),
    "x[1:].lerp_(x[:-1], 0.5)": _after(lambda L, x: x[1:].lerp_(x[:-1], 0.5)),
    "x[1:] = x[:-1]": _after(lambda L, x: _set(x, slice(1, None), x[:-1])),
    "x[[1, 2]] = x[:-1]": _after(lambda L, x: _set(x, [1, 2], x[:-1])),
    "x.t().add_(x)": _after(lambda L, x: x.t().add_(x), _matrix),
    "x.t().copy_(x)": _after(lambda L, x: x.t().copy_(x), _matrix),
}


@pytest.mark.parametrize("name", PARTIAL)
def test_partly_overlapping_source_raises_torch_s_error(name):
    raises_like_torch(PARTIAL[name], _PARTIAL)


def test_autograd_s_check_comes_before_the_overlap_check():
    leaf = _after(lambda L, x: x.add_(x[0]), lambda L: L.ones(3, requires_grad=True))
    raises_like_torch(leaf, "a leaf Variable that requires grad")


ALLOWED = {
    "x.add_(x)": _after(lambda L, x: x.add_(x)),
    "x.add_(x[:])": _after(lambda L, x: x.add_(x[:])),
    "x.view(3, 1).add_(x.view(3, 1))": _after(lambda L, x: x.view(3, 1).add_(x.view(3, 1))),
    "x[1:].add_(x[:1])": _after(lambda L, x: x[1:].add_(x[:1])),
    "x[0] = x[1:2]": _after(lambda L, x: _set(x, 0, x[1:2])),
    "x[:] = x": _after(lambda L, x: _set(x, slice(None), x)),
    "x[1:1].add_(x[0:0])": _after(lambda L, x: x[1:1].add_(x[0:0])),  # empty: no overlap
    # torch's BLAS-backed addmv_ does not check its inputs
    "x[:2].addmv_(ones, x[1:])": _after(lambda L, x: x[:2].addmv_(L.ones(2, 2), x[1:])),
    "x[0] = x[1] (2-d)": _after(lambda L, x: _set(x, 0, x[1]), _matrix),
}


@pytest.mark.parametrize("name", ALLOWED)
def test_same_or_disjoint_source_is_written_as_torch(name):
    compare(ALLOWED[name])


def test_strided_source_is_too_hard_to_check_and_written():
    """Not dense (``x[::2]``): torch's get_overlap_status gives up and the write goes on."""
    compare(_after(lambda L, x: x[1:4].add_(x[::2]), lambda L: L.arange(6.0)))


EXPANDED = {
    "x.expand(2, 3)[0][0] = 100": lambda L, x: _set(x.expand(2, 3)[0], 0, 100.0),
    "x.expand(2, 3)[1].fill_(7)": lambda L, x: x.expand(2, 3)[1].fill_(7),
    "x.expand(2, 3)[1].add_(1)": lambda L, x: x.expand(2, 3)[1].add_(1),
    "broadcast_tensors(x, zeros(2, 3))[0][1][0] = 100": lambda L, x: _set(
        L.broadcast_tensors(x, L.zeros(2, 3))[0][1], 0, 100.0
    ),
    "x.expand(2, 3)[0] = 100": lambda L, x: _set(x.expand(2, 3), 0, 100.0),
    "x.expand(2, 3)[1] = [5, 6, 7]": lambda L, x: _set(x.expand(2, 3), 1, L.tensor([5.0, 6, 7])),
    # a fill writes into shared elements too ("Fill is idempotent, so overlap is okay")
    "x.expand(2, 3)[:, 0].fill_(4)": lambda L, x: x.expand(2, 3)[:, 0].fill_(4),
    "x.expand(2, 3).zero_()": lambda L, x: x.expand(2, 3).zero_(),
}


@pytest.mark.parametrize("name", EXPANDED)
def test_view_of_expanded_tensor_without_shared_elements_writes_through(name):
    compare(_after(EXPANDED[name], _arange))


@pytest.mark.parametrize(
    "fn",
    [
        lambda L, x: x.expand(2, 3).add_(1),
        lambda L, x: x.expand(2, 3)[:, 0].add_(1),
        lambda L, x: x.expand(2, 3)[:, 0].copy_(L.tensor([5.0, 6])),
        lambda L, x: _set(x.expand(2, 3), (slice(None), 0), 100.0),
    ],
)
def test_view_with_shared_elements_raises_torch_s_error(fn):
    raises_like_torch(_after(fn, _arange), _INTERNAL)


@pytest.mark.parametrize("value", [[2.5], [[2.5]]])
def test_fill_with_a_tensor_of_dims_raises_torch_s_error(value):
    raises_like_torch(
        lambda L: L.tensor([1, 2]).fill_(L.tensor(value)),
        "fill_ only supports 0-dimension value tensor",
    )


def test_fill_with_a_0d_tensor_as_torch():
    compare(lambda L: L.tensor([1, 2]).fill_(L.tensor(2.5)))


SOURCE_DTYPES = {
    "scatter_add_": lambda L, s: L.tensor([1, 2]).scatter_add_(0, L.tensor([0]), s),
    "scatter_add": lambda L, s: L.tensor([1, 2]).scatter_add(0, L.tensor([0]), s),
    "index_add_": lambda L, s: L.tensor([1, 2]).index_add_(0, L.tensor([0]), s),
    "index_add": lambda L, s: L.tensor([1, 2]).index_add(0, L.tensor([0]), s),
}


@pytest.mark.parametrize("op", SOURCE_DTYPES)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_source_of_another_dtype_raises_torch_s_error(op, dtype):
    fragment = "Expected self.dtype to be equal to src.dtype" if "scatter" in op else "Long"
    msg = raises_like_torch(
        lambda L: SOURCE_DTYPES[op](L, L.tensor([2.7]).to(getattr(L, dtype))), fragment
    )
    if "index" in op:
        assert "must have the same scalar type" in msg


@pytest.mark.parametrize("alpha", [2.5, 3])
def test_index_add_alpha_in_self_s_dtype_as_torch(alpha):
    """torch converts alpha to an int tensor's dtype: 2.5 adds the source twice."""
    compare(lambda L: L.tensor([1, 2]).index_add(0, L.tensor([0]), L.tensor([2]), alpha=alpha))
    compare(lambda L: L.tensor([1.0, 2]).index_add(0, L.tensor([1]), L.tensor([2.0]), alpha=alpha))
