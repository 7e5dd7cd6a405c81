"""Adafactor, following PyTorch's single-tensor implementation."""

from __future__ import annotations

import math

from ..dtypes import finfo
from ..eager.factories import zeros, zeros_like
from .optimizer import Optimizer, advance, check_tensor_lr, decayed_grad, lerp_, new_step


class Adafactor(Optimizer):
    """Adam without first moment and with a factored second one: for a gradient of 2 or
    more dims, running means of its squares along the last dim (``row_var``) and the one
    before (``col_var``) stand in for the full ``variance``, whose decay ``1 - beta2`` is
    ``step ** beta2_decay``. Steps are relative: ``min(lr, 1 / sqrt(step))`` times the
    parameter's RMS (at least ``eps[1]``), the update clipped to RMS ``d``; ``eps[0]``
    (None: the dtype's eps) bounds the variance below. ``foreach``: Note [implementation
    flags] in ``optimizer.py``."""

    def __init__(
        self,
        params,
        lr=1e-2,
        beta2_decay=-0.8,
        eps=(None, 1e-3),
        d=1.0,
        weight_decay=0.0,
        *,
        foreach=None,
        maximize=False,
    ):
        check_tensor_lr(lr)
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        super().__init__(
            params,
            dict(
                lr=lr,
                beta2_decay=beta2_decay,
                eps=eps,
                d=d,
                weight_decay=weight_decay,
                foreach=foreach,
                maximize=maximize,
            ),
        )

    def _update(self, p, grad, state, h):
        if p.is_complex():
            raise RuntimeError("Adafactor does not support complex parameters")
        factored = grad.ndim > 1
        if not state:
            state["step"] = new_step()
            if factored:
                shape = tuple(grad.shape)
                state["row_var"] = zeros(shape[:-1] + (1,), dtype=grad.dtype)
                state["col_var"] = zeros(shape[:-2] + (1, shape[-1]), dtype=grad.dtype)
            else:
                state["variance"] = zeros_like(grad)
        tiny = finfo(p.dtype).eps

        def eps1(g):
            return tiny if g["eps"][0] is None else g["eps"][0]

        step = advance(state, p.dtype)
        lr, weight = h.number("lr"), step ** h.number("beta2_decay")  # 1 - beta2 at this step
        rho = (1 / step.sqrt()).clamp(max=lr)
        # the parameter's RMS before the weight decay, as torch's
        alpha = (p.norm() / math.sqrt(p.numel())).clamp(min=h.number("eps2"))
        grad = decayed_grad(p, grad, h, decoupled=True)
        if factored:  # each running mean moves towards the new one by ``weight``
            row_var, col_var = state["row_var"], state["col_var"]
            lerp_(row_var, grad.norm(dim=-1, keepdim=True).square() / grad.shape[-1], weight)
            lerp_(col_var, grad.norm(dim=-2, keepdim=True).square() / grad.shape[-2], weight)
            floor = row_var.mean(dim=-2, keepdim=True).clamp(min=h.number("eps1", eps1))
            var_estimate = row_var @ col_var / floor
        else:
            var_estimate = state["variance"]
            lerp_(var_estimate, grad * grad, weight)
        eps1_sq = h.number("eps1 ** 2", lambda g: eps1(g) ** 2)
        update = var_estimate.clamp(min=eps1_sq).rsqrt() * grad
        denom = (update.norm() / (math.sqrt(update.numel()) * h.number("d"))).clamp(min=1.0)
        p.add_(update * (-alpha * rho / denom))
