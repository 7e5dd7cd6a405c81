"""dtypes: PyTorch's names over NumPy's dtypes, and PyTorch's type promotion."""

from __future__ import annotations

import math

import ml_dtypes  # bfloat16 and the float8s: NumPy dtypes for them
import numpy as np


_TITLES = {
    "bool": "Bool",
    "uint8": "Byte",
    "uint16": "UInt16",
    "uint32": "UInt32",
    "uint64": "UInt64",
    "int8": "Char",
    "int16": "Short",
    "int32": "Int",
    "int64": "Long",
    "float16": "Half",
    "float32": "Float",
    "float64": "Double",
    "bfloat16": "BFloat16",
    "complex64": "ComplexFloat",
    "complex128": "ComplexDouble",
    "float8_e4m3fn": "Float8_e4m3fn",
    "float8_e5m2": "Float8_e5m2",
    "float8_e4m3fnuz": "Float8_e4m3fnuz",
    "float8_e5m2fnuz": "Float8_e5m2fnuz",
}
# torch's C++ type names (caffe2::TypeMeta's), as its dtype-mismatch messages print them
_TYPE_META = {
    "bool": "bool",
    "uint8": "unsigned char",
    "uint16": "unsigned short",
    "uint32": "unsigned int",
    "uint64": "unsigned long",
    "int8": "signed char",
    "int16": "short int",
    "int32": "int",
    "int64": "long int",
    "float16": "c10::Half",
    "float32": "float",
    "float64": "double",
    "bfloat16": "c10::BFloat16",
    "complex64": "c10::complex<float>",
    "complex128": "c10::complex<double>",
    "float8_e4m3fn": "c10::Float8_e4m3fn",
    "float8_e5m2": "c10::Float8_e5m2",
    "float8_e4m3fnuz": "c10::Float8_e4m3fnuz",
    "float8_e5m2fnuz": "c10::Float8_e5m2fnuz",
}


# the package dtypes and sizes print as: "torch" where staged stands in for it
# (``staged.as_torch``), so a program prints (and compares) torch's ``torch.float32``
PACKAGE = "staged"


class DType:
    """A tensor element type; ``staged.float32`` and friends are the instances."""

    __slots__ = (
        "name",
        "np",
        "is_floating_point",
        "is_complex",
        "itemsize",
        "_category",
        "dclass",
        "title",
        "type_meta",
    )

    def __init__(self, name: str, np_dtype, category: int):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        self._category = category  # 0 bool, 1 int, 2 float, 3 complex
        self.is_floating_point = category == 2
        self.is_complex = category == 3
        # the class a primitive's domain and the lowerings are written over
        self.dclass = (
            "uint" if self.np.kind == "u" else ("bool", "int", "float", "complex")[category]
        )
        self.title = _TITLES[name]  # as torch's messages and legacy tensor types name it
        self.type_meta = _TYPE_META[name]  # "float": as some of torch's messages name it

    def __repr__(self) -> str:
        return f"{PACKAGE}.{self.name}"

    def __reduce__(self):
        return (from_numpy_dtype, (self.np,))

    @property
    def is_signed(self) -> bool:
        return self._category != 0 and self.np.kind != "u"

    def to_real(self) -> DType:
        """The real dtype of a complex one (complex64 -> float32); itself otherwise."""
        return {complex64: float32, complex128: float64}.get(self, self)

    def to_complex(self) -> DType:
        """The complex dtype of a float one (float16 and bfloat16: complex64, as staged has
        no complex32); itself otherwise."""
        if self.name == "bfloat16":
            return complex64
        return {float32: complex64, float64: complex128, float16: complex64}.get(self, self)


bool_ = DType("bool", np.bool_, 0)
uint8 = DType("uint8", np.uint8, 1)
int8 = DType("int8", np.int8, 1)
int16 = DType("int16", np.int16, 1)
int32 = DType("int32", np.int32, 1)
int64 = DType("int64", np.int64, 1)
float16 = DType("float16", np.float16, 2)
float32 = DType("float32", np.float32, 2)
float64 = DType("float64", np.float64, 2)
complex64 = DType("complex64", np.complex64, 3)
complex128 = DType("complex128", np.complex128, 3)

