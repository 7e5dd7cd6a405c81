"""Public reductions: dim handling, dtype rules, (values, indices) results."""

from __future__ import annotations

import builtins
import functools
import math
from collections import namedtuple
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ... import autodiff as ad
from ... import dtypes as dt
from ...autodiff import fused
from ..._where import warn_user
from ...autodiff.avals import normalize_dims, wrap_dim
from ..tensor import Tensor
from ._operands import expand_to, float_operand, scalar_tensor
from .elementwise import eq, isnan, maximum, minimum, ne, real, sub, where
from .shape import _dim_of, _shape_arg, cat, diagonal, narrow, new_zeros, reshape, select
from .shape import unsqueeze
from ..views import named

if TYPE_CHECKING:
    from collections.abc import Callable

    _F = TypeVar("_F", bound=Callable[..., Any])

# named after the op, as torch.return_types are (their repr: ``max(values=..., ...)``)
MaxResult = namedtuple("max", ["values", "indices"], module="staged.return_types")  # type: ignore[name-match]
MinResult = namedtuple("min", ["values", "indices"], module="staged.return_types")  # type: ignore[name-match]
SortResult = namedtuple("sort", ["values", "indices"], module="staged.return_types")  # type: ignore[name-match]
TopkResult = namedtuple("topk", ["values", "indices"], module="staged.return_types")  # type: ignore[name-match]
CummaxResult = namedtuple("cummax", ["values", "indices"], module="staged.return_types")  # type: ignore[name-match]
CumminResult = namedtuple("cummin", ["values", "indices"], module="staged.return_types")  # type: ignore[name-match]
AminmaxResult = namedtuple("aminmax", ["min", "max"], module="staged.return_types")  # type: ignore[name-match]


_FLOATING = "fcV"  # NumPy kinds of the floating and complex dtypes (V: bfloat16)


def _accumulation_dtype(x, dtype):
    """``dtype`` if given; integers and bools accumulate in int64 (PyTorch's sum, prod,
    cumsum); floating and complex dtypes are kept."""
    if dtype is not None:
        d = dt.as_dtype(dtype)
        return x if x.dtype is d else ad.cast(x, dtype=d)
    k = x._payload.dtype
    if k.kind not in _FLOATING and k != np.int64:
        return ad.cast(x, dtype=dt.int64)
    return x


def in_float32(fn: _F) -> _F:
    """Half-precision inputs compute in float32 and round once, as PyTorch's CPU kernels
    do for reductions and activations (a float16 sum of 4096 ones sticks at 2048, exp(20)
    overflows float16)."""

    def op(x, *args, **kwargs):
        d = x._payload.dtype
        if d.itemsize < 4 and d.kind in "fV":
            return fn(x.float(), *args, **kwargs).to(x.dtype)
        return fn(x, *args, **kwargs)

    return functools.wraps(fn)(op)  # type: ignore[return-value]  # op takes what fn takes


def _every_dim_if_empty(dim):
    """torch's sum, mean, var, amax, norm ... reduce every dim for an empty dim list too
    (``sum(dim=[])`` is 0-d); ``any`` and ``all`` reduce none."""
    return None if isinstance(dim, (list, tuple)) and not dim else dim


def sum(x, dim=None, keepdim=False, *, dtype=None):
    dims = normalize_dims(_every_dim_if_empty(dim), x.ndim)
    return _sum(_accumulation_dtype(x, dtype), dims, keepdim, _SUM_NAMES[dim is not None])


_SUM_NAMES = ("SumBackward0", "SumBackward1")  # torch's: all elements, over dims
_MEAN_NAMES = ("MeanBackward0", "MeanBackward1")


@in_float32
def _sum(x, dims, keepdim, name="SumBackward0"):
    return named(ad.reduce_sum(x, dims=dims, keepdim=keepdim), name)


def prod(x, dim=None, keepdim=False, *, dtype=None):
    """Product over all elements, or over ``dim``; zeros get PyTorch's gradients."""
    dims = normalize_dims(dim, x.ndim)
    return ad.reduce_prod(
        _accumulation_dtype(x, dtype), dims=dims, keepdim=keepdim and dim is not None
    )


