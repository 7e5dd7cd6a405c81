"""``torch.overrides``: the ``__torch_function__`` protocol (Note [the torch function
protocol] in ``staged/_torch_function.py``). A ``TorchFunctionMode`` entered with ``with``
sees the calls of staged's public functions made on its thread (``torch.*``,
``torch.linalg``, ``torch.fft``, ``torch.special``, ``torch.nn.functional``...) in its
``__torch_function__``, and decides what they do; so does a Tensor subclass (or another
class) defining ``__torch_function__`` for the calls given its instances, the subclass's
methods, operators and tensor properties included. The methods and operators of plain
tensors (``x.add(y)``, ``x + y``) and ``torch.nn.init`` are not handed to modes (torch's
are).

Example:
    >>> class Log(TorchFunctionMode):
    ...     def __torch_function__(self, func, types, args=(), kwargs=None):
    ...         print(func.__name__)
    ...         return func(*args, **(kwargs or {}))
    >>> with Log():
    ...     staged.zeros(2)
    zeros
"""

from __future__ import annotations

from . import _torch_function as _tf
from .eager.subclasses import NOWRAP
from .eager.tensor import Tensor

__all__ = [
    "TorchFunctionMode",
    "get_default_nowrap_functions",
    "handle_torch_function",
    "has_torch_function",
    "has_torch_function_unary",
    "has_torch_function_variadic",
    "is_tensor_like",
    "is_tensor_method_or_property",
]


class TorchFunctionMode:
    """A context in which calls of staged's public functions on this thread go to
    ``__torch_function__(func, types, args, kwargs)``; inside it this mode is off, so its
    calls reach the modes entered before it, then the functions themselves."""

    def __init__(self) -> None:
        pass

    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError(
            f"{type(self).__name__} must define __torch_function__(self, func, types, "
            "args=(), kwargs=None)"
        )

    def __enter__(self):
        _tf.push(self)
        return self

    def __exit__(self, *exc) -> None:
        _tf.pop(self)

    @classmethod
    def push(cls, *args, **kwargs):
        """Deprecated in torch: ``with cls(*args, **kwargs)``."""
        return cls(*args, **kwargs)


def _get_current_function_mode():
    """This thread's innermost mode, or None (torch's private helper)."""
    return _tf.current()


def is_tensor_like(inp) -> bool:
    """Whether ``inp`` is a Tensor or an instance of a class defining ``__torch_function__``."""
    return type(inp) is Tensor or hasattr(inp, "__torch_function__")


def has_torch_function(relevant_args) -> bool:
    """Whether one of ``relevant_args`` takes part in the protocol (and it is on here)."""
    return _tf.enabled() and bool(_tf.overloaded(relevant_args))


def has_torch_function_unary(arg) -> bool:
    """``has_torch_function((arg,))``."""
    return has_torch_function((arg,))


def has_torch_function_variadic(*args) -> bool:
    """``has_torch_function(args)``."""
    return has_torch_function(args)


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    """``public_api(*args, **kwargs)`` handed to the innermost mode, else to the
    ``__torch_function__`` of those of ``relevant_args`` that take part: what a Python
    function that takes part in the protocol calls (torch's)."""
    return _tf.handle(public_api, _tf.overloaded(relevant_args), args, kwargs)


def get_default_nowrap_functions() -> set:
    """The functions whose results Tensor's default ``__torch_function__`` leaves as they
    are (``Tensor.grad``'s getter)."""
    return set(NOWRAP)


def is_tensor_method_or_property(func) -> bool:
    """Whether ``func`` is a Tensor method or a property's getter."""
    return func in _TENSOR_ATTRIBUTES or getattr(func, "__name__", None) == "__get__"


_TENSOR_ATTRIBUTES = {v for v in vars(Tensor).values() if callable(v) and not isinstance(v, type)}
