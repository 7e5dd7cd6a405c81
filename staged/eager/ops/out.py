"""``out=``: torch's public functions write their result into a tensor the caller gives.

The result is computed as without ``out``, then written into ``out`` as an in-place write
(``inplace.write``: its memory, views and base included, a new version; under capture a
state update). An ``out`` of another shape is resized first, with torch's warning where it
held elements; a result whose dtype ``out``'s cannot hold raises torch's error. torch
refuses ``out=`` where an argument (``out`` too) requires grad under grad mode. The
factories and ``normal bernoulli multinomial`` draw into ``out`` as torch's ``*_out``
kernels do (in its dtype)."""

from __future__ import annotations

import functools

from ..._where import PLAIN, at_user, name_site, warn_user
from ..grad_mode import _state
from ..tensor import Tensor
from .. import factories
from ._operands import broadcast_shapes
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
        _grad_check(name, *args, *kwargs.values(), out)
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
    _resize(out, tuple(result.shape), warn)
    return inplace.write(out, result)


def _resize(out: Tensor, shape: tuple, warn: bool) -> None:
    if tuple(out.shape) != shape:
        if warn and out.numel():
            warn_user(_RESIZED.format(list(out.shape), list(shape)))
        metadata.resize_(out, *shape)
        if out._vc is not None:
            out._vc[0] -= 1  # torch's resize of an out= tensor is no write of its own


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


def _grad_check(name: str, *args) -> None:
    if _state.grad_enabled and any(map(_requires_grad, args)):
        raise RuntimeError(
            at_user(
                f"{name}(): functions with out=... arguments don't support automatic "
                "differentiation, but one of the arguments requires grad."
            )
        )


def _sited_out(into):
    """``into(fn, *args, out=out, **kwargs)`` for a call that gives ``out`` (else ``fn``'s
    own), its plain errors named at the user's line."""

    def wrap(fn):
        @functools.wraps(fn)
        def call(*args, out=None, **kwargs):
            if out is None:
                return fn(*args, **kwargs)
            try:
                return into(fn, *args, out=out, **kwargs)
            except PLAIN as e:
                name_site(e)
                raise

        return call

    return wrap


@_sited_out
def _normal_into(fn, mean, std=1.0, size=None, *, out, generator=None, **kwargs):
    """torch's ``normal_out``: floats draw as a factory into ``out``; with a tensor, drawn
    in ``out``'s dtype to the shape of ``mean`` and ``std`` (``mean`` and ``out`` where
    ``std`` is a float, as torch broadcasts), ``out`` resized as an op's."""
    if not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        factory = factory_out("normal", fn)
        return factory(mean, std, size, generator=generator, out=out, **kwargs)
    _grad_check("normal", mean, std, out)
    _check_tensor("normal", out)
    if not isinstance(std, Tensor):
        shape = broadcast_shapes(tuple(mean.shape), tuple(out.shape))
    elif isinstance(mean, Tensor):
        shape = broadcast_shapes(tuple(mean.shape), tuple(std.shape))
    else:
        shape = tuple(std.shape)
    return _into("normal", out, factories.normal_tensors(mean, std, shape, out.dtype, generator))


@_sited_out
def _bernoulli_into(fn, input, p=None, *, out, generator=None):
    """torch's ``bernoulli_out``: ``out`` resized to ``input``'s shape (no warning), then
    ``out.bernoulli_(input)`` in ``out``'s dtype."""
    if p is not None:
        raise TypeError(
            "bernoulli() received an invalid combination of arguments - got (Tensor, float, "
            "out=Tensor), but expected one of: (Tensor input, *, torch.Generator generator, "
            "Tensor out), (Tensor input, float p, *, torch.Generator generator)"
        )
    _grad_check("bernoulli", input, out)
    _check_tensor("bernoulli", out)
    _resize(out, tuple(input.shape), warn=False)
    return out.bernoulli_(input, generator=generator)


@_sited_out
def _multinomial_into(fn, input, num_samples, replacement=False, *, out, generator=None):
    """torch's ``multinomial_out``: an int64 ``out`` resized to the samples (no warning)."""
    _check_tensor("multinomial", out)
    if out.dtype.name != "int64":
        raise RuntimeError(f"multinomial expects Long tensor out, got: {out.dtype.title}")
    _grad_check("multinomial", input, out)
    return _into(
        "multinomial", out, fn(input, num_samples, replacement, generator=generator), False
    )


# the random functions whose out= is not a factory's
RANDOM = {"normal": _normal_into, "bernoulli": _bernoulli_into, "multinomial": _multinomial_into}
