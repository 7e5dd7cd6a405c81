"""``torch.types``: the type aliases torch's annotations use (libraries import them)."""

from __future__ import annotations

import os
from builtins import bool as _bool  # noqa: F401
from builtins import bytes as _bytes  # noqa: F401
from builtins import complex as _complex  # noqa: F401
from builtins import float as _float  # noqa: F401
from builtins import int as _int  # noqa: F401
from builtins import str as _str  # noqa: F401
from collections.abc import Sequence
from typing import IO

from ._C import DispatchKey
from ._sym import SymBool, SymFloat, SymInt
from .dtypes import DType as _dtype  # noqa: F401
from .eager.devices import device as _device
from .eager.tensor import Layout as _layout  # noqa: F401
from .eager.tensor import Size, Tensor
from .eager.storage import TypedStorage as Storage

__all__ = ["Number", "Device", "FileLike", "Storage"]

_TensorOrTensors = Tensor | Sequence[Tensor]
_TensorOrOptionalTensors = Tensor | Sequence[Tensor | None]
_size = Size | list[int] | tuple[int, ...]
_symsize = Size | Sequence[int | SymInt]
_dispatchkey = str | DispatchKey
IntLikeType = int | SymInt
FloatLikeType = float | SymFloat
BoolLikeType = bool | SymBool
py_sym_types = (SymInt, SymFloat, SymBool)
PySymType = SymInt | SymFloat | SymBool
Number = int | float | bool
_Number = (int, float, bool)
FileLike = str | os.PathLike[str] | IO[bytes]
Device = _device | str | int | None
