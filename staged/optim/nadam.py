"""NAdam, following PyTorch's single-tensor implementation."""

from __future__ import annotations

from ..eager.factories import zeros_like
from ..eager.ops._operands import scalar_tensor
from .optimizer import Optimizer, advance, check_args, decayed_grad, ema_, ema_sq_, new_step


class NAdam(Optimizer):
    """Adam with Nesterov momentum and a momentum schedule (``momentum_decay``);
    ``decoupled_weight_decay`` makes it NAdamW. ``foreach``, ``capturable`` and
    ``differentiable``: Note [implementation flags] in ``optimizer.py``."""

    complex_as_real = True  # Note [complex parameters] in optimizer.py
    _scalar_state = ("step", "mu_product")

    def __init__(
        self,
        params,
        lr=2e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        momentum_decay=4e-3,
        decoupled_weight_decay=False,
        *,
        foreach=None,
        maximize=False,
        capturable=False,
        differentiable=False,
    ):
        check_args(
            lr=lr, eps=eps, betas=betas, weight_decay=weight_decay, momentum_decay=momentum_decay
        )
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=betas,
                eps=eps,
                weight_decay=weight_decay,
                momentum_decay=momentum_decay,
                decoupled_weight_decay=decoupled_weight_decay,
                maximize=maximize,
                foreach=foreach,
                capturable=capturable,
                differentiable=differentiable,
            ),
        )

    def _update(self, p, grad, state, h):
        if not state:
            state["step"] = new_step()
            state["mu_product"] = scalar_tensor(1.0, state["step"].dtype)  # as torch's
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
        exp_avg, exp_avg_sq, mu_product = (
            state["exp_avg"],
            state["exp_avg_sq"],
            state["mu_product"],
        )
        step = advance(state, p.dtype, h)
        beta1, lr = h.number("beta1"), h.number("lr")
        bias_correction2 = h.one_minus_power("beta2", step)
        grad = decayed_grad(p, grad, h, h.flag("decoupled_weight_decay"))
        momentum_decay = h.number("momentum_decay")
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * momentum_decay))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * momentum_decay))
        eager = type(step) is float  # torch's Python floats (``advance``)
        mu_product.mul_(mu if eager else mu.to(mu_product.dtype))  # rounded first, as torch's
        ema_(exp_avg, grad, h, "beta1")
        ema_sq_(exp_avg_sq, grad, h, "beta2")
        denom = (exp_avg_sq / bias_correction2).sqrt() + h.number("eps")
        product = mu_product.item() if eager else mu_product.to(step.dtype)
        p.addcdiv_(grad, denom, value=-lr * (1.0 - mu) / (1.0 - product))
        p.addcdiv_(exp_avg, denom, value=(-lr * mu_next) / (1.0 - product * mu_next))
