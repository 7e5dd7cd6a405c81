"""Public elementwise ops: promote, broadcast, then bind the strict primitive."""

# ruff: noqa: F405  (mul, eq, lt ...: module globals made from the registry below)
from __future__ import annotations

import builtins
from typing import TYPE_CHECKING

import numpy as np

from ... import autodiff as ad
from ... import _torch_function as _tf
from ... import dtypes as dt
from ...autodiff import fused
from ..._blas import blas_threads
from ..._where import PLAIN, at_user, name_site
from ...autodiff.primitive import _bind
from .. import views
from ..checks import require
from ..grad_mode import _state
from ..meta import Meta
from ..scalars import fill_array
from ..tensor import Tensor, as_payload
from . import memory_formats
from .data_dependent import nonzero
from ._operands import (
    broadcast_shapes,
    expand_to,
    float_operand,
    half,
    in_float32,
    operands,
    promote_types,
    scalar_tensor,
)


# the public ops ask the torch function protocol inline (Note [the torch function protocol]):
# only where a mode is on or an argument's type may take part
_entered, _modes, _NOT_HANDLED = _tf.entered, _tf.modes_entered, _tf.NOT_HANDLED
_plain = _tf.KIND.get  # False for a type known not to take part


def _binary(prim, check=None, converted=None, wide=None):
    """``prim`` on promoted, broadcast operands; ``check(b)`` first where one is given, and
    ``converted(x, y)`` where ``operands`` promoted or broadcast either, or the primitive
    refused them (off the hot path: torch's words for what its domain leaves out).
    ``wide(x, y)``, where one is given and a converted operand is 16-bit, may give the
    result itself (None: ``prim`` gives it). ``prim`` is bound as ``prim(a, b)`` binds it,
    less that call."""

    def op(input, other):  # torch's names: torch.gt(input=a, other=b)
        if _entered[0] and (  # (inline, as _where.sited: the torch function protocol)
            _modes[0] or _plain(type(input)) is not False or _plain(type(other)) is not False
        ):
            out = _tf.dispatch(op, (input, other), None, True)
            if out is not _NOT_HANDLED:
                return out
        try:
            a, b = operands(input, other)
            if check is not None:
                check(b)
            if a is not input or b is not other:
                if converted is not None:
                    converted(input, other)
                if wide is not None and a._payload.dtype.itemsize == 2:
                    out = wide(input, other)
                    if out is not None:
                        return out
            return _bind[0](prim, (a, b), {})
        except PLAIN as e:
            if converted is not None:
                try:
                    converted(input, other)
                except PLAIN as refusal:
                    name_site(refusal)
                    raise refusal from None
            name_site(e)
            raise

    op.__name__ = prim.name
    op.sited = True  # type: ignore[attr-defined]  # (inline: no wrapper frame on the hot path)
    return op


def _relu_refused(kind: str) -> None:
    if kind == "b":
        raise RuntimeError("Boolean inputs not supported for relu")
    raise NotImplementedError("clamp is not supported for complex types")


def _abs_refused(kind: str) -> None:
    raise NotImplementedError("\"abs_cpu\" not implemented for 'Bool'")


# torch's refusals, at the public op, of dtypes that a unary primitive's domain keeps (its
# lowerings take them: relu and abs of bools): the NumPy kinds refused, and the error
_REFUSED = {"relu": ("bc", _relu_refused), "abs": ("b", _abs_refused)}


def _not_a_tensor(prim, x) -> None:
    """torch's TypeError where a unary op was given something other than a tensor (its
    AttributeError reached ``op``'s handler: no cost on the way in)."""
    if not isinstance(x, Tensor):
        raise TypeError(
            f"{prim.name}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}"
        ) from None


