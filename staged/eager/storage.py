"""A tensor's memory as torch names it: ``Tensor.untyped_storage()`` gives the bytes of the
NumPy array at the root of its payload's views, which ``Tensor.set_`` (eager/ops/metadata.py)
takes to make another tensor over them; ``Tensor.storage()`` (deprecated in torch) the same
memory read as elements of the tensor's dtype."""

from __future__ import annotations

import numpy as np

from .._where import at_user, warn_once
from . import devices
from .tensor import Tensor, _address, storage


class UntypedStorage:
    """The bytes under a tensor, torch's ``UntypedStorage`` of a CPU tensor: its size in
    bytes (``nbytes``, ``size``, ``len``), where it starts (``data_ptr``: a view's storage
    starts where its base's does) and its bytes (``tolist``)."""

    __slots__ = ("_array",)

    def __init__(self, array: np.ndarray):
        self._array = array  # the root of the views: the memory itself

    def nbytes(self) -> int:
        return self._array.nbytes

    size = nbytes

    def __len__(self) -> int:
        return self._array.nbytes

    def data_ptr(self) -> int:
        return _address(self._array)

    def element_size(self) -> int:
        return 1

    @property
    def device(self):
        return devices.CPU

    @classmethod
    def from_file(cls, filename, shared: bool = False, nbytes: int = 0) -> UntypedStorage:
        """The first ``nbytes`` of file ``filename``, mapped into memory: ``shared``, writes
        reach the file; else they stay in this process (copy on write), as torch's.
        safetensors' ``safe_open(..., framework="pt")`` reads a checkpoint so."""
        mapped = np.memmap(filename, np.uint8, "r+" if shared else "c", shape=(nbytes,))
        return cls(mapped.view(np.ndarray))  # (a plain array over the mapping, kept alive)

    def untyped(self) -> UntypedStorage:
        return self

    def __getitem__(self, i):
        """A byte (an int), or a slice of the bytes: a storage over the same memory."""
        if isinstance(i, slice):
            return UntypedStorage(self._bytes()[i])
        return int(self._bytes()[i])

    def _bytes(self) -> np.ndarray:
        """The bytes, as a flat uint8 view of the memory."""
        a = self._array
        if not (a.flags.c_contiguous or a.flags.f_contiguous):  # (a root is one block)
            raise NotImplementedError(at_user("a storage that is not one block of memory"))
        return a.reshape(-1, order="A").view(np.uint8)

    def tolist(self) -> list:
        return self._bytes().tolist()

    def __repr__(self) -> str:
        rows = "".join(f" {b}\n" for b in self.tolist())
        return f"{rows}[staged.storage.UntypedStorage(device=cpu) of size {len(self)}]"


def untyped_storage(x: Tensor) -> UntypedStorage:
    """``x.untyped_storage()``: the memory ``x`` views (a NumPy array's for a tensor made
    from one), shared by every view of it."""
    p = x._payload
    if type(p) is not np.ndarray:
        raise NotImplementedError(
            at_user(
                "untyped_storage() needs the tensor's data at hand (not a meta tensor, nor "
                "one inside staged.compile/capture): use x.data_ptr() or x.numpy() outside"
            )
        )
    return UntypedStorage(storage(p))


class TypedStorage:
    """torch's ``TypedStorage`` of a CPU tensor (``Tensor.storage()``): the memory under it
    as elements of its dtype: their count (``size``, ``len``), ``data_ptr``, ``tolist``,
    indexing, and the bytes (``untyped()``)."""

    __slots__ = ("_untyped_storage", "dtype")

    def __init__(self, untyped: UntypedStorage, dtype):
        self._untyped_storage, self.dtype = untyped, dtype

    def untyped(self) -> UntypedStorage:
        return self._untyped_storage

    def element_size(self) -> int:
        return self.dtype.itemsize

    def size(self) -> int:
        return self._untyped_storage.nbytes() // self.element_size()

    __len__ = size

    def nbytes(self) -> int:
        return self._untyped_storage.nbytes()

    def data_ptr(self) -> int:
        return self._untyped_storage.data_ptr()

    @property
    def device(self):
        return devices.CPU

    def _elements(self) -> np.ndarray:
        return self._untyped_storage._bytes().view(self.dtype.np)

    def tolist(self) -> list:
        return self._elements().tolist()

    def __getitem__(self, i):
        return self._elements()[i].item()

    def __repr__(self) -> str:
        rows = "".join(f" {v}\n" for v in self.tolist())
        return f"{rows}[staged.storage.TypedStorage(dtype={self.dtype}, device=cpu) of size {len(self)}]"


def typed_storage(x: Tensor) -> TypedStorage:
    """``x.storage()``: torch's deprecated TypedStorage, with its warning once a process."""
    warn_once(
        "TypedStorage is deprecated. It will be removed in the future and UntypedStorage will "
        "be the only storage class. This should only matter to you if you are using storages "
        "directly.  To access UntypedStorage directly, use tensor.untyped_storage() instead of "
        "tensor.storage()"
    )
    return TypedStorage(untyped_storage(x), x.dtype)