def _no_bool_scan(name, dtype):
    if dtype is not None and dt.as_dtype(dtype) is dt.bool_:
        raise NotImplementedError(f"\"{name}_out_cpu\" not implemented for 'Bool'")


def cumsum(x, dim, *, dtype=None):
    _no_bool_scan("cumsum", dtype)
    x = _accumulation_dtype(x, dtype)
    return ad.cumsum(x, dim=wrap_dim(dim, x.ndim), reverse=False) if x.ndim else ad.copy(x)


def _scan(xs: tuple, dim: int, combine, fills: tuple) -> tuple:
    """The inclusive prefix scan of the tensors ``xs`` along ``dim`` by an associative
    ``combine(earlier, later)`` of tuples: log2(n) steps of ``combine(y shifted by 2^k,
    y)``, each ``fills`` entry (combine's identity) shifted in, or, where it is None (an
    idempotent combine: max, min), ``y``'s own head: no extreme constant, which Vulkan's
    32-bit int64 would wrap."""
    shape = tuple(xs[0]._payload.shape)
    n, s = shape[dim], 1
    while s < n:
        pad = shape[:dim] + (s,) + shape[dim + 1 :]
        shifted = tuple(
            ad.concat(
                narrow(y, dim, 0, s) if f is None else expand_to(scalar_tensor(f, y.dtype), pad),
                narrow(y, dim, 0, n - s),
                dim=dim,
                sizes=(s, n - s),
            )
            for y, f in zip(xs, fills)
        )
        xs = combine(shifted, xs)
        s *= 2
    return xs


def cumprod(x, dim, *, dtype=None):
    """Running products along ``dim``, a scan of products (ones shifted in): only
    products, so zeros get exact gradients; half precision multiplies in float32, as
    torch."""
    _no_bool_scan("cumprod", dtype)
    x = _accumulation_dtype(x, dtype)
    return _cumprod(x, dim) if x.ndim else ad.copy(x)


@in_float32
def _cumprod(x, dim):
    (y,) = _scan((x,), wrap_dim(dim, x.ndim), lambda a, b: (ad.mul(b[0], a[0]),), (1,))
    return ad.copy(x) if y is x else y


def _cumulative_extremum(x, dim, result, later_wins):
    """``(values, indices)`` of the running max (min) along ``dim``: the later of tied
    entries, and NaN once one is met (with the last NaN's index), as torch; the gradient
    goes to the entry each value came from."""
    if not x.ndim:
        return result(ad.copy(x), scalar_tensor(0, dt.int64))
    d = wrap_dim(dim, x.ndim)

    def combine(a, b):
        take_b = isnan(b[0]) | (~isnan(a[0]) & later_wins(b[0], a[0]))
        return where(take_b, b[0], a[0]), where(take_b, b[1], a[1])

    positions = expand_to(_positions(x, d), tuple(x._payload.shape))
    _, idx = _scan((x.detach(), positions), d, combine, (None, None))
    return result(ad.gather(x, idx, dim=d), idx)


def cummax(x, dim) -> Any:
    """``(values, indices)``: the largest entry so far along ``dim``."""
    return _cumulative_extremum(x, dim, CummaxResult, lambda b, a: b >= a)


def cummin(x, dim) -> Any:
    """``(values, indices)``: the smallest entry so far along ``dim``."""
    return _cumulative_extremum(x, dim, CumminResult, lambda b, a: b <= a)


