"""Saved tensors: what a Node keeps for backward, with the version check, freeing, and
pack/unpack hooks (per saved tensor, or by default for a block: ``saved_tensors_hooks``).

Note [saved outputs]: a Node that saves its own output must not hold the output
Tensor (the Tensor holds the Node: a cycle). It keeps the payload and the shared
version counter and rebuilds a Tensor whose grad_fn is the Node on unpack.

Interface for Nodes (built-in ones and custom Functions alike): set the output's
``grad_fn`` to the Node first, then ``SavedTensor(tensor, node)`` saves it (an output of
``node`` is recognised by ``tensor.grad_fn is node``); ``unpack()`` returns it for the
backward pass; ``release()`` frees it once backward ran without ``retain_graph``.
"""

from __future__ import annotations

import threading
import weakref

from .._where import at_user
from ..eager.scalars import is_number
from ..eager.tensor import Tensor
from .forward_ad import restore_tangent

FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


class _Hooks(threading.local):
    stack = ()  # (pack, unpack) pairs of the open saved_tensors_hooks blocks
    disabled_message = None  # set by disable_saved_tensors_hooks


_hooks = _Hooks()
_state = {"hooks_open": 0, "mutation": None}  # cheap checks for the hot path


def default_hooks() -> tuple:
    """This thread's open ``saved_tensors_hooks`` blocks, innermost last, and the message
    of a ``disable_saved_tensors_hooks`` block (None outside one): what a capture's trace
    assumed (staged/tracing/capture.py)."""
    return _hooks.stack, _hooks.disabled_message


