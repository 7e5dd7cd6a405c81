"""Stochastic gradient descent with momentum, dampening, weight decay and Nesterov."""

from __future__ import annotations

from ..eager.tensor import Tensor
from .optimizer import Optimizer, check_args, decayed_grad


class SGD(Optimizer):
    """PyTorch's SGD: the momentum buffer starts as the first gradient. ``foreach``,
    ``fused`` and ``differentiable``: Note [implementation flags] in ``optimizer.py``."""

    _takes_sparse = True  # Note [sparse gradients] in staged/sparse.py
    _sparse_decay_refusal = "add(sparse, dense) is not supported. Use add(dense, sparse) instead."

    def __init__(
        self,
        params,
        lr=1e-3,
        momentum=0,
        dampening=0,
        weight_decay=0,
        nesterov=False,
        *,
        maximize=False,
        foreach=None,
        differentiable=False,
        fused=None,
    ):
        check_args(lr=lr, momentum=momentum, weight_decay=weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(
            params,
            dict(
                lr=lr,
                momentum=momentum,
                dampening=dampening,
                weight_decay=weight_decay,
                nesterov=nesterov,
                maximize=maximize,
                foreach=foreach,
                differentiable=differentiable,
                fused=fused,
            ),
        )

    _sparse_updates = True  # _update gets them: without momentum only their rows change

    def _update(self, p, grad, state, h):
        if type(grad) is not Tensor and grad.is_sparse:  # Note [sparse gradients]
            if not h.flag("momentum"):
                rows = grad._values() * h.number("lr" if h.flag("maximize") else "-lr")
                p.index_add_(0, Tensor._wrap(grad._idx[0]), rows)
                return
            grad = grad.to_dense()
        d_p = decayed_grad(p, grad, h)
        if h.flag("momentum"):
            momentum = h.number("momentum")
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = d_p.clone().detach()
            else:
                buf.mul_(momentum).add_(d_p, alpha=h.one_minus("dampening"))
            d_p = d_p.add(buf, alpha=momentum) if h.flag("nesterov") else buf
        p.add_(d_p, alpha=h.number("-lr"))