def diff(x, n=1, dim=-1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim`` (``!=`` for bools), after ``prepend``
    and ``append`` are joined to ``x``."""
    if x.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    dim = wrap_dim(dim, x.ndim)
    parts = [t for t in (prepend, x, append) if t is not None]
    if builtins.any(t.ndim != x.ndim for t in parts):
        raise RuntimeError("diff expects prepend or append to be the same dimension as input")
    if len(parts) > 1:
        x = cat(parts, dim)
    for _ in range(n):
        m = x._payload.shape[dim]
        if m == 0:
            break
        hi, lo = narrow(x, dim, 1, m - 1), narrow(x, dim, 0, m - 1)
        x = ne(hi, lo) if x.dtype is dt.bool_ else sub(hi, lo)
    return x


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """The derivative of ``input`` sampled on a grid, estimated along each of ``dim`` (all
    dims by default) by central differences inside and one-sided ones of ``edge_order``
    (1 or 2) at the ends, as torch's (and NumPy's): ``spacing`` is a number for every dim,
    one number per dim, or per dim a 1-D tensor of its coordinates. Returns a tuple, one
    tensor per dim."""
    dims = list(range(input.ndim)) if dim is None else [dim] if isinstance(dim, int) else dim
    dims = [wrap_dim(d, input.ndim) for d in dims]
    for i, d in enumerate(dims):
        if d in dims[:i]:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims) and dim is None:
            raise RuntimeError(
                "torch.gradient expected spacing to be unspecified, a scalar, or a list of "
                f"length equal to 'self.dim() = {input.ndim}', since dim argument was not "
                f"given, but got a list of length {len(spacing)}"
            )
        if len(spacing) != len(dims):
            raise RuntimeError(
                "torch.gradient expected spacing to be unspecified, a scalar or it's spacing "
                "and dim arguments to have the same length, but got a spacing argument of "
                f"length {len(spacing)} and a dim argument of length {len(dims)}."
            )
        spacing = list(spacing)
    else:
        spacing = [spacing] * len(dims)
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    if builtins.any(input.shape[d] < edge_order + 1 for d in dims):
        raise RuntimeError(
            "torch.gradient expected each dimension size to be at least edge_order+1"
        )
    x = input if input.dtype.is_floating_point or input.dtype.is_complex else input.float()
    return tuple(_gradient_along(x, d, h, edge_order) for d, h in zip(dims, spacing))


def _gradient_along(x, d, h, edge_order):
    """torch's gradient along ``d``: uniform ``h`` or coordinates ``h`` (a 1-D tensor)."""

    def at(start, stop=None):
        start += x.shape[d] if start < 0 else 0
        return narrow(x, d, start, (x.shape[d] if stop is None else stop) - start)

    n = x.shape[d]
    if not isinstance(h, Tensor):
        center = (at(2) - at(0, n - 2)) / h / 2
        if edge_order == 1:
            first, last = (at(1, 2) - at(0, 1)) / h, (at(-1) - at(-2, n - 1)) / h
        else:
            first = (-1.5 * at(0, 1) + 2 * at(1, 2) - 0.5 * at(2, 3)) / h
            last = (0.5 * at(-3, n - 2) - 2 * at(-2, n - 1) + 1.5 * at(-1)) / h
        return cat([first, center, last], d)
    step = diff(h, dim=0)
    shape = [1] * x.ndim
    shape[d] = -1
    dx1, dx2 = step[:-1], step[1:]
    a = (-dx2 / (dx1 * (dx1 + dx2))).reshape(shape)
    b = ((dx2 - dx1) / (dx1 * dx2)).reshape(shape)
    c = (dx1 / (dx2 * (dx1 + dx2))).reshape(shape)
    center = a * at(0, n - 2) + b * at(1, n - 1) + c * at(2)
    if edge_order == 1:
        first = (at(1, 2) - at(0, 1)) / step[0]
        last = (at(-1) - at(-2, n - 1)) / step[-1]
    else:
        s0, s1, t1, t0 = step[0], step[1], step[-2], step[-1]
        first = (
            -(2.0 * s0 + s1) / (s0 * (s0 + s1)) * at(0, 1)
            + (s0 + s1) / (s0 * s1) * at(1, 2)
            + -s0 / (s1 * (s0 + s1)) * at(2, 3)
        )
        last = (
            t0 / (t1 * (t0 + t1)) * at(-3, n - 2)
            + -(t0 + t1) / (t0 * t1) * at(-2, n - 1)
            + (2 * t0 + t1) / (t0 * (t0 + t1)) * at(-1)
        )
    return cat([first, center, last], d)


