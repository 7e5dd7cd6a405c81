"""The in-place random Tensor methods (``uniform_``, ``normal_``, ``random_``,
``bernoulli_``, ``exponential_``, ``geometric_``, ``cauchy_``, ``log_normal_``) and
``Tensor.bernoulli``/``Tensor.multinomial``, with torch's checks; each writes its draws as
an in-place op does (Note [in-place]). ``staged`` imports this module to attach them.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from ..._where import sited
from .. import factories
from ..ops.inplace import check_inplace, write
from ..tensor import Tensor
from . import fills
from .generator import drawn

_UNSET = object()


def _write(t: Tensor, fill, name: str, generator) -> Tensor:
    """Write ``fill(gen, payload)`` into ``t`` (nothing to draw for an empty or a meta
    tensor)."""
    check_inplace(t, False)  # before drawing, as torch's autograd checks before its kernel
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


def _from_to(name: str, a, b, kw: dict):
    """``(from, to)`` of a call that may name them torch's way (``from`` is a Python
    keyword: ``uniform_(**{"from": 1, "to": 2})``)."""
    a = kw.pop("from", a)
    b = kw.pop("to", b)
    if kw:
        raise TypeError(f"{name}() got an unexpected keyword argument '{next(iter(kw))}'")
    return a, b


def uniform_(self, a=0.0, b=1.0, *, generator=None, **kw) -> Tensor:
    """Uniform on [a, b): ``fma(u, b - a, a)`` in the tensor's dtype."""
    a, b = _from_to("uniform_", a, b, kw)
    fills.check_floating(self.dtype, "check_uniform_bounds")
    real = self.dtype.to_real()  # a complex tensor's parts
    for v, name in ((a, "from"), (b, "to")):
        if not -float(dt.finfo(real).max) <= v <= float(dt.finfo(real).max):
            raise RuntimeError(f"{name} is out of bounds for {real.type_meta}")
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
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")  # C++'s <<
    return _write(self, lambda gen, p: fills.normal(gen, p, mean, std), "normal_", generator)


def random_(self, from_=_UNSET, to=_UNSET, *, generator=None, **kw) -> Tensor:
    """``random_()``: integers in [0, 2**mantissa] (floats) or [0, max]; ``random_(to)``:
    [0, to); ``random_(from, to)``: [from, to), ``to=None`` up to the dtype's maximum."""
    from_, to = _from_to("random_", from_, to, kw)
    d = self.dtype
    if from_ is _UNSET and to is _UNSET:
        return _write(self, fills.random_bits, "random_", generator)
    if from_ is _UNSET:  # random_(to=...)
        from_ = 0
    elif to is _UNSET:
        from_, to = 0, from_
    from_ = int(from_)
    if to is None:
        to = (
            (1 << fills.DIGITS[d.name]) + 1
            if d.is_floating_point
            else 2
            if d.name == "bool"
            else int(np.iinfo(d.np).max) + 1
        )
        if d.is_floating_point:
            from_ = fills.update_bound(from_, 1, d)
        fills.check_range(from_, to - 1, d)
    else:
        from_, to = fills.int_range(from_, int(to), d)
    return _write(self, lambda gen, p: fills.integers(gen, p, from_, to), "random_", generator)


def bernoulli_(self, p=0.5, *, generator=None) -> Tensor:
    """1 with probability ``p`` (a float, or a tensor broadcast to this one), else 0."""
    if isinstance(p, Tensor):
        fills.check_floating(p.dtype, "bernoulli_tensor_cpu_p_")
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
    if not self.dtype.is_floating_point:
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
    if not (self.dtype.is_floating_point or self.dtype.is_complex):
        raise RuntimeError(
            "Cauchy distribution is a continuous probability distribution. dtype must be a "
            f"floating point but you specified {self.dtype.type_meta}"
        )
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    return _write(self, lambda gen, p: fills.cauchy(gen, p, median, sigma), "cauchy_", generator)


def log_normal_(self, mean=1.0, std=2.0, *, generator=None) -> Tensor:
    fills.check_floating(self.dtype, "log_normal_cpu")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    return _write(
        self, lambda gen, p: fills.log_normal(gen, p, mean, std), "log_normal_", generator
    )


for _fn in (uniform_, normal_, random_, bernoulli_, exponential_, geometric_, cauchy_, log_normal_):
    setattr(Tensor, _fn.__name__, sited(_fn))  # their errors name the user's line
# attached at import time; Tensor declares them for type checkers (its TYPE_CHECKING block)
Tensor.bernoulli = sited(factories.bernoulli)  # type: ignore[method-assign, assignment]
Tensor.multinomial = sited(factories.multinomial)  # type: ignore[method-assign, assignment]
