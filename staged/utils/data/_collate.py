"""``default_collate`` and ``default_convert`` as in ``torch.utils.data._utils.collate``: a
list of samples made into one batch, containers kept and leaves stacked."""

from __future__ import annotations

import collections.abc
import copy
import re

import numpy as np

from ...eager.factories import from_numpy, tensor
from ...eager.ops.shape import stack
from ...eager.tensor import Tensor

_STR_OR_OBJECT = re.compile(r"[SaUO]")  # NumPy dtype codes with no tensor dtype
_ERROR = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)


def _as_tensor(data) -> Tensor:
    """``torch.as_tensor`` of a NumPy array, NumPy scalar or list of NumPy scalars."""
    return from_numpy(np.asarray(data))


def default_convert(data):
    """NumPy arrays and scalars in ``data`` made tensors, containers kept (``DataLoader``'s
    ``collate_fn`` when it does not batch).

    Example:
        >>> default_convert((np.array([0, 1]), 2))
        [tensor([0, 1]), 2]
    """
    elem_type = type(data)
    if isinstance(data, Tensor):
        return data
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_"):
        if isinstance(data, np.ndarray) and _STR_OR_OBJECT.search(data.dtype.str):
            return data
        return _as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]  # a list, as torch (backwards compatibility)
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data


def _rebuild_mapping(like, items: dict):
    """``items`` in a mapping of ``like``'s type where it can be made, else a dict."""
    try:
        if isinstance(like, collections.abc.MutableMapping):
            clone = copy.copy(like)
            clone.update(items)
            return clone
        return type(like)(items)
    except TypeError:
        return items


def _rebuild_sequence(like, items: list):
    """``items`` in a sequence of ``like``'s type where it can be made, else a list."""
    try:
        if isinstance(like, collections.abc.MutableSequence):
            clone = copy.copy(like)
            for i, item in enumerate(items):
                clone[i] = item
            return clone
        return type(like)(items)
    except TypeError:
        return items


def collate(batch, *, collate_fn_map: dict | None = None):
    """Collate ``batch`` with ``collate_fn_map`` (``{type or tuple of types: fn(batch, *,
    collate_fn_map)}``, exact type first, then the first ``isinstance`` match) at the leaves,
    recursing through mappings, namedtuples and sequences."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for collate_type in collate_fn_map:
            if isinstance(elem, collate_type):
                return collate_fn_map[collate_type](batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        return _rebuild_mapping(
            elem,
            {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map) for key in elem},
        )
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(
            *(collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch))
        )
    if isinstance(elem, collections.abc.Sequence):
        if any(len(e) != len(elem) for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        collated = [collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return collated  # a list, as torch (backwards compatibility)
        return _rebuild_sequence(elem, collated)
    raise TypeError(_ERROR.format(elem_type))


def collate_tensor_fn(batch, *, collate_fn_map=None):
    return stack(batch, 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    if _STR_OR_OBJECT.search(batch[0].dtype.str):
        raise TypeError(_ERROR.format(batch[0].dtype))
    return collate([_as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    return _as_tensor(batch)


def collate_float_fn(batch, *, collate_fn_map=None):
    # not staged.tensor(batch, dtype=float64): it rounds Python floats through float32 first
    return from_numpy(np.array(batch, dtype=np.float64))


def collate_int_fn(batch, *, collate_fn_map=None):
    return tensor(batch)


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


default_collate_fn_map: dict = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def default_collate(batch):
    """A list of samples made one batch (``DataLoader``'s default ``collate_fn``): tensors
    stacked along a new dim 0, NumPy arrays and scalars made tensors and stacked, Python
    floats a float64 tensor, ints an int64 tensor, str and bytes left a list; mappings,
    namedtuples and sequences collated field by field (tuples become lists, as in torch).

    Example:
        >>> default_collate([{"x": staged.zeros(2), "y": 0}, {"x": staged.ones(2), "y": 1}])
        {'x': tensor([[0., 0.],
                [1., 1.]]), 'y': tensor([0, 1])}
    """
    return collate(batch, collate_fn_map=default_collate_fn_map)
