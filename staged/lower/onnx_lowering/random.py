"""uniform: the counter-based hash of each element's flat index (Note [counter-based RNG])
in uint32 ONNX arithmetic, the same functions the NumPy impl uses, so draws are
bit-identical."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from ...autodiff import REGISTRY
from ...autodiff import random as rnd
from .model import lowering, onnx_type


@lowering(REGISTRY["uniform"])
def _uniform(b, op, state):
    out = op.out.aval
    u32, u64 = TensorProto.UINT32, TensorProto.UINT64

    def val(v):
        return b.const(np.array(v, np.uint32)) if isinstance(v, int) else v

    def xor(x, y):
        return b.node("BitwiseXor", [val(x), val(y)])

    def add(x, y):
        return b.node("Add", [val(x), val(y)])

    def shr(x, s):
        return b.node("BitShift", [x, val(s)], direction="RIGHT")

    def mix(x):
        s1, m1, s2, m2, s3 = rnd.MIX
        x = xor(x, shr(x, s1))
        x = b.node("Mul", [x, val(m1)])
        x = xor(x, shr(x, s2))
        x = b.node("Mul", [x, val(m2)])
        return xor(x, shr(x, s3))

    words = b.node("Cast", [state], to=u64)
    lo = b.node(
        "Cast", [b.node("BitwiseAnd", [words, b.const(np.array(0xFFFFFFFF, np.uint64))])], to=u32
    )
    hi = b.node(
        "Cast",
        [b.node("BitShift", [words, b.const(np.array(32, np.uint64))], direction="RIGHT")],
        to=u32,
    )
    halves = [
        [
            b.node(
                "Slice", [w, b.const(np.array([i], np.int64)), b.const(np.array([i + 1], np.int64))]
            )
            for w in (lo, hi)
        ]
        for i in range(2)
    ]
    (seed_lo, seed_hi), (ctr_lo, ctr_hi) = halves
    k0, k1 = rnd.keys(seed_lo, seed_hi, ctr_lo, ctr_hi, xor, mix)
    count = b.node("ReduceProd", [b.shape(out.shape)], keepdims=0)
    index = b.node(
        "Cast",
        [b.node("Range", [b.const(np.array(0, np.int64)), count, b.const(np.array(1, np.int64))])],
        to=u32,
    )
    bits = rnd.mantissa_bits(out.dtype)
    h = shr(rnd.element(index, k0, k1, xor, add, mix), 32 - bits)
    r = b.node(
        "Mul",
        [b.node("Cast", [h], to=onnx_type(out.dtype)), b.const(np.array(2.0**-bits, out.dtype.np))],
    )
    return b.node("Reshape", [r, b.shape(out.shape)])
