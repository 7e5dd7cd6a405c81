"""RMSprop, following PyTorch's single-tensor implementation."""

from __future__ import annotations

from ..eager.factories import zeros_like
from .optimizer import Optimizer, advance, check_args, decayed_grad, ema_, ema_sq_, new_step


class RMSprop(Optimizer):
    """Divide the gradient by a running RMS of it (centered: its running variance).
    ``capturable``, ``foreach`` and ``differentiable``: Note [implementation flags] in
    ``optimizer.py``."""

    complex_as_real = True  # Note [complex parameters] in optimizer.py

    def __init__(
        self,
        params,
        lr=1e-2,
        alpha=0.99,
        eps=1e-8,
        weight_decay=0,
        momentum=0,
        centered=False,
        capturable=False,
        foreach=None,
        maximize=False,
        differentiable=False,
    ):
        check_args(lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        super().__init__(
            params,
            dict(
                lr=lr,
                momentum=momentum,
                alpha=alpha,
                eps=eps,
                centered=centered,
                weight_decay=weight_decay,
                capturable=capturable,
                foreach=foreach,
                maximize=maximize,
                differentiable=differentiable,
            ),
        )

    def _update(self, p, grad, state, h):
        if not state:
            state["step"] = new_step()
            state["square_avg"] = zeros_like(p)
        momentum, centered = h.flag("momentum"), h.flag("centered")
        if momentum and "momentum_buffer" not in state:
            state["momentum_buffer"] = zeros_like(p)
        if centered and "grad_avg" not in state:
            state["grad_avg"] = zeros_like(p)
        advance(state, p.dtype)
        grad = decayed_grad(p, grad, h)
        square_avg = state["square_avg"]
        ema_sq_(square_avg, grad, h, "alpha")
        if centered:
            grad_avg = state["grad_avg"]
            ema_(grad_avg, grad, h, "alpha")
            avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt()
        else:
            avg = square_avg.sqrt()
        avg = avg + h.number("eps")
        if momentum:
            buf = state["momentum_buffer"]
            buf.mul_(h.number("momentum")).addcdiv_(grad, avg)
            p.add_(buf, alpha=h.number("-lr"))
        else:
            p.addcdiv_(grad, avg, value=h.number("-lr"))