def _public(prim):
    """The public function of a primitive declared with ``public=`` (its ``Public.op`` says
    how operands are readied). Its errors name the user's line and it takes part in the
    torch function protocol (``_where.sited``, inline)."""
    to_float = prim.public.op == "float"
    if len(prim.inputs) == 2 and not to_float:
        return _binary(prim)
    # the variants differ in arity on purpose: one per kind of primitive
    if len(prim.inputs) == 2:

        def op(input, other):
            if _entered[0] and (
                _modes[0] or _plain(type(input)) is not False or _plain(type(other)) is not False
            ):
                out = _tf.dispatch(op, (input, other), None, True)
                if out is not _NOT_HANDLED:
                    return out
            try:
                d = promote_types(input, other)
                if not (d.is_floating_point or d.is_complex):
                    d = dt.get_default_dtype()
                return prim(*operands(input, other, dtype=d))
            except PLAIN as e:
                name_site(e)
                raise
    elif to_float:

        def op(input):  # type: ignore[misc]
            if _entered[0] and (_modes[0] or _plain(type(input)) is not False):
                out = _tf.dispatch(op, (input,), None, True)
                if out is not _NOT_HANDLED:
                    return out
            try:
                if input._payload.dtype.kind not in "fc":  # (float and complex: as they are)
                    input = float_operand(input)
                return _bind[0](prim, (input,), {})
            except PLAIN as e:
                name_site(e)
                raise
            except AttributeError:
                _not_a_tensor(prim, input)
                raise
    else:
        refused, refusal = _REFUSED.get(prim.name, ("", None))

        def op(input):  # type: ignore[misc]
            if _entered[0] and (_modes[0] or _plain(type(input)) is not False):
                out = _tf.dispatch(op, (input,), None, True)
                if out is not _NOT_HANDLED:
                    return out
            try:
                if refused and input._payload.dtype.kind in refused:
                    refusal(input._payload.dtype.kind)
                return _bind[0](prim, (input,), {})
            except PLAIN as e:
                name_site(e)
                raise
            except AttributeError:
                _not_a_tensor(prim, input)
                raise

    op.__name__ = op.__qualname__ = prim.name
    op.sited = True  # type: ignore[attr-defined]
    return op


# mul, exp, eq, relu ... : module globals from here on
globals().update({p.name: _public(p) for p in ad.REGISTRY.values() if p.public is not None})

if TYPE_CHECKING:  # the functions made above, for type checkers (generated)
    from ._from_registry import *  # noqa: F403


_add = _binary(ad.add)


# Note [half by a scalar]: torch's CPU kernels multiply and divide a float16 or bfloat16
# tensor by a scalar second operand (a Python number, a 0-d tensor) at the scalar's
# float32 value (TensorIterator's original_scalar_value), in float32, rounding once:
# ``x * 0.1`` is round(x * 0.1f), not round(x * half(0.1)) (an ulp apart for a third of
# the inputs), and ``x * 70000`` stays finite where float16's 70000 is inf. A 0-d tensor
# given first is rounded to the dtype first (``mul(tensor(1.1), x)``), as in torch, and so
# is ``alpha`` of ``add``/``sub``, which compute ``x + alpha * y`` in float32. The test
# runs only where ``operands`` converted an operand to a 16-bit dtype: float32 and float64
# ops pay one comparison.
def _half_dtype(x):
    """The dtype of ``x``, a float16 or bfloat16 tensor; None for anything else."""
    if isinstance(x, Tensor):
        d = x._payload.dtype
        if d.itemsize == 2 and d.kind in "fV":
            return x.dtype
    return None


def _by_scalar(prim, node: str):
    """``prim(x, y)`` of a half ``x`` and a scalar ``y`` in float32 (Note [half by a
    scalar]), its Node named ``node`` as torch's; None for other operands."""

    def wide(x, y):
        if prim is ad.mul and type(x) in (int, float):  # ``2.5 * x``: torch's x.mul(2.5)
            x, y = y, x
        d = _half_dtype(x)
        if d is None or not (
            type(y) in (int, float) or isinstance(y, Tensor) and not y._payload.shape
        ):
            return None
        if promote_types(x, y) is not d:
            return None
        return views.named(ad.cast(prim(*operands(ad.cast(x, dtype=dt.float32), y)), dtype=d), node)

    return wide


mul = _binary(ad.mul, wide=_by_scalar(ad.mul, "MulBackward0"))
_div_by_scalar = _by_scalar(ad.div, "DivBackward0")


def _is_bool(v) -> bool:
    return isinstance(v, (bool, np.bool_)) or (
        isinstance(v, Tensor) and v._payload.dtype.kind == "b"
    )


