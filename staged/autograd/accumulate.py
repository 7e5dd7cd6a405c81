"""Gradient accumulation into a leaf's ``.grad`` (PyTorch's gradient layout rules)."""

from __future__ import annotations

import numpy as np

from ..autodiff import lax
from ..eager.factories import empty_like
from ..eager.grad_mode import _state
from ..eager.interceptor import call_hook
from ..eager.ops.inplace import copy_
from ..eager.ops.shape import row_major
from ..eager.tensor import Tensor


def add_grads(a, b):
    """The sum of two gradients of one tensor: the strict ``add`` primitive when they agree
    in dtype and shape, as every rule's gradients do; the public ``+`` (promotion,
    broadcasting) only for what a user's hook returned otherwise. A sparse gradient (Note
    [sparse gradients] in staged/sparse.py) added to a sparse one stays sparse, to a dense
    one is dense."""
    try:
        pa, pb = a._payload, b._payload
    except AttributeError:  # a sparse one, which has no payload
        return a + b if b.is_sparse else b + a
    if pa.dtype == pb.dtype and pa.shape == pb.shape:
        return lax.add(a, b)
    return a + b


def accumulate_grad(var, g, owned=False) -> None:
    """``.grad`` is set to ``g`` the first time; later gradients are added in place, or
    out of place (a new tensor with a graph) when backward runs with create_graph=True.
    A first gradient that is not ``owned`` (nothing else holds it), or any first one under
    create_graph=True, is copied: it will be accumulated into in place."""
    if g is None:
        return
    old = var._grad
    if (
        type(g) is not Tensor
        and g.is_sparse
        or type(old) is not Tensor
        and old is not None
        and old.is_sparse
    ):
        var._grad = _with_sparse(old, g)
    elif old is None:
        if not _state.grad_enabled:
            p = g._payload
            if type(p) is np.ndarray and (not owned or p.base is not None or not p.flags.writeable):
                g = Tensor._wrap(p.copy(), False)
            elif getattr(p, "order", None):  # traced, laid out as eager's view: row-major,
                g = Tensor._wrap(row_major(g)._payload, False)  # as the copy above
            elif not owned or g._requires_grad or g._vc is None or g._base is not None or g._hooks:
                g = Tensor._wrap(p, False)  # a tensor of its own, without autograd metadata
        else:
            # create_graph: a copy with a graph (torch's clone_obey_contract, a CopyBackwards
            # Node), not ``g`` itself, which hooks saw and a later backward would add into
            g = copy_(empty_like(g), g)
        var._grad = g
    elif _state.grad_enabled:
        var._grad = add_grads(var._grad, g)
    else:
        var._grad.add_(g)
    if var._post_acc_hooks:
        for hook in tuple(var._post_acc_hooks.values()):
            if call_hook(hook, var) is not None:
                raise RuntimeError("Tensor post accumulate grad hooks should return None.")


def _with_sparse(old, g):
    """``.grad`` after ``g`` arrived where one of them is sparse (Note [sparse gradients] in
    staged/sparse.py): as torch's, a dense ``.grad`` is added to in place (outside
    create_graph), anything else gives a new tensor."""
    if old is None:
        return g.clone() if _state.grad_enabled else g.detach()
    if not old.is_sparse and not _state.grad_enabled:
        return old.add_(g.to_dense())
    return add_grads(old, g)
