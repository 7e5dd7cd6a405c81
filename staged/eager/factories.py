"""Tensor factories and the random-number state (``staged.manual_seed``)."""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .grad_mode import _state as _grad_state
from .interceptor import current_interceptor
from .tensor import Tensor, as_payload

_rng = [np.random.default_rng()]


def _seed_state(seed: int) -> np.ndarray:
    return np.array([int(seed) & (2 ** 64 - 1), 0], np.uint64).view(np.int64)


# (seed, counter) of the counter-based generator behind dropout (Note [counter-based RNG]
# in autodiff/random.py); one tensor for the process, so compiled steps keep it as state
_rng_state = Tensor._wrap(_seed_state(np.random.SeedSequence().entropy), False)


def manual_seed(seed: int):
    """Seed the generators behind rand, randn, randint (NumPy's) and dropout (counter-based)."""
    _rng[0] = np.random.default_rng(int(seed))
    _rng_state._payload = _seed_state(seed)  # the same tensor: compiled steps see the reseed


def generator() -> np.random.Generator:
    return _rng[0]


def rng_state() -> Tensor:
    """The int64[2] (seed, counter) tensor dropout draws from and advances in place."""
    return _rng_state


def _new(payload, requires_grad):
    t = Tensor._wrap(payload, False)
    if _grad_state.inference:
        t._vc = None  # made in inference_mode: an inference tensor
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensor(data, dtype=None, requires_grad=False) -> Tensor:
    """A new leaf tensor holding a copy of ``data``.

    Example:
        >>> staged.tensor([1.0, 2.0], requires_grad=True)
        tensor([1., 2.], requires_grad=True)
    """
    return _new(as_payload(data, dtype), requires_grad)


def from_numpy(a: np.ndarray) -> Tensor:
    """A tensor sharing memory with the NumPy array ``a``."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(a).__name__})")
    dt.from_numpy_dtype(a.dtype)
    return Tensor._wrap(a, False)


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for s in size:
        if not isinstance(s, (int, np.integer)) or s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension or a "
                               f"non-integer size: {list(size)}")
    return tuple(int(s) for s in size)


def _dtype(dtype, default=None):
    return dt.as_dtype(dtype) if dtype is not None else (default or dt.get_default_dtype())


def zeros(*size, dtype=None, requires_grad=False) -> Tensor:
    return _new(np.zeros(_size(size), _dtype(dtype).np), requires_grad)


def ones(*size, dtype=None, requires_grad=False) -> Tensor:
    return _new(np.ones(_size(size), _dtype(dtype).np), requires_grad)


def empty(*size, dtype=None, requires_grad=False) -> Tensor:
    return _new(np.empty(_size(size), _dtype(dtype).np), requires_grad)


def full(size, fill_value, dtype=None, requires_grad=False) -> Tensor:
    if dtype is None:
        dtype = dt.result_type([], [], [fill_value])
    return _new(np.full(_size((size,)), fill_value, _dtype(dtype).np), requires_grad)


def zeros_like(t, dtype=None, requires_grad=False) -> Tensor:
    return zeros(*t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def ones_like(t, dtype=None, requires_grad=False) -> Tensor:
    return ones(*t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def full_like(t, fill_value, dtype=None, requires_grad=False) -> Tensor:
    return full(tuple(t.shape), fill_value, dtype=dtype or t.dtype, requires_grad=requires_grad)


def empty_like(t, dtype=None, requires_grad=False) -> Tensor:
    return empty(*t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, requires_grad=False) -> Tensor:
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = dt.result_type([], [], [start, end, step])
    return _new(np.arange(start, end, step).astype(_dtype(dtype).np), requires_grad)


def linspace(start, end, steps, dtype=None, requires_grad=False) -> Tensor:
    return _new(np.linspace(start, end, steps).astype(_dtype(dtype).np), requires_grad)


def eye(n, m=None, dtype=None, requires_grad=False) -> Tensor:
    return _new(np.eye(n, m, dtype=_dtype(dtype).np), requires_grad)


def _draw(name: str) -> np.random.Generator:
    """The generator; under capture, first tell the tracer that ``staged.<name>`` makes a
    tensor that the graph will hold as a constant."""
    icpt = current_interceptor()
    if icpt is not None:
        icpt.impure(f"staged.{name}")
    return _rng[0]


def rand(*size, dtype=None, requires_grad=False) -> Tensor:
    d = _dtype(dtype)
    return _new(_draw("rand").random(_size(size)).astype(d.np), requires_grad)


def randn(*size, dtype=None, requires_grad=False) -> Tensor:
    d = _dtype(dtype)
    if d.is_complex:
        a = (_draw("randn").standard_normal(_size(size) + (2,)) / np.sqrt(2)).view(
            np.complex128)[..., 0]
        return _new(a.astype(d.np), requires_grad)
    return _new(_draw("randn").standard_normal(_size(size)).astype(d.np), requires_grad)


def randint(low, high=None, size=(), dtype=None, requires_grad=False) -> Tensor:
    if high is None:
        low, high = 0, low
    return _new(_draw("randint").integers(low, high, size=_size((size,))).astype(
        _dtype(dtype, dt.int64).np), requires_grad)


def rand_like(t, dtype=None, requires_grad=False) -> Tensor:
    return rand(*t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def randn_like(t, dtype=None, requires_grad=False) -> Tensor:
    return randn(*t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


