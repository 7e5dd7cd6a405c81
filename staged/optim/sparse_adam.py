"""SparseAdam: Adam on the rows of sparse gradients, with torch's checks and errors."""

from __future__ import annotations

import math

from ..autodiff.avals import EagerOnlyError
from ..eager.factories import zeros_like
from ..eager.interceptor import current_interceptor
from ..eager.tensor import Tensor
from .optimizer import Optimizer, check_args, check_tensor_lr


class SparseAdam(Optimizer):
    """Adam for sparse gradients (``nn.Embedding(sparse=True)``): the moments and the
    parameter change only in the rows the gradient has (its entries summed per row), as
    torch's. A dense gradient raises torch's error, before any parameter changed (Note
    [sparse gradients] in staged/sparse.py)."""

    _scalar_state = ()  # torch's keeps its step a Python number

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        check_tensor_lr(lr)
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        check_args(betas=betas)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))
        sparse, complex_ = [], []
        for i, group in enumerate(self.param_groups):
            for j, p in enumerate(group["params"]):
                if p.is_sparse:
                    sparse.append([i, j])
                if p.is_complex():
                    complex_.append([i, j])
        if sparse:
            raise ValueError(
                f"Sparse params at indices {sparse}: SparseAdam requires dense parameter tensors"
            )
        if complex_:
            raise ValueError(
                f"Complex params at indices {complex_}: SparseAdam does not support complex "
                "parameters"
            )

    _sparse_updates = True  # _update gets the sparse gradients themselves
    _takes_sparse = True

    def _check_sparse_grads(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is not None and not g.is_sparse:
                    message = (
                        "SparseAdam does not support dense gradients, please consider Adam instead"
                    )
                    if current_interceptor() is None:
                        raise RuntimeError(message)
                    raise EagerOnlyError(  # which fallback="eager" runs eagerly
                        f"{message} (under staged.compile gradients are dense: run a step "
                        "with sparse ones eagerly, or compile with fallback='eager')"
                    )

    def _update(self, p, grad, state, h):
        """torch's update, on the gradient's rows ``rows`` (distinct): the moments moved
        toward the gradient there, the parameter by their bias-corrected ratio."""
        grad = grad.coalesce()
        rows, g = Tensor._wrap(grad._idx[0]), grad._values()
        if h.flag("maximize"):
            g = -g
        if not state:
            state["step"] = 0
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
        state["step"] += 1
        beta1, beta2 = h.group["betas"]
        m, v = state["exp_avg"], state["exp_avg_sq"]
        old_m, old_v = m.index_select(0, rows), v.index_select(0, rows)
        m_step = (g - old_m) * (1 - beta1)
        v_step = (g * g - old_v) * (1 - beta2)
        m.index_add_(0, rows, m_step)
        v.index_add_(0, rows, v_step)
        step = state["step"]
        step_size = h.group["lr"] * math.sqrt(1 - beta2**step) / (1 - beta1**step)
        denom = (v_step + old_v).sqrt() + h.group["eps"]
        p.index_add_(0, rows, (m_step + old_m) / denom * -step_size)
