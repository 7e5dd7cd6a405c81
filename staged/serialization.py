"""``staged.save`` / ``staged.load``: checkpoints in PyTorch's own zip format, so they move
both ways between staged and torch (``torch.load(f, weights_only=True)`` reads staged's,
staged reads torch's without torch installed).

Note [checkpoint format]: torch.save's default format (torch 2.13). A zip archive whose
records all sit in one folder ``<name>/``: ``data.pkl``, a protocol-2 pickle of the object
in which a tensor is ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
requires_grad, hooks)`` (a Parameter wraps that in ``torch._utils._rebuild_parameter``)
and a storage the persistent id ``("storage", torch.<Type>Storage, key, location,
numel)``; ``data/<key>``, the storage's raw bytes in the byte order the ``byteorder``
record names, uncompressed and 64-byte aligned; and ``.format_version``,
``.storage_alignment``, ``version`` and ``.data/serialization_id`` as torch writes them.
Tensors viewing one NumPy array are saved over one storage and load as views of one array
again. Reading unpickles through an allow-list (``find_class``), as torch's weights-only
unpickler does: a global outside it is refused before anything is called.
"""

from __future__ import annotations

import collections
import contextlib
import importlib
import io
import os
import pickle
import struct
import sys
import zipfile
import zlib
from typing import Any

import numpy as np

from . import dtypes as dt
from .eager.devices import device
from .eager.tensor import Size, Tensor
from .nn.parameter import Parameter

_ALIGNMENT = 64
_ZIP64_AT = 0xFFFFFFFF  # sizes and offsets from here on take zip64 fields, as miniz decides
_LEGACY_MAGIC = b"\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19"  # pickle of torch's old magic number
# what a checkpoint may fail with when it is damaged or not a checkpoint at all
_CORRUPT = (
    zipfile.BadZipFile,
    zlib.error,
    struct.error,
    pickle.UnpicklingError,
    EOFError,
    KeyError,
    ValueError,
    OverflowError,
    MemoryError,
)


class _StorageType:
    """``torch.<Type>Storage`` in a checkpoint: the dtype of a storage."""

    __slots__ = ("dtype",)

    def __init__(self, dtype: dt.DType):
        self.dtype = dtype


class _Storage:
    """A storage being saved: its key and the flat array of its elements."""

    __slots__ = ("key", "array")

    def __init__(self, key: str, array: np.ndarray):
        self.key, self.array = key, array


class _Refused(Exception):
    """A global outside the allow-list (raised to the caller as ``UnpicklingError``)."""


def _rebuild_tensor_v2(
    storage, storage_offset, size, stride, requires_grad, backward_hooks, metadata=None
):
    """``torch._utils._rebuild_tensor_v2``: the tensor viewing ``storage`` (hooks, always
    empty in files torch writes, are dropped)."""
    if not isinstance(storage, np.ndarray):
        raise ValueError(f"a tensor's storage is {type(storage).__name__}, not a storage")
    payload = _view(storage, storage_offset, tuple(size), tuple(stride))
    if metadata:  # torch's conj and neg bits: staged keeps the values they stand for
        if set(metadata) - {"conj", "neg"}:
            raise ValueError(f"unsupported tensor metadata {metadata!r}")
        if metadata.get("conj"):
            payload = np.conj(payload)
        if metadata.get("neg"):
            payload = np.negative(payload)
    return Tensor._wrap(payload).requires_grad_(bool(requires_grad))


