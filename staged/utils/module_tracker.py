"""``torch.utils.module_tracker``: ``ModuleTracker``, which Modules are running, forward
or backward, by their qualified names (what ``FlopCounterMode`` attributes its counts to)."""

from __future__ import annotations

import weakref

from ..autograd import engine
from ..autograd.graph import register_multi_grad_hook
from ..eager.tensor import Tensor
from ..nn.module import register_module_forward_hook, register_module_forward_pre_hook
from ._pytree import tree_flatten

__all__ = ["ModuleTracker"]


class ModuleTracker:
    """A context in which ``parents`` is the set of the running Modules' names (the
    outermost Module's class name, then ``Class.child.grandchild``) and "Global", as
    torch's: a Module is entered when its forward starts and again when the gradient of
    its outputs arrives in backward, left when its forward returns and when its inputs'
    gradients are computed.

    Example:
        >>> with ModuleTracker() as tracker:
        ...     model(x)      # a forward hook that reads tracker.parents sees
        ...                   # {"Global", "Net", "Net.fc1"} inside fc1
    """

    def __init__(self) -> None:
        self.parents = {"Global"}
        self._known_modules: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._seen_modules: weakref.WeakSet = weakref.WeakSet()
        self._has_callback = False
        self._hooks: list = []

    @property
    def is_bw(self) -> bool:
        """Whether a backward pass is running on this thread."""
        return engine.current_graph_task() is not None

    def _maybe_set_engine_callback(self) -> None:
        if self._has_callback:
            return

        def callback() -> None:
            self.parents = {"Global"}
            self._has_callback = False

        engine.queue_callback(callback)
        self._has_callback = True

    def _get_mod_name(self, mod) -> str:
        if mod not in self._known_modules:
            self._known_modules[mod] = type(mod).__name__
        name = self._known_modules[mod]
        if mod not in self._seen_modules:
            for child_name, child in mod.named_children():
                self._known_modules[child] = f"{name}.{child_name}"
                self._get_mod_name(child)
            self._seen_modules.add(mod)
        return name

    def _enter(self, name: str, is_bw: bool):
        def fn(*args) -> None:
            if is_bw:
                self._maybe_set_engine_callback()
            self.parents.add(name)

        return fn

    def _leave(self, name: str):
        def fn(*args) -> None:
            self.parents.discard(name)

        return fn

    def _watch(self, tree, fn) -> None:
        tensors = [a for a in tree_flatten(tree)[0] if isinstance(a, Tensor) and a.requires_grad]
        if tensors:
            self._hooks.append(register_multi_grad_hook(tensors, fn))

    def _fw_pre_hook(self, mod, args) -> None:
        name = self._get_mod_name(mod)
        self._enter(name, False)()
        self._watch(args, self._leave(name))

    def _fw_post_hook(self, mod, args, output) -> None:
        name = self._get_mod_name(mod)
        self._leave(name)()
        self._watch(output, self._enter(name, True))

    def __enter__(self):
        self._pre = register_module_forward_pre_hook(self._fw_pre_hook)
        self._post = register_module_forward_hook(self._fw_post_hook)
        return self

    def __exit__(self, *exc) -> None:
        self._pre.remove()
        self._post.remove()
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
