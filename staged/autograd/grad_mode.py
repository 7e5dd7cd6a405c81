"""``torch.autograd.grad_mode``'s path to the grad modes (``staged/eager/grad_mode.py``), and
``set_multithreading_enabled``."""

from __future__ import annotations

import threading

from ..eager.grad_mode import _Mode
from ..eager.grad_mode import (  # noqa: F401
    enable_grad,
    inference_mode,
    no_grad,
    set_grad_enabled,
)


class _Threads(threading.local):
    enabled = True


_threads = _Threads()


def is_multithreading_enabled() -> bool:
    return _threads.enabled


class set_multithreading_enabled(_Mode):
    """torch's switch of multithreaded backward (its device threads), thread-local, at once
    when called, for a block as a context manager, for a function as a decorator. staged's
    backward always runs on the calling thread, as torch's does on the CPU: the setting is
    kept and read back, and changes nothing else."""

    def __init__(self, mode: bool):
        self.prev, self.mode = _threads.enabled, bool(mode)
        _threads.enabled = self.mode

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        _threads.enabled = self.prev

    def clone(self) -> set_multithreading_enabled:
        return type(self)(self.mode)