class _AbsentDtype:
    """A torch dtype staged has no counterpart of, named in a checkpoint."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


# torch's dtypes without a staged one; torch writes their tensors by _rebuild_tensor_v3
_ABSENT_DTYPES = (
    "float8_e8m0fnu",
    "float4_e2m1fn_x2",
    "complex32",
    *(f"bits{k}" for k in ("1x8", "2x4", "4x2", "8", "16")),
    *(f"{u}int{b}" for u in ("", "u") for b in range(1, 8)),
)


# the dtypes torch has no typed storage for: their tensors are saved over an untyped (byte)
# storage by _rebuild_tensor_v3, which names the dtype
_UNTYPED = dt.SHELL_UINTS | dt.FLOAT8


def _rebuild_tensor_v3(
    storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype, metadata=None
):
    """``torch._utils._rebuild_tensor_v3``: ``_rebuild_tensor_v2`` over an untyped (byte)
    storage read as ``dtype``; torch writes it for the dtypes without a typed storage."""
    if isinstance(dtype, _AbsentDtype):
        raise _Refused(
            f"the checkpoint holds a tensor of dtype torch.{dtype.name}, and staged has no "
            f"such dtype (it has {', '.join(d.name for d in dt.ALL)})"
        )
    if not (isinstance(storage, np.ndarray) and isinstance(dtype, dt.DType)):
        raise ValueError("_rebuild_tensor_v3 needs an untyped storage and a dtype")
    return _rebuild_tensor_v2(
        storage.view(dtype.np),
        storage_offset,
        size,
        stride,
        requires_grad,
        backward_hooks,
        metadata,
    )


def _rebuild_parameter(data, requires_grad, backward_hooks):
    """``torch._utils._rebuild_parameter``."""
    return Parameter(data, bool(requires_grad))


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    """``torch._utils._rebuild_parameter_with_state``: a Parameter with a user's
    attributes (``p.tag = 1``)."""
    return _set_state(Parameter(data, bool(requires_grad)), state)


def _rebuild_from_type_v2(func, new_type, args, state):
    """``torch._tensor._rebuild_from_type_v2``, as torch writes a tensor with a user's
    attributes: ``func(*args)`` with ``state`` set on it (a plain tensor only: the
    allow-list has no subclass)."""
    if new_type is not Tensor:
        raise _Refused(f"a tensor of type {getattr(new_type, '__name__', new_type)!r}")
    return _set_state(func(*args), state)


def _set_state(t: Tensor, state) -> Tensor:
    """``torch._utils._set_obj_state`` for a plain tensor or Parameter: ``state`` is its
    ``__dict__``, or ``(__dict__, slots)`` with no slots (those are a subclass's). The
    attributes go into ``__dict__`` only: a file cannot set staged's own fields."""
    attributes, slots = state if isinstance(state, tuple) and len(state) == 2 else (state, None)
    if slots or not isinstance(attributes or {}, dict):
        raise ValueError(f"invalid tensor state {state!r}: expected a dict of attributes")
    if not all(isinstance(k, str) for k in attributes or {}):
        raise ValueError(f"invalid tensor state {state!r}: attribute names must be strings")
    t.__dict__.update(attributes or {})
    return t


def _view(array: np.ndarray, offset: int, size: tuple, stride: tuple) -> np.ndarray:
    """The strided view of the flat ``array`` that a saved tensor is, checked to lie in it."""
    if len(size) != len(stride) or offset < 0 or min(size + stride, default=0) < 0:
        raise ValueError(
            f"invalid tensor layout: size {list(size)}, stride {list(stride)}, offset {offset}"
        )
    if 0 in size:
        return np.empty(size, array.dtype)
    if offset + sum((n - 1) * s for n, s in zip(size, stride)) >= array.size:
        raise ValueError(
            f"a tensor of size {list(size)} and stride {list(stride)} at offset "
            f"{offset} runs past its storage of {array.size} elements"
        )
    step = array.itemsize
    return np.ndarray(
        size, array.dtype, buffer=array, offset=offset * step, strides=[s * step for s in stride]
    )


def _latin1(text, encoding):
    """``_codecs.encode`` as protocol-2 pickles use it for bytes, and only that."""
    if encoding != "latin1":
        raise ValueError(f"bytes encoded as {encoding!r}, not 'latin1'")
    return text.encode("latin1")


# torch's globals and what stands for them here: the loader maps names to objects, the
# saver writes the name of each object (Note [checkpoint format])
_TORCH = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter_with_state,
    ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
    ("torch", "Tensor"): Tensor,
    ("torch", "Size"): Size,
    ("torch", "device"): device,
    **{("torch", d.name): d for d in dt.ALL},
    **{("torch", d.title + "Storage"): _StorageType(d) for d in dt.ALL if d not in _UNTYPED},
    ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
    ("torch.storage", "UntypedStorage"): _StorageType(dt.uint8),
}
_NAME_OF = {id(obj): where for where, obj in _TORCH.items()}
_STORAGE_TYPE = {d: _TORCH[("torch", d.title + "Storage")] for d in dt.ALL if d not in _UNTYPED}
_UNTYPED_STORAGE = _TORCH[("torch.storage", "UntypedStorage")]
# what only a loaded file names (never written by staged.save)
_TORCH_LOADED = {
    **_TORCH,
    **{("torch", name): _AbsentDtype(name) for name in _ABSENT_DTYPES},
}
# the weights-only allow-list: torch's, less what staged has no type for
_SAFE = {
    **_TORCH_LOADED,
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("collections", "Counter"): collections.Counter,
    ("_codecs", "encode"): _latin1,
    **{
        (module, t.__name__): t
        for module in ("builtins", "__builtin__")
        for t in (set, complex, bytearray)
    },
}


