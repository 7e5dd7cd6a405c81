"""Matrix products."""

from __future__ import annotations

import numpy as np

from . import lax
from .avals import Aval, ShapeError
from .primitive import Primitive, _plain, domain


def _matmul_rule(a, b):
    if a.ndim < 2 or a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[-2]:
        hint = (
            ""
            if a.ndim < 2 or a.ndim != b.ndim or a.shape[-1] == b.shape[-2]
            else (
                f" (mat1's columns, {a.shape[-1]}, must equal mat2's rows, {b.shape[-2]}: for a "
                "Linear layer, the input's last dimension must be its in_features)"
            )
        )
        raise ShapeError(
            f"mat1 and mat2 shapes cannot be multiplied "
            f"({'x'.join(map(str, a.shape))} and {'x'.join(map(str, b.shape))})" + hint
        )
    if a.dtype is not b.dtype:
        raise ShapeError(
            f"expected m1 and m2 to have the same dtype, but got: "
            f"{a.dtype.type_meta} != {b.dtype.type_meta} (convert one operand to the "
            f"other's dtype, e.g. b.to(a.dtype))"
        )
    return Aval(a.shape[:-1] + b.shape[-1:], a.dtype)


def _matmul_jvp(primals, tangents, out):
    (a, b), (at, bt) = primals, tangents
    if bt is None:
        return matmul(at, b)
    return matmul(a, bt) if at is None else lax.add(matmul(at, b), matmul(a, bt))


def _matmul(a, b):
    if a.shape[-1] == 1 and a.ndim > 2:  # stacked outer products: NumPy's matmul loops
        return np.einsum("...ik,...kj->...ij", a, b)  # over the stack, 3-5x slower
    return np.matmul(a, b)


def _times_t(a, b):
    return _matmul(a, b.swapaxes(-1, -2))  # (lax.mT's permute: the same strides)


def _t_times(a, b):
    return _matmul(a.swapaxes(-1, -2), b)


def _plain_mm(fn, a, b, other):
    """``fn`` on ``a`` and ``b`` where ``other``, the one transposed, is real and no graph
    is built (Note [plain rules] in eager/dispatch.py), else None."""
    p = other._payload
    if p.dtype.kind == "c" or len(p.shape) < 2:
        return None
    return _plain[0](fn, (a, b), {})


def _matmul_vjp_a(g, b):
    r = _plain_mm(_times_t, g, b, b)
    return matmul(g, lax.conj(lax.mT(b))) if r is None else r


def _matmul_vjp_b(g, a):
    r = _plain_mm(_t_times, a, g, a)
    return matmul(lax.conj(lax.mT(a)), g) if r is None else r


matmul: Primitive = Primitive(
    "matmul",
    _matmul,
    _matmul_rule,
    vjp=(_matmul_vjp_a, _matmul_vjp_b),
    jvp=_matmul_jvp,
    node_name="MmBackward0",
    domain=domain(bool="NumPy's boolean matmul is an OR of ANDs; cast to an integer dtype first"),
)
