"""``torch.overrides``' function modes: a ``TorchFunctionMode`` entered with ``with`` sees
the calls of staged's public functions made on its thread (``torch.*``, ``torch.linalg``,
``torch.fft``, ``torch.special``, ``torch.nn.functional``...) in its ``__torch_function__``,
and decides what they do. Tensor methods and operators (``x.add(y)``, ``x + y``) and
``torch.nn.init`` are not handed to it (torch's are): staged's Tensor has no
``__torch_function__`` protocol.

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

from . import _modes
from .eager.tensor import Tensor

__all__ = ["TorchFunctionMode", "is_tensor_like"]


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
        _modes.push(self)
        return self

    def __exit__(self, *exc) -> None:
        _modes.pop(self)

    @classmethod
    def push(cls, *args, **kwargs):
        """Deprecated in torch: ``with cls(*args, **kwargs)``."""
        return cls(*args, **kwargs)


def _get_current_function_mode():
    """This thread's innermost mode, or None (torch's private helper)."""
    return _modes.current()


def is_tensor_like(inp) -> bool:
    """Whether ``inp`` is a Tensor (staged has no other tensor-like types)."""
    return isinstance(inp, Tensor)
