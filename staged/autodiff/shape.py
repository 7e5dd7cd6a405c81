"""Shape primitives. reshape, expand and permute return views of their input."""
from __future__ import annotations

import math

import numpy as np

from .avals import Aval, ShapeError
from .primitive import LINEAR, Primitive


def _reshape_rule(x, *, shape):
    if math.prod(shape) != math.prod(x.shape):
        raise ShapeError(f"shape '{list(shape)}' is invalid for input of size "
                         f"{math.prod(x.shape)}")
    return Aval(tuple(shape), x.dtype)


def _expand_rule(x, *, shape):
    if len(shape) != len(x.shape) or any(a != b and a != 1 for a, b in zip(x.shape, shape)):
        raise ShapeError(f"The expanded size of the tensor ({list(shape)}) must match the "
                         f"existing size ({list(x.shape)}) at non-singleton dimensions "
                         f"(expand is rank-strict; the public op adds leading dims)")
    return Aval(tuple(shape), x.dtype)


def _permute_rule(x, *, perm):
    if sorted(perm) != list(range(len(x.shape))):
        raise ShapeError(f"permute(): dims {list(perm)} are not a permutation of "
                         f"{len(x.shape)} dims")
    return Aval(tuple(x.shape[p] for p in perm), x.dtype)


def _expand_vjp(g, x_aval, shape):
    from .reduction import reduce_sum
    dims = tuple(i for i, (a, b) in enumerate(zip(x_aval.shape, shape)) if a == 1 and b != 1)
    return reduce_sum(g, dims=dims, keepdim=True) if dims else g


def _inverse(perm):
    return tuple(int(i) for i in np.argsort(perm))


reshape = Primitive("reshape", lambda x, *, shape: np.reshape(x, shape), _reshape_rule,
                    vjp=lambda g, x_aval: reshape(g, shape=x_aval.shape), jvp=LINEAR,
                    view=True, node_name="ViewBackward0")
expand = Primitive("expand", lambda x, *, shape: np.broadcast_to(x, shape), _expand_rule,
                   vjp=_expand_vjp, jvp=LINEAR, view=True)
permute = Primitive("permute", lambda x, *, perm: np.transpose(x, perm), _permute_rule,
                    vjp=lambda g, perm: permute(g, perm=_inverse(perm)), jvp=LINEAR, view=True)
