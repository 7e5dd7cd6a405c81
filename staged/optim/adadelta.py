"""Adadelta, following PyTorch's single-tensor implementation."""

from __future__ import annotations

from ..eager.factories import zeros_like
from .optimizer import Optimizer, advance, check_args, decayed_grad, ema_sq_, new_step


class Adadelta(Optimizer):
    """Scale each step by the ratio of running RMS of updates and of gradients.
    ``foreach``, ``capturable`` and ``differentiable``: Note [implementation flags] in
    ``optimizer.py``."""

    complex_as_real = True  # Note [complex parameters] in optimizer.py

    def __init__(
        self,
        params,
        lr=1.0,
        rho=0.9,
        eps=1e-6,
        weight_decay=0,
        foreach=None,
        *,
        capturable=False,
        maximize=False,
        differentiable=False,
    ):
        check_args(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)
        super().__init__(
            params,
            dict(
                lr=lr,
                rho=rho,
                eps=eps,
                weight_decay=weight_decay,
                maximize=maximize,
                capturable=capturable,
                foreach=foreach,
                differentiable=differentiable,
            ),
        )

    def _update(self, p, grad, state, h):
        if not state:
            state["step"] = new_step()
            state["square_avg"] = zeros_like(p)
            state["acc_delta"] = zeros_like(p)
        advance(state, p.dtype)
        grad = decayed_grad(p, grad, h)
        square_avg, acc_delta, eps = state["square_avg"], state["acc_delta"], h.number("eps")
        ema_sq_(square_avg, grad, h, "rho")
        delta = (acc_delta + eps).sqrt() / (square_avg + eps).sqrt() * grad
        ema_sq_(acc_delta, delta, h, "rho")
        p.add_(delta, alpha=h.number("-lr"))