class SavedTensor:
    """One tensor saved for backward (``grad_fn._raw_saved_<name>``)."""

    __slots__ = (
        "_tensor",
        "_payload",
        "_vc",
        "_saved_version",
        "_is_output",
        "_requires_grad",
        "_freed",
        "saved_tangent",
        "_node",
        "_packed",
        "_unpack",
        "_grad_fn",
        "_output_nr",
        "_acc",
        "__weakref__",  # forward AD drops saved tangents when its level closes
    )

    def __init__(self, tensor, node):
        if tensor._vc is None:
            raise RuntimeError(
                "Inference tensors cannot be saved for backward. Please do not use Tensors "
                "created in inference mode in computation tracked by autograd. To work around "
                "this, you can make a clone to get a normal tensor and use it in autograd, or "
                "use `staged.no_grad()` instead of `staged.inference_mode()`."
            )
        vc = self._vc = tensor._vc
        self._saved_version = vc[0]
        self._freed = False
        self.saved_tangent = None  # set by forward AD (Note [tangents by tensor])
        self._unpack = None
        self._requires_grad = tensor._requires_grad
        self._output_nr = tensor._output_nr
        fn = tensor.grad_fn
        if fn is node:
            self._is_output = True
            self._tensor = None
            self._payload = tensor._payload
            self._node = weakref.ref(node)
        else:
            self._is_output = False
            self._tensor = tensor
            self._payload = None
            self._grad_fn = fn  # its creator (no cycle: an older Node)
        if _state["hooks_open"] and _hooks.stack and not is_number(tensor):
            self._pack(*_hooks.stack[-1])
        if _state["mutation"] is not None:
            _state["mutation"].saved(self)

    def _current(self):
        """The saved tensor as it would be unpacked without hooks."""
        if not self._is_output:
            return self._tensor
        t = Tensor._wrap(self._payload, self._requires_grad)
        t._vc = self._vc
        if self._requires_grad:
            t.grad_fn, t._output_nr = self._node(), self._output_nr
        return t

    def _pack(self, pack, unpack):
        t = self._current()
        version = t._vc[0]
        packed = pack(t)
        if t._vc[0] != version:
            raise RuntimeError(
                "A saved tensor pack hook is modifying its input in place. Tensors provided "
                "as input to pack hook cannot be modified by in-place operations as this can "
                "lead to unexpected side-effects. Please open an issue if you need to perform "
                "in-place operations on the input to a pack hook."
            )
        if not self._is_output:  # unpacked tensors route gradients to its accumulator
            self._acc = t._grad_accumulator() if t.grad_fn is None and t._requires_grad else None
        self._packed, self._unpack = packed, unpack
        self._tensor = self._payload = None

    def register_hooks(self, pack_hook, unpack_hook) -> None:
        """Pack this saved tensor with ``pack_hook`` now; every access unpacks it again."""
        if not (callable(pack_hook) and callable(unpack_hook)):
            raise TypeError("register_hooks(): expected two callables (pack_hook, unpack_hook)")
        if self._freed:
            raise RuntimeError(
                "Calling register_hooks on a saved tensor after it has been freed. Saved "
                "intermediate values of the graph are freed when you call .backward() or "
                "autograd.grad(). Specify retain_graph=True if you need to backward through "
                "the graph a second time or if you need to access saved variables after "
                "calling backward."
            )
        if self._unpack is not None:
            raise RuntimeError(
                "Calling register_hooks on a saved tensor whose hooks have "
                "already been set. Hint: only one pair of hooks is allowed at "
                "a time."
            )
        self._pack(pack_hook, unpack_hook)

    def unpack(self):
        if self._freed:
            raise RuntimeError(at_user(FREED_MESSAGE))
        if self._unpack is None:
            if self._vc[0] != self._saved_version:
                raise RuntimeError(_version_message(self))
            if not self._is_output:
                return self._tensor  # the tensor itself: its tangent is its own
            t = self._current()
        else:
            t = self._unpack_with_hook()
        # an output's tangent, and a hooked input's (the unpacked tensor is a new one)
        if self.saved_tangent is not None:
            restore_tangent(t, self.saved_tangent)
        return t

    def _unpack_with_hook(self):
        r = self._unpack(self._packed)
        if not isinstance(r, Tensor):
            raise TypeError(
                "Output of saved tensor unpack_hook expected to be a Tensor but "
                f"got result of type {type(r).__name__}"
            )
        t = Tensor._wrap(r._payload, self._requires_grad)  # the autograd metadata is ours
        t._vc = r._vc
        if self._is_output:
            if self._requires_grad:
                t.grad_fn, t._output_nr = self._node(), self._output_nr
        else:
            t.grad_fn, t._output_nr = self._grad_fn, self._output_nr
            if self._acc is not None:
                t._grad_acc = weakref.ref(self._acc)
        return t

    def keep_current_value(self) -> None:
        """The saved tensor's memory is about to be written: keep its value in a copy
        (PyTorch's ``original_self``; ``allow_mutation_on_saved_tensors``)."""
        if self._freed or self._unpack is not None:
            return
        t = self._current()
        p = t._payload
        copy = Tensor._wrap(p.copy() if hasattr(p, "copy") else p, t._requires_grad)
        if self._is_output:
            self._payload = copy._payload
        else:
            copy.grad_fn, copy._output_nr = t.grad_fn, t._output_nr
            if t.grad_fn is None and t._requires_grad:
                copy._grad_acc = weakref.ref(t._grad_accumulator())
            self._tensor = copy
        self._vc, self._saved_version = copy._vc, 0

    def release(self) -> None:
        self._tensor = self._payload = self.saved_tangent = None
        self._packed = self._unpack = None
        self._freed = True


def _version_message(saved) -> str:
    t = saved._current()
    shape = ", ".join(map(str, t._payload.shape))
    # an output: the Node that saved it; an input: its grad_fn now, as torch's (CopySlices
    # after a write through a view, the write's Node after one into it)
    fn, nr = (saved._node(), saved._output_nr) if saved._is_output else (t.grad_fn, t._output_nr)
    which = f", which is output {nr} of {fn.name()}," if fn is not None else ""
    return (
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: [{t.dtype}[{shape}]]{which} is at version {saved._vc[0]}; "
        f"expected version {saved._saved_version} instead. Hint: the backtrace further "
        "above can show the operation that failed to compute its gradient; enable "
        "anomaly detection with staged.autograd.set_detect_anomaly(True) to find it, or "
        "avoid modifying the tensor in place."
    )
