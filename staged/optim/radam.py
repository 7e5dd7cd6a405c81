"""RAdam, following PyTorch's single-tensor implementation."""

from __future__ import annotations

from ..eager.factories import zeros_like
from ..eager.ops.elementwise import where
from .optimizer import (
    Optimizer,
    advance,
    check_args,
    decayed_grad,
    ema_,
    ema_sq_,
    new_step,
    sqrt,
)


class RAdam(Optimizer):
    """Adam with the variance of its adaptive rate rectified: plain momentum SGD while the
    approximated SMA length ``rho_t`` is at most 5; ``decoupled_weight_decay`` as AdamW.
    ``foreach``, ``capturable`` and ``differentiable``: Note [implementation flags] in
    ``optimizer.py``."""

    complex_as_real = True  # Note [complex parameters] in optimizer.py

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        decoupled_weight_decay=False,
        *,
        foreach=None,
        maximize=False,
        capturable=False,
        differentiable=False,
    ):
        check_args(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=betas,
                eps=eps,
                weight_decay=weight_decay,
                maximize=maximize,
                foreach=foreach,
                capturable=capturable,
                decoupled_weight_decay=decoupled_weight_decay,
                differentiable=differentiable,
            ),
        )

    def _update(self, p, grad, state, h):
        if not state:
            state["step"] = new_step()
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        step = advance(state, p.dtype, h)
        grad = decayed_grad(p, grad, h, h.flag("decoupled_weight_decay"))
        ema_(exp_avg, grad, h, "beta1")
        ema_sq_(exp_avg_sq, grad, h, "beta2")
        beta2_t = h.number("beta2") ** step
        bias_correction1 = h.one_minus_power("beta1", step)
        bias_correction2 = h.one_minus_power("beta2", step)
        rho_inf = h.number("rho_inf", lambda g: 2 / (1 - g["betas"][1]) - 1)
        rho_t = rho_inf - 2 * step * beta2_t / bias_correction2
        momentum = exp_avg / bias_correction1 * h.number("lr")

        def rect():
            return (
                (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
            ) ** 0.5

        def rectified(rect):
            # torch's order: (momentum * adaptive_lr) * rect; a number over a tensor is its
            # reciprocal times the number eagerly, as torch's __rtruediv__
            adaptive_lr = sqrt(bias_correction2) / (exp_avg_sq.sqrt() + h.number("eps"))
            return momentum * adaptive_lr * rect

        if type(rho_t) is float:  # eagerly (``advance``): torch's branch in Python, so rect
            # is computed only where rho_t > 5 (a beta2 of 0.6 makes its divisor 0)
            p.sub_(rectified(rect()) if rho_t > 5.0 else momentum)
            return
        # a select keeps the compiled step one graph (and zeroes rect where not taken: no
        # NaN in a differentiable step's gradient)
        taken = rho_t > 5.0
        p.sub_(where(taken, rectified(where(taken, rect(), 0.0)), momentum))
