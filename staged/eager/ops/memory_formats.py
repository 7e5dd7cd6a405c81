"""torch's memory formats (``staged.contiguous_format``, ``channels_last`` ...).

Note [memory formats]: staged keeps every result it makes row-major (C order), so a format
asked for (``x.contiguous(memory_format=staged.channels_last)``, ``clone``, ``to``) gives
the same values as torch, laid out row-major: ``stride()`` and ``is_contiguous()`` report
the layout staged has, not the one torch would make. ``is_contiguous(memory_format=...)``
reads the strides as torch does.
"""

from __future__ import annotations

import numpy as np


class MemoryFormat:
    """A memory format: ``staged.contiguous_format``, ``preserve_format``, ``channels_last``
    or ``channels_last_3d`` (Note [memory formats])."""

    def __init__(self, name: str, rank: int | None = None, order: tuple = ()):
        self.name, self._rank, self._order = name, rank, order

    def __repr__(self) -> str:
        return f"torch.{self.name}"

    def __reduce__(self):
        return self.name


contiguous_format = MemoryFormat("contiguous_format")
preserve_format = MemoryFormat("preserve_format")
# the dims from fastest to slowest varying: NHWC, NDHWC
channels_last = MemoryFormat("channels_last", 4, (1, 3, 2, 0))
channels_last_3d = MemoryFormat("channels_last_3d", 5, (1, 4, 3, 2, 0))


def check(x, fmt) -> None:
    """torch's checks of a format asked for ``x`` (``channels_last`` needs 4-D)."""
    if fmt is None:
        return
    _check_type(fmt)
    if fmt._rank is not None and x.ndim != fmt._rank:
        raise RuntimeError(f"required rank {fmt._rank} tensor to use {fmt.name} format")


def _check_type(fmt) -> None:
    if not isinstance(fmt, MemoryFormat):
        raise TypeError(f"memory_format must be a torch.memory_format, not {type(fmt).__name__}")


def is_contiguous(x, memory_format=None) -> bool:
    """Whether ``x``'s layout is that of ``memory_format`` (default: row-major), as torch
    reads strides: dims of size 1 have any stride."""
    if memory_format is not None:
        _check_type(memory_format)
    p = x._payload
    if type(p) is not np.ndarray:  # data left on a device by a compiled step: row-major
        return memory_format is None or memory_format._rank is None
    if memory_format is None or memory_format._rank is None:
        return bool(p.flags.c_contiguous)
    if x.ndim != memory_format._rank:
        return False
    expected, strides = 1, x.stride()
    for d in memory_format._order:
        if x.shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= x.shape[d]
    return True
