"""``staged.device``: torch.device's names and checks, for a build whose tensors all live in
host memory.

Note [devices]: eager tensors are NumPy arrays, so every tensor with data is on
``device('cpu')`` (a ``device('meta')`` tensor has none: Note [meta tensors] in ``meta.py``);
scripts written for torch name devices anyway (``device = "cuda" if
torch.cuda.is_available() else "cpu"``, ``x.to(device)``, ``zeros(..., device=device)``).
Those calls work for the CPU (any index, as torch) and fail clearly for any other device,
as a CPU-only torch build does (an AssertionError for CUDA). A compiled step picks its
accelerator by ``staged.compile(fn, backend="cuda" | "vulkan-spirv")`` instead: its state
stays on that device between calls. The checks run only where a caller passes a device,
so the eager hot path never sees them.
"""

from __future__ import annotations

import re

# torch's device types, in the order its error message lists them
TYPES = (
    "cpu",
    "cuda",
    "ipu",
    "xpu",
    "mkldnn",
    "opengl",
    "opencl",
    "ideep",
    "hip",
    "ve",
    "fpga",
    "maia",
    "xla",
    "lazy",
    "vulkan",
    "mps",
    "meta",
    "hpu",
    "mtia",
    "privateuseone",
)
_SPEC = re.compile(r"([a-z_]+)(?::(0|[1-9][0-9]*))?")
_NO_ACCELERATOR = "Cannot access accelerator device when none is available."


class device:
    """A device, as ``torch.device``: ``device('cpu')``, ``device('cuda:1')``,
    ``device('cuda', 0)``; ``.type`` and ``.index`` (None when not given)."""

    __slots__ = ("_type", "_index")

    def __init__(self, type, index=None):  # torch's argument names
        if isinstance(type, device):
            if index is not None:
                raise TypeError(
                    "device() received an invalid combination of arguments: a device and an index"
                )
            self._type, self._index = type._type, type._index
            return
        if isinstance(type, int) and not isinstance(type, bool):
            raise RuntimeError(_NO_ACCELERATOR)  # device(0): the current accelerator's
        if not isinstance(type, str):
            raise TypeError(
                f"device() received an invalid combination of arguments - got "
                f"({_tname(type)}), "
                "but expected one of: (torch.device device), (str type, "
                "int index = -1)"
            )
        m = _SPEC.fullmatch(type)
        if m is None:  # torch's parser: a name of letters and _, then an optional :index
            name = type.partition(":")[0]
            if name and all(c.isalpha() or c == "_" for c in name) and name not in TYPES:
                raise RuntimeError(_unknown(type))
            raise RuntimeError(f"Invalid device string: '{type}'")
        kind, idx = m.group(1), m.group(2)
        if kind not in TYPES:
            raise RuntimeError(_unknown(type))
        if idx is not None and index is not None:
            raise RuntimeError(
                f"type (string) must not include an index because index was "
                f"passed explicitly: {type}"
            )
        if index is not None:
            if not isinstance(index, int) or isinstance(index, bool):
                raise TypeError(f"device(): index must be an int, not {_tname(index)}")
            if index < 0:
                if index != -1:
                    raise RuntimeError("Device index must not be negative")
                index = None  # torch's default: no index
        self._type = kind
        self._index = int(idx) if idx is not None else index

    @property
    def type(self) -> str:
        return self._type

    @property
    def index(self):
        return self._index

    def __eq__(self, other):
        if not isinstance(other, device):
            return False
        return self._type == other._type and self._index == other._index

    def __hash__(self):
        return hash((self._type, self._index))

    def __str__(self):
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __repr__(self):
        if self._index is None:
            return f"device(type='{self._type}')"
        return f"device(type='{self._type}', index={self._index})"

    def __reduce__(self):
        return (device, (self._type,) if self._index is None else (self._type, self._index))

    def __enter__(self):  # torch's ``with torch.device('meta'):``: the default inside
        _default.append(_placed(self))
        return self

    def __exit__(self, *exc):
        _default.pop()
        return False


def _tname(x) -> str:
    return x.__class__.__name__


def _unknown(spec: str) -> str:
    return f"Expected one of {', '.join(TYPES)} device type at start of device string: {spec}"


CPU = device("cpu")
META = device("meta")
_default = [CPU]  # the default device: its last entry (``with device(...)`` pushes one)


def check(d) -> device:
    """``d`` (a device, a string or None) as a device this build holds tensors on: the CPU;
    any other raises the error a CPU-only torch build raises, saying what to use instead."""
    if d is None or d is CPU or d == "cpu":
        return CPU
    if not isinstance(d, device):
        d = device(d)
    if d._type == "cpu":
        return d
    if d._type == "cuda":
        raise AssertionError(
            f"Torch not compiled with CUDA enabled: staged holds eager tensors in host memory "
            f"(NumPy), so there is no tensor on '{d}' (staged.cuda.is_available() is False). "
            f"Keep tensors on 'cpu' and run the training step on a GPU with "
            f"staged.compile(step, backend='cuda') or backend='vulkan-spirv'."
        )
    raise RuntimeError(
        f"staged has no '{d._type}' device: eager tensors live in host memory (device "
        f"'cpu'); a compiled step runs on an accelerator with staged.compile(step, "
        f"backend='cuda' or 'vulkan-spirv')."
    )


def _placed(d) -> device:
    """``d`` as a device tensors can be on: the CPU or meta (others raise as ``check``)."""
    if d is META or d == "meta" or (isinstance(d, device) and d._type == "meta"):
        return META
    return check(d)


def on_meta(d) -> bool:
    """Whether a factory's ``device=`` (the default device where None) is meta."""
    if d is None:
        return _default[-1] is META
    return _placed(d) is META


def get_default_device() -> device:
    """The device factories make tensors on: the CPU, or meta (``set_default_device``,
    ``with device('meta'):``)."""
    return _default[-1]


def set_default_device(d) -> None:
    """Make factories put tensors on ``d`` (the CPU where None, or meta)."""
    _default[0] = CPU if d is None else _placed(d)
