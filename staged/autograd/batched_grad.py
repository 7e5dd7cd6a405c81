"""``autograd.grad(..., is_grads_batched=True)``: one backward pass on a batch of
cotangents, the engine run under ``vmap`` over the first dim of each grad_output (as
torch runs it under its vmap), so each VJP binds its primitives once on the batch."""

from __future__ import annotations

from ..eager.tensor import Size, Tensor
from .vmap import vmap


def check_batched(outputs, grad_outputs, make_grads, shape_of) -> list:
    """``grad_outputs`` with a batch dim checked against ``outputs`` (torch's errors;
    ``make_grads``: the engine's, which says what a grad_output should be; ``shape_of``:
    an output's shape, also of a GradientEdge)."""
    grads = list(grad_outputs or (None,) * len(outputs))
    for i, (t, g) in enumerate(zip(outputs, grads)):
        if g is None:  # torch makes it ones_like(t), 0-dim, which its vmap refuses
            make_grads((t,), None)
            raise ValueError(
                "vmap(vjp, in_dims=0, ...)(<inputs>): Got in_dim=0 for some input, but "
                "that input is a Tensor of dimensionality 0 so expected in_dim to "
                "satisfy 0 <= in_dim < 0."
            )
        if not isinstance(g, Tensor):
            continue  # _make_grads says what it should be
        if g.ndim == 0:
            raise IndexError(
                "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number"
            )
        if tuple(g[0].shape) != shape_of(t):  # g[0]: torch's error for an empty batch
            if not isinstance(t, Tensor):
                raise RuntimeError("Batched grads are not supported with GradientEdge")
            # the shape shown is torch's: the first entry's shape less its first dim
            raise RuntimeError(
                "If `is_grads_batched=True`, we interpret the first dimension of each "
                "grad_output as the batch dimension. The sizes of the remaining "
                "dimensions are expected to match the shape of corresponding output, "
                f"but a mismatch was detected: grad_output[{i}] has a shape of "
                f"{Size(g.shape[2:])} and output[{i}] has a shape of {t.shape}. If you only "
                "want some tensors in `grad_output` to be considered batched, consider "
                "using vmap."
            )
    return grads


def run_batched(vjp, grads, n_inputs: int) -> list:
    """``vjp(grad_outputs)`` (the engine's result per input, None where unused) run on
    each grad_output's batch along dim 0, batched (None where unused)."""
    unused: list[int] = []

    def used_only(*g_outs):
        result = vjp(g_outs)
        unused[:] = [i for i, g in enumerate(result) if g is None]
        return tuple(g for g in result if g is not None)

    used = iter(vmap(used_only)(*grads))
    return [None if i in unused else next(used) for i in range(n_inputs)]
