"""Grad modes: thread-local switches deciding whether ops record the backward graph."""

from __future__ import annotations

import functools
import threading


class _State(threading.local):
    grad_enabled = True
    inference = False


_state = _State()


def is_grad_enabled() -> bool:
    return _state.grad_enabled


def is_inference_mode_enabled() -> bool:
    return _state.inference


class _Mode:
    """Base for grad-mode context managers that also work as decorators (with or without
    parentheses: ``@no_grad`` and ``@no_grad()``)."""

    def __new__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and cls in _NO_PARAM:
            return cls()(args[0])
        return super().__new__(cls)

    def _enter(self):
        raise NotImplementedError

    def __enter__(self):
        self._prev = (_state.grad_enabled, _state.inference)
        self._enter()
        return None

    def __exit__(self, *exc):
        _state.grad_enabled, _state.inference = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)

        return wrapper

    def clone(self):
        return type(self)()


class no_grad(_Mode):
    """Disable gradient recording: results of ops inside have ``requires_grad=False``.

    Example:
        >>> x = staged.ones(2, requires_grad=True)
        >>> with staged.no_grad():
        ...     y = x * 2
        >>> y.requires_grad
        False
    """

    def _enter(self):
        _state.grad_enabled = False


class enable_grad(_Mode):
    """Enable gradient recording inside a ``no_grad`` block."""

    def _enter(self):
        _state.grad_enabled = True


class set_grad_enabled(_Mode):
    """Set grad mode on or off: at once when called, for a block as a context manager,
    for a function as a decorator."""

    def __init__(self, mode: bool):
        self.mode = bool(mode)
        self._prev = (_state.grad_enabled, _state.inference)
        _state.grad_enabled = self.mode

    def __enter__(self):
        return None  # __init__ already switched the mode; __exit__ restores it

    def _enter(self):
        _state.grad_enabled = self.mode

    def __call__(self, fn):
        _state.grad_enabled = self._prev[0]  # as a decorator, only calls are affected
        return super().__call__(fn)

    def clone(self):
        return _Scope(self.mode)


class _Scope(_Mode):
    def __init__(self, mode):
        self.mode = mode

    def _enter(self):
        _state.grad_enabled = self.mode


class inference_mode(_Mode):
    """Like ``no_grad``, and tensors created inside are inference tensors: they have no
    version counter, cannot be saved for backward, and cannot be updated in place outside
    inference mode. ``inference_mode(False)`` inside it turns grad mode back on."""

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)

    def _enter(self):
        _state.grad_enabled = not self.mode
        _state.inference = self.mode

    def clone(self):
        return inference_mode(self.mode)


_NO_PARAM = (no_grad, enable_grad, inference_mode)
