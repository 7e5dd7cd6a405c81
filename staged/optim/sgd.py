"""Stochastic gradient descent with momentum, dampening, weight decay and Nesterov."""
from __future__ import annotations

from .optimizer import Optimizer


class SGD(Optimizer):
    """PyTorch's SGD: the momentum buffer starts as the first gradient."""

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, maximize=False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize))

    def _update(self, p, grad, state, h):
        d_p = -grad if h.flag("maximize") else grad
        if h.flag("weight_decay"):
            d_p = d_p + p * h.number("weight_decay")
        if h.flag("momentum"):
            momentum = h.number("momentum")
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = d_p.clone().detach()
            else:
                buf.mul_(momentum).add_(d_p * h.number("1 - dampening",
                                                       lambda g: 1 - g["dampening"]))
            d_p = d_p + buf * momentum if h.flag("nesterov") else buf
        p.add_(d_p * h.number("-lr", lambda g: -g["lr"]))
