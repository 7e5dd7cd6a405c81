"""torch's structured control flow, ``cond`` and ``while_loop``, as the Python ``if`` and
``while`` they stand for (torch's eager semantics). Under ``staged.compile`` a predicate
known at the trace (a Python bool, ``x.shape[0] > 4``, a tensor of constants: Note
[constant data] in tracing/capture.py) picks its branch there; one computed from the
step's data raises the trace's ``CaptureError``, as a Python ``if`` on it does (a graph has
no branches: computing both and selecting would leak the other branch's NaN gradients)."""

from __future__ import annotations

from .tensor import Tensor


def cond(pred, true_fn, false_fn, operands=()):
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``; ``pred`` a bool, a
    number or a one-element tensor."""
    if isinstance(pred, Tensor):
        if pred.numel() != 1:
            raise RuntimeError(
                f"Expected pred to be bool or single-element tensor, but got {pred}."
            )
    elif not isinstance(pred, (bool, int, float)):
        raise RuntimeError(f"Expected pred to be bool or tensor, but got {pred}.")
    if not isinstance(operands, (tuple, list)):
        raise TypeError(
            f"cond: operands must be a tuple or list of the branches' arguments, got "
            f"{type(operands).__name__} (pass (x,) for one tensor)"
        )
    if not all(isinstance(t, Tensor) for t in _leaves(operands)):
        raise RuntimeError(
            "Expect operands to be a tuple of possibly nested dict/list/tuple that only "
            f"consists of tensor leaves, but got {tuple(operands)}."
        )
    return (true_fn if bool(pred) else false_fn)(*operands)


def _leaves(tree):
    if isinstance(tree, dict):
        return [x for v in tree.values() for x in _leaves(v)]
    if isinstance(tree, (tuple, list)):
        return [x for v in tree for x in _leaves(v)]
    return [tree]


def while_loop(cond_fn, body_fn, carried_inputs):
    """Run ``carried = body_fn(*carried)`` while ``cond_fn(*carried)``; the last values,
    as a tuple."""
    if not isinstance(carried_inputs, (tuple, list)):
        raise RuntimeError(
            f"carried_inputs must be a tuple or list, got {type(carried_inputs).__name__}"
        )
    carried = tuple(carried_inputs)
    while bool(cond_fn(*carried)):
        out = body_fn(*carried)
        carried = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        if len(carried) != len(carried_inputs):
            raise RuntimeError(
                f"while_loop: body_fn returned {len(carried)} values for "
                f"{len(carried_inputs)} carried inputs"
            )
    return carried
