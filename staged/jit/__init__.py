"""``staged.jit``: torch.jit's decorators and entry points, so scripts that script or trace
functions and modules run. TorchScript compiles Python into a graph with the same values as
eager code, so here ``script`` and ``trace`` return what they are given, to run eagerly
(``staged.compile`` is staged's compiler). Saving and loading TorchScript archives is not
supported: ``save``/``load`` raise, saying so."""

from __future__ import annotations

from typing import Any, Final  # noqa: F401  (``torch.jit.Final``, typing's)

from ..futures import Future


class ScriptModule:
    """torch's class of scripted Modules. ``script`` returns a Module itself, so no object
    is one here (libraries check ``isinstance(m, ScriptModule)`` to treat those apart)."""


class ScriptFunction:
    """torch's class of scripted functions; as ``ScriptModule``, no object is one here."""


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """``obj`` itself: a function, Module or class runs eagerly."""
    return obj


def trace(func, example_inputs=None, *args, **kwargs):
    """``func`` itself (a function or Module), run eagerly at each call."""
    return func


def trace_module(mod, inputs, *args, **kwargs):
    return mod


def is_scripting() -> bool:
    return False


def is_tracing() -> bool:
    return False


def _identity_decorator(fn=None, **_):
    """``@ignore``, ``@ignore(drop=True)``, ``@unused``, ``@export``: the function."""
    if fn is None:
        return lambda f: f
    return fn


ignore = unused = export = script_if_tracing = _script_if_tracing = _identity_decorator


def _overload(fn):
    """``@torch.jit._overload`` / ``_overload_method`` declare TorchScript signatures of a
    function defined after them (torchvision's DenseNet); eagerly that definition wins.
    ``@torch.jit.interface`` (a class as a TorchScript interface type) is the class."""
    return fn


_overload_method = interface = _overload


def annotate(the_type, the_value):
    return the_value


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    return mod


def optimize_for_inference(mod, other_methods=None):
    return mod


def fork(func, *args, **kwargs) -> Future:
    """Runs ``func`` now; ``wait(future)`` returns its result."""
    future: Future = Future()
    future.set_result(func(*args, **kwargs))
    return future


def wait(future: Future) -> Any:
    return future.wait()


def _no_archives(*args, **kwargs):
    raise NotImplementedError(
        "staged.jit cannot save or load TorchScript archives: save a state_dict with "
        "staged.save, or a compiled step with staged.compile(step).save(directory)"
    )


save = load = _no_archives
