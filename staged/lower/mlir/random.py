"""uniform: one linalg.generic over the output; seed and counter enter as 0-d operands and
the hash of each element's flat index is the same 32-bit integer arithmetic as the NumPy
impl (Note [counter-based RNG]), so compiled and eager draws are bit-identical."""

from __future__ import annotations

from ... import dtypes as dt
from ...autodiff import REGISTRY
from ...autodiff import random as rnd
from .emitter import elem_type, lowering, tensor_type


def _i32(e, v: int) -> str:
    return e.const(v - (1 << 32) if v >= 1 << 31 else v, dt.int32)


def _ops(e):
    """xor and mix on i32 SSA values (Python ints become constants)."""

    def val(v):
        return _i32(e, v) if isinstance(v, int) else v

    def binop(name, x, y):
        return e.emit(f"arith.{name} {val(x)}, {val(y)} : i32")

    def mix(x):
        s1, m1, s2, m2, s3 = rnd.MIX
        x = binop("xori", x, binop("shrui", x, s1))
        x = binop("muli", x, m1)
        x = binop("xori", x, binop("shrui", x, s2))
        x = binop("muli", x, m2)
        return binop("xori", x, binop("shrui", x, s3))

    return (lambda x, y: binop("xori", x, y)), (lambda x, y: binop("addi", x, y)), mix


def _words(e, v):
    """(low, high) i32 halves of an i64."""
    hi = e.emit(f"arith.shrui {v}, {e.const(32, dt.int64)} : i64")
    return tuple(e.emit(f"arith.trunci {w} : i64 to i32") for w in (v, hi))


def _flat_index(e, shape):
    flat = e.emit("arith.constant 0 : index")
    stride = 1
    for d in reversed(range(len(shape))):
        i = e.emit(f"linalg.index {d} : index")
        size = (
            e.emit(f"arith.constant {stride} : index")
            if isinstance(stride, int)
            else e.index(stride)
        )  # a dynamic stride (a Sym), read at run time
        term = e.emit(f"arith.muli {i}, {size} : index")
        flat = e.emit(f"arith.addi {flat}, {term} : index")
        stride *= shape[d]
    return e.emit(f"arith.index_cast {flat} : index to i32")


@lowering(REGISTRY["uniform"])
def _uniform(e, op, state):
    out = op.out.aval
    scalar = type(out)((), dt.int64)
    parts = []
    for i in range(2):
        one = e.emit(
            f"tensor.extract_slice {state}[{i}][1][1] : "
            f"{tensor_type((2,), dt.int64)} to {tensor_type((1,), dt.int64)}"
        )
        parts.append((e.reshape(one, (1,), (), dt.int64), scalar))
    bits = rnd.mantissa_bits(out.dtype)
    t = elem_type(out.dtype)

    def body(seed, counter, _):
        xor, add, mix = _ops(e)
        k0, k1 = rnd.keys(*_words(e, seed), *_words(e, counter), xor, mix)
        h = rnd.element(_flat_index(e, out.shape), k0, k1, xor, add, mix)
        h = e.emit(f"arith.shrui {h}, {_i32(e, 32 - bits)} : i32")
        f = e.emit(f"arith.uitofp {h} : i32 to {t}")
        return e.emit(f"arith.mulf {f}, {e.const(2.0**-bits, out.dtype)} : {t}")

    rank = len(out.shape)
    return e.generic(
        parts,
        [(e.empty(out.shape, out.dtype), out)],
        [(), (), tuple(range(rank))],
        ["parallel"] * rank,
        body,
    )
