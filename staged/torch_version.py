"""``torch.torch_version``: ``TorchVersion``, the ``str`` that ``__version__`` is, compared
as a version (``torch.__version__ >= "2.5"``, ``>= (2, 5)``), as PEP 440 orders them."""

from __future__ import annotations

from collections.abc import Iterable

from packaging.version import InvalidVersion, Version

__all__ = ["TorchVersion", "Version", "InvalidVersion"]


class TorchVersion(str):
    """A version string that compares with strings, tuples and ``Version``s as a version
    (a string that is none, ``"parrot"``, compares as a string), as torch's."""

    def _convert_to_version(self, inp) -> Version:
        if isinstance(inp, Version):
            return inp
        if isinstance(inp, str):
            return Version(inp)
        if isinstance(inp, Iterable):
            return Version(".".join(str(item) for item in inp))
        raise InvalidVersion(inp)

    def _cmp_wrapper(self, cmp, method: str) -> bool:
        try:
            return getattr(Version(self), method)(self._convert_to_version(cmp))
        except InvalidVersion:
            return getattr(super(), method)(cmp)

    def __gt__(self, other) -> bool:
        return self._cmp_wrapper(other, "__gt__")

    def __lt__(self, other) -> bool:
        return self._cmp_wrapper(other, "__lt__")

    def __eq__(self, other) -> bool:
        return self._cmp_wrapper(other, "__eq__")

    def __ge__(self, other) -> bool:
        return self._cmp_wrapper(other, "__ge__")

    def __le__(self, other) -> bool:
        return self._cmp_wrapper(other, "__le__")

    __hash__ = str.__hash__