def _sorted(x, dim, descending, k, order="stable"):
    """(values, indices) of the first ``k`` along ``dim``, ties in ``order`` (the argsort
    primitive's: "stable", or torch's kernel's where it is built)."""
    d = wrap_dim(dim, x.ndim)
    if x.dtype.is_complex:
        raise RuntimeError(f"sort(): complex tensors cannot be ordered (got {x.dtype.name})")
    if not x.ndim:
        one = ad.reshape(x, shape=(1,))
        idx = ad.argsort(one, dim=0, descending=descending, k=k, order=order)
        return ad.copy(x), ad.reshape(idx, shape=())
    idx = ad.argsort(x, dim=d, descending=descending, k=k, order=order)
    return ad.gather(x, idx, dim=d), idx


def sort(x, dim=-1, descending=False, stable=False) -> Any:
    """``(values, indices)`` along ``dim``, NaN above every number; ties in order with
    ``stable``, else in the order torch's CPU kernel (``std::sort``) leaves them (Note
    [torch's order of ties]; a compiled step keeps them in order). The gradient of
    ``values`` goes to the positions they came from."""
    n = x._payload.shape[wrap_dim(dim, x.ndim)] if x.ndim else 1
    return SortResult(*_sorted(x, dim, descending, n, "stable" if stable else "sort"))


def argsort(x, dim=-1, descending=False, stable=False):
    return sort(x, dim, descending, stable).indices


def msort(x):
    """``x`` sorted along dim 0."""
    return sort(x, 0).values


def topk(x, k, dim=-1, largest=True, sorted=True) -> Any:
    """The ``k`` largest (``largest=False``: smallest) along ``dim``, sorted unless
    ``sorted=False``; of tied entries, and in the unsorted order, those torch's CPU kernel
    gives (Note [torch's order of ties]; a compiled step sorts, ties by index)."""
    if x.dtype is dt.bool_:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    n = x._payload.shape[wrap_dim(dim, x.ndim)] if x.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError(f"selected index k out of range (k={k}, size {n})")
    return TopkResult(*_sorted(x, dim, largest, k, "topk" if sorted else "topk_unsorted"))


@in_float32
def norm(x, p="fro", dim=None, keepdim=False):
    """The vector p-norm over ``dim`` (all elements by default): p = 2 ("fro"), 1, inf,
    -inf or any other number. Where an entry is 0 its gradient is 0, and where the norm is 0
    all are, as PyTorch's norm_backward masks them (not 0 * inf)."""
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. "
            f"Got {x.dtype.title}"
        )
    dims = normalize_dims(_every_dim_if_empty(dim), x.ndim)
    if p in ("fro", 2):
        kernel = _norm2 if fused.fusable(x) else _norm2_decomposed
        return kernel(x, dims=dims, keepdim=keepdim)
    a = x.abs()
    if p == 1:
        return sum(a, dims, keepdim)
    if p in (float("inf"), float("-inf")):
        return (amax if p > 0 else amin)(a, dims, keepdim)
    if p == 0:  # a count: torch's requires grad, with a zero gradient
        count = sum((a != 0).to(a.dtype), dims, keepdim)
        return where(scalar_tensor(True, dt.bool_), count, sum(a, dims, keepdim))
    return _pow_off_zero(sum(_pow_off_zero(a, p), dims, keepdim), 1.0 / p)


def _norm2_decomposed(x, *, dims, keepdim):
    # x * x for real x (|x|^2, bit for bit): its gradient 2 g x keeps the sign of a zero
    # entry's, as torch's x g / norm does, where abs's sgn(0) gave +0
    a = x.abs() if x.dtype.is_complex else x
    s = sum(a * a, dims, keepdim)
    zero = s == 0
    return where(zero, scalar_tensor(0, s.dtype), s.where(~zero, 1).sqrt())


# eagerly one kernel and torch's LinalgVectorNormBackward0 (x g / norm), where the
# composite bound 7 primitives
_norm2 = ad.Fused(
    "norm2",
    fused.norm2_impl,
    _norm2_decomposed,
    vjp=fused.NORM2_VJP,
    node_name="LinalgVectorNormBackward0",
)


def _pow_off_zero(t, q: float):
    """``t ** q`` (0 or inf where ``t`` is 0) with no derivative, nor tangent, at 0."""
    zero = t == 0
    return where(zero, scalar_tensor(0.0 if q > 0 else math.inf, t.dtype), t.where(~zero, 1) ** q)


