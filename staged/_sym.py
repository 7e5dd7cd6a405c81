"""torch's ``sym_*`` helpers on plain Python numbers (torch's give the same results for
them; its symbolic sizes are staged's plain ints): code written for torch.compile's
dynamic shapes calls them on sizes."""

from __future__ import annotations

import builtins
import math


def sym_int(a) -> int:
    """``a`` as an int, truncated toward zero."""
    return math.trunc(a)


def sym_float(a) -> float:
    return float(a)


def sym_max(a, b):
    """The larger, a float where either is one (``sym_max(2, 2.0)`` is 2.0)."""
    m = builtins.max(a, b)
    return float(m) if isinstance(a, float) or isinstance(b, float) else m


def sym_min(a, b):
    """The smaller, a float where either is one."""
    m = builtins.min(a, b)
    return float(m) if isinstance(a, float) or isinstance(b, float) else m


def sym_not(a) -> bool:
    return not a


def sym_sqrt(a) -> float:
    return math.sqrt(a)


def sym_sum(args):
    """The sum of the numbers ``args``."""
    return builtins.sum(args)


def sym_ite(b, t, f):
    """``t`` if ``b`` else ``f``, of one type (torch asserts it)."""
    if type(t) is not type(f):
        raise AssertionError(f"type mismatch: {type(t)} vs {type(f)}")
    return t if b else f


class SymInt:
    """torch's symbolic int, a size traced by torch.compile: staged's sizes are plain ints,
    so no value is one (``isinstance(n, SymInt)`` is False, as torch's for an int)."""


class SymFloat:
    """torch's symbolic float: none exists in staged (see ``SymInt``)."""


class SymBool:
    """torch's symbolic bool: none exists in staged (see ``SymInt``)."""
