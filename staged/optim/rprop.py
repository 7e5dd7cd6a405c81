"""Rprop, following PyTorch's single-tensor implementation."""

from __future__ import annotations

from ..eager.factories import full_like, zeros_like
from ..eager.ops.elementwise import where
from .optimizer import Optimizer, advance, check_args, new_step


class Rprop(Optimizer):
    """Resilient backpropagation: each weight moves by its own step size against the sign
    of its gradient; the step size grows by ``etaplus`` while the sign holds and shrinks by
    ``etaminus`` when it flips (then that gradient counts as 0), within ``step_sizes``.
    ``foreach``, ``capturable`` and ``differentiable``: Note [implementation flags] in
    ``optimizer.py``."""

    complex_as_real = True  # Note [complex parameters] in optimizer.py

    def __init__(
        self,
        params,
        lr=1e-2,
        etas=(0.5, 1.2),
        step_sizes=(1e-6, 50),
        *,
        capturable=False,
        foreach=None,
        maximize=False,
        differentiable=False,
    ):
        check_args(lr=lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(
            params,
            dict(
                lr=lr,
                etas=etas,
                step_sizes=step_sizes,
                foreach=foreach,
                maximize=maximize,
                differentiable=differentiable,
                capturable=capturable,
            ),
        )

    def _update(self, p, grad, state, h):
        if not state:
            state["step"] = new_step()
            state["prev"] = zeros_like(p)
            state["step_size"] = full_like(grad, h.group["lr"])
        advance(state, p.dtype)
        if h.flag("maximize"):
            grad = -grad
        prev, step_size, etaminus = state["prev"], state["step_size"], h.number("etaminus")
        # torch's masked writes, in its order: sign(grad * prev) becomes the step size factor
        factor = (grad * prev).sign().detach()  # piecewise constant: no gradient to record
        factor = where(factor > 0, h.number("etaplus"), factor)
        factor = where(factor < 0, etaminus, factor)
        factor = where(factor == 0, 1.0, factor)
        step_size.copy_(
            (step_size * factor).clamp(h.number("step_size_min"), h.number("step_size_max"))
        )
        grad = where(factor == etaminus, 0.0, grad)
        p.sub_(grad.sign() * step_size)
        prev.copy_(grad)
