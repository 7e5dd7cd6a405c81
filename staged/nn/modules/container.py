"""Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict."""

from __future__ import annotations

import itertools
import operator
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from ...eager.tensor import Tensor
from ..module import Module
from ..parameter import Parameter


def _abs_index(idx, size: int) -> int:
    """``idx`` (an int or an object with ``__index__``; negative counts from the end) as a
    position among ``size`` items, with torch's IndexError out of range."""
    idx = operator.index(idx)
    if not -size <= idx < size:
        raise IndexError(f"index {idx} is out of range")
    return idx % size


def _renumbered(modules) -> OrderedDict:
    """``modules`` keyed ``"0"``, ``"1"``, ... in their order (after a deletion, as torch)."""
    return OrderedDict((str(i), m) for i, m in enumerate(modules.values()))


class Container(Module):
    """torch's deprecated ``nn.Container``: a Module holding the keyword modules given."""

    def __init__(self, **kwargs):
        super().__init__()
        warnings.warn(
            "`nn.Container` is deprecated. All of its functionality is now implemented in "
            "`nn.Module`. Subclass that instead.",
            FutureWarning,
            stacklevel=2,
        )
        for key, value in kwargs.items():
            self.add_module(key, value)


def _sequential_only(other):
    """torch's error for ``+`` of a Sequential and something else."""
    return ValueError(
        f"add operator supports only objects of Sequential class, but {type(other)} is given."
    )


def _check_factor(seq, other) -> None:
    """torch's errors for ``seq * other`` where ``other`` is no positive int."""
    if not isinstance(other, int):
        raise TypeError(f"unsupported operand type(s) for *: {type(seq)} and {type(other)}")
    if other <= 0:
        raise ValueError(f"Non-positive multiplication factor {other} for {type(seq)}")


class Sequential(Module):
    """Modules applied one after another."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for k, m in args[0].items():
                self.add_module(k, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def _key(self, idx) -> str:
        """The key of the ``idx``-th module."""
        return list(self._modules)[_abs_index(idx, len(self))]

    def __getitem__(self, idx):
        if isinstance(idx, slice):  # the modules' keys are kept
            return self.__class__(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._key(idx)]

    def __setitem__(self, idx, module):
        setattr(self, self._key(idx), module)

    def __delitem__(self, idx):
        keys = list(self._modules)[idx] if isinstance(idx, slice) else [self._key(idx)]
        for key in keys:
            delattr(self, key)
        self._modules = _renumbered(self._modules)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise _sequential_only(other)
        return Sequential().extend(self).extend(other)

    def __iadd__(self, other):
        if not isinstance(other, Sequential):
            raise _sequential_only(other)
        offset = len(self)
        for i, m in enumerate(other):
            self.add_module(str(i + offset), m)
        return self

    def __mul__(self, other):
        _check_factor(self, other)
        combined = Sequential()
        for i, m in enumerate(list(self) * other):
            combined.add_module(str(i), m)
        return combined

    def __rmul__(self, other):
        return self.__mul__(other)

    def __imul__(self, other):
        _check_factor(self, other)
        n = len(self)
        for i in range(n, n * other):
            self.add_module(str(i), self._modules[str(i % n)])
        return self

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index, module):
        """``module`` put at ``index`` (``-len <= index <= len``), the later ones moved up."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        for i in range(n, index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module
        return self

    def extend(self, sequential):
        for m in sequential:
            self.append(m)
        return self

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input