def _no_bool(x, y) -> None:
    """torch refuses a bool operand of a subtraction (two bool tensors of one shape meet
    the primitive's domain, which refuses them: this gives torch's words then)."""
    if _is_bool(x) or _is_bool(y):
        if _is_bool(x) and _is_bool(y):
            raise RuntimeError(
                "Subtraction, the `-` operator, with two bool tensors is not supported. "
                "Use the `^` or `logical_xor()` operator instead."
            )
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
            "trying to invert a mask, use the `~` or `logical_not()` operator instead."
        )


_sub = _binary(ad.sub, converted=_no_bool)


def _scaled(x, y, alpha):
    """``alpha * y`` (``alpha`` other than the int 1) after torch's checks of ``alpha``
    against the result's dtype."""
    d = promote_types(x, y)
    if isinstance(alpha, (bool, np.bool_)) and d is not dt.bool_:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if isinstance(alpha, (float, complex)) and not (d.is_floating_point or d.is_complex):
        raise RuntimeError(
            "For integral input tensors, argument alpha must not be a floating point number."
        )
    if isinstance(alpha, complex) and not d.is_complex:
        raise RuntimeError(
            "For non-complex input tensors, argument alpha must not be a complex number."
        )
    return y if _is_one(alpha) else mul(y, alpha)


def _fused_scaled(x, y, alpha, node, negate=False):
    """``x + alpha * y`` (``x - alpha * y``: ``negate``) of a floating result rounded once,
    ``alpha`` (a number or a 0-d tensor, as torch's Scalar) rounded to the result's dtype,
    as torch's kernels (Note [fused multiply-add] in ``autodiff/elementwise.py``; halves in
    float32 but their tails, Note [half-precision tails]); None for other operands."""
    d = promote_types(x, y)
    if not d.is_floating_point:
        return None
    if isinstance(alpha, Tensor):
        if not alpha.dtype.is_floating_point:
            return None
        a = alpha.to(d)
        a = neg(a) if negate else a
    elif type(alpha) in (int, float):
        a = float(fill_array(-alpha if negate else alpha, d))  # torch's Scalar.to<scalar_t>()
    else:
        return None
    if d.itemsize != 2:
        return views.named(ad.fma(*operands(y, a, x, dtype=d)), node)
    # one flat loop (tails as Note [half-precision tails]) where no operand is broadcast
    # but a scalar; numbers and 0-d tensors rounded to the half type first, as torch's
    shapes = [tuple(v.shape) for v in (x, y) if isinstance(v, Tensor) and v.numel() != 1]
    flat = len(set(shapes)) < 2
    x, y = operands(x, y, dtype=d)
    r = ad.cast(ad.fma(*operands(y, a, x, dtype=dt.float32)), dtype=d)
    return views.named(_scalar_tails(r, x, y, a) if flat else r, node)