# Note [safe globals]: torch's API for widening the weights-only allow-list. A checkpoint of
# a whole model (``torch.save(model)``) names each class by its torch path
# (``torch.nn.modules.linear.Linear``); staged resolves such a name to the object at the
# same path under ``staged`` (``staged.nn.modules.linear.Linear``; Note [module paths])
# and, when loading weights only, accepts it only if that object was allowed.
_user_globals: dict = {}  # "module.name" -> object, from add_safe_globals


def _qualified(entry) -> tuple:
    """``(name, object)`` of an ``add_safe_globals`` entry: an object, or ``(object,
    "module.name")``."""
    if isinstance(entry, tuple):
        if len(entry) != 2 or not isinstance(entry[1], str):
            raise ValueError(f"expected an object or (object, 'module.name'), got {entry!r}")
        return entry[1], entry[0]
    return f"{entry.__module__}.{entry.__qualname__}", entry


def add_safe_globals(safe_globals) -> None:
    """Allow ``staged.load(weights_only=True)`` to rebuild these classes and functions (as
    ``torch.serialization.add_safe_globals``): for a pickled whole model, its layer classes,
    e.g. ``[nn.Sequential, nn.Linear, nn.ReLU]``. Only for classes you trust."""
    for entry in safe_globals:
        name, obj = _qualified(entry)
        _user_globals[name] = obj


def get_safe_globals() -> list:
    """The objects (or ``(object, name)`` pairs) ``add_safe_globals`` allowed."""
    return [
        obj
        if name == "{}.{}".format(getattr(obj, "__module__", ""), getattr(obj, "__qualname__", ""))
        else (obj, name)
        for name, obj in _user_globals.items()
    ]


def clear_safe_globals() -> None:
    _user_globals.clear()


class safe_globals:
    """``with staged.serialization.safe_globals([nn.Linear, ...]):`` allows them only inside
    the block (torch's context manager of that name)."""

    def __init__(self, safe_globals):
        self._entries = [_qualified(e) for e in safe_globals]

    def __enter__(self):
        self._saved = dict(_user_globals)
        _user_globals.update(self._entries)
        return self

    def __exit__(self, *exc):
        _user_globals.clear()
        _user_globals.update(self._saved)
        return False


def _staged_global(module: str, name: str):
    """The object a checkpoint's ``torch.<path>.<name>`` stands for: ``staged.<path>.<name>``
    (None where staged has none). Only staged's own modules are imported for it."""
    if module != "torch" and not module.startswith("torch."):
        return None
    path = "staged" + module[len("torch") :]
    try:
        obj = (
            importlib.import_module(path) if path.startswith("staged.nn") else sys.modules.get(path)
        )
    except ImportError:
        return None
    for part in name.split("."):
        obj = getattr(obj, part, None)
    return obj


