"""Collectives as IREE's own collective ops, over the default channel (``flow.collective``).

On llvm-cpu and vulkan-spirv, whose IREE drivers have no collective channel (IREE #12810),
these are never reached: ``staged.compile`` runs a step with collectives as compiled
segments with the collectives between them on the host (Note [segments] in
``staged/tracing/segments.py``). On cuda the whole step is one module, and its collectives
run on IREE's channel (NCCL, its ranks met through IREE's MPI channel provider).

``flow.collective`` works along dim 0 of its operands: ``all_gather`` concatenates each
rank's ``(1, ...)`` reshape of ``x`` into ``(world, ...)``; ``reduce_scatter`` gives each
rank its ``(1, ...)`` row; ``broadcast``, which has no op, is an all_reduce sum of the bits
of ``x`` on rank ``src`` and zeros elsewhere (exact: -0.0 and NaN payloads arrive as sent).
"""

from ... import dtypes as dt
from ...autodiff import REGISTRY
from .emitter import lowering, tensor_type, unsupported

# flow.collective's element types; complex and bool tensors have none
_KIND = {
    dt.float16: "f16",
    dt.float32: "f32",
    dt.float64: "f64",
    dt.int8: "si8",
    dt.uint8: "ui8",
    dt.int16: "si16",
    dt.int32: "si32",
    dt.int64: "si64",
}
_KIND[dt.bfloat16] = "bf16"
_INT_OF = {16: dt.int16, 32: dt.int32, 64: dt.int64}  # the bits of a float, for broadcast
_REDUCTION = {
    "sum": "sum",
    "avg": "average",
    "max": "maximum",
    "min": "minimum",
    "product": "product",
}


for _name in ("all_reduce", "all_gather", "reduce_scatter", "broadcast"):
    unsupported(
        _name,
        dict.fromkeys(("complex", "bool"), "IREE's collectives take real numbers and integers"),
    )


def _kind(e, d) -> str:
    if d not in _KIND:
        e.fail(f"IREE's collectives take no {d.name} tensors", d)
    return _KIND[d]


def _run(e, name: str, how: str, x: str, x_type: str, shape, d) -> str:
    """``flow.collective.<name> <how>, x`` into a new ``shape`` tensor of dtype ``d``."""
    channel = e.emit("flow.channel.default : !flow.channel")
    target, out_type = e.empty(shape, d), tensor_type(shape, d)
    return e.emit(
        f"flow.collective.{name} {how}, {target}, {x}, {channel} : "
        f"({out_type}, {x_type}, !flow.channel) -> {target} as {out_type}"
    )


@lowering(REGISTRY["all_reduce"])
def _all_reduce(e, op, x):
    a = op.out.aval
    how = f"{_REDUCTION[op.params['op']]}, {_kind(e, a.dtype)}"
    return _run(e, "all_reduce", how, x, tensor_type(a.shape, a.dtype), a.shape, a.dtype)


@lowering(REGISTRY["all_gather"])
def _all_gather(e, op, x):
    (xa,), a = [v.aval for v in op.inputs], op.out.aval
    one = (1, *xa.shape)
    x1 = e.reshape(x, xa.shape, one, xa.dtype)
    return _run(e, "all_gather", _kind(e, a.dtype), x1, tensor_type(one, a.dtype), a.shape, a.dtype)


@lowering(REGISTRY["reduce_scatter"])
def _reduce_scatter(e, op, x):
    (xa,), a = [v.aval for v in op.inputs], op.out.aval
    how = f"{_REDUCTION[op.params['op']]}, {_kind(e, a.dtype)}"
    one = (1, *a.shape)
    row = _run(e, "reduce_scatter", how, x, tensor_type(xa.shape, xa.dtype), one, a.dtype)
    return e.reshape(row, one, a.shape, a.dtype)


@lowering(REGISTRY["broadcast"])
def _broadcast(e, op, x):
    a = op.out.aval
    _kind(e, a.dtype)
    bits = a.dtype if a.dtype.dclass != "float" else _INT_OF[a.dtype.itemsize * 8]
    t, bt = tensor_type(a.shape, a.dtype), tensor_type(a.shape, bits)
    xb = x if bits is a.dtype else e.emit(f"arith.bitcast {x} : {t} to {bt}")
    channel = e.emit("flow.channel.default : !flow.channel")
    rank = e.emit(f"flow.channel.rank {channel} : index")
    src = e.emit(f"arith.constant {op.params['src']} : index")
    mine = e.emit(f"arith.cmpi eq, {rank}, {src} : index")
    sent = e.emit(f"arith.select {mine}, {xb}, {e.full(a.shape, bits, 0)} : {bt}")
    total = _run(e, "all_reduce", f"sum, {_KIND[bits]}", sent, bt, a.shape, bits)
    return total if bits is a.dtype else e.emit(f"arith.bitcast {total} : {bt} to {t}")
