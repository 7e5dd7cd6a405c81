"""ASGD, following PyTorch's single-tensor implementation."""

from __future__ import annotations

from ..eager.factories import zeros_like
from ..eager.grad_mode import is_grad_enabled
from ..eager.ops._operands import scalar_tensor
from ..eager.ops.elementwise import where
from .optimizer import Optimizer, advance, check_args, decayed_grad, new_step, saved_copy


class ASGD(Optimizer):
    """Averaged SGD: steps of size ``eta = lr / (1 + lambd * lr * t) ** alpha`` with the
    weights shrunk by ``1 - lambd * eta``; ``state["ax"]`` follows the weights until step
    ``t0`` and averages them after it. ``eta`` and ``mu`` (the averaging weight) are 0-d
    tensors of the step's dtype, as torch's. ``foreach``, ``capturable`` and
    ``differentiable``: Note [implementation flags] in ``optimizer.py``."""

    complex_as_real = True  # Note [complex parameters] in optimizer.py
    _scalar_state = ("step", "eta", "mu")

    def __init__(
        self,
        params,
        lr=1e-2,
        lambd=1e-4,
        alpha=0.75,
        t0=1e6,
        weight_decay=0,
        foreach=None,
        maximize=False,
        differentiable=False,
        capturable=False,
    ):
        check_args(lr=lr, weight_decay=weight_decay)
        super().__init__(
            params,
            dict(
                lr=lr,
                lambd=lambd,
                alpha=alpha,
                t0=t0,
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
            state["eta"] = scalar_tensor(h.group["lr"], state["step"].dtype)
            state["mu"] = scalar_tensor(1.0, state["step"].dtype)
            state["ax"] = zeros_like(p)
        eta, mu, ax, real = state["eta"], state["mu"], state["ax"], p.dtype.to_real()
        step = advance(state, real, h)
        grad = decayed_grad(p, grad, h)
        # torch reads it with .item(): eagerly the decay 1 - lambd * eta is a double
        eta_p = eta.item() if h.eager and not is_grad_enabled() else saved_copy(eta).to(real)
        p.mul_(1 - h.number("lambd") * eta_p)
        p.sub_(grad, alpha=eta_p)
        # torch copies the weights while mu is 1: a select keeps the compiled step one graph
        ax.copy_(where(mu == 1, p, ax + (p - ax) * saved_copy(mu).to(real)))
        lambd_lr = h.number("lambd * lr", lambda g: g["lambd"] * g["lr"])
        eta.fill_(h.number("lr") / (1 + lambd_lr * step) ** h.number("alpha"))
        since = step - h.number("t0")  # eagerly torch's Python float (``advance``)
        mu.fill_(1 / (max(since, 1) if type(since) is float else since.clamp(min=1)))