class _Pickler(pickle._Pickler):
    """torch.save's pickling: tensors by storage, torch's names for dtypes and Size. The
    pure-Python pickler, as only it lets a subclass write a global by name (``save_global``)
    without importing the module that defines it."""

    def __init__(self, file):
        super().__init__(file, protocol=2)
        self.storages = {}  # id(array) -> _Storage, in the order torch numbers them

    def persistent_id(self, obj):
        if type(obj) is _Storage:
            d = dt.from_numpy_dtype(obj.array.dtype)
            if d in _UNTYPED:
                return ("storage", _UNTYPED_STORAGE, obj.key, "cpu", obj.array.nbytes)
            return ("storage", _STORAGE_TYPE[d], obj.key, "cpu", obj.array.size)
        return None

    def reducer_override(self, obj):
        if id(obj) in _NAME_OF:
            return "torch"  # a name: pickle calls save_global
        state = obj.__dict__ if isinstance(obj, Tensor) else None  # a user's attributes
        if isinstance(obj, Parameter):
            data = (Tensor._wrap(obj._host()), obj.requires_grad, collections.OrderedDict())
            if state:
                return _rebuild_parameter_with_state, (*data, state)
            return _rebuild_parameter, data
        if isinstance(obj, Tensor):
            args = (
                *self._storage_of(obj._host()),
                obj.requires_grad,
                collections.OrderedDict(),
            )
            rebuild = _rebuild_tensor_v2
            if obj.dtype in _UNTYPED:
                rebuild, args = _rebuild_tensor_v3, (*args, obj.dtype)
            if state:
                return _rebuild_from_type_v2, (rebuild, Tensor, args, state)
            return rebuild, args
        if type(obj) is Size:
            return Size, (tuple(obj),)
        return NotImplemented

    def save_global(self, obj, name=None):
        where = _NAME_OF.get(id(obj))
        if where is None:
            return super().save_global(obj, name)
        self.write(pickle.GLOBAL + f"{where[0]}\n{where[1]}\n".encode())
        self.memoize(obj)

    def _storage_of(self, p: np.ndarray):
        """``(storage, offset, size, stride)`` of payload ``p``: over the array whose memory
        it views where that is a flat buffer of its dtype, else over a contiguous copy."""
        root = p
        while isinstance(root.base, np.ndarray):
            root = root.base
        step = p.itemsize
        start = p.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        inside = (
            root.dtype == p.dtype
            and root.flags.c_contiguous
            and p.size > 0
            and start >= 0
            and start % step == 0
            and all(s >= 0 and s % step == 0 for s in p.strides)
            and start + sum((n - 1) * s for n, s in zip(p.shape, p.strides)) < root.nbytes
        )
        if not inside:
            root, start = np.array(p, order="C"), 0
            p = root
        storage = self.storages.get(id(root))
        if storage is None:
            storage = self.storages[id(root)] = _Storage(str(len(self.storages)), root.reshape(-1))
        return storage, start // step, p.shape, tuple(s // step for s in p.strides)


