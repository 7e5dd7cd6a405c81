"""Saved tensors: what a Node keeps for backward, with the version check and freeing.

Note [saved outputs]: a Node that saves its own output must not hold the output
Tensor (the Tensor holds the Node: a cycle). It keeps the payload and the shared
version counter and rebuilds a Tensor whose grad_fn is the Node on unpack.
"""
from __future__ import annotations

FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward.")


class SavedTensor:
    """One tensor saved for backward (``grad_fn._raw_saved_<name>``)."""

    __slots__ = ("_tensor", "_payload", "_vc", "_saved_version", "_is_output",
                 "_requires_grad", "_freed", "saved_tangent")

    def __init__(self, tensor, is_output: bool):
        self._is_output = is_output
        self._vc = tensor._vc
        self._saved_version = tensor._vc[0]
        self._freed = False
        self.saved_tangent = None  # set by forward AD (Note [tangents by tensor])
        if is_output:
            self._tensor = None
            self._payload = tensor._payload
            self._requires_grad = tensor._requires_grad
        else:
            self._tensor = tensor
            self._payload = None

    def unpack(self, node):
        if self._freed:
            raise RuntimeError(FREED_MESSAGE)
        if self._vc[0] != self._saved_version:
            raise RuntimeError(_version_message(self, node))
        if self._is_output:
            from .tensor import Tensor
            t = Tensor._wrap(self._payload, self._requires_grad)
            t._vc = self._vc
            if self._requires_grad:
                t.grad_fn = node
            if self.saved_tangent is not None:
                from .forward_ad import restore_tangent
                restore_tangent(t, self.saved_tangent)
            return t
        return self._tensor

    def release(self) -> None:
        self._tensor = self._payload = self.saved_tangent = None
        self._freed = True


def _version_message(saved, node) -> str:
    payload = saved._payload if saved._is_output else saved._tensor._payload
    shape = ", ".join(map(str, payload.shape))
    where = f"output 0 of {node.name()}" if saved._is_output else f"an input of {node.name()}"
    return ("one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: [{payload.dtype}[{shape}]], which is {where}, is at version "
            f"{saved._vc[0]}; expected version {saved._saved_version} instead. Hint: the "
            "backtrace further above can show the operation that failed to compute its "
            "gradient; enable anomaly detection with staged.autograd.set_detect_anomaly(True) "
            "to find it, or avoid modifying the tensor in place.")
