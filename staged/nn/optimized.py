"""``torch.compile(model)``'s result: a Module holding the model as its child
``_orig_mod``, its calls the compiled ones (Note [optimized modules])."""

from __future__ import annotations

from . import module
from .module import Module

# Note [optimized modules]: torch.compile(model) is torch's OptimizedModule, and programs
# rely on its being a Module: ``cm.train()`` and ``cm.to(...)`` return it (training
# continues compiled), ``isinstance(cm, nn.Module)`` holds, and its state_dict's keys are
# the model's under ``_orig_mod.`` (checkpoints saved from a compiled model load into one;
# nanoGPT strips the prefix for a plain one). Attributes it lacks are the model's
# (``cm.config``), then the compiled function's (``cm.traces``, ``cm.explain()``). A copy or
# a pickle compiles its own copy of the model with the same arguments, as torch's does.


class OptimizedModule(Module):
    """``staged.compile(module)``: calls ``compiled`` (the module compiled), its attributes
    the module's."""

    def __init__(self, mod: Module, compiled, kwargs: dict):
        super().__init__()
        self._orig_mod = mod
        object.__setattr__(self, "_compiled", compiled)
        object.__setattr__(self, "_compile_kwargs", kwargs)

    def forward(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            d = self.__dict__
            if name.startswith("__") or "_orig_mod" not in d.get("_modules", ()):
                raise
        try:
            return getattr(d["_modules"]["_orig_mod"], name)
        except AttributeError:
            return getattr(d["_compiled"], name)

    def __reduce_ex__(self, protocol):
        return _recompile, (self._orig_mod, self._compile_kwargs)


def _recompile(mod: Module, kwargs: dict) -> OptimizedModule:
    return module._compile(mod, **kwargs)  # staged.compile (installed by staged/__init__.py)