def mean(x, dim=None, keepdim=False, *, dtype=None):
    if dtype is None and not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(
            f"mean(): could not infer output dtype. Input dtype must be either "
            f"a floating point or complex dtype. Got: {x.dtype.title}"
        )
    return _mean(_accumulation_dtype(x, dtype), dim, keepdim)


def _mean_composite(x, *, dims, keepdim):
    # sum's primitive (x is of its accumulation dtype, float32 for halves) and the strict
    # div, n a constant of x's dtype: none of the public ops' checks again
    n = 1
    for d in dims:
        n *= x._payload.shape[d]
    return ad.lax.div(ad.reduce_sum(x, dims=dims, keepdim=keepdim), n)


# eagerly one kernel and one Node (torch's MeanBackward0/1); graphs see the sum and the div
_mean_kernel = ad.Fused(
    "mean", fused.mean_impl, _mean_composite, vjp=fused.mean_dx, node_name=_MEAN_NAMES[0]
)


@in_float32
def _mean(x, dim, keepdim):
    dims = normalize_dims(_every_dim_if_empty(dim), x.ndim)
    return named(_mean_kernel(x, dims=dims, keepdim=keepdim), _MEAN_NAMES[dim is not None])


def var(x, dim=None, unbiased=None, keepdim=False, *, correction=1):
    """PyTorch's overloads: ``var(dim, *, correction, keepdim)``, ``var(dim, unbiased,
    keepdim)`` and ``var(unbiased)`` (a bool first argument is ``unbiased``, not a dim)."""
    return _variance(x, "var", dim, unbiased, keepdim, correction)


