"""The base class: shapes, argument validation and the sampling entry points."""

from __future__ import annotations

import math

from ..eager.grad_mode import no_grad
from ..eager.interceptor import current_interceptor
from ..eager.tensor import Size, Tensor
from .utils import broadcast_all

# torch validates arguments unless Python runs with -O (Distribution._validate_args)
_VALIDATE = __debug__


class Distribution:
    """``torch.distributions.Distribution``: ``batch_shape`` (independent draws) and
    ``event_shape`` (one draw's shape); subclasses give ``sample``/``rsample``,
    ``log_prob``, ``entropy``, ``mean`` and ``variance``.

    Note [checks while tracing]: parameter and sample checks read values, so they run
    eagerly; a compiled step traces without them (an out-of-support value then gives the
    NaN or -inf that the formulas give)."""

    has_rsample = False
    arg_checks: dict = {}  # parameter name -> (check, its constraint's name)

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = Size(batch_shape)
        self._event_shape = Size(event_shape)
        self._validate_args = _VALIDATE if validate_args is None else validate_args
        if self._checking():
            for name, (ok, constraint) in self.arg_checks.items():
                value = self.__dict__.get(name)  # a given parameter, not a derived one
                if isinstance(value, Tensor) and not bool(ok(value).all()):
                    raise ValueError(
                        f"Expected parameter {name} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {constraint}, but found invalid values:\n{value}"
                    )

    def _checking(self) -> bool:
        return bool(self._validate_args) and current_interceptor() is None

    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no variance")

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def _extended_shape(self, sample_shape=()) -> Size:
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def sample(self, sample_shape=()) -> Tensor:
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()) -> Tensor:
        raise NotImplementedError(
            f"{type(self).__name__} has no reparameterized sample (rsample); use sample()"
        )

    def sample_n(self, n: int) -> Tensor:
        return self.sample(Size((n,)))

    def _check_sample(self, value: Tensor, ok, support: str) -> None:
        if self._checking() and not bool(ok(value).all()):
            raise ValueError(
                f"Expected value argument ({type(value).__name__} of shape "
                f"{tuple(value.shape)}) to be within the support ({support}) of the "
                f"distribution {self!r}, but found invalid values:\n{value}"
            )

    def __repr__(self) -> str:
        given = [(n, self.__dict__[n]) for n in self.arg_checks if n in self.__dict__]
        shown = ", ".join(f"{n}: {v if v.numel() == 1 else v.size()}" for n, v in given)
        return f"{type(self).__name__}({shown})"


class LocScale(Distribution):
    """A family of ``loc`` (any real) and ``scale`` (positive), of one broadcast shape, whose
    mean and mode are ``loc`` (Normal, Laplace)."""

    has_rsample = True
    arg_checks = {
        "loc": (lambda x: x == x, "Real()"),
        "scale": (lambda x: x > 0, "GreaterThan(lower_bound=0.0)"),
    }

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc


LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))