bfloat16 = DType("bfloat16", ml_dtypes.bfloat16, 2)
# torch's "shell" dtypes: tensors of them are made, converted, copied, indexed, saved and
# loaded (safetensors' U16/U32/U64 and F8 weights), but torch has no arithmetic for most of
# them and promotes them with no other dtype (``_promote_shell``)
uint16 = DType("uint16", np.uint16, 1)
uint32 = DType("uint32", np.uint32, 1)
uint64 = DType("uint64", np.uint64, 1)
float8_e4m3fn = DType("float8_e4m3fn", ml_dtypes.float8_e4m3fn, 2)
float8_e5m2 = DType("float8_e5m2", ml_dtypes.float8_e5m2, 2)
float8_e4m3fnuz = DType("float8_e4m3fnuz", ml_dtypes.float8_e4m3fnuz, 2)
float8_e5m2fnuz = DType("float8_e5m2fnuz", ml_dtypes.float8_e5m2fnuz, 2)
FLOAT8 = frozenset((float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz))
SHELL_UINTS = frozenset((uint16, uint32, uint64))
# the NumPy dtypes ml_dtypes defines, which NumPy converts to integers as they choose
ML_NP = frozenset(d.np for d in (bfloat16, *FLOAT8))

ALL: tuple[DType, ...] = (
    bool_,
    uint8,
    int8,
    int16,
    int32,
    int64,
    float16,
    float32,
    float64,
    complex64,
    complex128,
    bfloat16,
    uint16,
    uint32,
    uint64,
    float8_e4m3fn,
    float8_e5m2,
    float8_e4m3fnuz,
    float8_e5m2fnuz,
)
_BY_NP = {d.np: d for d in ALL}

_NP_DTYPES = frozenset(type(d) for d in _BY_NP)  # NumPy's dtype classes: no conversion
_default = [float32]


def get_default_dtype() -> DType:
    return _default[0]


def set_default_dtype(d: DType) -> None:
    if not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default[0] = d


def from_numpy_dtype(npd) -> DType:
    try:
        return _BY_NP[npd if type(npd) in _NP_DTYPES else np.dtype(npd)]
    except (KeyError, TypeError):
        raise TypeError(
            f"staged has no dtype for NumPy dtype {npd!r}; supported: "
            f"{', '.join(d.name for d in ALL)}"
        ) from None


def as_dtype(d) -> DType:
    """Accept a DType, a NumPy dtype or a Python type (float, int, bool, complex)."""
    if isinstance(d, DType):
        return d
    if d is float:
        return get_default_dtype()
    if d is int:
        return int64
    if d is bool:
        return bool_
    if d is complex:
        return get_default_dtype().to_complex()
    return from_numpy_dtype(d)


def _promote_pair(a: DType, b: DType) -> DType:
    """torch.promote_types: within a category the wider dtype (bfloat16 with float16 is
    float32); across categories the higher one, a complex one as wide as a float64 it
    meets (float64 with complex64 is complex128)."""
    if a is b:
        return a
    if a in FLOAT8 or b in FLOAT8 or a in SHELL_UINTS or b in SHELL_UINTS:
        return _promote_shell(a, b)
    if a._category != b._category:
        lo, hi = (a, b) if a._category < b._category else (b, a)
        return complex128 if hi is complex64 and lo is float64 else hi
    if {a.name, b.name} == {"bfloat16", "float16"}:
        return float32
    return from_numpy_dtype(np.promote_types(a.np, b.np))


def _promote_shell(a: DType, b: DType) -> DType:
    """torch's promotion of two different dtypes, one a shell one: a float8 with none, an
    unsigned one wider than uint8 with a float16, bfloat16, float32 or float64 only."""
    if a in FLOAT8 or b in FLOAT8:
        what = "Float8 Types"
    elif a in SHELL_UINTS and b._category == 2:
        return b
    elif b in SHELL_UINTS and a._category == 2:
        return a
    else:
        what = "uint16, uint32, uint64 types"
    raise RuntimeError(
        f"Promotion for {what} is not supported, attempted to promote {a.title} and {b.title}"
    )


def _promote_all(group):
    r = None
    for d in group:
        r = d if r is None else _promote_pair(r, d)
    return r


def _scalar_dtype(v) -> DType:
    if isinstance(v, bool):  # (not NumPy's bool: torch's arguments read np.bool_ as a float)
        return bool_
    if isinstance(v, (int, np.integer)):
        return int64
    if isinstance(v, complex):
        return get_default_dtype().to_complex()
    return get_default_dtype()