# Note [half-precision tails]: torch's float16/bfloat16 ``add``/``sub`` with ``alpha`` run
# vectorized (``fmadd`` in float32, rounded once) over all but the last ``n % 32`` of the
# ``n`` elements each thread takes, and a scalar loop over those, in the dtype's own
# arithmetic: ``x + half(alpha * y)``, rounded twice (the same on AVX2 and AVX-512 builds).
# A tensor of at least 32768 elements (ATen's grain) is split among
# ``min(threads, ceil(n / 32768))`` threads, ``ceil(n / k)`` elements each. So the same
# update differs from the fused one in about 1 % of those tail elements. Tensors of one
# shape are taken as contiguous (parameters, gradients), and torch's thread count as ours.
def _tail_spans(n: int) -> list:
    """The [lo, hi) spans of ``n`` elements torch's half kernels compute by their scalar
    loop (Note [half-precision tails])."""
    threads = blas_threads()  # staged.get_num_threads()
    k = 1 if n < 32768 or threads < 2 else min(threads, -(-n // 32768))
    size = -(-n // k)
    spans = []
    for start in range(0, n, size or 1):
        stop = min(start + size, n)
        lo = stop - (stop - start) % 32
        if lo < stop:
            spans.append((lo, stop))
    return spans


def _scalar_tails(r, x, y, a):
    """``r`` with the elements of the scalar spans ``x + half(a * y)`` instead, of half
    ``x`` and ``y`` of ``r``'s shape (Note [half-precision tails])."""
    shape, n = tuple(r.shape), r.numel()
    flat = [ad.lax.reshape(v, (n,)) for v in (r, x, y)]
    out = flat[0]
    for lo, hi in _tail_spans(n):
        span = {"starts": (lo,), "stops": (hi,), "steps": (1,)}
        xs, ys = (ad.lax.bind("slice", v, **span) for v in flat[1:])
        out = ad.lax.bind("slice_scatter", out, _add(xs, mul(ys, a)), **span)
    return ad.lax.reshape(out, shape)


def _number_alpha(name, alpha) -> None:
    """torch's refusal of an ``alpha`` that is a tensor of one dim or more (a 0-d one is a
    number to its argument parser); it multiplied elementwise before."""
    if isinstance(alpha, Tensor) and alpha.ndim:
        raise TypeError(f"{name}(): argument 'alpha' must be Number, not Tensor")


def add(x, y, *, alpha=1):
    if type(alpha) is int and alpha == 1:
        return _add(x, y)
    _number_alpha("add", alpha)
    out = _fused_scaled(x, y, alpha, "AddBackward0")
    return _add(x, _scaled(x, y, alpha)) if out is None else out


def sub(x, y, *, alpha=1):
    if type(alpha) is int and alpha == 1:
        return _sub(x, y)
    _no_bool(x, y)  # (a bool ``y`` scaled is an integer one)
    _number_alpha("sub", alpha)
    out = _fused_scaled(x, y, alpha, "SubBackward0", negate=True)
    return _sub(x, _scaled(x, y, alpha)) if out is None else out


def rsub(input, other, *, alpha=1):
    """``other - alpha * input``."""
    return sub(other, input, alpha=alpha)


def div(x, y, *, rounding_mode=None):
    if rounding_mode is not None:
        return _div_rounded(x, y, rounding_mode)
    d = promote_types(x, y)
    if not (d.is_floating_point or d.is_complex):
        d = dt.get_default_dtype()
    a, b = operands(x, y, dtype=d)
    if (a is not x or b is not y) and a._payload.dtype.itemsize == 2:
        out = _div_by_scalar(x, y)
        if out is not None:
            return out
    return ad.div(a, b)


def pow(x, y):
    a, b = operands(x, y)
    if type(y) is int and y < 0 and not (a.dtype.is_floating_point or a.dtype.is_complex):
        # a tensor exponent gives 0 (PyTorch's kernels), a Python one raises
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    return ad.pow(a, b)


def logical_and(x, y):
    a, b = operands(x, y, dtype=dt.bool_)
    return ad.logical_and(a, b)


def logical_or(x, y):
    a, b = operands(x, y, dtype=dt.bool_)
    return ad.logical_or(a, b)


def logical_xor(x, y):
    a, b = operands(x, y, dtype=dt.bool_)
    return ad.ne(a, b)


def logical_not(x):
    return ad.logical_not(operands(x, dtype=dt.bool_)[0])


_ONLY_CONDITION = object()


def where(condition, input=_ONLY_CONDITION, other=_ONLY_CONDITION):
    """``input`` where ``condition`` holds, else ``other`` (broadcast together); a Python
    number is converted as a fill value is (torch refuses ``300`` for int8). With the
    condition alone, ``nonzero(condition, as_tuple=True)``."""
    if input is _ONLY_CONDITION and other is _ONLY_CONDITION:
        return nonzero(condition, as_tuple=True)
    if input is _ONLY_CONDITION or other is _ONLY_CONDITION:
        raise TypeError("where() takes 1 or 3 arguments: where(condition, input, other)")
    x, y = input, other
    d = promote_types(x, y)
    a, b = (v if isinstance(v, Tensor) else scalar_tensor(v, d, check_half=False) for v in (x, y))
    a, b = operands(a, b, dtype=d)
    cond = condition if isinstance(condition, Tensor) else Tensor._wrap(as_payload(condition))
    if cond.dtype is not dt.bool_:
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a tensor "
            f"with dtype {cond.dtype.title}"
        )
    shape = broadcast_shapes(cond._payload.shape, a._payload.shape)
    return ad.where(expand_to(cond, shape), expand_to(a, shape), expand_to(b, shape))


def _not_integral(name: str, x) -> None:
    """torch's refusal of a complex or bool ``x`` in a rounding op (``name``)."""
    if x.dtype.is_complex and name != "round":
        raise NotImplementedError(f"{name} is not supported for complex inputs")
    if x.dtype.is_complex or x.dtype is dt.bool_:
        raise NotImplementedError(f"\"{name}_vml_cpu\" not implemented for '{x.dtype.title}'")


def _integral_kept(prim):
    """floor, ceil, trunc: integers are already integral (a copy, as PyTorch)."""

    def op(x):
        if x.dtype.is_floating_point:
            return prim(x)
        _not_integral(prim.name, x)
        return ad.copy(x)

    op.__name__ = prim.name
    return op


floor = _integral_kept(ad.floor)
ceil = _integral_kept(ad.ceil)
trunc = _integral_kept(ad.trunc)


def round(x, *, decimals=0):
    """Round half to even; ``decimals`` scales by a power of ten first, as PyTorch."""
    if not x.dtype.is_floating_point:
        if decimals:
            raise NotImplementedError(f"\"round_cpu\" not implemented for '{x.dtype.title}'")
        _not_integral("round", x)
        return ad.copy(x)
    if decimals == 0:
        return ad.round(x)
    if half(x):  # scaled, rounded and scaled back in float32, as torch's kernel
        return in_float32(round, x, decimals=decimals)
    scale = 10.0 ** builtins.abs(decimals)
    return ad.round(x * scale) / scale if decimals > 0 else ad.round(x / scale) * scale


def _nonzero_divisor(b) -> None:
    """An integer quotient or remainder by zero raises as PyTorch does: eagerly at once,
    from a compiled step when its results are read (the check is recorded; the step's
    value there is 0, as NumPy's)."""
    p = b._payload
    if type(p) is np.ndarray:
        if p.dtype.kind in "iub" and not p.all():
            raise RuntimeError("ZeroDivisionError")
    elif b.dtype._category <= 1 and type(p) is not Meta:
        require(ne(b, 0), RuntimeError, "ZeroDivisionError")


def _integer_divisor(kernel):
    """The check of a remainder's operands: torch has no bool kernel (``kernel`` names
    it), and an integer divisor must not be 0."""

    def check(b) -> None:
        if b._payload.dtype.kind in "iub":
            if b._payload.dtype.kind == "b":
                raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")
            _nonzero_divisor(b)

    return check


remainder = _binary(ad.remainder, _integer_divisor("remainder_cpu"))
fmod = _binary(ad.fmod, _integer_divisor("fmod_cpu"))
_int_floor_divide = _binary(ad.floor_divide, _integer_divisor("div_floor_cpu"))


def floor_divide(x, y):
    """``x // y`` rounded down, as PyTorch (and Python): for floats its div_floor from fmod,
    with ``x / y`` for a zero divisor; integers divide exactly. Not differentiable: as in
    PyTorch, the result carries no gradient (it is piecewise constant)."""
    d = promote_types(x, y)
    if d.is_complex or d is dt.bool_:
        raise NotImplementedError(f"\"div_floor_cpu\" not implemented for '{d.title}'")
    x, y = (v.detach() if isinstance(v, Tensor) else v for v in (x, y))
    if not d.is_floating_point:
        return _int_floor_divide(x, y)
    return ad.div_floor(*operands(x, y))


def _div_rounded(x, y, mode):
    """``div(x, y, rounding_mode=mode)``: the quotient rounded down (``floor_divide``) or
    toward zero, in the promoted dtype (integers stay integers). As torch's DivBackward2,
    the result requires grad where an input does, with gradient 0 (piecewise constant)."""
    if mode not in ("trunc", "floor"):
        raise RuntimeError(
            f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{mode}'"
        )
    if mode == "floor":
        q = floor_divide(x, y)
    else:
        d = promote_types(x, y)
        if d.is_complex or d is dt.bool_:
            raise NotImplementedError(f"\"div_trunc_cpu\" not implemented for '{d.title}'")
        a, b = operands(*(v.detach() if isinstance(v, Tensor) else v for v in (x, y)))
        if d.is_floating_point:
            q = ad.trunc(ad.div(a, b))
        else:
            _nonzero_divisor(b)
            q = ad.floor_divide(ad.sub(a, ad.fmod(a, b)), b)  # exact: a multiple of b
    for v in (x, y):
        if isinstance(v, Tensor) and v._requires_grad and q.dtype.is_floating_point:
            q = where(scalar_tensor(False, dt.bool_), v, q)  # in the graph, gradient 0
    return q


def isnan(x):
    return ne(x, x)


def isinf(x):
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        return ne(x, x)  # all False
    return eq(ad.abs(x), float("inf"))


def isfinite(x):
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        return eq(x, x)  # all True
    return lt(ad.abs(x), float("inf"))


def _is_infinity(name, x, value):
    if x.dtype.is_complex:
        raise RuntimeError(f"{name} does not support complex inputs.")
    return eq(x, value) if x.dtype.is_floating_point else ne(x, x)  # integers: all False


def isposinf(x):
    return _is_infinity("isposinf", x, float("inf"))


def isneginf(x):
    return _is_infinity("isneginf", x, float("-inf"))


def isreal(x):
    """Whether each entry's imaginary part is 0: all True for a real dtype."""
    if x.dtype.is_complex:
        return eq(ad.imag(x), 0)
    return ad.copy(expand_to(scalar_tensor(True, dt.bool_), tuple(x._payload.shape)))


def square(x):
    """``x * x``; bool squares as torch's ``pow(x, 2)``, in int64."""
    if x.dtype is dt.bool_:
        x = ad.cast(x, dtype=dt.int64)
    return mul(x, x)


def reciprocal(x):
    """``1 / x`` (integers and bools as the default float dtype), with torch's
    ``ReciprocalBackward0``."""
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = ad.cast(x, dtype=dt.get_default_dtype())
    return ad.reciprocal(x)


def neg(x):
    if x.dtype is dt.bool_:
        raise RuntimeError(
            at_user(  # (``-x`` calls this, unsited)
                "Negation, the `-` operator, on a bool tensor is not supported. "
                "If you are trying to invert a mask, use the `~` or "
                "`logical_not()` operator instead."
            )
        )
    return ad.neg(x)


def sign(x):
    if x.dtype.is_complex:
        raise NotImplementedError(
            "Unlike NumPy, torch.sign is not intended to support complex "
            "numbers. Please use torch.sgn instead."
        )
    return ad.sign(x)


def real(x):
    """The real part, a view of complex ``x``; a real tensor is its own real part."""
    return ad.real(x) if x.dtype.is_complex else x


def imag(x):
    if not x.dtype.is_complex:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return ad.imag(x)


def conj(x):
    """The complex conjugate: for a complex ``x`` a view of it, read and written through
    a conjugation (Note [conj views] in ``eager/views.py``); a real ``x`` itself."""
    if not x.dtype.is_complex:
        return x
    y = ad.conj(x)
    views.record(y, x, ad.conj, {}, _state.grad_enabled, copy=True)
    return y


def clamp(x, min=None, max=None):
    """``x`` limited to ``[min, max]``. The gradient goes to ``x`` at a bound, and to
    nothing at NaN; the tangent follows PyTorch's clamp JVP, which differs from it at ties
    and NaN: one tensor bound gives its tangent there, scalar bounds give 0, two bounds
    with a tensor ``x``'s."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    _bool_bounds(x, min, max)
    if not (isinstance(min, Tensor) or isinstance(max, Tensor)):
        return _by_numbers(x, min, max, _CLAMP)
    return _clamp(x, min, max, ("gt", "lt") if min is None or max is None else None)


def _by_numbers(x, min, max, kernel):
    """clamp by numbers: float32 and float64 by ``kernel``, one np.clip and torch's Node
    (the composite's two selections compared, or-ed and selected twice: 243 -> 14 µs on
    65536 float32s), other dtypes by the composite."""
    top = _CLAMPED.get(x.dtype)
    if top and all(
        b is None or (type(b) in _NUMBERS and not builtins.abs(b) > top) for b in (min, max)
    ):
        return kernel(x, min=min, max=max)  # (the composite raises torch's overflow errors)
    return _clamp_by_numbers(x, min=min, max=max)


def _clamp_by_numbers(x, *, min, max):
    return _clamp(x, min, max, ("ge", "le"))


_CLAMPED = {d: float(np.finfo(d.np).max) for d in (dt.float32, dt.float64)}
_NUMBERS = frozenset({int, float})
_CLAMP, _CLAMP_MIN, _CLAMP_MAX = (
    ad.Fused(name, fused.clamp_impl, _clamp_by_numbers, vjp=fused.CLAMP_VJP, node_name=node)
    for name, node in (
        ("clamp", "ClampBackward1"),
        ("clamp_min", "ClampMinBackward0"),
        ("clamp_max", "ClampMaxBackward0"),
    )
)


def _clamp(x, min, max, keep):
    """where, not maximum/minimum: at a bound the gradient goes to ``x``, as in PyTorch;
    ``keep``: the comparisons of ``x`` with (min, max) where the tangent is ``x``'s (the
    bound's elsewhere), or None where it follows the value."""
    if min is not None:
        x = _bound(lt, min, x, keep and keep[0])
    if max is not None:
        x = _bound(gt, max, x, keep and keep[1])
    return x


def _bound(beyond, bound, x, keep):
    """where(beyond(x, bound), bound, x), the bound also where it is NaN: PyTorch's clamp
    propagates a NaN bound."""
    dtype = promote_types(x, bound)
    if not isinstance(bound, Tensor):  # converted checked, as torch's (int8 max=300 raises)
        bound = scalar_tensor(bound, dtype)
    b, a = operands(x, bound, dtype=dtype)  # torch names x's size first
    c = logical_or(beyond(x, bound), ne(a, a))
    shape = tuple(c._payload.shape)
    return ad.clamp_where(c, expand_to(a, shape), expand_to(b, shape), keep=keep)


def _bool_bounds(x, min, max) -> None:
    """torch has no bool kernel for a clamp by numbers, nor by two tensors (one tensor
    bound is its maximum or minimum), and no complex clamp."""
    category = x.dtype._category  # bool, int, float, complex: 0-3
    if any(isinstance(b, complex) for b in (min, max)) and category == 2:
        raise RuntimeError("value cannot be converted to type double without overflow")
    if category == 3 or any(isinstance(b, complex) for b in (min, max)):  # promoted to complex
        raise NotImplementedError("clamp is not supported for complex types")
    if x._payload.dtype.kind == "b" and all(b is None or _is_bool(b) for b in (min, max)):
        tensors = isinstance(min, Tensor) + isinstance(max, Tensor)
        if tensors != 1:
            name = "clamp_max" if min is None else "clamp_min" if max is None else "clamp"
            kernel = name if tensors else f"{name}_scalar"
            raise NotImplementedError(f"\"{kernel}_cpu\" not implemented for 'Bool'")


def clamp_min(x, min):
    _bool_bounds(x, min, None)
    if isinstance(min, Tensor):
        return _clamp(x, min, None, ("ge", "le"))
    return _by_numbers(x, min, None, _CLAMP_MIN)


def clamp_max(x, max):
    _bool_bounds(x, None, max)
    if isinstance(max, Tensor):
        return _clamp(x, None, max, ("ge", "le"))
    return _by_numbers(x, None, max, _CLAMP_MAX)


def lerp(start, end, weight):
    """``start + weight * (end - start)``: ``end`` and a tensor ``weight`` of ``start``'s
    dtype, a floating one (torch's kernels)."""
    for name, t in (("end", end), ("weight", weight)):
        if isinstance(t, Tensor) and t.dtype is not start.dtype:
            raise RuntimeError(
                f"expected dtype {start.dtype.type_meta} for `{name}` but got dtype "
                f"{t.dtype.type_meta}"
            )
    if not (start.dtype.is_floating_point or start.dtype.is_complex):
        kernel = "tensor" if isinstance(weight, Tensor) else "scalar"
        raise NotImplementedError(
            f"\"lerp_kernel_{kernel}\" not implemented for '{start.dtype.title}'"
        )
    if half(start, end, weight if isinstance(weight, Tensor) else None):
        return in_float32(lerp, start, end, weight)  # rounded once, as torch's kernel
    if start.dtype.is_complex:
        return add(start, mul(weight, sub(end, start)))
    return views.named(_lerp(start, end, weight), f"LerpBackward{int(isinstance(weight, Tensor))}")


def _lerp(start, end, weight):
    """torch's real lerp: ``start + w (end - start)`` for ``|w| < 0.5``, else
    ``end - (end - start) (1 - w)``, each one fused multiply-add (Note [fused multiply-add]
    in ``autodiff/elementwise.py``); a number ``w`` at the dtype's precision."""
    d = promote_types(start, end)
    diff = sub(end, start)
    if isinstance(weight, Tensor):
        w, rest, diff, s, e = operands(weight, sub(1, weight), diff, start, end)
        return where(lt(abs(weight), 0.5), ad.fma(w, diff, s), ad.fma(neg(diff), rest, e))
    small, c = lerp_by_number(weight, d)
    return ad.fma(*operands(diff, c, start)) if small else ad.fma(*operands(neg(diff), c, end))


def lerp_by_number(weight, d) -> tuple[bool, float]:
    """torch's real lerp by a number ``weight`` in dtype ``d``: ``(True, w)`` where
    ``|w| < 0.5`` (``start + w diff``), else ``(False, 1 - w)`` (``end - diff (1 - w)``),
    each at ``d``'s precision."""
    w = fill_array(weight, d)
    if builtins.abs(float(w)) < 0.5:
        return True, float(w)
    return False, float(np.subtract(1, w, dtype=w.dtype))


def addcmul(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 * tensor2`` (optimizer updates). As torch's kernel,
    ``value`` is cast to the operands' dtype (a float ``value`` truncated for integers)
    and bool operands are refused."""
    if input.dtype._category < 2:  # a float input (Adam's, per parameter) promotes to float
        kind = promote_types(input, tensor1, tensor2)
        if kind is dt.bool_:
            raise NotImplementedError("\"addcmul_cpu_out\" not implemented for 'Bool'")
        value = dt.scalar_as(value, kind)
    elif half(input, tensor1, tensor2):  # rounded once, as torch's kernel
        return in_float32(addcmul, input, tensor1, tensor2, value=value)
    if input.dtype.is_floating_point and promote_types(input, tensor1, tensor2) is input.dtype:
        # torch's fmadd(value * tensor1, tensor2, input) (Note [fused multiply-add])
        scaled = tensor1 if _is_one(value) else mul(tensor1, value)
        return views.named(ad.fma(*operands(scaled, tensor2, input)), "AddcmulBackward0")
    product = mul(tensor1, tensor2)
    return _add(input, product if _is_one(value) else mul(product, value))


def _is_one(value) -> bool:
    """Whether ``value`` is the number 1 (a 0-d tensor, a hyper-parameter under capture,
    is not looked at)."""
    return not isinstance(value, Tensor) and value == 1


def addcdiv(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 / tensor2``; torch refuses integer ``tensor1`` and
    ``tensor2``."""
    if not any(t.dtype.is_floating_point or t.dtype.is_complex for t in (tensor1, tensor2)):
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future release "
            "addcdiv will perform a true division of tensor1 and tensor2."
        )
    if half(input, tensor1, tensor2):  # rounded once, as torch's kernel
        return in_float32(addcdiv, input, tensor1, tensor2, value=value)
    if not _is_one(value):  # torch's (value * tensor1) / tensor2
        tensor1 = mul(tensor1, value)
    return _add(input, div(tensor1, tensor2))


def clone(x, *, memory_format=None):
    """A copy that is part of the graph (gradient flows through), laid out as torch's
    (``preserve_format`` keeps a permuted input's strides: Note [memory formats])."""
    return memory_formats.laid_out_like(x, ad.copy(x), memory_format)


def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    """``x`` with NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (by
    default the dtype's largest and lowest finite values); the gradient flows where ``x``
    is finite. Complex parts are replaced apart; integers and bools are copied."""
    if x.dtype.is_complex:
        return add(
            nan_to_num(real(x), nan, posinf, neginf),
            mul(nan_to_num(imag(x), nan, posinf, neginf), 1j),
        )
    if not x.dtype.is_floating_point:
        return ad.copy(x)
    big = float(np.nextafter(np.array(np.inf, x.dtype.np), np.array(0, x.dtype.np)))
    return ad.nan_to_num(
        x,
        nan=0.0 if nan is None else float(nan),
        posinf=big if posinf is None else float(posinf),
        neginf=-big if neginf is None else float(neginf),
    )


def polygamma(n, input):
    """The ``n``-th derivative of digamma (torch's argument order and names; ``n`` = 0 is
    digamma)."""
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    x = float_operand(input)
    return ad.digamma(x) if n == 0 else ad.polygamma(x, n=n)
