"""Adagrad, following PyTorch's single-tensor implementation."""

from __future__ import annotations

from ..eager.factories import full_like
from .optimizer import Optimizer, advance, check_args, decayed_grad, new_step, real_parts


class Adagrad(Optimizer):
    """Divide by the root of the summed squared gradients. As in torch, every parameter's
    state (``sum`` starts at ``initial_accumulator_value``) is made by the constructor.
    ``foreach``, ``fused`` and ``differentiable``: Note [implementation flags] in
    ``optimizer.py``."""

    complex_as_real = True  # Note [complex parameters] in optimizer.py
    _takes_sparse = True  # Note [sparse gradients] in staged/sparse.py

    def __init__(
        self,
        params,
        lr=1e-2,
        lr_decay=0,
        weight_decay=0,
        initial_accumulator_value=0,
        eps=1e-10,
        foreach=None,
        *,
        maximize=False,
        differentiable=False,
        fused=None,
    ):
        check_args(
            lr=lr,
            lr_decay=lr_decay,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            eps=eps,
        )
        super().__init__(
            params,
            dict(
                lr=lr,
                lr_decay=lr_decay,
                eps=eps,
                weight_decay=weight_decay,
                initial_accumulator_value=initial_accumulator_value,
                foreach=foreach,
                maximize=maximize,
                differentiable=differentiable,
                fused=fused,
            ),
        )
        for group in self.param_groups:
            for p in group["params"]:
                p_, _, state = real_parts(p, None, self.state.setdefault(p, {}))
                self._init_state(p_, state, group)

    def _init_state(self, p, state, group):
        """torch takes the accumulator's start from the defaults, not the group."""
        state["step"] = new_step(group["fused"])
        state["sum"] = full_like(p, self.defaults["initial_accumulator_value"])

    def _update(self, p, grad, state, h):
        if not state:  # a parameter of a group added later
            self._init_state(p, state, h.group)
        step = advance(state, p.dtype, h)
        grad = decayed_grad(p, grad, h)
        clr = h.number("lr") / (1 + (step - 1) * h.number("lr_decay"))
        state["sum"].addcmul_(grad, grad, value=1)
        p.addcdiv_(grad, state["sum"].sqrt() + h.number("eps"), value=-clr)