def result_type(dim_dtypes, zero_dim_dtypes, scalars=()) -> DType:
    """PyTorch's promotion: dimensioned tensors take precedence over zero-dim tensors,
    which take precedence over Python scalars, unless a lower tier has a higher category
    (bool < int < float < complex)."""
    out: DType | None = None
    for tier in (
        _promote_all(dim_dtypes),
        _promote_all(zero_dim_dtypes),
        _promote_all(_scalar_dtype(v) for v in scalars),
    ):
        if tier is None:
            continue
        if out is None:
            out = tier
        elif tier._category > out._category:
            # a complex scalar keeps a float tensor's precision (float64 + 1j -> complex128)
            out = out.to_complex() if tier._category == 3 and out._category == 2 else tier
    return out  # type: ignore[return-value]  # None only where no operand has a dtype


def narrowed(a: np.ndarray, npd: np.dtype) -> np.ndarray:
    """``a`` as NumPy dtype ``npd``. Note [half through float32]: torch makes float16 and
    bfloat16 values from a float (c10::Half(float)), so float64s and integers are rounded
    twice, to float32 and then to 16 bits: 1 + 2**-11 + 2**-40 is float16's 1.0 (a tie once
    in float32), where NumPy's direct conversion gives 1.0009765625, and 2**24 + 2**16 + 1
    is bfloat16's 2**24 (ml_dtypes: 2**24 + 2**17). A float8 is made as torch's are
    (``_float8``)."""
    if npd.itemsize == 1 and npd.kind in "fV":
        return _float8(a, npd)
    if npd.itemsize == 2 and npd.kind in "fV" and a.dtype.kind in "fiu" and a.dtype.itemsize > 2:
        a = a.astype(np.float32, copy=False)
    return a.astype(npd, copy=False)


def _float8(a: np.ndarray, npd: np.dtype) -> np.ndarray:
    """``a`` rounded to a float8 as torch's conversions do, from its value in float64 (exact
    for every source within float8's range): float8_e4m3fn saturates (an infinity, or a
    number beyond +-448, is +-448; ml_dtypes gives NaN), and float8_e5m2's NaN is 0x7F
    (0xFF with the sign; ml_dtypes' 0x7E). The fnuz types are ml_dtypes' (their one NaN)."""
    a = np.array(a, np.float64)
    if npd == float8_e4m3fn.np:
        np.clip(a, -448.0, 448.0, out=a)  # NaN stays NaN
    with np.errstate(over="ignore", invalid="ignore"):
        out = a.astype(npd)
    if npd == float8_e5m2.np:
        nan = np.isnan(a)
        if nan.any():
            out.view(np.uint8)[nan] = np.where(np.signbit(a[nan]), 0xFF, 0x7F)
    return out


def scalar_as(value, d: DType):
    """A Python number as ``d``'s kernels read a Scalar argument (torch's
    ``Scalar.to<T>()``): a float truncated toward zero for an integer ``d`` (addmm's
    ``beta=0.5`` on int64 tensors is 0), a truth value for bool."""
    if d._category == 0:
        return bool(value)
    if isinstance(value, float) and d._category == 1:
        return int(value)
    return value


class finfo:
    """``torch.finfo``: the limits of a floating dtype (a complex one's parts; the default
    dtype when none is given): ``bits eps max min tiny smallest_normal resolution``."""

    def __init__(self, type=None):
        d = get_default_dtype() if type is None else as_dtype(type)
        if d.is_complex:
            d = {complex64: float32, complex128: float64}[d]
        if not d.is_floating_point:
            raise TypeError(
                f"torch.finfo() requires a floating point input type, got {d!r}: use "
                "torch.iinfo for integers"
            )
        info = ml_dtypes.finfo(d.np) if d.np.kind == "V" or d in FLOAT8 else np.finfo(d.np)
        self.bits = int(info.bits)
        self.eps, self.max, self.min = float(info.eps), float(info.max), float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        # torch's: 10 ** -digits10, the decimal digits the significand always holds
        self.resolution = 10.0 ** -math.floor(int(info.nmant) * math.log10(2))
        if d is float8_e5m2fnuz:  # c10's numeric_limits says 2**-3 (the spacing at 1 is 2**-2)
            self.eps = 0.125
        self.dtype = d.name

    def __repr__(self) -> str:
        return (
            f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
            f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
            f"tiny={self.tiny:g}, dtype={self.dtype})"
        )


class iinfo:
    """``torch.iinfo``: the limits of an integer dtype: ``bits max min``."""

    def __init__(self, type):
        d = as_dtype(type)
        if d.is_floating_point or d.is_complex or d is bool_:
            raise TypeError(
                f"torch.iinfo() requires an integer input type, got {d!r}: use torch.finfo "
                "for floating point types"
            )
        info = np.iinfo(d.np)
        self.bits, self.max, self.min, self.dtype = (
            int(info.bits),
            int(info.max),
            int(info.min),
            d.name,
        )

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"
