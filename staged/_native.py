"""The eager hot path compiled to C by Cython, from the same Python files.

Note [native modules]
~~~~~~~~~~~~~~~~~~~~~
Eager overhead is per-op Python: dispatch, recording a Node, the engine's loop. The
modules in ``MODULES`` are compiled by Cython at install time (``setup.py``), each to an
extension module beside its ``.py`` file; the ``.py`` stays the one source. Compiled
unchanged they run the op_overhead step in 0.65x the time (README, Native modules).

A compiled module is used only when it was built from the source that is there now:
the build writes ``_native.json`` (each module's SHA-256 at translation time) and
``install()`` puts a finder first on ``sys.meta_path`` that loads the ``.py`` of every
module whose hash differs, which was not built (no C compiler) or when
``STAGED_NATIVE=0``. So an edited module never runs stale code; it runs as Python until
``make native`` rebuilds it. The compiled ones it loads with a loader that gives their
source (``_CompiledLoader``): Cython names a frame's file relative to the package's
parent (``staged/eager/tensor.py``), which an editable install's sys.path does not lead
to, so tracebacks had no source lines for them. This file imports only the standard
library: ``setup.py`` loads it to read ``MODULES``.

What a module here must not rely on, since compiled code differs: ``sys.getrefcount`` of
a local or an argument (one less: calibrate as ``_sole_refs`` in ``autograd/engine.py``),
its own frames (``sys._getframe``, stack walks: compiled functions have none, so a
``warnings.warn(..., stacklevel=2)`` there named the caller's caller: a user's
``float(loss)`` warned at ``sys:1``; warn through ``_where.warn_user``, which finds the
user's frame either way), and its functions being ``types.FunctionType``
(``is_function`` below accepts both kinds). ``tests/test_native.py`` checks the first two
in the sources.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import types
import warnings

MODULES = (
    "staged.autograd.accumulate",
    "staged.autograd.engine",
    "staged.autograd.node",
    "staged.autograd.saved",
    "staged.autograd.tensor_methods",
    "staged.autodiff.avals",
    "staged.autodiff.elementwise",
    "staged.autodiff.lax",
    "staged.autodiff.primitive",
    "staged.autodiff.reduction",
    "staged.autodiff.shape",
    "staged.eager.dispatch",
    "staged.eager.interceptor",
    "staged.eager.tensor",
    "staged.eager.views",
    "staged.eager.ops._operands",
    "staged.eager.ops.elementwise",
    "staged.eager.ops.reduction",
    "staged.eager.ops.table",
)
ROOT = os.path.dirname(os.path.abspath(__file__))  # the staged package's folder
# in ROOT: {"modules": {name: stamp}}, a stamp starting with the SHA-256 of the source built
MANIFEST = "_native.json"


def source_path(module: str, root: str = ROOT) -> str:
    return os.path.join(root, *module.split(".")[1:]) + ".py"


def source_hash(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def states(root: str = ROOT) -> dict[str, str]:
    """``{module: "compiled" | "stale" | "not built" | "off"}`` for ``MODULES``."""
    if not _wanted(os.environ.get("STAGED_NATIVE", "")):
        return dict.fromkeys(MODULES, "off")
    built = read_manifest(root)
    return {m: _state(m, built.get(m, "").split(" ")[0], root) for m in MODULES}


def _wanted(setting: str) -> bool:
    """``STAGED_NATIVE``: off for 0/false/no/off, on for 1/true/yes/on or unset."""
    v = setting.strip().lower()
    if v in ("0", "false", "no", "off"):
        return False
    if v not in ("", "1", "true", "yes", "on"):
        warnings.warn(
            f"STAGED_NATIVE={setting!r} is not 0/false/no/off or 1/true/yes/on: "
            "the compiled modules stay on",
            stacklevel=2,
        )
    return True


def read_manifest(root: str = ROOT) -> dict[str, str]:
    """``{module: stamp}`` of the modules built in place (none without a manifest)."""
    try:
        with open(os.path.join(root, MANIFEST)) as f:
            return dict(json.load(f)["modules"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _state(module: str, built_hash: str, root: str) -> str:
    if not built_hash or _extension(module, root) is None:
        return "not built"
    return "compiled" if built_hash == source_hash(source_path(module, root)) else "stale"


def _extension(module: str, root: str = ROOT) -> str | None:
    base = source_path(module, root)[:-3]
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if os.path.exists(base + suffix):
            return base + suffix
    return None


class _CompiledLoader(importlib.machinery.ExtensionFileLoader):
    """A compiled module's loader that knows its source: tracebacks printed by Python
    (``traceback``, pytest, IPython) show the lines of its frames, which name the ``.py``
    relative to the package's parent (Cython's filenames) where no search finds it."""

    def get_source(self, fullname):
        with open(source_path(fullname)) as f:
            return f.read()


class _Finder:
    """A meta path finder for ``MODULES``: the ``.py`` of those in ``python``, ahead of
    their extension modules; the others' extension modules with ``_CompiledLoader``."""

    def __init__(self, python):
        self.python = frozenset(python)

    def find_spec(self, fullname, path=None, target=None):
        if fullname in self.python:
            return importlib.util.spec_from_file_location(fullname, source_path(fullname))
        if fullname not in MODULES:
            return None
        ext = _extension(fullname)
        if ext is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, ext, loader=_CompiledLoader(fullname, ext)
        )


def is_function(obj) -> bool:
    """A function written in Python, compiled (a ``cython_function_or_method``) or not."""
    return isinstance(obj, types.FunctionType) or type(obj).__name__ == _CYFUNCTION


_CYFUNCTION = "cython_function_or_method"
STATES: dict[str, str] = {}


def install() -> None:
    """Load every module of ``MODULES`` not compiled from its current source as Python,
    the others with their source known (``_Finder``)."""
    STATES.update(states())
    sys.meta_path.insert(0, _Finder(m for m, s in STATES.items() if s != "compiled"))


def summary() -> str:
    """One line for ``staged doctor``."""
    counts: dict[str, list[str]] = {}
    for m, s in STATES.items():
        counts.setdefault(s, []).append(m)
    if set(counts) == {"compiled"}:
        return f"compiled by Cython ({len(MODULES)} modules)"
    if set(counts) == {"off"}:
        return "Python (STAGED_NATIVE=0)"
    parts = [f"{len(ms)} {s}" for s, ms in sorted(counts.items())]
    stale = counts.get("stale", [])
    if stale:
        hint = f" ({', '.join(stale)}: `make native` rebuilds them)"
    elif "not built" in counts:
        hint = " (installed without a C compiler? `make native` builds them)"
    else:
        hint = ""
    return "; ".join(parts) + hint


if __name__ == "staged._native":  # imported by staged first (setup.py only reads MODULES)
    install()
