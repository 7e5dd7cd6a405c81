"""``out=``: torch's public functions write their result into a tensor the caller gives.

The result is computed as without ``out``, then written into ``out`` as an in-place write
(``inplace.write``: its memory, views and base included, a new version; under capture a
state update). An ``out`` of another shape is resized first, with torch's warning where it
held elements; a result whose dtype ``out``'s cannot hold raises torch's error. torch
refuses ``out=`` where an argument (``out`` too) requires grad under grad mode."""

from __future__ import annotations

import functools

from ..._where import PLAIN, at_user, name_site, warn_user
from ..grad_mode import _state
from ..tensor import Tensor
from . import inplace, metadata

# the exported ops whose torch signatures take no out= (views, predicates, Python-level
# functions): every other public function takes it
NO_OUT = frozenset(
    """
    adjoint allclose argwhere as_strided atleast_1d atleast_2d atleast_3d broadcast_tensors
    broadcast_to cartesian_prod cdist chunk combinations conj corrcoef cov
    cumulative_trapezoid diagflat diagonal dsplit einsum flatten fliplr flipud hsplit imag
    is_complex is_conj is_floating_point is_neg is_nonzero is_same_size is_signed is_tensor
    isclose isfinite isreal meshgrid movedim narrow numel permute positive prelu ravel real
    reshape resolve_conj resolve_neg select split split_with_sizes squeeze t tensor_split
    tile transpose trapezoid unbind unflatten unique unsqueeze view_as_complex view_as_real
    vsplit
    """.split()
)

_RESIZED = (
    "An output with one or more elements was resized since it had shape {}, which does "
    "not match the required output shape {}. This behavior is deprecated, and in a future "
    "PyTorch release outputs will not be resized unless they have zero elements. You can "
    "explicitly reuse an out tensor t by resizing it, inplace, to zero elements with "
    "t.resize_(0)."
)


def takes_out(name: str, fn):
    """``fn`` (a sited public function) taking torch's keyword ``out``: its result written
    into it, ``out`` returned (a tuple of tensors for an op of several results)."""

    @functools.wraps(fn)
    def call(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        if _state.grad_enabled and any(map(_requires_grad, (*args, *kwargs.values(), out))):
            raise RuntimeError(
                at_user(
                    f"{name}(): functions with out=... arguments don't support automatic "
                    "differentiation, but one of the arguments requires grad."
                )
            )
        result = fn(*args, **kwargs)
        try:
            return _written(name, out, result)
        except PLAIN as e:
            name_site(e)
            raise

    return call


def _written(name: str, out, result):
    if isinstance(result, Tensor):
        return _into(name, out, result)
    if not isinstance(out, (tuple, list)) or len(out) != len(result):
        raise TypeError(
            f"{name}(): argument 'out' must be tuple of {len(result)} Tensors, "
            f"not {type(out).__name__}"
        )
    written = [_into(name, o, r) for o, r in zip(out, result)]
    return type(result)(*written) if hasattr(result, "_fields") else tuple(written)


def _requires_grad(a) -> bool:
    if isinstance(a, Tensor):
        return a._requires_grad
    return isinstance(a, (tuple, list)) and any(map(_requires_grad, a))


def _into(name: str, out, result: Tensor, warn: bool = True) -> Tensor:
    """``out`` holding ``result``, resized to its shape where it differs (with torch's
    warning where ``warn``: a factory's resize gives none)."""
    _check_tensor(name, out)
    if tuple(out.shape) != tuple(result.shape):
        if warn and out.numel():
            warn_user(_RESIZED.format(list(out.shape), list(result.shape)))
        metadata.resize_(out, *result.shape)
        if out._vc is not None:
            out._vc[0] -= 1  # torch's resize of an out= tensor is no write of its own
    return inplace.write(out, result)


def _check_tensor(name: str, out) -> None:
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")


# the factories whose torch signatures take out= (not tensor, as_tensor, empty_strided, the
# *_like ones)
FACTORIES = "zeros ones empty full arange linspace logspace eye rand randn randint randperm".split()


def factory_out(name: str, fn):
    """``fn``, a factory, taking torch's keyword ``out``: made (drawn) in ``out``'s dtype, which
    a ``dtype`` given must be, written into ``out`` (resized without a warning), which
    ``requires_grad`` then marks."""

    @functools.wraps(fn)
    def call(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        dtype, requires_grad = kwargs.pop("dtype", None), kwargs.pop("requires_grad", False)
        try:
            _check_tensor(name, out)
            if _state.grad_enabled and out._requires_grad:
                raise RuntimeError(
                    "cannot resize variables that require grad"
                    if name in ("empty", "randn")  # torch's kernels resize out first
                    else f"aten::{name}(): functions with out=... arguments don't support "
                    "automatic differentiation, but one of the arguments requires grad."
                )
            if dtype is not None and dtype is not out.dtype:
                raise RuntimeError(
                    f"dtype {dtype.title} does not match dtype of out parameter ({out.dtype.title})"
                )
            _into(name, out, _ranged(name, out, fn(*args, dtype=out.dtype, **kwargs)), warn=False)
        except PLAIN as e:
            name_site(e)
            raise
        return out.requires_grad_() if requires_grad else out

    return call


_RANGE_RESIZED = (
    "The number of elements in the out tensor of shape {} is {} which does not match the "
    "computed number of elements {}. Note that this may occur as a result of rounding error. "
    "The out tensor will be resized to a tensor of shape ({},)."
)


def _ranged(name: str, out: Tensor, result: Tensor) -> Tensor:
    """A range's ``result`` in ``out``'s shape where their sizes agree, as torch's range
    kernels keep it (arange warning where it resizes an ``out`` that held elements)."""
    if name not in ("arange", "linspace", "logspace"):
        return result
    if out.numel() == result.numel():
        return result.reshape(out.shape)
    if name == "arange" and out.numel():
        n = result.numel()
        warn_user(_RANGE_RESIZED.format(list(out.shape), out.numel(), n, n))
    return result
