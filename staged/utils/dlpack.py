"""``staged.utils.dlpack``: as ``torch.utils.dlpack``, tensors to and from DLPack capsules."""

from __future__ import annotations

from ..eager.factories import from_dlpack
from ..eager.tensor import Tensor

__all__ = ["from_dlpack", "to_dlpack"]


def to_dlpack(tensor: Tensor):
    """A DLPack capsule over ``tensor``'s memory, for ``from_dlpack`` to take once."""
    return tensor.__dlpack__(max_version=(1, 0))
