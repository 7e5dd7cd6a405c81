"""Adam and AdamW, following PyTorch's single-tensor implementation."""

from __future__ import annotations

from ..eager.factories import zeros_like
from ..eager.grad_mode import is_grad_enabled
from ..eager.tensor import Tensor
from .optimizer import (
    Optimizer,
    advance,
    check_args,
    decayed_grad,
    ema_,
    ema_sq_,
    new_step,
    saved_copy,
    sqrt,
)

_TENSOR_LR = "lr as a Tensor is not supported for capturable=False and foreach=True"


class Adam(Optimizer):
    """Adam; ``step`` is a tensor so that a compiled step stays valid call after call.
    ``decoupled_weight_decay`` makes it AdamW. ``foreach``, ``capturable``, ``fused`` and
    ``differentiable``: Note [implementation flags] in ``optimizer.py``."""

    complex_as_real = True  # Note [complex parameters] in optimizer.py

    def _sparse_refusal(self, group) -> str:
        return "Adam does not support sparse gradients, please consider SparseAdam instead"

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        amsgrad=False,
        *,
        foreach=None,
        maximize=False,
        capturable=False,
        differentiable=False,
        fused=None,
        decoupled_weight_decay=False,
    ):
        if isinstance(lr, Tensor) and foreach and not capturable:
            raise ValueError(_TENSOR_LR)
        check_args(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        if not any(all(isinstance(b, t) for b in betas) for t in (float, Tensor)):
            raise ValueError("betas must be either both floats or both Tensors")
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=betas,
                eps=eps,
                weight_decay=weight_decay,
                amsgrad=amsgrad,
                maximize=maximize,
                foreach=foreach,
                capturable=capturable,
                differentiable=differentiable,
                fused=fused,
                decoupled_weight_decay=decoupled_weight_decay,
            ),
        )

    def _update(self, p, grad, state, h):
        g = h.group
        if g["foreach"] and isinstance(g["lr"], Tensor) and not g["capturable"]:
            raise RuntimeError(_TENSOR_LR)  # set by hand after construction
        if not state:
            state["step"] = new_step(g["fused"])
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
            if h.flag("amsgrad"):
                state["max_exp_avg_sq"] = zeros_like(p)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        step = advance(state, p.dtype.to_real(), h, own=True)
        grad = decayed_grad(p, grad, h, h.flag("decoupled_weight_decay"))
        ema_(exp_avg, grad, h, "beta1")
        ema_sq_(exp_avg_sq, grad, h, "beta2")
        bias_correction1 = h.one_minus_power("beta1", step)
        bias_correction2_sqrt = sqrt(h.one_minus_power("beta2", step))
        if h.flag("amsgrad"):
            max_exp_avg_sq = state["max_exp_avg_sq"]
            max_exp_avg_sq.copy_(saved_copy(max_exp_avg_sq).maximum(exp_avg_sq))
            exp_avg_sq = state["max_exp_avg_sq"]
        if is_grad_enabled() and h.eager:  # torch's differentiable step (``advance``)
            step_size_neg = -(h.number("lr") / bias_correction1)
            denom = exp_avg_sq.sqrt() / (bias_correction2_sqrt * step_size_neg)
            p.add_(exp_avg / (denom + h.number("eps") / step_size_neg))
            return
        denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(h.number("eps"))
        p.addcdiv_(exp_avg, denom, value=-(h.number("lr") / bias_correction1))


class AdamW(Adam):
    """Adam with decoupled weight decay (default 1e-2)."""

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=1e-2,
        amsgrad=False,
        *,
        maximize=False,
        foreach=None,
        capturable=False,
        differentiable=False,
        fused=None,
    ):
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad,
            foreach=foreach,
            maximize=maximize,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=True,
        )