@contextlib.contextmanager
def _opened(f, mode):
    """``f`` itself when it is a file-like object, else the file at path ``f``, closed after."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, mode) as fp:
            yield fp
    else:
        yield f


def _zip64(*values: int) -> bytes:
    """A zip64 extra field holding ``values`` (none: no field)."""
    return struct.pack(f"<HH{len(values)}Q", 1, 8 * len(values), *values) if values else b""


def _write_zip(fp, folder: str, records) -> None:
    """Write ``records`` (``(name, bytes-like)``) into folder ``folder`` of a zip archive laid
    out as torch's writer (miniz) lays it out: uncompressed, each record's data 64-byte
    aligned by an ``FB`` padding field and followed by a data descriptor unless empty, zip64
    fields past 4 GiB. torch computes storage offsets from that layout
    (``calculate_storage_offsets``), so it holds for staged's files too."""
    pos, central = 0, []
    for name, data in records:
        name, data = f"{folder}/{name}".encode(), memoryview(data).cast("B")
        size, crc = len(data), zlib.crc32(data)
        big_size, big_pos = size >= _ZIP64_AT, pos >= _ZIP64_AT
        local64 = _zip64(*[size, size] * big_size, *[pos] * big_pos)
        pad = -(pos + 30 + len(name) + len(local64) + 4) % _ALIGNMENT
        extra = local64 + b"FB" + struct.pack("<H", pad) + b"Z" * pad
        flags = 0x800 | 0x8 * (size > 0)  # UTF-8 name; crc and sizes in the descriptor
        version = 45 if big_size or big_pos else 20
        fp.write(
            struct.pack(
                "<IHHHHHIIIHH",
                0x04034B50,
                version,
                flags,
                0,
                0,
                0x21,
                0,
                0,
                0,
                len(name),
                len(extra),
            )
            + name
            + extra
        )
        fp.write(data)
        if size:
            fp.write(
                struct.pack(
                    "<IIQQ" if big_size or big_pos else "<IIII", 0x08074B50, crc, size, size
                )
            )
        size32 = 0xFFFFFFFF if big_size else size
        central.append(
            struct.pack(
                "<IHHHHHHIIIHHHHHII",
                0x02014B50,
                version,
                version,
                flags,
                0,
                0,
                0x21,
                crc,
                size32,
                size32,
                len(name),
                len(local64),
                0,
                0,
                0,
                0,
                0xFFFFFFFF if big_pos else pos,
            )
            + name
            + local64
        )
        pos += 30 + len(name) + len(extra) + size + (size > 0) * (24 if version == 45 else 16)
    directory, n = b"".join(central), len(central)
    end = struct.pack(
        "<IHHHHIIH",
        0x06054B50,
        0,
        0,
        min(n, 0xFFFF),
        min(n, 0xFFFF),
        min(len(directory), 0xFFFFFFFF),
        min(pos, 0xFFFFFFFF),
        0,
    )
    if n >= 0xFFFF or pos >= _ZIP64_AT or len(directory) >= _ZIP64_AT:
        end = (
            struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, len(directory), pos)
            + struct.pack("<IIQI", 0x07064B50, 0, pos + len(directory), 1)
            + end
        )
    fp.write(directory + end)


def save(obj, f) -> None:
    """Save ``obj`` (tensors, Parameters, state dicts, nested containers, numbers, strings)
    to ``f``, a path or a writable file-like object, in torch.save's zip format
    (Note [checkpoint format]): ``torch.load(f, weights_only=True)`` reads it.

    Example::

        >>> import io
        >>> buf = io.BytesIO()
        >>> staged.save({"w": staged.ones(2)}, buf)
        >>> _ = buf.seek(0)
        >>> staged.load(buf)["w"]
        tensor([1., 1.])
    """
    buf = io.BytesIO()
    pickler = _Pickler(buf)
    pickler.dump(obj)
    data = buf.getvalue()
    folder = "archive"
    if isinstance(f, (str, os.PathLike)):
        folder = os.path.splitext(os.path.basename(os.fspath(f)))[0] or folder
    serialization_id = f"{int.from_bytes(os.urandom(8), 'little'):020d}{zlib.crc32(data):020d}"
    records = [
        ("data.pkl", data),
        (".format_version", b"1"),
        (".storage_alignment", str(_ALIGNMENT).encode()),
        ("byteorder", sys.byteorder.encode()),
        *((f"data/{s.key}", s.array.view(np.uint8)) for s in pickler.storages.values()),
        ("version", b"3\n"),
        (".data/serialization_id", serialization_id.encode()),
    ]
    with _opened(f, "wb") as fp:
        _write_zip(fp, folder, records)