@in_float32
def _variance(x, name, dim, unbiased, keepdim, correction):
    """var, for the op ``name`` (torch's warning names it where no degree of freedom is
    left: the result is NaN or inf)."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    if unbiased is not None:
        correction = int(unbiased)
    dim = _every_dim_if_empty(dim)
    dims = normalize_dims(dim, x.ndim)
    n = 1
    for d in dims:
        n *= x._payload.shape[d]
    # PyTorch's var_backward is 2 / (n - correction) * g * (x - m): the gradient through
    # m = mean(x), 0 in exact arithmetic, is NaN for the whole row as soon as x holds an
    # infinity, so finite_grad drops it there (m still differentiates for second order)
    m = mean(x, dims, keepdim=True)
    if n <= correction:
        warn_user(
            f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than "
            "the reduction factor (input numel divided by output numel)."
        )
    if isinstance(n, int) and n == 0:  # NaN, with torch's tangent 0 (not 0 / 0)
        s = sum(_squared(x - m), dims, keepdim)
        return where(scalar_tensor(True, dt.bool_), scalar_tensor(float("nan"), s.dtype), s)
    if n <= correction:
        return _var_without_dof(x, x - m, dims, keepdim, n - correction, dim is None or not x.ndim)
    return sum(_squared(x - ad.finite_grad(m)), dims, keepdim) / (n - correction)


def _squared(c):
    return (c * c.conj()).real if c.dtype.is_complex else c * c


def _var_without_dof(x, centered, dims, keepdim, dof, whole):
    """var with ``dof`` = n - correction <= 0: the sum of squares over 0 (inf, or NaN where
    all entries are equal), with torch's var_backward: over every dim (``whole``)
    ``g * where(x == mean, nan, inf)``, along dims ``2 / dof * g * (x - mean)``. Each is the
    derivative of a term worth 0, ``w * (x - x.detach())`` (w detached), added to the sum."""
    c, d = centered.detach(), x - x.detach()
    zero = sum(c.abs() * real(d) if whole else real(2 * c.conj() * d), dims, keepdim)
    s = sum(_squared(c), dims, keepdim)
    return (s + zero) / 0 if whole or dof == 0 else s / 0 + zero / dof


def std(x, dim=None, unbiased=None, keepdim=False, *, correction=1):
    """``sqrt(var)`` (with var's overloads); where the variance is 0 the gradient is 0, not
    0 * inf (PyTorch's std_backward masks it the same way)."""
    return _std(x, "std", dim, unbiased, keepdim, correction)


@in_float32
def _std(x, name, dim, unbiased, keepdim, correction):
    v = _variance(x, name, dim, unbiased, keepdim, correction)
    zero = v == 0  # sqrt at 1 there: its tangent 0 / sqrt(0) would be NaN, torch's is 0
    return where(zero, scalar_tensor(0, v.dtype), v.where(~zero, 1).sqrt())


def _nonempty(name, x, dim, error=RuntimeError):
    """torch's errors for a reduction without identity (max, argmax ...) over no entries:
    ``error`` (IndexError for argmax) over every dim (``dim`` None), IndexError naming the
    first empty dim of ``dim``'s."""
    if 0 not in x._payload.shape:
        return
    if dim is None:
        more = "" if error is IndexError else " Specify the reduction dim with the 'dim' argument."
        raise error(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0.{more}"
        )
    for d in sorted(dim):
        if x._payload.shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def _bounded(name, reduce, x, dim, keepdim):
    dim = _every_dim_if_empty(dim)
    dims = normalize_dims(dim, x.ndim)
    _nonempty(name, x, None if dim is None else dims)
    return reduce(x, dims=dims, keepdim=keepdim)


def amax(x, dim=(), keepdim=False):
    return _bounded("amax", ad.reduce_max, x, dim, keepdim)


def amin(x, dim=(), keepdim=False):
    return _bounded("amin", ad.reduce_min, x, dim, keepdim)


def aminmax(x, *, dim=None, keepdim=False) -> Any:
    """``(min, max)``: ``amin`` and ``amax`` over ``dim`` (every entry by default)."""
    if x.dtype.is_complex:
        raise NotImplementedError(f"\"aminmax_cpu\" not implemented for '{x.dtype.title}'")
    if dim is None and x.numel() == 0:
        raise RuntimeError(
            "aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
            "identity."
        )
    if dim is not None and x.ndim and x._payload.shape[wrap_dim(dim, x.ndim)] == 0:
        raise IndexError(f"aminmax: Expected reduction dim {dim} to have non-zero size.")
    dims = () if dim is None else dim
    return AminmaxResult(amin(x, dims, keepdim), amax(x, dims, keepdim))


def sum_to_size(x, *size):
    """``Tensor.sum_to_size``: ``x`` summed over the dims that ``size`` (which must expand
    to ``x``'s shape) lacks or holds as 1."""
    size = _shape_arg(size)
    shape = tuple(x._payload.shape)
    lead = len(shape) - len(size)
    if lead < 0 or builtins.any(s not in (1, n) for s, n in zip(size, shape[lead:])):
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size {{{list(shape)}}}.")
    dims = [*range(lead), *(lead + i for i, s in enumerate(size) if s == 1 != shape[lead + i])]
    return reshape(sum(x, dims, keepdim=True), size) if dims else x


def argmax(x, dim=None, keepdim=False):
    return _arg("argmax", ad.argmax, x, dim, keepdim)


def argmin(x, dim=None, keepdim=False):
    return _arg("argmin", ad.argmin, x, dim, keepdim)


def _arg(name, prim, x, dim, keepdim):
    if x.dtype is dt.bool_:
        raise RuntimeError(f"{name}(): does not support bool input")
    if dim is None:
        _nonempty(name, x, None, IndexError)
        return prim(ad.reshape(x, shape=(x.numel(),)), dim=0, keepdim=False)
    d = wrap_dim(dim, x.ndim)
    _nonempty(name, x, (d,))
    return prim(x, dim=d, keepdim=keepdim)


def _positions(x, dim):
    """The int64 position along ``dim`` of each entry, shaped to broadcast against ``x``."""
    shape = [1] * x.ndim
    shape[dim] = x._payload.shape[dim]
    return Tensor._wrap(np.arange(shape[dim], dtype=np.int64).reshape(shape), False)


def _select_along(x, idx, *, dim, keepdim):
    """x at ``idx`` along ``dim``: the gradient goes to the chosen element only."""
    picked = ad.gather(x, idx if keepdim else unsqueeze(idx, dim), dim=dim)
    return picked if keepdim else reshape(picked, idx._payload.shape)


def _extremum(name, reduce, arg, result, x, dim, keepdim, other):
    if isinstance(dim, Tensor):
        dim, other = None, dim
    if other is not None:
        return (maximum if reduce is ad.reduce_max else minimum)(x, other)
    if dim is None:
        _nonempty(name, x, None)
        dims = normalize_dims(None, x.ndim)
        if x._requires_grad and x.dtype.is_floating_point:
            return _evenly_distributed(reduce, x, dims, math.inf if name == "min" else -math.inf)
        return reduce(x, dims=dims, keepdim=False)
    d = wrap_dim(dim, x.ndim)
    _nonempty(name, x, (d,))
    idx = arg(x, dim=d, keepdim=keepdim)
    kernel = _PICK_MAX if reduce is ad.reduce_max else _PICK_MIN
    return result(kernel(x, idx, dim=d, keepdim=keepdim) if x.ndim else x, idx)


# eagerly torch's Node, whose backward puts the gradient in place (gather's adds it)
_PICK_MAX, _PICK_MIN = (
    ad.Fused(name, fused.pick_impl, _select_along, vjp=fused.PICK_VJP, node_name=node)
    for name, node in (("pick_max", "MaxBackward0"), ("pick_min", "MinBackward0"))
)


def _evenly_distributed(reduce, x, dims, fill):
    """``reduce`` over every entry with torch's evenly_distribute_backward (full max and
    min): the gradient is split among the entries equal to the result or, where that is
    NaN, among the NaN entries (the primitive's own rule, amax's, gives NaN to all there);
    the tangent is the primitive's (torch's evenly_read_jvp, NaN there). Its value is the
    primitive's."""
    nan = isnan(x)
    nans = sum(nan)
    numbers = reduce(where(nan, fill, x), dims=dims, keepdim=False)  # NaN ignored
    # NaN, with the primitive's tangent; its gradient, NaN, dropped by finite_grad
    at_nan = reduce(ad.finite_grad(x), dims=dims, keepdim=False)
    return where(nans > 0, at_nan + sum(where(nan, x, 0)) / nans.clamp_min(1), numbers)


def max(x, dim=None, keepdim=False, *, other=None) -> Any:
    """Full max, ``(values, indices)`` along ``dim``, or elementwise max with a tensor."""
    return _extremum("max", ad.reduce_max, ad.argmax, MaxResult, x, dim, keepdim, other)


def min(x, dim=None, keepdim=False, *, other=None) -> Any:
    return _extremum("min", ad.reduce_min, ad.argmin, MinResult, x, dim, keepdim, other)


def logsumexp(x, dim, keepdim=False):
    # integer and bool inputs compute in the default float dtype, as torch (bools have no
    # x - max(x))
    return _logsumexp(float_operand(x), dim, keepdim)


@in_float32
def _logsumexp(x, dim, keepdim):
    dims = normalize_dims(dim, x.ndim)
    # an empty sum: log(0) = -inf, as torch
    if builtins.any(x._payload.shape[d] == 0 for d in dims):
        return sum(x.exp(), dims, keepdim=keepdim).log()
    m = amax(x.real if x.dtype.is_complex else x, dims, keepdim=True).detach()  # (torch's)
    m = where(m.abs() == float("inf"), scalar_tensor(0, m.dtype), m)
    out = sum((x - m).exp(), dims, keepdim=True).log() + m
    return (
        out
        if keepdim
        else ad.reshape(
            out, shape=tuple(s for i, s in enumerate(out._payload.shape) if i not in dims)
        )
    )


def count_nonzero(x, dim=None):
    """The number of non-zero entries (int64), over all dims or ``dim`` (an int or a
    tuple); NaN counts."""
    return sum(ne(x, 0), dim)


def _count(mask, dim, keepdim):
    """The number of True entries of ``mask`` over ``dim`` (none for an empty list)."""
    return _sum(_accumulation_dtype(mask, None), normalize_dims(dim, mask.ndim), keepdim)


def any(x, dim=None, keepdim=False):
    """Whether any entry over ``dim`` (all dims by default) is non-zero: bool, or uint8 for
    a uint8 input, as torch."""
    r = ne(_count(ne(x, 0), dim, keepdim), 0)
    return r.to(dt.uint8) if x.dtype is dt.uint8 else r


def all(x, dim=None, keepdim=False):
    """Whether every entry over ``dim`` (all dims by default) is non-zero (NaN is)."""
    r = eq(_count(eq(x, 0), dim, keepdim), 0)
    return r.to(dt.uint8) if x.dtype is dt.uint8 else r


def var_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=1):
    """``(var, mean)`` over ``dim``, with var's overloads."""
    v = _variance(x, "var_mean", dim, unbiased, keepdim, correction)
    return v, mean(x, None if isinstance(dim, bool) else dim, keepdim)


def std_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=1):
    """``(std, mean)`` over ``dim``, with var's overloads."""
    s = _std(x, "std_mean", dim, unbiased, keepdim, correction)
    return s, mean(x, None if isinstance(dim, bool) else dim, keepdim)


