"""The base class: shapes, argument and sample validation, ``expand`` and the sampling
entry points (torch.distributions.distribution)."""

from __future__ import annotations

import math
import warnings

from ..eager.grad_mode import no_grad
from ..eager.interceptor import current_interceptor
from ..eager.tensor import Size, Tensor
from . import constraints
from .utils import lazy_property


class Distribution:
    """``torch.distributions.Distribution``: ``batch_shape`` (independent draws) and
    ``event_shape`` (one draw's shape); subclasses give ``arg_constraints``, ``support``,
    ``sample``/``rsample``, ``log_prob``, ``entropy``, ``mean``, ``mode``, ``variance``,
    ``expand``, and ``cdf``/``icdf``/``enumerate_support`` where they have them.

    Note [checks while tracing]: parameter and sample checks read values, so they run
    eagerly; a compiled step traces without them (an out-of-support value then gives the
    NaN or -inf that the formulas give)."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__  # torch validates unless Python runs with -O

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument validation on or off for distributions made without
        ``validate_args``."""
        if value not in [True, False]:
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = Size(tuple(batch_shape))
        self._event_shape = Size(tuple(event_shape))
        if validate_args is not None:
            self._validate_args = validate_args
        if not self._checking():
            return
        try:
            arg_constraints = self.arg_constraints
        except NotImplementedError:
            arg_constraints = {}
            warnings.warn(
                f"{self.__class__} does not define `arg_constraints`. Please set "
                "`arg_constraints = {}` or initialize the distribution with "
                "`validate_args=False` to turn off validation.",
                stacklevel=2,
            )
        for param, constraint in arg_constraints.items():
            if constraints.is_dependent(constraint):
                continue  # cannot be checked
            if param not in self.__dict__ and isinstance(getattr(type(self), param), lazy_property):
                continue  # a lazily derived parameter
            value = getattr(self, param)
            if not bool(constraint.check(value).all()):
                raise ValueError(
                    f"Expected parameter {param} ({type(value).__name__} of shape "
                    f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                    f"constraint {constraint!r}, but found invalid values:\n{value}"
                )

    def _checking(self) -> bool:
        return bool(self._validate_args) and current_interceptor() is None

    def expand(self, batch_shape, _instance=None):
        """A new distribution (or ``_instance`` filled in) with batch dims expanded to
        ``batch_shape``: the parameters are ``expand``ed views, not checked again."""
        raise NotImplementedError

    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    @property
    def arg_constraints(self) -> dict:
        raise NotImplementedError

    @property
    def support(self):
        raise NotImplementedError

    @property
    def mean(self) -> Tensor:
        raise NotImplementedError

    @property
    def mode(self) -> Tensor:
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def sample(self, sample_shape=()) -> Tensor:
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()) -> Tensor:
        raise NotImplementedError

    def sample_n(self, n: int) -> Tensor:
        warnings.warn(
            "`sample_n(n)` will be deprecated. Use `sample((n,))` instead.",
            FutureWarning,
            stacklevel=2,
        )
        return self.sample(Size((n,)))

    def log_prob(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def cdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def icdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def enumerate_support(self, expand: bool = True) -> Tensor:
        raise NotImplementedError

    def entropy(self) -> Tensor:
        raise NotImplementedError

    def perplexity(self) -> Tensor:
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=()) -> Size:
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value: Tensor) -> None:
        """torch's checks of a value to score: a tensor whose rightmost dims are the event
        shape and broadcast with the batch shape, inside the support (the support check
        only eagerly: Note [checks while tracing])."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = len(value.size()) - len(self._event_shape)
        if tuple(value.size()[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(
                f"The right-most size of value must match event_shape: {value.size()} vs "
                f"{self._event_shape}."
            )
        actual_shape = value.size()
        expected_shape = self._batch_shape + self._event_shape
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(
                    "Value is not broadcastable with batch_shape+event_shape: "
                    f"{actual_shape} vs {Size(expected_shape)}."
                )
        if current_interceptor() is not None:
            return
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(
                f"{self.__class__} does not define `support` to enable sample validation. "
                "Please initialize the distribution with `validate_args=False` to turn off "
                "validation.",
                stacklevel=2,
            )
            return
        if not bool(support.check(value).all()):
            raise ValueError(
                f"Expected value argument ({type(value).__name__} of shape "
                f"{tuple(value.shape)}) to be within the support ({support!r}) of the "
                f"distribution {self!r}, but found invalid values:\n{value}"
            )

    def _expand_params(self, cls, batch_shape, _instance, *names):
        """torch's ``expand`` for a family whose parameters ``names`` (those this instance
        holds: tensors, or distributions it is built on) have the batch dims first: each
        becomes an expanded view (an expanded distribution)."""
        new = self._get_checked_instance(cls, _instance)
        batch_shape = Size(tuple(batch_shape))
        n = len(self._batch_shape)
        for name in names:
            if name in self.__dict__:
                p = self.__dict__[name]
                if isinstance(p, Distribution):
                    new.__dict__[name] = p.expand((*batch_shape, *p.batch_shape[n:]))
                else:
                    new.__dict__[name] = p.expand(*batch_shape, *p.shape[n:])
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom "
                "__init__ method must also define a custom .expand() method."
            )
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self) -> str:
        names = [k for k in self.arg_constraints if k in self.__dict__]
        shown = ", ".join(
            f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}"
            for p in names
        )
        return f"{type(self).__name__}({shown})"


LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))
