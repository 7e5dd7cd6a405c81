"""Matrix products."""

from __future__ import annotations

import math

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


# Note [outer products]: a stack of outer products (``k`` = 1: vmap's per-example weight
# gradients, 27 MB for the example MLP's 256) is NumPy's worst matmul: it sends ``k`` = 1
# to its naive loop, not BLAS (3-5x slower than einsum), and einsum zero-fills the whole
# result before adding the products into it, two passes over memory. With ``k`` padded to
# 2 by a zero column of ``a`` and a zero row of ``b`` each product is one BLAS GEMM, its
# tile zeroed and written while in cache, one pass: the 128x64 layer's 8 MB alone in 0.2 ms
# against einsum's 0.56 ms. The values are einsum's, bit for bit: each entry is
# ``a * b + 0 * 0`` (one rounding; +0 for a -0 product, as einsum's and matmul's sums
# from 0). Real BLAS dtypes only: a complex GEMM may fuse its products' roundings.
def matmul_flops(a_shape, b_shape) -> int:
    """Two floating-point operations per multiply-add of a ``matmul`` of operands of these
    shapes (equal batch dims), as torch counts its matrix products (the flop counter's and
    the profiler's ``with_flops`` formula)."""
    return 2 * math.prod(a_shape[:-1]) * b_shape[-1] * a_shape[-1]


def _matmul(a, b):
    if a.shape[-1] == 1 and a.ndim > 2:  # Note [outer products]
        if a.dtype.char not in "fd":
            return np.einsum("...ik,...kj->...ij", a, b)
        col = np.zeros(a.shape[:-1] + (2,), a.dtype)
        col[..., :1] = a
        row = np.zeros(b.shape[:-2] + (2,) + b.shape[-1:], b.dtype)
        row[..., :1, :] = b
        return np.matmul(col, row)
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
