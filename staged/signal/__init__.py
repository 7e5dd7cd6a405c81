"""``torch.signal``'s counterpart: the window functions of ``staged.signal.windows``."""

from . import windows

__all__ = ["windows"]
