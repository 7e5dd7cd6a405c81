"""``staged.autograd.graph``: inspecting and interposing on the backward graph, and the
saved-tensor hooks (PyTorch's ``torch.autograd.graph``)."""

from __future__ import annotations

import functools
import threading
import weakref

from .._locks import fork_safe
from ..eager.ops import inplace
from ..eager.views import bumped
from . import saved as _saved
from .engine import GradientEdge, current_graph_task, gradient_edge
from .node import Node  # noqa: F401  (the base class of every grad_fn)


def get_gradient_edge(tensor) -> GradientEdge:
    """The edge where ``tensor``'s gradient is computed: ``autograd.grad(loss, edge)``
    gives what ``autograd.grad(loss, tensor)`` gives."""
    if not tensor._requires_grad:
        raise RuntimeError(
            "It is not possible to get the gradient edge for a Tensor that "
            "does not require gradients"
        )
    edge = gradient_edge(tensor)
    if edge.node.variable is None:  # what a grad_output of the edge must be (_edge_aval)
        if edge.node._edge_avals is None:
            edge.node._edge_avals = {}
        edge.node._edge_avals[edge.output_nr] = (tuple(tensor.shape), tensor.dtype)
    return edge


def increment_version(tensor) -> None:
    """Mark ``tensor`` (and every tensor sharing its data) as modified in place."""
    if tensor._vc is None:
        raise RuntimeError("Inference tensors do not track version counter.")
    tensor._vc[0] += 1
    bumped(tensor._vc)


class saved_tensors_hooks:
    """Pack every tensor saved for backward in this block with ``pack_hook`` (once); unpack
    it with ``unpack_hook`` each time backward needs it. Thread-local; the innermost
    block wins."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        h = _saved._hooks
        if h.disabled_message is not None:
            raise RuntimeError(h.disabled_message)
        h.stack = h.stack + ((self.pack_hook, self.unpack_hook),)
        with _count_lock:
            _saved._state["hooks_open"] += 1
        return self

    def __exit__(self, *exc):
        _saved._hooks.stack = _saved._hooks.stack[:-1]
        with _count_lock:
            _saved._state["hooks_open"] -= 1
        return False


_count_lock = fork_safe()


class save_on_cpu(saved_tensors_hooks):
    """Keep saved tensors in host memory. staged's eager tensors already live there, so
    packing keeps the tensor as it is (no copy); ``pin_memory`` is accepted and ignored."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        super().__init__(_pack_to_host, _unpack_from_host)


def _pack_to_host(t):
    return t.detach()


def _unpack_from_host(t):
    return t


class disable_saved_tensors_hooks:
    """Inside this block, opening ``saved_tensors_hooks`` raises RuntimeError(error_message)."""

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        h = _saved._hooks
        if h.stack:
            raise RuntimeError(self.error_message)
        self.prev, h.disabled_message = h.disabled_message, self.error_message

    def __exit__(self, *exc):
        _saved._hooks.disabled_message = self.prev
        return False


class _MultiHandle:
    def __init__(self, handles):
        self.handles = handles

    def remove(self) -> None:
        for h in self.handles:
            h.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """Call ``fn`` once per backward pass: with every gradient of ``tensors`` that pass
    computes (None for the others) once the last is ready (``mode="all"``), or with the
    first one computed (``mode="any"``). Returns a handle with ``remove()``."""
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    lock = threading.Lock()
    if mode == "any":
        ran = set()

        @functools.wraps(fn)
        def any_hook(grad):
            task = current_graph_task().id
            with lock:
                if task in ran:
                    return
                ran.add(task)
            fn(grad)

        return _MultiHandle([t.register_hook(any_hook) for t in tensors if t.requires_grad])

    n = len(tensors)
    edges = [gradient_edge(t).node if t.requires_grad else None for t in tensors]
    pending = {}  # graph task id -> [grads, number still expected]

    def inner(i):
        def hook(grad):
            task = current_graph_task()
            with lock:
                entry = pending.get(task.id)
                if entry is None:
                    expected = sum(1 for e in edges if e is not None and task.will_execute(e))
                    entry = pending[task.id] = [[None] * n, expected]
                entry[0][i] = grad
                entry[1] -= 1
                done = entry[1] == 0
                if done:
                    del pending[task.id]
            if done:
                fn(entry[0])

        return hook

    return _MultiHandle(
        [t.register_hook(inner(i)) for i, t in enumerate(tensors) if t.requires_grad]
    )


class allow_mutation_on_saved_tensors:
    """Allow in-place changes of tensors saved for backward: a saved tensor about to be
    written is cloned first, so backward sees the value it saved. Run forward and
    backward inside the same block."""

    def __enter__(self):
        if _saved._state["mutation"] is not None:
            raise RuntimeError("allow_mutation_on_saved_tensors contexts cannot be nested")
        self.by_storage = {}  # id of a version counter -> SavedTensors sharing it
        self.all_saved = weakref.WeakSet()  # what was saved here and is alive
        self.thread = threading.get_ident()  # Note [mutation on one thread]
        _saved._state["mutation"] = self
        inplace.before_write.append(self.before_write)
        return self

    def __exit__(self, *exc):
        _saved._state["mutation"] = None
        inplace.before_write.remove(self.before_write)
        self.by_storage.clear()
        # torch saves them through hooks of this block, whose unpack refuses once it is
        # closed; a tensor that an inner saved_tensors_hooks block packed keeps its hooks
        for s in self.all_saved:
            if s._unpack is None and not s._freed:
                s._packed, s._unpack = None, _outside_block
        self.all_saved.clear()
        return False

    # Note [mutation on one thread]: as in torch (saved-tensor hooks and a dispatch mode,
    # both the thread's own) the block clones what its own thread saved before its own
    # thread writes it; other threads' saves and writes are left to the version check
    # (they were cloned too: a backward torch refuses ran on the saved value). Opening a
    # second block anywhere in the process raises, as torch's global flag does.
    def saved(self, s) -> None:
        if threading.get_ident() == self.thread:
            self.by_storage.setdefault(id(s._vc), []).append(s)
            self.all_saved.add(s)

    def before_write(self, t) -> None:
        if threading.get_ident() != self.thread:
            return
        for s in self.by_storage.pop(id(t._vc), ()):
            s.keep_current_value()


def _outside_block(_packed):
    raise AssertionError(  # torch's words, its missing space too
        "Trying to backward outside of the 'allow_mutation_on_saved_tensors' context"
        "in which the graph was originally recorded."
    )
