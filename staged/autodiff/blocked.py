"""Blocked sums: the order in which ``reduce_sum`` adds, in every mode (NumPy impl, MLIR
and ONNX lowerings).

Note [blocked sums]
A reduction kernel accumulates each output along one running chain: IREE's float32 sum of
30e6 ones stuck at 2**24, and onnxruntime's sum over a leading axis of 2**25 rows too; a
chain of n additions errs by up to (n-1)u relative (u = 2**-24 in float32); NumPy's
pairwise sum covers the trailing axes of a C-contiguous array only (its sum over the
leading axis of 2**25 rows stuck too). IREE has no pass that splits a generic reduction
(only matmuls and argmax). So a sum over more than
SPLIT_MIN elements runs in levels: each level cuts the innermost reduced dim still longer
than 1 into blocks of at most BLOCK elements (a divisor of its size in [BLOCK/2, BLOCK],
else BLOCK with zero padding) and sums each block, until at most BLOCK elements remain for
the last reduction. Every chain is then at most BLOCK long, and the error at most
``depth(...) * u`` relative for terms of one sign: 2**25 elements take 5 levels, depth
155, 9.2e-6 (pairwise-like growth, as NumPy's sum). Smaller sums (the models' batch and
feature sums) keep their one kernel.
"""

from __future__ import annotations

import math

BLOCK = 32
SPLIT_MIN = 4096


def _block(s: int) -> int:
    if s <= BLOCK:
        return s
    return next((k for k in range(BLOCK, BLOCK // 2 - 1, -1) if s % k == 0), BLOCK)


def levels(shape, dims):
    """The levels summing ``shape`` over ``dims`` down to at most BLOCK elements: a list of
    ``(dim, padded size, block)``; the dim's size becomes ``padded size // block``. Empty
    when the sum needs no split (small, or a reduced size is dynamic)."""
    shape = list(shape)
    if not all(isinstance(shape[i], int) for i in dims):
        return []
    n = math.prod(shape[i] for i in dims)
    out = []
    if n <= SPLIT_MIN:
        return out
    while n > BLOCK:
        i = max(j for j in dims if shape[j] > 1)
        k = _block(shape[i])
        s = -(-shape[i] // k) * k
        out.append((i, s, k))
        n = n // shape[i] * (s // k)
        shape[i] = s // k
    return out


def depth(shape, dims) -> int:
    """The most additions on one chain of the blocked sum: its error is at most
    ``depth * u`` relative (terms of one sign, to first order)."""
    plan = levels(shape, dims)
    rest = list(shape)
    for i, s, k in plan:
        rest[i] = s // k
    return sum(k - 1 for _, _, k in plan) + math.prod(rest[i] for i in dims) - 1
