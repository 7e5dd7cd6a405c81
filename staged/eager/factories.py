"""Tensor factories, the random ones drawing torch's streams (``staged/eager/random``)."""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from .. import autodiff as ad
from .. import dtypes as dt
from .checks import require
from .devices import check as _check_device
from .grad_mode import _state as _grad_state
from .interceptor import current_interceptor
from .random import counter, distributions, fills
from .random.generator import drawn
from .tensor import Tensor, _ragged, as_payload, first_leaf

if TYPE_CHECKING:
    # a size: ints (zeros(2, 3)) or one tuple or list of them (zeros((2, 3)), zeros(t.shape))
    _Dim: TypeAlias = int | np.integer
    _SizeArg: TypeAlias = _Dim | tuple[_Dim, ...] | list[_Dim]

__all__ = [
    "tensor",
    "from_numpy",
    "as_tensor",
    "zeros",
    "ones",
    "empty",
    "full",
    "zeros_like",
    "ones_like",
    "full_like",
    "empty_like",
    "arange",
    "linspace",
    "logspace",
    "eye",
    "rand",
    "randn",
    "randint",
    "randperm",
    "rand_like",
    "randn_like",
    "randint_like",
    "normal",
    "bernoulli",
    "multinomial",
]


def _new(payload, requires_grad):
    t = Tensor._wrap(payload, False)
    if _grad_state.inference:
        t._vc = None  # made in inference_mode: an inference tensor
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensor(data, dtype=None, requires_grad=False, device=None) -> Tensor:
    """A new leaf tensor holding a copy of ``data``.

    Example:
        >>> staged.tensor([1.0, 2.0], requires_grad=True)
        tensor([1., 2.], requires_grad=True)
    """
    if device is not None:
        _check_device(device)
    if isinstance(data, (list, tuple)) and _holds_tensor(data):
        return _new(_from_items(data, dtype)._payload, requires_grad)
    if isinstance(data, Tensor) and current_interceptor() is not None:  # a traced copy
        x = data.detach().to(data.dtype if dtype is None else dtype)
        return _new(ad.copy(x)._payload, requires_grad)
    return _new(as_payload(data, dtype), requires_grad)


# Note [tensors from tensors]: ``tensor([t, u])`` of one-element tensors is torch's: the
# items' values, detached (the result is a leaf, not requiring grad, as torch's; stack the
# tensors instead to differentiate through them), of the dtype promoted from the items'
# dtypes (int32 items make an int32 tensor, a float64 one makes float64). Under
# staged.compile the items are traced values, or state a later call changes: the result
# is built from them by ops (a reshape and a concat, as torch.compile builds it), never
# from their data at trace time. Eagerly, NumPy builds it from their data.


def _holds_tensor(data) -> bool:
    """``data`` (nested lists and tuples) holds a tensor: anywhere under capture (where
    NumPy cannot read a traced one), else as its first item (a Python walk of every
    item would cost 4-6x NumPy's conversion of a long list; the others reach NumPy as
    arrays)."""
    if current_interceptor() is not None:
        return any(
            isinstance(x, Tensor) or (isinstance(x, (list, tuple)) and _holds_tensor(x))
            for x in data
        )
    return isinstance(first_leaf(data), Tensor)


def _from_items(data, dtype) -> Tensor:
    """A new tensor of the numbers and one-element tensors in the nested lists ``data``
    (Note [tensors from tensors])."""
    error = _ragged(data)
    if error is not None:
        raise error
    d = _item_dtype(data) if dtype is None else dt.as_dtype(dtype)
    if current_interceptor() is None:
        return Tensor._wrap(np.array(_host_items(data, d.np), dtype=d.np), False)
    return ad.copy(_traced_items(data, d))


def _item_dtype(data) -> dt.DType:
    """torch's dtype for ``tensor(data)``: a tensor's own, the promotion of a list's."""
    if isinstance(data, Tensor):
        return data.dtype
    if isinstance(data, (list, tuple)):
        if not data:
            return dt.get_default_dtype()
        return dt.result_type([_item_dtype(x) for x in data], ())
    return dt.from_numpy_dtype(as_payload(data).dtype)


