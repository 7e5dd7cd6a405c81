"""Python numbers converted to a dtype as torch's checked ``Scalar.to<T>()`` converts a
fill value (``fill_``, ``full``, ``masked_fill``, ``where``, clamp's bounds ...): what
does not fit raises, where a NumPy cast would wrap or saturate silently."""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt

# torch's names of the C++ types in its "value cannot be converted" message
_CXX = {
    "int32": "int",
    "float32": "float",
    "float64": "double",
    "float16": "c10::Half",
    "bfloat16": "c10::BFloat16",
    "complex64": "c10::complex<float>",
    "complex128": "c10::complex<double>",
}


def int64_range(v) -> bool:
    """Whether torch's Scalar holds ``v`` (an int of int64 or uint64 range; any float):
    beyond, its argument parser raises OverflowError."""
    return type(v) is not int or -(1 << 63) <= v < 1 << 64


def _overflow(dtype: dt.DType) -> RuntimeError:
    name = _CXX.get(dtype.name, f"{dtype.name}_t")
    return RuntimeError(f"value cannot be converted to type {name} without overflow")


def fill_array(v, dtype: dt.DType, *, check_half: bool = True) -> np.ndarray:
    """``v`` as a 0-d array of ``dtype``. Integer dtypes take the numbers in their range
    (uint8 also -255..-1, wrapped) and refuse NaN, inf and complex numbers; float32,
    float64 and complex dtypes refuse a finite number beyond their range and a complex
    one into a real dtype. float16 and bfloat16 are range-checked only with
    ``check_half``: torch checks them in masked_fill, index_fill, clamp, and fill_ and
    full of other than one element, not in setitem, where or a one-element fill (its
    scalar_fill), which saturate to inf."""
    if dtype is dt.bool_:
        return np.array(bool(v))
    if isinstance(v, complex) and not dtype.is_complex and v.imag:
        raise _overflow(dt.float64 if dtype._category == 2 and dtype.itemsize < 4 else dtype)
    if dtype._category >= 2 and isinstance(v, (float, complex)):
        limit = float(dt.finfo(dtype).max)
        parts = (v.real, v.imag) if isinstance(v, complex) else (v,)
        if any(math.isfinite(p) and abs(p) > limit for p in parts):
            if check_half or dtype.itemsize >= 4:
                raise _overflow(dtype)
            with np.errstate(over="ignore"):  # saturates to inf, as torch's
                return np.array(v, dtype.np)
    try:
        v = v.real if isinstance(v, complex) and not dtype.is_complex else v
        if dtype.itemsize <= 2 and dtype._category == 2:  # Note [half through float32]
            return dt.narrowed(np.array(v), dtype.np)
        return np.array(v, dtype.np)
    except (OverflowError, ValueError, TypeError) as e:  # NaN into an integer dtype: ValueError
        if not isinstance(v, (int, float, complex)) or not int64_range(v):
            raise e
        if type(v) is int and dtype.np.kind == "u" and -np.iinfo(dtype.np).max <= v < 0:
            return np.array(v % (1 << 8 * dtype.np.itemsize), dtype.np)
        raise _overflow(dtype) from None


class Number(np.ndarray):
    """The read-only 0-d array of a Python number that ops broadcast as an operand (the
    memory of ``_operands._number``'s views): what tells autograd a saved operand was a
    number (``is_number``); ``value`` is the number."""

    value: bool | int | float | complex


def number_array(a: np.ndarray, value) -> Number:
    """``a``, a 0-d array of the number ``value``, copied into a read-only ``Number``
    (which owns its memory, so that views of it name it as their base)."""
    n = Number((), a.dtype)
    n[()] = a
    n.flags.writeable = False
    n.value = value
    return n


_WRAPPED = {bool: np.bool_, int: np.int64, float: np.float64, complex: np.complex128}


def wrapped_number(t) -> np.ndarray:
    """The number of ``t`` (``is_number``) as torch keeps one it saves: a 0-d tensor's
    array of its Python type's dtype (float64 for a float, int64 for an int), or the
    operand's own 0-d array for an int beyond int64."""
    n = _number_of(t)
    assert n is not None  # is_number(t)
    try:
        return np.array(n.value, _WRAPPED[type(n.value)])
    except (KeyError, OverflowError):
        return np.array(n)


def is_number(t) -> bool:
    """Whether tensor ``t`` is an op's operand made of a Python number: torch saves such an
    operand as a Scalar, so no saved-tensor hook packs it (the probe of
    ``tests/test_trust_probe21.py``)."""
    return _number_of(t) is not None


def _number_of(t) -> Number | None:
    """The ``Number`` behind ``t``, or None: eagerly its payload's base, in a trace the
    base of the number's 0-d constant it expands."""
    p = t._payload
    if type(p) is not np.ndarray:
        t = t._base
        p = None if t is None else t._payload
    n = p.base if type(p) is np.ndarray else None
    return n if type(n) is Number else None
