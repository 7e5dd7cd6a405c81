"""Adam and AdamW, following PyTorch's single-tensor implementation."""
from __future__ import annotations

from ..dtypes import get_default_dtype
from ..eager.factories import zeros_like
from ..eager.ops._operands import scalar_tensor
from .optimizer import Optimizer


class Adam(Optimizer):
    """Adam; ``step`` is a tensor so that a compiled step stays valid call after call."""

    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 amsgrad=False, maximize=False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= betas[0] < 1.0 or not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameters: {betas}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize))

    def _update(self, p, grad, state, h):
        beta1 = h.number("beta1", lambda g: g["betas"][0])
        beta2 = h.number("beta2", lambda g: g["betas"][1])
        if h.flag("maximize"):
            grad = -grad
        if not state:
            state["step"] = scalar_tensor(0.0, get_default_dtype())  # torch's scalar dtype
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
            if h.flag("amsgrad"):
                state["max_exp_avg_sq"] = zeros_like(p)
        step_t, exp_avg, exp_avg_sq = state["step"], state["exp_avg"], state["exp_avg_sq"]
        step_t.add_(1)
        if h.flag("weight_decay"):
            if self._decoupled:
                p.mul_(h.number("1 - lr * weight_decay",
                                lambda g: 1 - g["lr"] * g["weight_decay"]))
            else:
                grad = grad + p * h.number("weight_decay")
        exp_avg.add_((grad - exp_avg) * h.number("1 - beta1", lambda g: 1 - g["betas"][0]))
        exp_avg_sq.mul_(beta2).add_(grad * grad.conj() *
                                    h.number("1 - beta2", lambda g: 1 - g["betas"][1]))
        step = step_t.to(p.dtype.to_real())  # torch computes these in double precision
        bias_correction1 = 1 - beta1 ** step
        bias_correction2_sqrt = (1 - beta2 ** step).sqrt()
        if h.flag("amsgrad"):
            state["max_exp_avg_sq"].copy_(state["max_exp_avg_sq"].maximum(exp_avg_sq))
            exp_avg_sq = state["max_exp_avg_sq"]
        denom = exp_avg_sq.sqrt() / bias_correction2_sqrt + h.number("eps")
        p.sub_(exp_avg / denom * (h.number("lr") / bias_correction1))


class AdamW(Adam):
    """Adam with decoupled weight decay (default 1e-2)."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize)
