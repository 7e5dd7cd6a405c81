"""torch's rules for strides of dense layouts (``empty``'s formats, ``*_like``'s and a
meta tensor's elementwise results)."""

from __future__ import annotations


def dense_strides(shape, order) -> tuple:
    """Strides of a dense layout whose dims vary from fastest to slowest in ``order``."""
    strides, n = [0] * len(shape), 1
    for d in order:
        strides[d] = n
        n *= max(shape[d], 1)
    return tuple(strides)


def non_overlapping_and_dense(shape, strides, unit: int = 1) -> bool:
    """torch's ``is_non_overlapping_and_dense``: the elements fill a block with no gaps
    (``strides`` in elements, or in bytes with ``unit`` the item size)."""
    need = unit
    for stride, n in sorted((s, n) for s, n in zip(strides, shape) if n > 1):
        if stride != need:
            return False
        need *= n
    return True


def inferred(shape, strides) -> tuple:
    """torch's ``infer_dense_strides``: dense strides keeping the order of ``strides`` (an
    insertion sort from the innermost dim; dims of stride 0 stay where they are, ties go
    to the smaller dim first)."""

    def after(a, b) -> int:  # 1: a goes after b, -1: before, 0: either
        if strides[a] == 0 or strides[b] == 0:
            return 0
        if strides[a] != strides[b]:
            return 1 if strides[a] > strides[b] else -1
        return 1 if shape[a] > shape[b] else 0

    perm = list(range(len(shape)))[::-1]
    for i in range(1, len(perm)):
        j = i
        for k in range(i - 1, -1, -1):
            c = after(perm[k], perm[j])
            if c > 0:
                perm[k], perm[j] = perm[j], perm[k]
                j = k
            elif c < 0:
                break
    return dense_strides(shape, perm)


def row_major(shape) -> tuple:
    """Contiguous strides of ``shape`` (a size 0 counts as 1, as torch's)."""
    return dense_strides(shape, range(len(shape) - 1, -1, -1))