def _item(t: Tensor) -> Tensor:
    if t.numel() != 1:
        raise ValueError("only one element tensors can be converted to Python scalars")
    return t


def _host_items(data, np_dtype):
    """``data`` with each tensor replaced by its value as a 0-d array of ``np_dtype``."""
    if isinstance(data, Tensor):
        return np.asarray(_item(data)._host()).reshape(()).astype(np_dtype)
    if isinstance(data, (list, tuple)):
        return [_host_items(x, np_dtype) for x in data]
    return data


def _traced_items(data, d: dt.DType) -> Tensor:
    """``data`` as a tensor of dtype ``d`` made by ops from its tensors' values."""
    if isinstance(data, Tensor):
        return ad.reshape(_item(data).detach().to(d), shape=())
    if not isinstance(data, (list, tuple)):
        return Tensor._wrap(as_payload(data, d), False)
    if not data:
        return Tensor._wrap(np.empty((0,), d.np), False)
    parts = [_traced_items(x, d) for x in data]
    parts = [ad.reshape(p, shape=(1, *p.shape)) for p in parts]
    return ad.concat(*parts, dim=0, sizes=(1,) * len(parts))


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """``data`` itself where it is a tensor of ``dtype`` (converted where it is of
    another), else a new tensor of it, as ``tensor`` makes; a NumPy array of a supported
    dtype is shared, not copied."""
    if device is not None:
        _check_device(device)
    if isinstance(data, Tensor):
        return data if dtype is None or dt.as_dtype(dtype) is data.dtype else data.to(dtype)
    if isinstance(data, np.ndarray) and dtype is None:
        return from_numpy(data)
    return tensor(data, dtype)


def from_numpy(a: np.ndarray) -> Tensor:
    """A tensor sharing memory with the NumPy array ``a``."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(a).__name__})")
    dt.from_numpy_dtype(a.dtype)
    return Tensor._wrap(a, False)


def _size(size, keyword=None):
    """The shape from a factory's ``*size`` or its ``size=`` keyword (torch takes either)."""
    if keyword is not None:
        if size:
            op = sys._getframe(1).f_code.co_name
            raise TypeError(f"{op}() got multiple values for argument 'size'")
        size = (keyword,)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for i, s in enumerate(size):
        if not isinstance(s, (int, np.integer)):
            op = sys._getframe(1).f_code.co_name  # the factory: only on this error path
            raise TypeError(
                f"{op}(): argument 'size' failed to unpack the object at pos {i + 1} with "
                f'error "type must be tuple of ints,but got {type(s).__name__}"'
            )
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
    return tuple(int(s) for s in size)


def _dtype(dtype, default=None):
    return dt.as_dtype(dtype) if dtype is not None else (default or dt.get_default_dtype())


def zeros(*sizes: _SizeArg, size=None, dtype=None, requires_grad=False, device=None) -> Tensor:
    if device is not None:
        _check_device(device)
    return _new(np.zeros(_size(sizes, size), _dtype(dtype).np), requires_grad)


def ones(*sizes: _SizeArg, size=None, dtype=None, requires_grad=False, device=None) -> Tensor:
    if device is not None:
        _check_device(device)
    return _new(np.ones(_size(sizes, size), _dtype(dtype).np), requires_grad)


def empty(*sizes: _SizeArg, size=None, dtype=None, requires_grad=False, device=None) -> Tensor:
    if device is not None:
        _check_device(device)
    return _new(np.empty(_size(sizes, size), _dtype(dtype).np), requires_grad)


def full(size, fill_value, dtype=None, requires_grad=False, device=None) -> Tensor:
    if device is not None:
        _check_device(device)
    if isinstance(fill_value, Tensor) and fill_value.ndim == 0:
        fill_value = fill_value.item()
    if not isinstance(fill_value, (bool, int, float, complex, np.number)):
        raise TypeError(
            "full(): argument 'fill_value' (position 2) must be Number, not "
            f"{type(fill_value).__name__}"
        )
    if dtype is None:
        dtype = dt.result_type([], [], [fill_value])
    return _new(np.full(_size((size,)), fill_value, _dtype(dtype).np), requires_grad)


def zeros_like(t, dtype=None, requires_grad=False, device=None) -> Tensor:
    if device is not None:
        _check_device(device)
    return _new(np.zeros(t.shape, _dtype(dtype, t.dtype).np), requires_grad)


