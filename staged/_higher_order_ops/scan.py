"""``torch._higher_order_ops.scan``: a loop over the slices of ``xs`` threading a carry,
its outputs stacked, as torch's eager ``scan`` computes it (``generic_scan``). A Python
loop: eager, autograd and a ``staged.compile`` trace (the length is static) run it
unrolled."""

from __future__ import annotations

from ..eager.ops.shape import stack
from ..eager.tensor import Tensor
from ..utils import _pytree as pytree
from ..autodiff.avals import wrap_dim


def scan(combine_fn, init, xs, *, dim: int = 0, reverse: bool = False):
    """Scan ``combine_fn`` over ``xs`` along ``dim``, threading a carry from ``init``.

    Args:
        combine_fn: ``(carry, x) -> (next_carry, y)``; ``x`` a slice of ``xs`` along
            ``dim``, ``next_carry`` of the shapes and dtypes of ``init``.
        init: the first carry, a tensor or a pytree of tensors.
        xs: a tensor or a pytree of tensors of one length along ``dim``.
        dim: the dimension to scan over.
        reverse: scan from the end of ``dim``.

    Returns:
        ``(final_carry, ys)``: each leaf of ``ys`` the per-step ``y`` stacked along ``dim``
        (along 0 where ``y`` has fewer than ``dim`` dims).

    Example:
        >>> scan(lambda c, x: (c + x, c + x), staged.zeros(()), staged.arange(4.0))
        (tensor(6.), tensor([0., 1., 3., 6.]))
    """
    init_leaves, init_spec = pytree.tree_flatten(init)
    xs_leaves, xs_spec = pytree.tree_flatten(xs)
    if not xs_leaves:
        return init, []
    dim = wrap_dim(dim, xs_leaves[0].ndim)
    _validate(combine_fn, xs_leaves, init_leaves, dim, reverse)
    steps = range(xs_leaves[0].shape[dim])
    carry, ys = init_leaves, []
    for i in reversed(steps) if reverse else steps:
        x = pytree.tree_unflatten([t.select(dim, i) for t in xs_leaves], xs_spec)
        out = combine_fn(pytree.tree_unflatten(carry, init_spec), x)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise RuntimeError(
                "torch.scan: improper combine_fn number of returns: expected combine_fn to "
                f"return a tuple (next_carry, y) but got {out}"
            )
        carry_tree, y = out
        carry = pytree.tree_leaves(carry_tree)
        _check_carry(init_leaves, carry)
        y_leaves, y_spec = pytree.tree_flatten(y)
        if not all(isinstance(t, Tensor) for t in y_leaves):
            raise RuntimeError(f"All leaves of combine_fn's y must be tensors, but got {y}")
        ys.append(y_leaves)
    if reverse:
        ys.reverse()
    stacked = [stack(step, dim if dim <= step[0].ndim else 0) for step in zip(*ys, strict=True)]
    return carry_tree, pytree.tree_unflatten(stacked, y_spec)


def _validate(combine_fn, xs_leaves, init_leaves, dim, reverse):
    """torch's checks, in its order, with its messages."""
    if not callable(combine_fn):
        raise RuntimeError(f"Combine_fn must be a callable, but got {combine_fn}")
    if not isinstance(dim, int):
        raise RuntimeError("Dim must be an int, but got " + str(type(dim)))
    if not isinstance(reverse, bool):
        raise RuntimeError("Reverse must be a bool, but got " + str(type(reverse)))
    if not init_leaves:
        raise RuntimeError("scan() operator requires init leaves.")
    for x in init_leaves:
        if not isinstance(x, Tensor):
            raise RuntimeError(f"All init leaves must be a Tensor but got {x}")
    for x in xs_leaves:
        if not isinstance(x, Tensor):
            raise RuntimeError(f"All xs leaves must be a Tensor but got {x}")
    if any(x.ndim <= dim or x.shape[dim] == 0 for x in xs_leaves):
        raise RuntimeError(
            "All xs leaves must at least have 'dim' number of dimensions and scan dimension > 0"
        )


def _check_carry(init, carry):
    """torch's check that each step's carry matches ``init`` in shape and dtype."""
    if len(init) != len(carry):
        raise RuntimeError(
            "Expected init and carry to have same number of outputs but got "
            f"lhs:{init} and rhs:{carry}"
        )
    diffs = []
    for i, (a, b) in enumerate(zip(init, carry)):
        if not isinstance(b, Tensor):
            diffs.append(f"pair[{i}] differ in type: {a} vs {b}")
            continue
        for what, u, v in (("shape", a.shape, b.shape), ("dtype", a.dtype, b.dtype)):
            if u != v:
                diffs.append(f"pair[{i}] differ in '{what}: {u} vs {v}'")
    if diffs:
        raise RuntimeError(
            "Expected init and carry to have same metadata but found:\n" + "\n".join(diffs)
        )
