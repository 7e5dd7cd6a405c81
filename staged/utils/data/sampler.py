"""Samplers as in ``torch.utils.data.sampler``: iterables of dataset indices (or of lists of
them, for ``BatchSampler``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sized
from typing import Generic, TypeVar

import numpy as np

from ...eager.factories import from_numpy
from . import _random

_T_co = TypeVar("_T_co", covariant=True)


def _require(ok: bool, name: str, value, what: str, error=ValueError) -> None:
    """torch's argument errors: ``"<name> should be <what> value, but got <name>=<value>"``."""
    if not ok:
        raise error(f"{name} should be {what} value, but got {name}={value}")


def _positive_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


class Sampler(Generic[_T_co]):
    """Base class: subclasses define ``__iter__`` and may define ``__len__`` (deliberately
    not defined here, as in torch, so that ``len()`` of one without it is a TypeError)."""

    def __iter__(self) -> Iterator[_T_co]:
        raise NotImplementedError


class SequentialSampler(Sampler[int]):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """A new random order of ``data_source`` each pass, or ``num_samples`` indices drawn with
    ``replacement``. Without a ``generator``, each pass seeds its own from the global one
    (so ``staged.manual_seed`` makes the passes reproducible)."""

    def __init__(
        self,
        data_source: Sized,
        replacement: bool = False,
        num_samples: int | None = None,
        generator=None,
    ) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        _require(isinstance(replacement, bool), "replacement", replacement, "a boolean", TypeError)
        _require(
            isinstance(self.num_samples, int) and self.num_samples > 0,
            "num_samples",
            self.num_samples,
            "a positive integer",
        )

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        generator = self.generator
        if generator is None:
            generator = _random.new_generator(_random.seed())
        if self.replacement:
            for _ in range(self.num_samples // 32):
                yield from _random.randint(n, 32, generator)
            yield from _random.randint(n, self.num_samples % 32, generator)
        else:
            for _ in range(self.num_samples // n):
                yield from _random.randperm(n, generator)
            yield from _random.randperm(n, generator)[: self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given ``indices`` in a new random order each pass."""

    def __init__(self, indices, generator=None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in _random.randperm(len(self.indices), self.generator):
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """``num_samples`` indices of ``weights`` drawn with probabilities proportional to them.

    Example:
        >>> sorted(set(WeightedRandomSampler([0.0, 1.0, 3.0], 20)))
        [1, 2]
    """

    def __init__(self, weights, num_samples: int, replacement: bool = True, generator=None) -> None:
        _require(_positive_int(num_samples), "num_samples", num_samples, "a positive integer")
        _require(isinstance(replacement, bool), "replacement", replacement, "a boolean")
        weights = from_numpy(np.array(weights, dtype=np.float64))  # exact, as torch's double
        if weights.dim() != 1:
            raise ValueError(
                f"weights should be a 1d sequence but given weights have shape "
                f"{tuple(weights.shape)}"
            )
        self.weights = weights
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        yield from _random.multinomial(
            self.weights.numpy(), self.num_samples, self.replacement, self.generator
        )

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list]):
    """Lists of ``batch_size`` indices from ``sampler``; a shorter last one unless
    ``drop_last``.

    Example:
        >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
        [[0, 1], [2, 3], [4]]
    """

    def __init__(self, sampler, batch_size: int, drop_last: bool) -> None:
        _require(_positive_int(batch_size), "batch_size", batch_size, "a positive integer")
        _require(isinstance(drop_last, bool), "drop_last", drop_last, "a boolean")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list]:
        sampler_iter = iter(self.sampler)
        batch = list(itertools.islice(sampler_iter, self.batch_size))
        while batch and (len(batch) == self.batch_size or not self.drop_last):
            yield batch
            batch = list(itertools.islice(sampler_iter, self.batch_size))

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