class _Unpickler(pickle.Unpickler):
    """Rebuilds a checkpoint's ``data.pkl``: globals from the allow-list (any non-torch one
    too when not ``safe``), storages read from the archive on first use."""

    _storages: dict[Any, Any]

    def __init__(self, file, read_storage, safe: bool):
        super().__init__(file)
        self._read_storage, self._safe, self._storages = read_storage, safe, {}

    def find_class(self, module, name):
        obj = (_SAFE if self._safe else _TORCH_LOADED).get((module, name))
        if obj is not None:
            return obj
        obj = _user_globals.get(f"{module}.{name}")
        if obj is not None:
            return obj
        ours = _staged_global(module, name)  # Note [safe globals]
        if ours is not None and (not self._safe or any(ours is v for v in _user_globals.values())):
            return ours
        if self._safe:
            raise _Refused(
                f"Weights only load failed: unsupported global {module}.{name}. staged.load "
                "rebuilds tensors, nn.Parameter, torch dtypes and torch.Size, OrderedDict and "
                "Python containers, numbers, strings and bytes; add_safe_globals([...]) or "
                "with safe_globals([...]) allows more (e.g. the layer classes of a pickled "
                "model), weights_only=False any (only for a file you trust)."
            )
        if module.partition(".")[0] == "torch":
            raise _Refused(
                f"unsupported global {module}.{name}: staged has no "
                f"staged{module[5:]}.{name} to stand for it"
            )
        return super().find_class(module, name)

    def persistent_load(self, pid):
        if not (
            type(pid) is tuple
            and len(pid) == 5
            and pid[0] == "storage"
            and isinstance(pid[1], _StorageType)
        ):
            raise pickle.UnpicklingError(f"unsupported persistent id {pid!r}")
        _, kind, key, location, numel = pid
        if key not in self._storages:
            self._storages[key] = self._read_storage(str(key), kind.dtype, numel, location)
        return self._storages[key]


def _location_hook(map_location):
    """``map_location`` as a callable ``(storage, location)``, or None where it has no effect
    (staged keeps every tensor in host memory)."""
    if callable(map_location):
        return map_location
    if (
        map_location is None
        or isinstance(map_location, (str, dict))
        or hasattr(map_location, "type")
    ):
        return None
    raise TypeError(
        f"map_location must be None, a string, a device, a dict or a callable, "
        f"not {type(map_location).__name__}"
    )


def _check_header(fp, name: str) -> None:
    """Refuse, before reading further, a file that is no zip archive."""
    start = fp.tell()
    head = fp.read(len(_LEGACY_MAGIC))
    fp.seek(start)
    if head.startswith(_LEGACY_MAGIC):
        raise RuntimeError(
            f"{name} was written in PyTorch's legacy (non-zip) format "
            "(_use_new_zipfile_serialization=False), which staged does not read; re-save it "
            "with a current torch: torch.save(torch.load(path, weights_only=True), path)"
        )
    if not head.startswith(b"PK\x03\x04"):
        raise RuntimeError(
            f"{name} is not a checkpoint written by torch.save or staged.save: "
            "it is not a zip archive"
        )