def ones_like(t, dtype=None, requires_grad=False, device=None) -> Tensor:
    if device is not None:
        _check_device(device)
    return _new(np.ones(t.shape, _dtype(dtype, t.dtype).np), requires_grad)


def full_like(t, fill_value, dtype=None, requires_grad=False, device=None) -> Tensor:
    if device is not None:
        _check_device(device)
    return full(tuple(t.shape), fill_value, dtype=dtype or t.dtype, requires_grad=requires_grad)


def empty_like(t, dtype=None, requires_grad=False, device=None) -> Tensor:
    if device is not None:
        _check_device(device)
    return empty(*t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def _sticky(x, err):
    """``x`` rounded to odd where ``err`` (what rounding ``x`` lost) is not zero: ``x``'s
    neighbour toward ``err`` where ``x``'s last bit is even, so that rounding it again to a
    narrower precision rounds the exact value (round-to-odd)."""
    even = (x.view(np.int64) & 1) == 0
    return np.where((err != 0) & even, np.nextafter(x, np.where(err > 0, np.inf, -np.inf)), x)


def _two_sum(a, b):
    """``a + b`` rounded and what the rounding lost (Knuth's TwoSum: exact)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _split(a):
    """``a`` as two halves of 26 bits (Veltkamp's split)."""
    c = 134217729.0 * a
    hi = c - (c - a)
    return hi, a - hi


def _fma(c, a, b, dtype):
    """``c + a * b`` in float64 arrays, rounded once to ``dtype`` (float32 or float64), as a
    fused multiply-add rounds."""
    if dtype == np.float32:  # the product of two float32s is exact in float64
        return _sticky(*_two_sum(c, a * b)).astype(np.float32)
    p = a * b
    (ah, al), (bh, bl) = _split(a), _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl  # Dekker: a * b == p + e exactly
    s, t1 = _two_sum(c, p)
    return s + _sticky(*_two_sum(t1, e))


def _arange(start, end, step, np_dtype) -> np.ndarray:
    """torch 2.13's CPU kernel for float32 and float64 (its AVX2 build, on one thread): in
    blocks of one 256-bit vector, two blocks at a time, a block's base is ``start + step *
    i`` and its values ``base + k * step``, the rest ``start + step * i``, each a fused
    multiply-add in float64 rounded to the dtype."""
    values = np.arange(start, end, step)
    if np.dtype(np_dtype) not in (np.float32, np.float64):
        return values.astype(np_dtype)
    exact = 2.0 ** (np.finfo(np_dtype).nmant + 1)  # integers below it: every way is exact
    if all(float(v).is_integer() and abs(v) < exact for v in (start, end, step)):
        return values.astype(np_dtype)
    n, width = len(values), 32 // np.dtype(np_dtype).itemsize
    i = np.arange(n, dtype=np.float64)
    first = i - i % width  # each vector's first index
    c, a = np.full(n, float(start)), np.full(n, float(step))
    base = _fma(c, a, first, np.float64).astype(np_dtype).astype(np.float64)
    vector = _fma(base, a, i - first, np.float64)
    scalar = _fma(c, a, i, np.float64)
    return np.where(i < n - n % (2 * width), vector, scalar).astype(np_dtype)


def arange(start, end=None, step=1, dtype=None, requires_grad=False, device=None) -> Tensor:
    if device is not None:
        _check_device(device)
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is None:
        dtype = dt.result_type([], [], [start, end, step])
    return _new(_arange(start, end, step, _dtype(dtype).np), requires_grad)


def _linspace(start, end, steps: int, np_dtype) -> np.ndarray:
    """torch 2.13's CPU kernel: ``step = (end - start) / (steps - 1)`` in the dtype (in
    float64 for integers), the first half ``start + step * i``, the second ``end - step *
    (steps - 1 - i)``, each one fused multiply-add (as torch's AVX2 and AVX-512 builds
    compile it), so its rounding is torch's to the bit; float16 and bfloat16 round each
    operation (c10's Half arithmetic)."""
    if steps == 1:
        return np.full(1, start).astype(np_dtype)
    kind = np.dtype(np_dtype)
    i = np.arange(steps)
    first = i < steps // 2
    k = np.where(first, i, steps - 1 - i)
    if kind.kind == "c":
        return np.linspace(start, end, steps).astype(np_dtype)
    if kind.itemsize == 2 and kind.kind == "f" or kind.name == "bfloat16":
        t = kind.type
        s, e = t(start), t(end)
        step = t(t(e - s) / t(steps - 1))
        return np.where(first, s + step * k.astype(kind), e - step * k.astype(kind)).astype(kind)
    work = np.float32 if kind == np.float32 else np.float64
    s, e = (work(float(np.asarray(v).astype(np_dtype))) for v in (start, end))
    step = (e - s) / work(steps - 1)
    c = np.where(first, s, e).astype(np.float64)
    step_k = np.where(first, step, -step).astype(np.float64)
    values = _fma(c, step_k, k.astype(work).astype(np.float64), work)
    return values.astype(np_dtype) if kind.kind == "f" else np.trunc(values).astype(np_dtype)


def linspace(start, end, steps, dtype=None, requires_grad=False, device=None) -> Tensor:
    """``steps`` values from ``start`` to ``end``, evenly spaced, equal to the bit to
    torch's (``_linspace``)."""
    if device is not None:
        _check_device(device)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    return _new(_linspace(start, end, int(steps), _dtype(dtype).np), requires_grad)


def logspace(start, end, steps, base=10.0, dtype=None, requires_grad=False, device=None) -> Tensor:
    """``steps`` values from ``base ** start`` to ``base ** end``, evenly spaced in the
    exponent (computed in float64, then cast, as torch's CPU kernel)."""
    if device is not None:
        _check_device(device)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    values = np.power(float(base), np.linspace(start, end, steps))
    return _new(values.astype(_dtype(dtype).np), requires_grad)


def eye(n, m=None, dtype=None, requires_grad=False, device=None) -> Tensor:
    if device is not None:
        _check_device(device)
    for what, k in (("n", n), ("m", m)):
        if k is not None and k < 0:
            raise RuntimeError(f"{what} must be greater or equal to 0, got {k}")
    return _new(np.eye(n, m, dtype=_dtype(dtype).np), requires_grad)


def _random(name, fill, size, dtype, requires_grad, generator):
    """A new tensor of ``size`` filled by ``fill(gen, fills.New(...))`` (``fill`` must hold no
    tensor: under capture it outlives the trace, Note [host draws])."""
    t = drawn(
        generator,
        f"staged.{name}",
        size,
        dtype,
        lambda gen, shape: fill(gen, fills.New(shape, dtype.np)),
        _in_graph(fill, size, dtype),
    )
    return _new(t._payload, requires_grad)


# Note [draws in traced steps]: inside a trace, every draw from a generator is made on the
# host at each compiled call, from torch's stream, as eager code would (Note [host draws]
# in tracing/draws.py). Traced with rng="counter" (deployed steps, ONNX export), rand/randn
# (and their _like forms) from the default generator draw from the counter-based stream in
# the graph instead (as dropout does), new numbers at every call but not torch's; other
# draws are then frozen at trace time, with a warning.
_IN_GRAPH = {fills.uniform: counter.rand_uniform, fills.normal: counter.rand_normal}


def _in_graph(fill, size, dtype):
    """The draw in the graph (``rng="counter"``), where the counter stream has one."""
    make = _IN_GRAPH.get(fill)
    return None if make is None else lambda: make(size, dtype)


def rand(
    *sizes: _SizeArg, size=None, generator=None, dtype=None, requires_grad=False, device=None
) -> Tensor:
    """Uniform on [0, 1), torch's values after the same seed."""
    if device is not None:
        _check_device(device)
    return _random(
        "rand",
        fills.uniform,
        _size(sizes, size),
        _floating(dtype, "check_uniform_bounds"),
        requires_grad,
        generator,
    )


def randn(
    *sizes: _SizeArg, size=None, generator=None, dtype=None, requires_grad=False, device=None
) -> Tensor:
    """Standard normal, torch's values after the same seed."""
    if device is not None:
        _check_device(device)
    return _random(
        "randn",
        fills.normal,
        _size(sizes, size),
        _floating(dtype, "normal_kernel_cpu"),
        requires_grad,
        generator,
    )


def randint(
    low, high=None, size=None, *, generator=None, dtype=None, requires_grad=False, device=None
) -> Tensor:
    """Integers in [low, high) (``randint(high, size)`` or ``randint(low, high, size)``)."""
    if device is not None:
        _check_device(device)
    if size is None:  # randint(high, size)
        if high is None:
            raise TypeError(
                "randint() received an invalid combination of arguments - got (int), but "
                "expected one of: (high, size), (low, high, size)"
            )
        low, high, size = 0, low, high
    elif high is None:  # randint(high, size=size)
        low, high = 0, low
    if not low < high:
        raise RuntimeError(
            f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"
        )
    return _random(
        "randint",
        lambda gen, p: fills.integers(gen, p, int(low), int(high)),
        _size((size,)),
        _dtype(dtype, dt.int64),
        requires_grad,
        generator,
    )


def randperm(n, *, generator=None, dtype=None, requires_grad=False, device=None) -> Tensor:
    """A random permutation of ``range(n)`` (torch's swap sequence)."""
    if device is not None:
        _check_device(device)
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    d = _dtype(dtype, dt.int64)
    t = drawn(
        generator,
        "staged.randperm",
        (int(n),),
        d,
        lambda gen, shape: distributions.randperm(gen, shape[0]).astype(d.np),
    )
    return _new(t._payload, requires_grad)


def _like(name, fill, t, dtype, requires_grad, generator):
    """A new tensor laid out as ``t`` (torch's preserve_format) filled by ``fill``."""
    d, shape = _dtype(dtype, t.dtype), tuple(t.shape)
    src = fills.like(t)  # torch's preserve_format: a strided t's layout, or a new one
    layout = None if fills.contiguous(src) else np.empty_like(src, dtype=d.np)
    r = drawn(
        generator,
        f"staged.{name}",
        shape,
        d,  # a strided t: drawn in memory order
        lambda gen, s: fill(
            gen, layout if layout is not None and s == layout.shape else fills.New(s, d.np)
        ),
        _in_graph(fill, shape, d),
    )
    return _new(r._payload, requires_grad)


def rand_like(t, *, generator=None, dtype=None, requires_grad=False, device=None) -> Tensor:
    if device is not None:
        _check_device(device)
    fills.check_floating(_dtype(dtype, t.dtype), "check_uniform_bounds")
    return _like("rand_like", fills.uniform, t, dtype, requires_grad, generator)


def randn_like(t, *, generator=None, dtype=None, requires_grad=False, device=None) -> Tensor:
    if device is not None:
        _check_device(device)
    fills.check_floating(_dtype(dtype, t.dtype), "normal_kernel_cpu")
    return _like("randn_like", fills.normal, t, dtype, requires_grad, generator)


def randint_like(
    t, low=0, high=None, *, generator=None, dtype=None, requires_grad=False, device=None
) -> Tensor:
    if device is not None:
        _check_device(device)
    if high is None:
        low, high = 0, low
    return _like(
        "randint_like",
        lambda gen, p: fills.integers(gen, p, int(low), int(high)),
        t,
        dtype,
        requires_grad,
        generator,
    )


def normal(
    mean, std=1.0, size=None, *, generator=None, dtype=None, requires_grad=False, device=None
) -> Tensor:
    """``normal(mean, std)`` with either a tensor (``std`` >= 0), or floats and ``size``:
    torch's draws of N(0, std) then ``+ mean``, or of N(0, 1) then ``* std + mean``."""
    if device is not None:
        _check_device(device)
    if not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        if size is None:
            raise TypeError(
                "normal() received an invalid combination of arguments: floats "
                "mean and std need a size"
            )
        _check_std(std)
        return _random(
            "normal",
            lambda gen, p: fills.normal(gen, p, mean, std),
            _size((size,)),
            _floating(dtype, "normal_kernel_cpu"),
            requires_grad,
            generator,
        )
    if not isinstance(std, Tensor):
        _check_std(std)
        mean = mean.detach()
        z = _random(
            "normal",
            lambda gen, p: fills.normal(gen, p, 0.0, std),
            tuple(mean.shape),
            mean.dtype,
            False,
            generator,
        )
        return _new((z + mean)._payload, requires_grad)
    std = std.detach()
    require(std >= 0, RuntimeError, "normal expects all elements of std >= 0.0")
    if isinstance(mean, Tensor):
        like, mean = mean, mean.detach()
        shape = tuple(np.broadcast_shapes(tuple(mean.shape), tuple(std.shape)))
    else:
        like, shape = std, tuple(std.shape)
    z = _random("normal", fills.normal, shape, like.dtype, False, generator)
    return _new((z * std + mean)._payload, requires_grad)


def _check_std(std):
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")


def bernoulli(input, p=None, *, generator=None) -> Tensor:
    """1 with probability ``p`` (the elements of ``input`` when ``p`` is None), else 0, in
    ``input``'s dtype."""
    if p is None:
        return bernoulli_mask(generator, "staged.bernoulli", tuple(input.shape), input).to(
            input.dtype
        )
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    return _random(
        "bernoulli",
        lambda gen, a: fills.bernoulli(gen, a, p),
        tuple(input.shape),
        input.dtype,
        False,
        generator,
    )


def bernoulli_mask(generator, what: str, shape, p: Tensor) -> Tensor:
    """``u < p`` of ``shape`` (``p`` broadcast to it), torch's ``bernoulli_`` of a
    probability tensor: float32 uniforms (float64 ones for float64 ``p``) in a
    contiguous tensor's order. Under capture the uniforms are drawn on the host at each
    call and the comparison (with the check that ``p`` lies in [0, 1]) is in the graph."""
    p = p.detach()
    require(
        (p >= 0) & (p <= 1),
        RuntimeError,
        "Expected p_in >= 0 && p_in <= 1 to be true, but got false.",
    )
    wide = dt.float64 if p.dtype is dt.float64 else dt.float32
    u = drawn(
        generator, what, shape, wide, lambda gen, s: gen.uniform(math.prod(s), wide.np).reshape(s)
    )
    return u < p.to(wide)


def multinomial(input, num_samples, replacement=False, *, generator=None) -> Tensor:
    """``num_samples`` indices per row of the 1-D or 2-D ``input``'s weights, as torch's CPU
    kernel draws them. Without replacement (or one sample): the top ``num_samples`` of
    ``w / q``, ``q`` from ``exponential_(1)`` in ``w``'s dtype (ties keep their order). With
    replacement: per row, the cumulative sum over its total (the last entry 1), and for
    each sample a float64 uniform's place in it (the first entry not below it). Under
    capture the draws are made on the host and the rest is in the graph."""
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            f"multinomial only supports floating-point dtypes for input, got: {input.dtype.title}"
        )
    k, cols = int(num_samples), input.shape[-1]
    if k <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and k > cols:
        raise RuntimeError(
            "cannot sample n_sample > prob_dist.size(-1) samples without replacement"
        )
    w = input.detach().reshape(-1, cols)
    require(
        w.isfinite() & (w >= 0),
        RuntimeError,
        "probability tensor contains either `inf`, `nan` or element < 0",
    )
    require(
        w.sum(1) > 0, RuntimeError, "invalid multinomial distribution (sum of probabilities <= 0)"
    )
    rows, d = w.shape[0], w.dtype.np
    if not replacement or k == 1:
        q = drawn(
            generator,
            "staged.multinomial",
            (rows, cols),
            w.dtype,
            lambda gen, s: distributions.exponential(gen, math.prod(s), 1.0).astype(d).reshape(s),
        )
        out = ad.argsort(-(w / q), dim=1, descending=False, k=k)
    else:
        cdf = ad.cumsum(w, dim=1, reverse=False)
        cdf = (cdf / cdf[:, -1:]).where(tensor(np.arange(cols) < cols - 1), 1.0)
        u = drawn(
            generator,
            "staged.multinomial",
            (rows, k),
            dt.float64,
            lambda gen, s: gen.uniform(math.prod(s), np.float64).reshape(s),
        )
        out = (cdf.double()[:, None, :] < u[:, :, None]).sum(2)
    return out.reshape(*input.shape[:-1], k)


def _floating(dtype, kernel):
    d = _dtype(dtype)
    fills.check_floating(d, kernel)
    return d
