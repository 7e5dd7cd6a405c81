"""Differentiable collectives (``torch.distributed.nn.functional``): each returns a new
tensor, and its gradient is the matching collective of the cotangent (the gradient of an
all_reduce(SUM) is an all_reduce(SUM))."""

from __future__ import annotations

from ...autodiff import collective as C
from ..distributed_c10d import ReduceOp, _op, get_world_size


def all_reduce(tensor, op=ReduceOp.SUM, group=None):
    """``tensor`` reduced elementwise over every rank with ``op``."""
    get_world_size()  # the clear error before init_process_group
    return C.all_reduce(tensor, op=_op(op))


def broadcast(tensor, src, group=None):
    """Rank ``src``'s ``tensor``, on every rank."""
    get_world_size()
    return C.broadcast(tensor, src=src)


def all_gather(tensor, group=None):
    """Every rank's ``tensor``, as a tuple in rank order."""
    world = get_world_size()
    rows = C.all_gather(tensor, world=world)
    return tuple(rows[r] for r in range(world))
