"""``torch._higher_order_ops.associative_scan``: an inclusive scan by an associative
``combine_fn``, by torch's own algorithm (``generic_associative_scan``: the recursive
odd/even scan, ``combine_fn`` vmapped over each level's pairs), so the combine calls, and
hence the rounding, are torch's. It is built of differentiable staged ops: autograd,
``staged.compile`` (a static length unrolls into ~2 log2(n) levels) and vmap see ordinary
ops. ``combine_mode="pointwise"`` is refused as torch refuses it for CPU tensors (it needs
inductor's CUDA/XPU codegen), and staged's eager tensors are host tensors."""

from __future__ import annotations

from ..autograd.vmap import vmap
from ..eager.ops.layers import pad
from ..eager.ops.shape import cat, stack
from ..eager.tensor import Tensor
from ..utils import _pytree as pytree
from ..autodiff.avals import wrap_dim


def associative_scan(combine_fn, xs, dim: int, reverse: bool = False, combine_mode="pointwise"):
    """Inclusive scan of ``xs`` (a tensor or a pytree of tensors) along ``dim``.

    Args:
        combine_fn: associative ``(pytree, pytree) -> pytree`` of the structure of ``xs``.
        xs: a tensor, or a pytree of tensors of one length along ``dim``.
        dim: the dimension to scan over.
        reverse: scan from the end of ``dim``.
        combine_mode: ``"generic"``; torch's ``"pointwise"`` needs CUDA or XPU tensors.

    Returns:
        The scanned pytree: element ``i`` is ``xs[0] op ... op xs[i]``.

    Example:
        >>> associative_scan(lambda a, b: a + b, staged.arange(4.0), 0, combine_mode="generic")
        tensor([0., 1., 3., 6.])
    """
    leaves, spec = pytree.tree_flatten(xs)
    dim = wrap_dim(dim, leaves[0].ndim)
    _validate(combine_fn, leaves, dim, reverse, combine_mode)
    leaves = [x.movedim(dim, 0) for x in leaves]
    if reverse:
        leaves = [x.flip([0]) for x in leaves]
    out = generic_associative_scan(_flat_combine(combine_fn, spec, len(leaves)), leaves)
    if reverse:
        out = [x.flip([0]) for x in out]
    return pytree.tree_unflatten([x.movedim(0, dim) for x in out], spec)


def _validate(combine_fn, leaves, dim, reverse, combine_mode):
    """torch's checks, in its order, with its error types and messages."""
    if not callable(combine_fn):
        raise ValueError(f"Combine_fn must be a callable, but got {combine_fn}")
    if not isinstance(dim, int):
        raise ValueError("Dim must be an int, but got " + str(type(dim)))
    if not isinstance(reverse, bool):
        raise RuntimeError("Reverse must be a bool, but got " + str(type(reverse)))
    if combine_mode not in ("pointwise", "generic"):
        raise ValueError(
            f"Combine_mode must either 'pointwise' or 'generic', but got {combine_mode}"
        )
    if combine_mode == "pointwise" and not all(x.device.type in ("cuda", "xpu") for x in leaves):
        raise ValueError(
            "For combine_mode='pointwise', all input tensors need to be on CUDA or XPU"
        )
    if not all(isinstance(x, Tensor) for x in leaves):
        raise ValueError("xs leaves must be a Tensor")
    if any(x.is_sparse for x in leaves):
        raise ValueError("xs leaves must dense Tensors, consider using `to_dense()`")
    if any(x.ndim <= dim or x.shape[dim] == 0 for x in leaves):
        raise ValueError(
            "All xs leaves must at least have 'dim' number of dimensions and scan dimension > 0"
        )


def _flat_combine(combine_fn, spec, num_leaves):
    """``combine_fn`` on flat leaves (the left operand's, then the right's), vmapped over
    their dim 0, returning its output's leaves: torch's ``wrap_combine_fn_flat`` over
    ``vmap(combine_fn)``. The vmapped function takes and returns flat leaves, so any pytree
    torch's vmap accepts is accepted here."""

    def on_leaves(*args):
        lhs = pytree.tree_unflatten(args[:num_leaves], spec)
        rhs = pytree.tree_unflatten(args[num_leaves:], spec)
        return pytree.tree_leaves(combine_fn(lhs, rhs))

    mapped = vmap(on_leaves)

    def call(*args):
        if len(args) != 2 * num_leaves:
            raise AssertionError(
                f"Combine_fn received wrong number of arguments, expected {2 * num_leaves}, "
                f"but got {len(args)}"
            )
        return mapped(*args)

    return call


def generic_associative_scan(operator, leaves):
    """torch's ``generic_associative_scan`` along dim 0: ``operator`` combines the
    neighbouring pairs, the half-length result is scanned recursively, and its prefixes
    combined with the remaining even elements; the two halves are interleaved."""
    n = leaves[0].shape[0]
    if n < 2:
        return leaves
    odd = _scan_leaves(operator, [x[0:-1:2] for x in leaves], [x[1::2] for x in leaves])
    odd = generic_associative_scan(operator, odd)
    evens = [x[2::2] for x in leaves]
    even = _scan_leaves(operator, [x[0:-1] for x in odd] if n % 2 == 0 else odd, evens)
    # element 0 of a scan is the input's; torch keeps an empty result out of the cat
    even = [
        (cat([x[0:1], r]) if x.shape[0] > 0 else r) if r.numel() > 0 else x[0:1]
        for x, r in zip(leaves, even)
    ]
    return [_interleave(e, o) for e, o in zip(even, odd)]


def _scan_leaves(operator, lhs, rhs):
    return pytree.tree_leaves(operator(*lhs, *rhs))


def _interleave(a, b):
    """``a[0], b[0], a[1], b[1], ...`` along dim 0, ``a`` as long as ``b`` or one longer:
    torch's ``_interleave`` (``b`` padded by one, stacked, flattened and cut)."""
    if a.shape[0] != b.shape[0] + 1:
        return stack([a, b], dim=1).flatten(0, 1)
    b = pad(b, [0] * (2 * b.ndim - 1) + [1])
    return stack([a, b], dim=1).flatten(0, 1)[: 2 * a.shape[0] - 1]