class ModuleList(Module):
    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self += modules

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self.__class__(list(self._modules.values())[idx])
        return self._modules[str(_abs_index(idx, len(self)))]

    def __setitem__(self, idx, module):
        setattr(self, str(_abs_index(idx, len(self))), module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                delattr(self, str(k))
        else:
            delattr(self, str(_abs_index(idx, len(self))))
        self._modules = _renumbered(self._modules)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        combined = ModuleList()
        for i, m in enumerate(itertools.chain(self, other)):
            combined.add_module(str(i), m)
        return combined

    def __repr__(self):
        """torch's: a run of equal reprs is one line, ``(0-11): 12 x Block(...)``."""
        if not len(self):
            return self._get_name() + "()"
        runs = []  # [first index, last index, repr]
        for i, m in enumerate(self):
            r = repr(m)
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = [
            (f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}").replace("\n", "\n  ")
            for a, b, r in runs
        ]
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def insert(self, index, module):
        """``module`` put before ``index``, the later ones moved up (torch's: no checks)."""
        for i in range(len(self._modules), index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def extend(self, modules):
        if not isinstance(modules, Iterable):
            raise TypeError(
                "ModuleList.extend should be called with an iterable, but got "
                + type(modules).__name__
            )
        offset = len(self)
        for i, m in enumerate(modules):
            self.add_module(str(offset + i), m)
        return self


def _pairs(kind, items):
    """``update``'s ``(key, value)`` pairs from an iterable of pairs, with torch's errors
    for an element that is not a pair."""
    for j, p in enumerate(items):
        if not isinstance(p, Iterable):
            raise TypeError(
                f"{kind} update sequence element #{j} should be Iterable; is" + type(p).__name__
            )
        if len(p) != 2:
            raise ValueError(
                f"{kind} update sequence element #{j} has length {len(p)}; 2 is required"
            )
        yield p[0], p[1]


class ModuleDict(Module):
    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def update(self, modules):
        """Set each key of ``modules``: a mapping (in its order) or an iterable of pairs."""
        if not isinstance(modules, Iterable):
            raise TypeError(
                "ModuleDict.update should be called with an iterable of key/value pairs, "
                "but got " + type(modules).__name__
            )
        if isinstance(modules, (Mapping, ModuleDict)):
            pairs = modules.items()
        else:
            pairs = _pairs("ModuleDict", modules)
        for k, m in pairs:
            self[k] = m


def _as_parameter(value):
    """A tensor that is no Parameter becomes one, as torch's containers do."""
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _entry_repr(key, value, dtype_name):
    """One line of a parameter container's repr, as torch writes it."""
    if isinstance(value, Tensor):
        kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
        size = "x".join(map(str, value.shape))
        return f"  ({key}): {kind} containing: [{dtype_name(value)} of size {size}]"
    return f"  ({key}): Object of type: {type(value).__name__}"


class ParameterList(Module):
    """Parameters in a list, registered under ``"0"``, ``"1"``, ...; tensors put in become
    Parameters (other objects are kept as plain attributes)."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def _index(self, idx):
        return str(_abs_index(idx, len(self)))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)([self[i] for i in range(*idx.indices(len(self)))])
        return getattr(self, self._index(idx))

    def __setitem__(self, idx, param):
        setattr(self, self._index(idx), _as_parameter(param))

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, parameters):
        return self.extend(parameters)

    def append(self, value):
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values):
        if not isinstance(values, Iterable) or isinstance(values, Tensor):
            raise TypeError(
                "ParameterList.extend should be called with an iterable, but got "
                + type(values).__name__
            )
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        return "\n".join(_entry_repr(k, p, lambda t: t.dtype) for k, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """Parameters in an ordered dict, registered under their (string) keys; tensors put in
    become Parameters (other objects are kept as plain attributes)."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _attr(key):
        if not isinstance(key, str):
            raise TypeError(
                "Index given to ParameterDict cannot be used as a key as it is not a string "
                f"(type is '{type(key).__name__}'). Open an issue on github if you need "
                "non-string keys."
            )
        return key

    def __getitem__(self, key):
        return getattr(self, self._attr(key))

    def __setitem__(self, key, value):
        self._keys[key] = None
        setattr(self, self._attr(key), _as_parameter(value))

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, self._attr(key))

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(self._keys)

    def __contains__(self, key):
        return key in self._keys

    def copy(self):
        return ParameterDict(OrderedDict(self.items()))

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for k in list(self._keys):
            del self[k]

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def popitem(self):
        k = next(reversed(self._keys))
        return k, self.pop(k)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def fromkeys(self, keys, default=None):
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def update(self, parameters):
        """Set each key of ``parameters``: a mapping (a plain dict's in sorted key order, an
        ``OrderedDict``'s or ``ParameterDict``'s in theirs) or an iterable of pairs."""
        if not isinstance(parameters, Iterable):
            raise TypeError(
                "ParametersDict.update should be called with an iterable of key/value pairs, "
                "but got " + type(parameters).__name__
            )
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            pairs = parameters.items()
        elif isinstance(parameters, Mapping):
            pairs = sorted(parameters.items())
        else:
            pairs = _pairs("ParameterDict", parameters)
        for k, v in pairs:
            self[k] = v

    def extra_repr(self):
        return "\n".join(_entry_repr(k, p, lambda t: t.type()) for k, p in self.items())

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")

    def __or__(self, other):
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other):
        out = other.copy()
        out.update(self)
        return out

    def __ior__(self, other):
        self.update(other)
        return self
