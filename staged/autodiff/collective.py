"""Collectives over the process group: all_reduce, broadcast, all_gather, reduce_scatter.

Note [collectives]: each is a primitive like any other, so it runs eagerly, records under
capture and differentiates. Its impl runs the operation through ``GROUP[0]``, the process
group ``staged.distributed.init_process_group`` installs (MPI); until then the group is
this process alone (``Solo``), where every collective is the identity on its data (what
the registry's sweeps check here; ``staged.distributed`` refuses to run one before init).
The rules are collectives again: the VJP of a sum over ranks is a sum over ranks of the
cotangent (``torch.distributed.nn.functional``), of an all_gather a reduce_scatter.
Static parameters: ``op`` (one of ``REDUCE_OPS``), ``src`` (a rank) and ``world`` (the
group's size, so that shape rules need no group).
"""

from __future__ import annotations

from typing import Any

from . import lax
from .avals import Aval, ShapeError
from .primitive import LINEAR, Primitive

REDUCE_OPS = ("sum", "avg", "max", "min", "product")


class Solo:
    """The group of this process alone: the one the impls run on before any other is set."""

    rank, size = 0, 1

    def run(self, name, x, params):
        """``name``'s result on NumPy ``x`` (a new array), as every group's ``run``."""
        return (x[None] if name == "all_gather" else x[0] if name == "reduce_scatter" else x).copy()


GROUP: list[Any] = [Solo()]  # the process group the impls run on (staged.distributed sets it)


def _reduce_op(op):
    if op not in REDUCE_OPS:
        raise ShapeError(f"unknown reduce op {op!r}; the ops are {REDUCE_OPS}")


def _same_rule(x, **params):
    _reduce_op(params.get("op", "sum"))
    return x


def _all_reduce(x, *, op):
    """Reduce ``x`` elementwise over every rank with ``op``; each rank gets the result."""
    return GROUP[0].run("all_reduce", x, {"op": op})


def _all_reduce_vjp(g, x, out, op):
    if op in ("sum", "avg"):
        return all_reduce(g, op=op)
    total = all_reduce(g, op="sum")
    if op == "product":  # d out / d x_r = out / x_r
        return lax.mul(total, lax.conj(lax.div(out, x)))
    hits = lax.cast(lax.eq(x, out), x.dtype)  # ranks holding the extremum share it evenly
    return lax.div(lax.mul(total, hits), all_reduce(hits, op="sum"))


def _all_reduce_jvp(primals, tangents, out, *, op):
    (x,), (t,) = primals, tangents
    if op in ("sum", "avg"):
        return all_reduce(t, op=op)
    if op == "product":
        return lax.mul(out, all_reduce(lax.div(t, x), op="sum"))
    hits = lax.cast(lax.eq(x, out), x.dtype)
    return lax.div(all_reduce(lax.mul(t, hits), op="sum"), all_reduce(hits, op="sum"))


def _broadcast(x, *, src):
    """Rank ``src``'s ``x`` on every rank."""
    return GROUP[0].run("broadcast", x, {"src": src})


def _broadcast_vjp(g, src):
    total = all_reduce(g, op="sum")
    return total if GROUP[0].rank == src else lax.mul(total, 0)


def _all_gather(x, *, world):
    """Every rank's ``x`` stacked in rank order: shape ``(world, *x.shape)``."""
    return GROUP[0].run("all_gather", x, {"world": world})


def _all_gather_rule(x, *, world):
    return Aval((world, *x.shape), x.dtype)


def _reduce_scatter(x, *, op, world):
    """Row ``rank`` of ``x`` (shape ``(world, ...)``) reduced over every rank with ``op``."""
    return GROUP[0].run("reduce_scatter", x, {"op": op, "world": world})


def _reduce_scatter_rule(x, *, op, world):
    _reduce_op(op)
    if not x.shape or x.shape[0] != world:
        raise ShapeError(
            f"reduce_scatter: the input needs a leading dim of the world size {world}, got {x}"
        )
    return Aval(x.shape[1:], x.dtype)


def _linear_op(op, what):
    if op not in ("sum", "avg"):
        raise NotImplementedError(
            f"the derivative of {what} with op={op!r} is not implemented (only sum and avg)"
        )


def _reduce_scatter_vjp(g, op, world):
    _linear_op(op, "reduce_scatter")
    out = all_gather(g, world=world)
    return out if op == "sum" else lax.div(out, world)


def _reduce_scatter_jvp(primals, tangents, out, *, op, world):
    _linear_op(op, "reduce_scatter")
    return reduce_scatter(tangents[0], op=op, world=world)


all_reduce = Primitive(
    "all_reduce",
    _all_reduce,
    _same_rule,
    vjp=_all_reduce_vjp,
    jvp=_all_reduce_jvp,
    node_name="AllReduceBackward",
)
broadcast = Primitive(
    "broadcast",
    _broadcast,
    _same_rule,
    vjp=_broadcast_vjp,
    jvp=LINEAR,
    node_name="BroadcastBackward",
)
all_gather = Primitive(
    "all_gather",
    _all_gather,
    _all_gather_rule,
    vjp=lambda g, world: reduce_scatter(g, op="sum", world=world),
    jvp=LINEAR,
    node_name="AllGatherBackward",
)
reduce_scatter: Primitive = Primitive(
    "reduce_scatter",
    _reduce_scatter,
    _reduce_scatter_rule,
    vjp=_reduce_scatter_vjp,
    jvp=_reduce_scatter_jvp,
    node_name="ReduceScatterBackward",
)
COLLECTIVES = (all_reduce, broadcast, all_gather, reduce_scatter)
