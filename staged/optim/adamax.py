"""Adamax, following PyTorch's single-tensor implementation."""

from __future__ import annotations

from ..eager.factories import zeros_like
from .optimizer import Optimizer, advance, check_args, decayed_grad, ema_, new_step


class Adamax(Optimizer):
    """Adam with the infinity norm: ``exp_inf = max(beta2 * exp_inf, |grad| + eps)``.
    ``foreach``, ``capturable`` and ``differentiable``: Note [implementation flags] in
    ``optimizer.py``."""

    complex_as_real = True  # Note [complex parameters] in optimizer.py

    def __init__(
        self,
        params,
        lr=2e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        foreach=None,
        *,
        maximize=False,
        differentiable=False,
        capturable=False,
    ):
        check_args(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=betas,
                eps=eps,
                weight_decay=weight_decay,
                foreach=foreach,
                maximize=maximize,
                differentiable=differentiable,
                capturable=capturable,
            ),
        )

    def _update(self, p, grad, state, h):
        if not state:
            state["step"] = new_step()
            state["exp_avg"] = zeros_like(p)
            state["exp_inf"] = zeros_like(p)
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        step = advance(state, p.dtype, h)
        grad = decayed_grad(p, grad, h)
        ema_(exp_avg, grad, h, "beta1")
        exp_inf.copy_((exp_inf * h.number("beta2")).maximum(grad.abs() + h.number("eps")))
        clr = h.number("lr") / h.one_minus_power("beta1", step)
        p.addcdiv_(exp_avg, exp_inf, value=-clr)