def nansum(x, dim=None, keepdim=False, *, dtype=None):
    """``sum`` with NaN entries counted as 0."""
    return sum(where(isnan(x), 0, x), dim, keepdim, dtype=dtype)


def nanmean(x, dim=None, keepdim=False, *, dtype=None):
    """``mean`` of the entries that are not NaN (NaN where there are none)."""
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(
            "nanmean(): expected input to have floating point or complex dtype but got "
            f"{x.dtype.title}"
        )
    return nansum(x, dim, keepdim, dtype=dtype) / sum(~isnan(x), dim, keepdim)


def trace(x):
    """The sum of a matrix's main diagonal."""
    if x.dtype is dt.bool_:
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    if x.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {x.ndim}")
    return sum(diagonal(x))


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The integral of ``y`` along ``dim`` by the trapezoid rule: samples ``dx`` apart (1
    by default) or at ``x`` (1-D along ``dim``, or broadcasting against ``y``)."""
    return _trapezoid("trapezoid", y, x, dx, dim, False)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running integrals of ``trapezoid``, one per interval."""
    return _trapezoid("cumulative_trapezoid", y, x, dx, dim, True)


def _trapezoid(name, y, x, dx, dim, cumulative):
    """torch's formulas, operation for operation (Integration.cpp)."""
    if x is not None and (dx is not None or not isinstance(x, Tensor)):
        raise TypeError(
            f"{name}() takes a Tensor x or a keyword dx: got x of type {type(x).__name__} and "
            f"dx={dx!r}"
        )
    d = _dim_of(y, dim)
    n = y._payload.shape[d]
    if n == 0 and not cumulative:  # NumPy's 0, in y's dtype
        return new_zeros(y, tuple(s for i, s in enumerate(y._payload.shape) if i != d))
    if y.dtype is dt.bool_ or (x is not None and x.dtype is dt.bool_):
        what = "`y`" if x is None else "`x` or `y`"
        raise RuntimeError(f"{name}: received a bool input for {what}, but bool is not supported")
    step = 1 if dx is None else dx
    if isinstance(step, (bool, complex)):
        raise RuntimeError(f"{name}: Currently, we only support dx as a real number.")
    m = builtins.max(n - 1, 0)
    pairs = narrow(y, d, 0, m) + narrow(y, d, n - m, m)  # left + right
    if x is None and not cumulative:
        return (sum(y, d) - (select(y, d, 0) + select(y, d, -1)) * 0.5) * step
    if x is None:
        return cumsum(step / 2.0 * pairs, d)
    if x.ndim == 1:
        if x._payload.shape[0] != n:
            raise RuntimeError(f"{name}: There must be one `x` value for each sample point")
        x = reshape(x, tuple(n if i == d else 1 for i in range(y.ndim)))
    elif x.ndim < y.ndim:
        x = reshape(x, (1,) * (y.ndim - x.ndim) + tuple(x._payload.shape))
    k = x._payload.shape[d]
    h = narrow(x, d, 1, k - 1) - narrow(x, d, 0, k - 1)
    return (cumsum(pairs * h, d) if cumulative else sum(pairs * h, d)) / 2.0
