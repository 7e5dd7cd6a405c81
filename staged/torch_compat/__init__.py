"""Run PyTorch programs on staged without editing them: ``staged.as_torch()`` makes
``import torch`` (and ``torch.nn``, ``torch.optim.lr_scheduler``, ``torch.utils.data``...)
import staged's modules of the same names, and

    python -m staged.torch_compat [--compile NAME] script.py [args...]

runs a script so (as ``python script.py`` would: ``__main__``, ``sys.argv``, its directory
first on the path). ``--compile NAME`` wraps the script's function ``NAME`` (its training
step) in ``staged.compile`` as the script defines it, for the compiled pass of the
compatibility suite (``tests/programs``)."""

from __future__ import annotations

import builtins
import importlib
import importlib.abc
import importlib.util
import os
import sys
import types

from .. import _version, dtypes, version
from ..torch_version import TorchVersion
from ..runtime.compiled import compile as staged_compile


class _TorchAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``torch`` and ``torch.<sub>`` as ``staged`` and ``staged.<sub>``."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        real = "staged" + spec.name[len("torch") :]
        try:
            return importlib.import_module(real)
        except ModuleNotFoundError as err:
            if err.name != real:
                raise
            raise ModuleNotFoundError(
                f"No module named {spec.name!r}: staged (standing in for torch) has no {real}",
                name=spec.name,
            ) from None

    def exec_module(self, module):
        pass  # already imported as itself


_ALIAS = _TorchAlias()


def as_torch() -> None:
    """Make ``import torch`` import staged from now on, in this process. Raises
    RuntimeError if the real torch is imported already (the two cannot share the name)."""
    real = sys.modules.get("torch")
    if real is not None and real.__name__ != "staged":
        raise RuntimeError(
            "the real torch is already imported in this process; call "
            "staged.as_torch() before anything imports torch"
        )
    if _ALIAS not in sys.meta_path:
        sys.meta_path.insert(0, _ALIAS)
    dtypes.PACKAGE = "torch"  # ``print(x.dtype)``: torch.float32, as the program expects
    # torch's version, which programs and libraries check (transformers needs >= 2.5)
    v = TorchVersion(f"{_version.TORCH}+staged.{_version.__version__}")
    version.__version__ = v
    sys.modules["staged"].__dict__["__version__"] = v


class _Globals(dict):
    """A script's globals that wrap the function ``name`` in ``staged.compile`` when the
    script defines it."""

    def __init__(self, name, **kw):
        super().__init__(**kw)
        self._name = name

    def __setitem__(self, key, value):
        if key == self._name and callable(value):
            value = staged_compile(value)
        super().__setitem__(key, value)


class _Main(types.ModuleType):
    """``sys.modules["__main__"]`` while the script runs, its attributes the script's
    globals: pickle finds the classes and functions the script defines by their module,
    ``__main__`` (``torch.save(model)`` of a model class of the script)."""

    def __init__(self, g: dict):
        super().__init__("__main__")
        self.__dict__["_globals"] = g

    def __getattr__(self, name):
        try:
            return self.__dict__["_globals"][name]
        except KeyError:
            raise AttributeError(f"module '__main__' has no attribute {name!r}") from None


def run(path: str, argv=(), step: str | None = None) -> dict:
    """Run the script at ``path`` as ``__main__`` with torch standing for staged
    (``as_torch``), its function ``step`` compiled; returns its globals."""
    as_torch()
    path = os.path.abspath(path)
    with open(path, encoding="utf-8") as f:
        code = compile(f.read(), path, "exec")
    g = _Globals(step, __name__="__main__", __file__=path, __builtins__=builtins)
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(path))
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = _Main(g)
    try:
        exec(code, g)
    finally:
        if main is not None:
            sys.modules["__main__"] = main
    return g
