"""``geqrf`` and ``ormqr``: the QR factorization in LAPACK's compact form (``R`` on and
above the diagonal, the Householder vectors below it, with their scalars ``tau``), and
the product of its ``Q`` with a matrix, as torch's. ``geqrf`` is LAPACK's own
(NumPy's ``qr(mode='raw')``), eager only and without a derivative, as torch's;
``ormqr`` applies the reflectors one by one in staged's ops, so it differentiates,
captures and compiles."""

from __future__ import annotations

import collections

import numpy as np

from .. import dtypes as dt
from ..autodiff import Fused
from ..eager import ops
from ..eager.factories import ones, zeros
from ..eager.tensor import Tensor
from ._core import _eager_only
from ._lapack import _own, _unpack

GeqrfResult = collections.namedtuple("geqrf", "a tau", module="staged.return_types")  # type: ignore[name-match]


def _geqrf_impl(A):
    """``(a, tau)`` of LAPACK's ``geqrf`` for the ``(*, m, n)`` ``A``, side by side."""
    *batch, m, n = A.shape
    k = min(m, n)
    if not A.size:
        h, tau = np.zeros((*batch, n, m), A.dtype), np.zeros((*batch, k), A.dtype)
    else:
        h, tau = np.linalg.qr(A, mode="raw")  # h is the factor column-major: transposed
    a = np.swapaxes(h, -1, -2).reshape(*batch, m * n)
    return np.concatenate([a, tau.astype(A.dtype)], -1)


def _no_derivative(g):
    raise NotImplementedError("the derivative for 'geqrf' is not implemented.")


_geqrf = Fused(
    "geqrf",
    _geqrf_impl,
    _eager_only("geqrf", "", prefix="torch."),
    vjp=_no_derivative,
    node_name="GeqrfBackward0",
)


def geqrf(input) -> GeqrfResult:
    """LAPACK's ``geqrf`` of the ``(*, m, n)`` ``input``: ``a`` holds ``R`` on and above
    its diagonal and the Householder vectors ``v_i`` below it (each 1 at ``i``, implied),
    ``tau`` the ``min(m, n)`` scalars of the reflectors ``H_i = I - tau_i v_i v_i^H``, whose
    product ``H_1 ... H_k`` is ``Q`` (``householder_product``, ``ormqr``)."""
    if input.ndim < 2:
        raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
    if not (input.dtype.is_floating_point or input.dtype.is_complex) or input.dtype in (
        dt.float16,
        dt.bfloat16,
    ):
        raise NotImplementedError(f"\"geqrf_cpu\" not implemented for '{input.dtype.title}'")
    *batch, m, n = input.shape
    a, tau = _unpack(_geqrf(input), tuple(batch), (m, n), (min(m, n),))
    return GeqrfResult(*_own(a, tau))


def _ormqr_checks(input, tau, other, left) -> None:
    what = "torch.ormqr"
    if input.ndim < 2:
        raise RuntimeError(f"{what}: input must have at least 2 dimensions.")
    if other.ndim < 2:
        raise RuntimeError(f"{what}: other must have at least 2 dimensions.")
    side = -2 if left else -1
    if tau.shape[-1] != min(other.shape[side], input.shape[-1]):
        raise RuntimeError(
            f"{what}: tau.shape[-1] must be equal to min(other.shape[{side}], input.shape[-1])"
        )
    if other.shape[side] != input.shape[-2]:
        raise RuntimeError(f"{what}: other.shape[{side}] must be equal to input.shape[-2]")
    if tau.ndim != input.ndim - 1:
        raise RuntimeError(
            f"{what}: Expected tau to have one dimension less than input, but got tau.ndim "
            f"equal to {tau.ndim} and input.ndim is equal to {input.ndim}"
        )
    if other.ndim != input.ndim:
        raise RuntimeError(
            f"{what}: Expected other to have the same number of dimensions as input, but got "
            f"other.ndim equal to {other.ndim} and input.ndim is equal to {input.ndim}"
        )
    for name, t in (("tau", tau), ("other", other)):
        if t.dtype is not input.dtype:
            raise RuntimeError(
                f"{what}: Expected input and {name} to have the same dtype, but input has "
                f"dtype{input.dtype.title} and {name} has dtype {t.dtype.title}"
            )


def ormqr(input, tau, other, left=True, transpose=False) -> Tensor:
    """``Q other`` (``left``; else ``other Q``), ``Q^H`` for ``Q`` where ``transpose``,
    ``Q`` the product of ``geqrf``'s reflectors in ``(input, tau)`` (LAPACK's ``ormqr``),
    each applied to ``other`` in turn: ``H C = C - tau v (v^H C)``."""
    _ormqr_checks(input, tau, other, left)
    *batch, m, _ = input.shape
    C = other
    steps = range(tau.shape[-1])
    for i in steps if left == transpose else reversed(steps):
        v = ops.cat(
            [
                zeros(*batch, i, dtype=input.dtype),
                ones(*batch, 1, dtype=input.dtype),
                input[..., i + 1 :, i],
            ],
            -1,
        )
        t = tau[..., i, None, None]
        t = t.conj() if transpose and t.dtype.is_complex else t
        if left:
            C = C - t * v.unsqueeze(-1) * (v.conj().unsqueeze(-2) @ C)
        else:
            C = C - t * (C @ v.unsqueeze(-1)) * v.conj().unsqueeze(-2)
    return C