def _data_offset(fp, info: zipfile.ZipInfo) -> int:
    """Where the data of an uncompressed record starts in the file."""
    fp.seek(info.header_offset)
    head = fp.read(30)
    if head[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local header for {info.filename}")
    return info.header_offset + 30 + sum(struct.unpack("<HH", head[26:30]))


def _load_archive(zf, fp, mapped, hook, safe):
    """The object in checkpoint ``zf``; storages from ``mapped`` (the file's map) if given."""
    names = zf.namelist()
    folder = names[0].partition("/")[0] if names else ""
    if f"{folder}/data.pkl" not in names:
        raise ValueError("it has no data.pkl record")
    order = zf.read(f"{folder}/byteorder") if f"{folder}/byteorder" in names else b"little"
    if order not in (b"little", b"big"):
        raise ValueError(f"unknown byte order {order!r}")

    def read_storage(key, dtype, numel, location):
        info = zf.getinfo(f"{folder}/data/{key}")
        nbytes = numel * dtype.itemsize
        if info.file_size != nbytes:
            raise ValueError(
                f"record data/{key} holds {info.file_size} bytes, not the "
                f"{nbytes} of {numel} {dtype.name} elements"
            )
        if mapped is not None:
            if info.compress_type != zipfile.ZIP_STORED:
                raise ValueError(f"mmap=True needs uncompressed records; data/{key} is not")
            start = _data_offset(fp, info)
            # over a memoryview, not the map: the array is its own root, so saving it again
            # writes this storage, not the whole file (``_Pickler._storage_of``)
            array = np.frombuffer(memoryview(mapped)[start : start + nbytes], dtype.np)
        else:
            array = np.empty(numel, dtype.np)
            with zf.open(info) as r:
                if r.readinto(array.view(np.uint8)) != nbytes or r.read(1):
                    raise EOFError(f"record data/{key} is truncated")
        if order.decode() != sys.byteorder:
            array.byteswap(inplace=True)
        if hook is not None:
            given = Tensor._wrap(array.view(np.uint8))
            out = hook(given, location)
            if out is not None and out is not given:
                raise TypeError(
                    "map_location must return the storage it is given (or None): "
                    "staged keeps every tensor in host memory"
                )
        return array

    with zf.open(f"{folder}/data.pkl") as pkl:
        return _Unpickler(io.BytesIO(pkl.read()), read_storage, safe).load()


class PyTorchFileReader:
    """torch's reader of a ``torch.save``/``staged.save`` archive (a path or a readable
    binary file): its records by name, relative to the archive's folder (``data.pkl``,
    ``data/0``, ``byteorder``), as bytes."""

    def __init__(self, file) -> None:
        self._zf = zipfile.ZipFile(file)
        names = self._zf.namelist()
        self._folder = names[0].partition("/")[0] if names else ""

    def get_all_records(self) -> list[str]:
        cut = len(self._folder) + 1
        return [n[cut:] for n in self._zf.namelist()]

    def has_record(self, name: str) -> bool:
        return f"{self._folder}/{name}" in self._zf.NameToInfo

    def get_record(self, name: str) -> bytes:
        try:
            return self._zf.read(f"{self._folder}/{name}")
        except KeyError:
            raise RuntimeError(f"record {name!r} not found in the archive") from None

    def get_record_offset(self, name: str) -> int:
        """Where the data of uncompressed record ``name`` starts in the file."""
        return _data_offset(self._zf.fp, self._zf.getinfo(f"{self._folder}/{name}"))


def load(f, map_location=None, *, weights_only=True, mmap=None):
    """Load what ``staged.save`` or ``torch.save`` (its default zip format) wrote to ``f``, a
    path or a readable file-like object; tensors come back as staged Tensors, ``nn.Parameter``
    as Parameters, tensors that shared a storage as views of one array.

    Args:
        map_location: accepted in every form torch takes; staged keeps tensors in host
            memory, so a string, device or dict changes nothing. A callable is called once
            per storage as ``fn(storage, location)`` (``storage`` a 1-D uint8 Tensor of its
            bytes, ``location`` the saved device string) and must return ``storage`` (e.g.
            ``storage.cpu()``) or None.
        weights_only: True (or None): unpickle through torch's weights-only allow-list
            (tensors, Parameters, dtypes, Size, OrderedDict, Python containers, numbers,
            strings, bytes); any other global raises ``pickle.UnpicklingError`` naming it,
            before anything runs. False: other (non-torch) globals are imported, as pickle
            does: only for files you trust.
        mmap: map the storages of the file at path ``f`` copy-on-write instead of reading
            them (torch's MAP_PRIVATE default); writes to the tensors never reach the file.

    Example::

        >>> import io
        >>> buf = io.BytesIO()
        >>> staged.save([staged.arange(3), "x"], buf)
        >>> _ = buf.seek(0)
        >>> staged.load(buf)
        [tensor([0, 1, 2]), 'x']
    """
    hook = _location_hook(map_location)
    is_path = isinstance(f, (str, os.PathLike))
    if mmap and not is_path:
        raise ValueError("f must be a file path in order to use the mmap argument")
    name = repr(os.fspath(f)) if is_path else "the file-like object"
    with _opened(f, "rb") as fp:
        if not getattr(fp, "seekable", lambda: False)():  # a pipe or socket: read it all
            fp = io.BytesIO(fp.read())
        _check_header(fp, name)
        try:
            mapped = np.memmap(f, np.uint8, mode="c") if mmap else None
            with zipfile.ZipFile(fp) as zf:
                return _load_archive(zf, fp, mapped, hook, weights_only is not False)
        except _Refused as e:
            raise pickle.UnpicklingError(str(e)) from None
        except _CORRUPT as e:
            raise RuntimeError(
                f"{name} is not a checkpoint written by torch.save or staged.save: {e}"
            ) from e
