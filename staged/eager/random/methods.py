"""The in-place random Tensor methods (``uniform_``, ``normal_``, ``random_``,
``bernoulli_``, ``exponential_``, ``geometric_``, ``cauchy_``, ``log_normal_``) and
``Tensor.bernoulli``/``Tensor.multinomial``, with torch's checks; each writes its draws as
an in-place op does (Note [in-place]). ``staged`` imports this module to attach them.
"""

from __future__ import annotations

import numpy as np

from .. import factories
from ..ops.inplace import write
from ..tensor import Tensor
from . import fills
from .generator import drawn

_UNSET = object()
_LIMITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}  # mantissa digits


def _write(t: Tensor, fill, name: str, generator) -> Tensor:
    """Write ``fill(gen, payload)`` into ``t`` (nothing to draw for an empty or a meta
    tensor)."""
    if t.numel() == 0 or t.is_meta:
        return t
    layout: np.ndarray | None
    layout, d = fills.like(t), t.dtype.np
    layout = None if fills.contiguous(layout) else layout  # drawn in t's memory order

    def draw(gen, shape):  # ``shape``: an array where the draw hook gives one (``drawn``)
        if type(shape) is np.ndarray:
            return fill(gen, shape)
        return fill(
            gen, layout if layout is not None and shape == layout.shape else fills.New(shape, d)
        )

    return write(t, drawn(generator, f"Tensor.{name}", tuple(t.shape), t.dtype, draw, like=t))


def uniform_(self, a=0.0, b=1.0, *, generator=None) -> Tensor:
    """Uniform on [a, b): ``fma(u, b - a, a)`` in the tensor's dtype."""
    fills.check_floating(self.dtype, "check_uniform_bounds")
    if a > b:
        raise RuntimeError(
            f"uniform_ expects to return a [from, to) range, but found from={a} > to={b}"
        )
    return _write(self, lambda gen, p: fills.uniform(gen, p, a, b), "uniform_", generator)


def normal_(self, mean=0.0, std=1.0, *, generator=None) -> Tensor:
    """N(mean, std): the block path for contiguous tensors of 16 or more elements, the
    serial one (with the generator's cached normal) otherwise."""
    fills.check_floating(self.dtype, "normal_kernel_cpu")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    return _write(self, lambda gen, p: fills.normal(gen, p, mean, std), "normal_", generator)


def _update(v: int, step: int, dtype) -> int:
    """torch's update_from (``step=1``) and update_to (``step=-1``): a bound moved to the
    nearest int64 that stays inside the range once cast to the float dtype."""
    cast = int(dtype.np.type(v + step))
    if (cast < v) if step > 0 else (cast >= v):
        n = abs(v + step).bit_length() - 1
        return cast + step * (1 << (n - _LIMITS[dtype.name] + 1))
    return v


def random_(self, from_=_UNSET, to=_UNSET, *, generator=None) -> Tensor:
    """``random_()``: integers in [0, 2**mantissa] (floats) or [0, max]; ``random_(to)``:
    [0, to); ``random_(from, to)``: [from, to), ``to=None`` up to the dtype's maximum."""
    d = self.dtype
    if from_ is _UNSET:
        return _write(self, fills.random_bits, "random_", generator)
    if to is _UNSET:
        from_, to = 0, from_
    from_ = int(from_)
    if to is None:
        to = (
            (1 << _LIMITS[d.name]) + 1
            if d.is_floating_point
            else 2
            if d.name == "bool"
            else int(np.iinfo(d.np).max) + 1
        )
        if d.is_floating_point:
            from_ = _update(from_, 1, d)
    else:
        to = int(to)
        if from_ >= to:
            raise RuntimeError(
                f"random_ expects 'from' to be less than 'to', but got from={from_} >= to={to}"
            )
        if d.is_floating_point:
            from_, to = _update(from_, 1, d), _update(to, -1, d)
    return _write(self, lambda gen, p: fills.integers(gen, p, from_, to), "random_", generator)


def bernoulli_(self, p=0.5, *, generator=None) -> Tensor:
    """1 with probability ``p`` (a float, or a tensor broadcast to this one), else 0."""
    if isinstance(p, Tensor):
        if not isinstance(p._payload, np.ndarray):  # traced: the comparison in the graph
            return write(
                self,
                factories.bernoulli_mask(generator, "Tensor.bernoulli_", tuple(self.shape), p).to(
                    self.dtype
                ),
            )
        p = p._host()
        if p.size and not (p.min() >= 0 and p.max() <= 1):
            raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    elif not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    return _write(self, lambda gen, t: fills.bernoulli(gen, t, p), "bernoulli_", generator)


def exponential_(self, lambd=1.0, *, generator=None) -> Tensor:
    if not (self.dtype.is_floating_point or self.dtype.is_complex):
        raise RuntimeError(
            f"Exponential distribution is a continuous probability "
            f"distribution. dtype must be a floating point but you specified "
            f"{self.dtype.title}"
        )
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    return _write(self, lambda gen, p: fills.exponential(gen, p, lambd), "exponential_", generator)


def geometric_(self, p, *, generator=None) -> Tensor:
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    return _write(self, lambda gen, t: fills.geometric(gen, t, p), "geometric_", generator)


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None) -> Tensor:
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    return _write(self, lambda gen, p: fills.cauchy(gen, p, median, sigma), "cauchy_", generator)


def log_normal_(self, mean=1.0, std=2.0, *, generator=None) -> Tensor:
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    return _write(
        self, lambda gen, p: fills.log_normal(gen, p, mean, std), "log_normal_", generator
    )


for _fn in (uniform_, normal_, random_, bernoulli_, exponential_, geometric_, cauchy_, log_normal_):
    setattr(Tensor, _fn.__name__, _fn)
# attached at import time; Tensor declares them for type checkers (its TYPE_CHECKING block)
Tensor.bernoulli = factories.bernoulli  # type: ignore[method-assign, assignment]
Tensor.multinomial = factories.multinomial  # type: ignore[method-assign, assignment]
