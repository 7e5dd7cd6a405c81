"""Python numbers written into tensors (fill_, full, new_full, full_like, masked_fill,
setitem, where, index_fill, clamp's bounds) against torch 2.13: what does not fit the dtype
raises torch's error, where a NumPy cast would wrap (``full((1,), 70000.0, dtype=int8)``
gave 112) or saturate silently; what fits gives torch's value and dtype. A complex number
where torch refuses one raises torch's exception type (its messages vary by op)."""

from __future__ import annotations

import warnings

import pytest
import torch

import staged

OPS = {
    "fill_": lambda L, d, v: L.zeros(1, dtype=d).fill_(v),
    "full": lambda L, d, v: L.full((1,), v, dtype=d),
    "new_full": lambda L, d, v: L.zeros(1, dtype=d).new_full((1,), v),
    "full_like": lambda L, d, v: L.full_like(L.zeros(1, dtype=d), v),
    "masked_fill": lambda L, d, v: L.zeros(1, dtype=d).masked_fill(L.tensor([True]), v),
    "setitem": lambda L, d, v: _setitem(L.zeros(1, dtype=d), v),
    "where": lambda L, d, v: L.where(L.tensor([True]), v, L.zeros(1, dtype=d)),
    "index_fill": lambda L, d, v: L.zeros(1, dtype=d).index_fill(0, L.tensor([0]), v),
    "clamp": lambda L, d, v: L.zeros(1, dtype=d).clamp(min=v),
}
DTYPES = ["int8", "uint8", "int16", "int32", "int64", "float16", "bfloat16", "float32"]
DTYPES += ["float64", "complex64", "bool"]
VALUES = [1e300, 3.5e38, 70000.0, 300, -1, -300, float("nan"), float("inf"), 2.5, 1e300j]
VALUES += [2 + 1j, True]
# torch's complex32 (staged has no such dtype); index_fill's own complex-to-bool message
KNOWN = {("where", "float16", 2 + 1j), ("index_fill", "bool", 1e300j)}
KNOWN |= {("index_fill", "bool", 2 + 1j)}


def _setitem(t, v):
    t[0] = v
    return t


def _outcome(L, op, name, v):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no NumPy cast warning leaks either
            r = OPS[op](L, getattr(L, name), v)
    except Exception as e:  # noqa: BLE001 (the exception type is what is compared)
        return ("raises", type(e).__name__, str(e).rsplit(": ", 1)[-1])
    return (str(r.dtype).split(".")[-1], repr(r.tolist()))


@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_a_number_written_into_a_tensor_is_converted_as_torch_s(op, name):
    wrong = []
    for v in VALUES:
        if (op, name, v) in KNOWN:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's ComplexHalf warning
            want = _outcome(torch, op, name, v)
        got = _outcome(staged, op, name, v)
        if isinstance(v, complex):  # torch's messages for these name one C++ type or another
            want, got = want[:2], got[:2]
        if got != want:
            wrong.append((v, want, got))
    assert not wrong


@pytest.mark.parametrize(
    "src",
    [
        "L.tensor([float('nan')], dtype=L.int32)",
        "L.tensor([float('inf'), 1.0], dtype=L.int64)",
        "L.tensor([1e20], dtype=L.int64)",
        "L.tensor([1.5, 300.7], dtype=L.uint8)",
        "L.tensor([-1.5], dtype=L.uint8)",
        "L.tensor([-1, 255], dtype=L.uint8)",
        "L.tensor([1.5, -2.7], dtype=L.int8)",
        "L.tensor([1 + 1j], dtype=L.float32)",
        "L.tensor([1e300], dtype=L.float32)",
    ],
)
def test_tensor_of_python_numbers_checks_them_as_torch(src):
    got, want = (_evaluated(L, src) for L in (staged, torch))
    assert got == want


def _evaluated(L, src):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            r = eval(src, {"L": L})
    except Exception as e:  # noqa: BLE001 (the exception type is what is compared)
        return ("raises", type(e).__name__)
    return (str(r.dtype).split(".")[-1], r.tolist())
