"""SparseAdam: torch's constructor, checks and errors."""

from __future__ import annotations

from .optimizer import Optimizer, check_args, check_tensor_lr


class SparseAdam(Optimizer):
    """Adam for sparse gradients (``nn.Embedding(sparse=True)``), updating only the rows
    that have one. A dense parameter's gradient is always dense here (``nn.Embedding`` and
    ``F.embedding`` reject ``sparse=True``, and ``.grad`` takes no sparse tensor), so as in
    torch, whose SparseAdam takes no dense gradients, a step with a gradient raises, and
    ``Adam`` is the optimizer to use."""

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

    def _update(self, p, grad, state, h):
        raise RuntimeError(
            "SparseAdam does not support dense gradients, please consider Adam instead"
        )
