"""What autograd adds to the eager layer, which does not import it: Tensor's autograd
methods, the Node that dispatch records for each op, and the Nodes of views."""

from __future__ import annotations

import weakref

from .._locks import fork_safe
from .._where import sited
from ..eager import dispatch, views
from ..eager.tensor import Tensor
from . import engine
from .hooks import add_hook
from .node import AccumulateGrad, hook_node, join, rebase, record, sync


def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate gradients of this tensor into the ``.grad`` of the graph's leaves."""
    engine.backward(
        (self,),
        None if gradient is None else (gradient,),
        retain_graph,
        create_graph,
        inputs=inputs,
    )


def _grad_accumulator(self):
    """The leaf's one AccumulateGrad while a graph holds it. Made under a lock: two threads
    making one each (the last graph holding it gone) would accumulate into ``.grad`` under
    two locks, losing updates (seen: 964 of 1000 backwards of 10 threads, under load), as
    torch makes it under the tensor's mutex."""
    acc = self._grad_acc() if self._grad_acc is not None else None
    if acc is None:
        with _ACCUMULATOR_LOCK:
            acc = self._grad_acc() if self._grad_acc is not None else None
            if acc is None:
                acc = AccumulateGrad(self)
                self._grad_acc = weakref.ref(acc)
    return acc


_ACCUMULATOR_LOCK = fork_safe()


def register_hook(self, hook):
    """Register ``hook(grad) -> Tensor or None``, run when this tensor's grad is computed."""
    if not self._requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self._base is not None:
        fn = hook_node(self)
    else:
        fn = self.grad_fn
    if fn is not None:
        return fn._add_tensor_pre_hook(self._output_nr, hook)
    if self._hooks is None:
        self._hooks = {}
    return add_hook(self._hooks, hook)


def register_post_accumulate_grad_hook(self, hook):
    """Register ``hook(tensor)``, run after ``.grad`` of this leaf has been accumulated."""
    if not self._requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    if self._post_acc_hooks is None:
        self._post_acc_hooks = {}
    return add_hook(self._post_acc_hooks, hook)


# attached at import time; Tensor declares them for type checkers (its TYPE_CHECKING block)
# (their errors name the user's line)
Tensor.backward = backward  # type: ignore[method-assign]
Tensor._grad_accumulator = _grad_accumulator  # type: ignore[method-assign]
Tensor.register_hook = sited(register_hook)  # type: ignore[method-assign]
Tensor.register_post_accumulate_grad_hook = (  # type: ignore[method-assign]
    sited(register_post_accumulate_grad_hook)
)
# the slot's class attribute, replaced by a property on the subclass (Note [stale views])
views._StaleView.grad_fn = property(sync, views._grad_fn.__set__)  # type: ignore[misc]
views.rebase = rebase
views.join = join
dispatch.set_recorder(record)
