"""PyTorch's legacy tensor types: ``staged.FloatTensor``, ``staged.LongTensor`` ... and the
``'torch.FloatTensor'`` names that ``Tensor.type()`` gives and takes.

Note [legacy tensor types]: as in torch, each is a class per dtype, not a subclass of
``Tensor``: ``FloatTensor(2, 3)`` makes an uninitialised tensor of that shape,
``FloatTensor([1, 2])`` one from data, ``FloatTensor()`` an empty one, and
``isinstance(t, FloatTensor)`` asks whether ``t`` is a float32 tensor. Old scripts use them
as constructors and as arguments of ``Tensor.type`` and ``Module.type``. The
``staged.cuda`` ones raise as torch's do in a CPU-only build.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .. import dtypes as dt
from . import devices
from .factories import empty, tensor
from .tensor import Size, Tensor

# Note [type strings]: Tensor.type() names dtypes as torch's legacy tensor types do
_BY_NAME = {f"torch.{d.title}Tensor": d for d in dt.ALL}


def type_name(dtype: dt.DType) -> str:
    """``'torch.FloatTensor'`` for float32, as ``Tensor.type()`` answers."""
    return f"torch.{dtype.title}Tensor"


def cpp_type_name(dtype: dt.DType) -> str:
    """What torch's C++ ``Tensor::toString()`` (its hook errors) calls a CPU tensor's type:
    ``'torch.FloatTensor'`` for the eight types of the old ``THTensor`` names, else the
    dispatch key's ``'CPUComplexFloatType'``, ``'CPUBoolType'``, ``'CPUBFloat16Type'``."""
    if dtype.title in _TH_TYPES:
        return type_name(dtype)
    return f"CPU{dtype.title}Type"


_TH_TYPES = ("Byte", "Char", "Short", "Int", "Long", "Half", "Float", "Double")


def dtype_of(t) -> dt.DType:
    """The dtype that ``t`` names: a dtype, a legacy type (``staged.DoubleTensor``) or its
    string (``'torch.DoubleTensor'``); a CUDA one raises as torch's CPU build does."""
    if isinstance(t, LegacyType):
        t._check_device()
        return t.dtype
    if isinstance(t, str):
        if t.startswith("torch.cuda.") and t.replace(".cuda", "") in _BY_NAME:
            devices.check("cuda")
        if t not in _BY_NAME:
            raise ValueError(f"invalid type: '{t}'")
        return _BY_NAME[t]
    return dt.as_dtype(t)


class LegacyType(type):
    """The metaclass of ``FloatTensor`` and its kin (torch's ``torch.tensortype``)."""

    if TYPE_CHECKING:  # each legacy type's class attributes (not in the metaclass's
        dtype: dt.DType  # __annotations__, which its classes would read as their own)
        is_cuda: bool

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and not cls.is_cuda

    def __call__(cls, *args, device=None):
        cls._check_device()
        if device is not None:
            devices.check(device)
        if not args:
            return empty(0, dtype=cls.dtype)
        if (
            all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args)
            or len(args) == 1
            and isinstance(args[0], Size)
        ):
            return empty(*args, dtype=cls.dtype)
        if len(args) > 1:
            raise TypeError(
                f"{cls.__name__}(): expected sizes (ints) or one sequence of data, "
                f"got {len(args)} arguments of types "
                f"{', '.join(type(a).__name__ for a in args)}"
            )
        data = args[0]
        if isinstance(data, Tensor):
            if data.dtype is not cls.dtype:
                raise TypeError(
                    f"expected {cls.dtype} (got {data.dtype}): use "
                    f"t.to({cls.dtype}) to convert a tensor's dtype"
                )
            return data.detach()
        if isinstance(data, (int, float, complex, bool)):
            raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
        return tensor(data, dtype=cls.dtype)

    def _check_device(cls):
        if cls.is_cuda:
            raise TypeError(
                f"type torch.cuda.{cls.__name__} not available: this is a CPU "
                f"build (compiled steps run on NVIDIA GPUs through "
                f"staged.compile(step, backend='cuda'))"
            )

    def __repr__(cls):
        return f"<class '{cls.__module__}.{cls.__name__}'>"


def _types(module: str, is_cuda: bool) -> dict:
    return {
        f"{d.title}Tensor": LegacyType(
            f"{d.title}Tensor",
            (),
            {
                "dtype": d,
                "is_cuda": is_cuda,
                "__module__": module,
                "__doc__": f"Legacy constructor and isinstance check for {d.title.lower()} tensors.",
            },
        )
        for d in dt.ALL
        if not (d.is_complex or d in dt.SHELL_UINTS or d in dt.FLOAT8)  # as torch's
    }


CPU_TYPES = _types("staged", False)
CUDA_TYPES = _types("staged.cuda", True)


def _tensor_init(self, *args, device=None, **kwargs) -> None:
    """``Tensor(*sizes)``, ``Tensor(size)``, ``Tensor(data)``, ``Tensor()``: torch's
    constructor, the legacy type of the default dtype (``torch.Tensor(5)`` has 5
    uninitialised elements; ``torch.Tensor([1, 2])`` is float32); ``Tensor(t)`` is an
    alias of ``t`` without its graph, whatever its dtype. Nothing for a tensor a subclass's
    ``__new__`` made (torchvision's ``BoundingBoxes(data, format=...)``): Python calls
    ``__init__`` with its arguments after it, and torch's ``Tensor.__init__`` does nothing."""
    if hasattr(self, "_payload"):
        return
    if kwargs:
        raise TypeError(f"Tensor(): unexpected keyword arguments {sorted(kwargs)}")
    if len(args) == 1 and isinstance(args[0], Tensor):  # an alias, of any dtype, as torch
        if device is not None:
            devices.check(device)
        made = args[0].detach()
    else:
        made = CPU_TYPES[f"{dt.get_default_dtype().title}Tensor"](*args, device=device)
    Tensor._init(self, made._payload, False)
    self._vc = made._vc


Tensor.__init__ = _tensor_init  # type: ignore[method-assign]
