"""``torch._higher_order_ops.map``: ``f`` applied to each slice of ``xs`` along dim 0,
the outputs stacked, as torch's eager ``map`` computes it (a loop: autograd and a
``staged.compile`` trace see it unrolled)."""

from __future__ import annotations

from ..eager.ops.shape import stack
from ..eager.tensor import Tensor
from ..utils import _pytree as pytree


def map(f, xs, *args):  # noqa: A001  (torch's name)
    """``stack([f(x, *args) for x in xs])`` over dim 0 of each leaf of ``xs``.

    Args:
        f: ``(x, *args) -> pytree of tensors``; ``x`` a slice of ``xs`` along dim 0.
        xs: a tensor or a pytree of tensors of one length along dim 0.
        *args: passed to every call of ``f`` as they are.

    Returns:
        ``f``'s outputs, each leaf stacked along a new dim 0.

    Example:
        >>> map(lambda x, w: x * w, staged.ones(2, 3), staged.arange(3.0))
        tensor([[0., 1., 2.],
                [0., 1., 2.]])
    """
    leaves, spec = pytree.tree_flatten(xs)
    if not all(isinstance(t, Tensor) for t in leaves):
        raise RuntimeError(f"Mapped xs can only consist of tensors. Got xs {leaves}.")
    shapes = [t.shape for t in leaves]
    if shapes[0][0] == 0:
        raise RuntimeError("Leading dimensions of mapped xs cannot be 0.")
    if any(s[0] != shapes[0][0] for s in shapes):
        raise RuntimeError(
            f"Leading dimensions of mapped xs must be consistent. Got shapes {shapes}."
        )
    outs = [
        pytree.tree_flatten(f(pytree.tree_unflatten([t[i] for t in leaves], spec), *args))
        for i in range(shapes[0][0])
    ]
    stacked = [stack(step) for step in zip(*(flat for flat, _ in outs), strict=True)]
    return pytree.tree_unflatten(stacked, outs[-1][1])
