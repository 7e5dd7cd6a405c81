"""Public shape ops: -1 inference, negative dims, rank changes, cat/stack/split/chunk, all
over the reshape, expand, permute, slice and concat primitives."""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from ... import autodiff as ad
from ... import dtypes as dt
from ...autodiff import fused
from ...autodiff.avals import normalize_dims, wrap_dim
from .. import factories, views
from ..views import named
from ..checks import check_range
from ..devices import check as check_device
from ..grad_mode import no_grad
from ..loop_cache import LoopCache
from ..meta import Meta
from ..tensor import Size, Tensor
from . import memory_formats
from ._operands import broadcast_shapes as _broadcast_shapes
from ._operands import expand_to, fresh, operands, promote_types, scalar_tensor, to_dtype
from .data_dependent import host_data
from .elementwise import conj
from .indexing import select_at, take_index


def _shape_arg(shape, keyword=None, name=""):
    """Sizes or dims given as varargs (``x.view(2, 3)``), one sequence (``x.view((2, 3))``)
    or, as ``keyword``, by torch's name for them (``x.view(size=(2, 3))``)."""
    if keyword is not None:
        if shape:
            raise TypeError(f"got multiple values for argument '{name}'")
        return (keyword,) if isinstance(keyword, int) else tuple(keyword)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def _bool_size(fn: str, sizes: tuple, keyword) -> TypeError:
    """torch's refusal of a bool first size of ``x.view``/``x.reshape`` (its argument
    parser takes no bool for the first int of a size; a later one it reads as 0 or 1)."""
    arg = sizes[0] if keyword is None else keyword
    seq = isinstance(arg, (tuple, list))
    if fn == "reshape":
        if keyword is not None:
            why = f"must be tuple of ints, not {type(arg).__name__}"
            return TypeError(f"reshape(): argument 'shape' {why}")
        if len(sizes) > 1:
            return TypeError(f"reshape() takes 1 positional argument but {len(sizes)} were given")
        why = "but found element of type bool at pos 0" if seq else "not bool"
        return TypeError(f"reshape(): argument 'shape' (position 1) must be tuple of ints, {why}")
    head = "view() received an invalid combination of arguments - got "
    one_of = "but expected one of:\n * (torch.dtype dtype)\n"
    if keyword is None and len(sizes) > 1:
        got = ", ".join(type(s).__name__ for s in sizes)
        return TypeError(f"{head}({got}), {one_of} * (tuple of ints size)\n")
    desc = "bool"
    if seq:
        names = [type(s).__name__ for s in arg]
        desc = f"{type(arg).__name__} of {list(names) if type(arg) is list else tuple(names)}"
        desc = desc.replace("'", "")
    if keyword is None:
        why = f"didn't match because some of the arguments have invalid types: (!{desc}!)\n"
        got, bad = type(arg).__name__, why
    else:
        got = f"size={type(arg).__name__}, "
        bad = "didn't match because some of the keywords were incorrect: size\n"
        why = f"didn't match because some of the arguments have invalid types: (!size={desc}!, )\n"
    pad = "      "
    return TypeError(f"{head}({got}), {one_of}{pad}{bad} * (tuple of ints size)\n{pad}{why}")


def reshape(x, *sizes, shape=None):
    given = _shape_arg(sizes, shape, "shape")
    if given and type(given[0]) is bool:
        raise _bool_size("reshape", sizes, shape)
    p = x._payload
    key = (given, p.shape)
    try:  # (symbolic shapes are not kept)
        sizes = _RESOLVED.get(key) if type(p) is np.ndarray else None
    except TypeError:  # an unhashable size: _resolved's error
        sizes = None
    if sizes is None:
        sizes = _resolved(given, x.numel())
        if type(p) is np.ndarray and all(type(s) is int for s in given):
            _RESOLVED.put(key, sizes)
    out = ad.reshape(x, shape=sizes)
    return out if x._base is None else _reshaped_view(x, out)


# (sizes given, all ints; input shape) -> the shape reshape binds: a view or reshape in a
# loop resolves its sizes once (1 us of a 3 us view on 8 floats)
_RESOLVED = LoopCache()


def _resolved(shape, n) -> tuple:
    """The sizes ``shape`` for ``n`` elements, a -1 inferred, with torch's errors."""
    shape = list(shape)
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if shape and min(shape) < -1:
        bad = next(i for i, s in enumerate(shape) if s < -1)
        raise RuntimeError(f"invalid shape dimension {shape[bad]} at index {bad} of shape {shape}")
    infer = -1 in shape
    known = math.prod([s for s in shape if s != -1] if infer else shape)
    if (known == 0 or n % known) if infer else known != n:
        raise RuntimeError(f"shape '{shape}' is invalid for input of size {n}")
    if infer:
        shape[shape.index(-1)] = n // known
    return tuple(map(int, shape))


def _reshaped_view(x, out):
    """``out``, view ``x`` reshaped, named as torch's reshape of a view it cannot view as
    it is: an alias with other strides, or a copy."""
    p = x._payload
    if type(p) is np.ndarray and p.size and not p.flags.c_contiguous:
        shares = np.may_share_memory(out._payload, p)
        named(out, "ReshapeAliasBackward0" if shares else "UnsafeViewBackward0")
    return out


def _viewed(x, shape):
    """``reshape``, its grad_fn named as torch's ``view`` names it (``ViewBackward0``)."""
    out = reshape(x, shape)
    return named(out, "ViewBackward0") if x._base is not None else out


def alias(x):
    """A view of all of ``x``: what torch's identity views (``x.view(x.shape)``, ``x[:]``,
    ``x.squeeze()`` of no size-1 dim) return, a tensor of its own, never ``x`` (a hook,
    ``retain_grad`` or ``requires_grad_`` on it is the view's, not ``x``'s)."""
    return ad.reshape(x, shape=tuple(x._payload.shape))


def _view_dtype(x, d):
    """``x``'s memory read as dtype ``d`` (safetensors' loader views a file's bytes so): a
    view sharing ``x``'s memory and version counter, not differentiable (as torch's); with
    torch's checks where the element sizes differ."""
    old, new = x.dtype.itemsize, d.itemsize
    if old != new:
        what = f"to view {x.dtype.title} as {d.title} (different element sizes)"
        if not x.ndim:
            raise RuntimeError(f"self.dim() cannot be 0 {what}")
        if (x.shape[-1] * old) % new:
            raise RuntimeError(
                f"self.size(-1) must be divisible by {new // old} {what}, but got {x.shape[-1]}"
            )
        strides = x.stride()
        if strides[-1] != 1:
            raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got {strides[-1]}")
        if old < new:
            ratio = new // old
            for i, s in enumerate(strides[:-1]):
                if s % ratio:
                    raise RuntimeError(
                        f"self.stride({i}) must be divisible by {ratio} {what}, but got {s}"
                    )
            if x.storage_offset() % ratio:
                raise RuntimeError(
                    f"self.storage_offset() must be divisible by {ratio} {what}, but got "
                    f"{x.storage_offset()}"
                )
    with no_grad():
        return ad.view_dtype(x, dtype=d)


def view(x, *sizes, size=None, dtype=None):
    """``reshape`` that must share memory: a view (``x.t()``, ``x.expand(..)``) whose layout
    only a copy could give raises, as in PyTorch. A tensor that is no view and has none is
    contiguous in PyTorch whatever layout NumPy gave its payload here (``a.t() + 0``), so
    it gets a C-contiguous payload the view then shares (a copy would drop writes).
    ``view(dtype)``: of ``x``'s own dtype an alias outside the graph, as torch's (``detach``);
    of another, its bits read as that dtype (``_view_dtype``)."""
    if dtype is None and len(sizes) == 1 and isinstance(sizes[0], dt.DType):
        dtype, sizes = sizes[0], ()
    if dtype is not None:
        if sizes or size is not None:
            raise TypeError("view() takes either sizes or a dtype, not both")
        d = dt.as_dtype(dtype)
        return x.detach() if d is x.dtype else _view_dtype(x, d)
    shape = _shape_arg(sizes, size, "size")
    if shape and type(shape[0]) is bool:
        raise _bool_size("view", sizes, size)
    out = _viewed(x, shape)
    p, q = out._payload, x._payload
    if (  # a copy, not a view (``p.base is q`` spares may_share_memory's cost)
        out is not x
        and type(p) is np.ndarray
        and p.size
        and p.base is not q
        and not np.may_share_memory(p, q)
    ):
        if x._base is not None or (x._vc is not None and len(x._vc) > 1):
            raise RuntimeError(
                "view size is not compatible with input tensor's size and "
                "stride (at least one dimension spans across two contiguous "
                "subspaces). Use .reshape(...) instead."
            )
        x._payload = np.ascontiguousarray(x._payload)
        out = _viewed(x, shape)
    return out


def view_as_real(x):
    """Complex ``x`` as a real tensor with a last dim of 2 (real and imaginary parts): a
    view, so writes through it reach ``x``."""
    if not x.dtype.is_complex:
        raise RuntimeError("view_as_real is only supported for complex tensors")
    if views.is_conj(x):
        raise RuntimeError(
            "view_as_real doesn't work on unresolved conjugated tensors.  To resolve the "
            "conjugate tensor so you can view it as real, use self.resolve_conj(); however, "
            "be warned that the resulting tensor will NOT alias the original."
        )
    return ad.view_as_real(x)


def view_as_complex(x):
    """The pairs along ``x``'s last dim (of size 2) as complex numbers: a view of float32
    or float64 ``x``, whose layout must be a complex tensor's (PyTorch's checks)."""
    if x.dtype is dt.float16:
        raise RuntimeError(
            "view_as_complex of a float16 tensor would be complex32 (ComplexHalf), which "
            "staged does not have: view x.float() instead"
        )
    if x.dtype not in (dt.float32, dt.float64):
        raise RuntimeError(
            "view_as_complex is only supported for half, float and double tensors, but got "
            f"a tensor of scalar type: {x.dtype.title}"
        )
    if x.ndim == 0:
        raise RuntimeError("Input tensor must have one or more dimensions")
    if x.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    why = _complex_layout_error(x)
    if why is not None and type(x._payload) is np.ndarray:
        if x._base is not None or (x._vc is not None and len(x._vc) > 1):
            raise RuntimeError(why)
        # no view and none of it: contiguous in PyTorch whatever NumPy's layout (``view``)
        x._payload = x._payload.copy()
    return ad.view_as_complex(x)


def _complex_layout_error(x):
    """Why PyTorch cannot view ``x`` (float, last dim 2) as complex, or None."""
    st = x.stride()
    if st[-1] != 1:
        return "Tensor must have a last dimension with stride 1"
    if any(s % 2 for s, n in zip(st[:-1], x.shape[:-1]) if n != 1):
        return "Tensor must have a stride divisible by 2 for all but last dimension"
    if x.storage_offset() % 2:
        return "Tensor must have a storage_offset divisible by 2"
    return None


_STRIDED = (np.ndarray, Meta)  # payloads with strides (others are row-major)


def contiguous(x, memory_format=None):
    """``x`` itself if it is C-contiguous, else a C-contiguous copy (part of the graph),
    whatever ``memory_format`` (Note [memory formats])."""
    memory_formats.check(x, memory_format)
    p = x._payload
    if type(p) in _STRIDED:
        return x if p.flags.c_contiguous else ad.copy(x)
    if getattr(p, "order", None):  # traced, laid out otherwise (Note [traced layouts])
        return row_major(x)
    if memory_formats._batched(p) and not memory_formats.is_contiguous(x):  # inside vmap
        return memory_formats.laid_out_like(x, ad.copy(x), memory_formats.contiguous_format)
    return x


def row_major(x):
    """A traced ``x`` laid out row-major in eager (Note [traced layouts] in
    tracing/capture.py): a reshape, which sets no order, and back."""
    shape = tuple(x._payload.shape)
    return ad.lax.bind("reshape", ad.lax.bind("reshape", x, shape=(math.prod(shape),)), shape=shape)


def flatten(x, start_dim=0, end_dim=-1):
    s, e = wrap_dim(start_dim, x.ndim), wrap_dim(end_dim, x.ndim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if x.ndim == 0:
        return reshape(x, 1)
    if s == e:  # x itself, as torch's
        return x
    shape = x._payload.shape
    return reshape(x, tuple(shape[:s]) + (math.prod(shape[s : e + 1]),) + tuple(shape[e + 1 :]))


def unflatten(x, dim, sizes):
    """Dim ``dim`` split into ``sizes`` (one of them may be -1)."""
    d, sizes = wrap_dim(dim, x.ndim), tuple(sizes)
    shape = x._payload.shape
    if -1 not in sizes and math.prod(sizes) != shape[d]:
        raise RuntimeError(
            f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim "
            f"{dim} ({shape[d]}) in the input tensor"
        )
    return _viewed(x, tuple(shape[:d]) + sizes + tuple(shape[d + 1 :]))


def unsqueeze(x, dim):
    dim = wrap_dim(dim, x.ndim + 1)
    shape = list(x._payload.shape)
    shape.insert(dim, 1)
    return named(ad.reshape(x, shape=tuple(shape)), "UnsqueezeBackward0")


_SQUEEZE_NAMES = ("SqueezeBackward0", "SqueezeBackward1", "SqueezeBackward2")


def squeeze(x, dim=None):
    """``x`` without its size-1 dims (of ``dim``, one or several); torch's grad_fn names
    the three forms apart (``SqueezeBackward0/1/2``)."""
    shape = x._payload.shape
    dims = normalize_dims(dim, x.ndim)
    new = tuple(s for i, s in enumerate(shape) if not (i in dims and s == 1))
    form = 0 if dim is None else 1 if isinstance(dim, int) else 2
    return named(ad.reshape(x, shape=new), _SQUEEZE_NAMES[form])


def permute(x, *args, dims=None):
    dims = _shape_arg(args, dims, "dims")
    n = len(x._payload.shape)
    ints = _INT.issuperset(map(type, dims))  # (a float or bool dim is no key: 1.0 == 1)
    perm = _PERMS.get((n, dims)) if ints else None
    if perm is None:
        perm = _permutation(dims, n)
        if ints:
            _PERMS.put((n, dims), perm)
    return ad.permute(x, perm=perm)


# (ndim, dims given, all ints) -> the permutation they make: x.permute(0, 2, 1, 3) in a
# loop checks its dims once
_PERMS = LoopCache()
_INT = frozenset({int})


def _permutation(dims: tuple, n: int) -> tuple:
    """``dims`` of a permute of ``n`` dims, wrapped, with torch's errors."""
    if len(dims) != n:
        raise RuntimeError(
            f"permute(): number of dimensions in the tensor input does not "
            f"match the length of the desired ordering of dimensions i.e. "
            f"input.dim() = {n} is not equal to len(dims) = {len(dims)}"
        )
    dims = tuple(wrap_dim(d, n) for d in dims)
    if len(set(dims)) != len(dims):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return dims


def _transpose(x, dim0, dim1):
    n = len(x._payload.shape)
    a, b = wrap_dim(dim0, n), wrap_dim(dim1, n)
    if n < 2:
        return alias(x)
    return ad.permute(x, perm=_swapped(n, a, b))  # a permutation: permute's checks hold


@functools.lru_cache(maxsize=256, typed=True)  # (typed: 1.0 is no dim, where 1 is one)
def _swapped(n: int, a: int, b: int) -> tuple:
    """The permutation of ``n`` dims that swaps dims ``a`` and ``b``."""
    perm = list(range(n))
    perm[a], perm[b] = perm[b], perm[a]
    return tuple(perm)


def transpose(x, dim0, dim1):
    return named(_transpose(x, dim0, dim1), "TransposeBackward0")


def t(x):
    n = len(x._payload.shape)
    if n > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {n}D")
    return named(_transpose(x, 0, 1) if n == 2 else alias(x), "TBackward0")


def _adjoint(x, name, conjugate):
    """The matrices of ``x`` transposed (and, with ``conjugate``, conjugated: a conj view of
    the transposed view, as torch's); a 0-d ``x`` is its own transpose, as in torch (which
    warns that this is deprecated)."""
    if x.ndim == 1:
        raise RuntimeError(
            f"tensor.{name} is only supported on matrices or batches of matrices. Got 1-D tensor."
        )
    y = transpose(x, -2, -1) if x.ndim else x
    return conj(y) if conjugate else y


def mT(x):
    return _adjoint(x, "mT", False)


def mH(x):
    return _adjoint(x, "mH", True)


def adjoint(x):
    return _adjoint(x, "adjoint()", True)


def T(x):
    return ad.permute(x, perm=tuple(range(len(x._payload.shape)))[::-1])  # a permutation


def expand(x, *sizes, size=None):
    sizes = _shape_arg(sizes, size, "size")
    if len(sizes) < x.ndim:
        raise RuntimeError(
            f"expand({x.type()}{{{list(x.shape)}}}, size={list(sizes)}): the number of "
            f"sizes provided ({len(sizes)}) must be "
            f"greater or equal to the number of dimensions in the tensor "
            f"({x.ndim})"
        )
    lead, have = len(sizes) - x.ndim, tuple(x._payload.shape)
    for i, s in enumerate(sizes):
        if i < lead and s < 0:
            raise RuntimeError(
                f"The expanded size of the tensor ({s}) isn't allowed in a leading, "
                f"non-existing dimension {i}"
            )
        if i >= lead and s != -1 and have[i - lead] not in (1, s):
            raise RuntimeError(
                f"The expanded size of the tensor ({s}) must match the existing size "
                f"({have[i - lead]}) at non-singleton dimension {i}.  Target sizes: "
                f"{list(sizes)}.  Tensor sizes: {list(have)}"
            )
    shape = tuple(have[i - lead] if s == -1 else s for i, s in enumerate(sizes))
    return expand_to(x, shape) if shape != have else named(alias(x), "ExpandBackward0")


def broadcast_to(input, size):
    return expand(input, tuple(size))


def _tensors(tensors) -> list:
    """The list of tensors a ``cat`` or ``stack`` takes, refusing anything else in it as
    torch does."""
    tensors = list(tensors)
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            kind = type(t)
            name = kind.__name__
            if kind.__module__ != "builtins":
                name = f"{kind.__module__}.{name}"  # numpy.ndarray, as torch names it
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {name}")
    return tensors


def cat(tensors, dim=0, *, axis=None):
    """Concatenate along ``dim`` (NumPy's ``axis``, which torch takes too; dtypes promoted;
    legacy 1-D empty tensors skipped)."""
    dim = dim if axis is None else axis
    tensors = _tensors(tensors)
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    d = promote_types(*tensors)
    parts = [to_dtype(t, d) for t in tensors if not (t.ndim == 1 and t._payload.shape[0] == 0)]
    if not parts:
        return to_dtype(tensors[0], d)
    ref = parts[0]
    if ref.ndim == 0:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    dim = wrap_dim(dim, ref.ndim)
    shape = tuple(ref._payload.shape)
    for i, t in enumerate(parts):
        s = tuple(t._payload.shape)
        if len(s) != len(shape):
            raise RuntimeError(
                f"Tensors must have same number of dimensions: got {len(shape)} and {len(s)}"
            )
        for k, (a, b) in enumerate(zip(shape, s)):
            if k != dim and a != b:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {dim}. "
                    f"Expected size {a} but got size {b} for tensor number {i} "
                    f"in the list."
                )
    if len(parts) == 1:
        return ad.copy(parts[0])
    return ad.concat(*parts, dim=dim, sizes=tuple(t._payload.shape[dim] for t in parts))


def _stack_composite(*tensors, dim):
    return cat([unsqueeze(t, dim) for t in tensors], dim)


_stack = ad.Fused(
    "stack", fused.stack_impl, _stack_composite, vjp=fused.stack_dx, node_name="StackBackward0"
)


def stack(tensors, dim=0, *, axis=None):
    """Stack along a new ``dim`` (NumPy's ``axis``, which torch takes too; dtypes
    promoted): one kernel and one ``StackBackward0`` eagerly (a batch's collation)."""
    dim = dim if axis is None else axis
    tensors = _tensors(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    first = tensors[0]
    shape, d = first._payload.shape, first.dtype
    same = True
    for i, t in enumerate(tensors):
        if t._payload.shape != shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got "
                f"{list(shape)} at entry 0 and {list(t.shape)} at entry {i}"
            )
        same = same and t.dtype is d
    if not same:
        d = promote_types(*tensors)
        tensors = [to_dtype(t, d) for t in tensors]
    return _stack(*tensors, dim=wrap_dim(dim, len(shape) + 1))


def _narrow(x, dim, start, length):
    shape = tuple(x._payload.shape)
    return ad.slice(
        x,
        starts=tuple(start if d == dim else 0 for d in range(len(shape))),
        stops=tuple(start + length if d == dim else s for d, s in enumerate(shape)),
        steps=(1,) * len(shape),
    )


def split(x, split_size_or_sections, dim=0) -> tuple[Tensor, ...]:
    """Views of consecutive pieces along ``dim``: of one size (the last may be smaller) or
    of the given sizes."""
    if x.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    dim = wrap_dim(dim, x.ndim)
    n = x._payload.shape[dim]
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size < 0 or (size == 0 and n != 0):
            raise RuntimeError(
                f"split_size can only be 0 if dimension size is 0, but got dimension size of {n}"
            )
        sizes = [size] * (n // size) + ([n % size] if n % size else []) if size and n else [0]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {n} "
                f"(input tensor's size at dimension {dim}), but got "
                f"split_sizes={sizes}"
            )
    name = "Split" if isinstance(split_size_or_sections, int) else "SplitWithSizes"
    out, start = [], 0
    for s in sizes:
        out.append(_narrow(x, dim, start, s))
        start += s
    return views.multi_output(tuple(out), name, x, dim, [tuple(t.shape) for t in out])


def split_with_sizes(x, split_sizes, dim=0) -> tuple[Tensor, ...]:
    """Views of consecutive pieces along ``dim`` of the given sizes (summing to its size)."""
    sizes = list(split_sizes)
    if any(s < 0 for s in sizes):
        raise RuntimeError(
            "split_with_sizes expects split_sizes have only non-negative entries, but got "
            f"split_sizes={sizes}"
        )
    return split(x, sizes, dim)


def chunk(x, chunks, dim=0) -> tuple[Tensor, ...]:
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: " + str(chunks))
    if x.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    n = x._payload.shape[wrap_dim(dim, x.ndim)]
    if n == 0:  # torch: `chunks` empty pieces (split would give one), by split_with_sizes
        return split(x, [0] * chunks, dim)
    return split(x, -(-n // chunks), dim)


def _untracked(op, x, *args) -> tuple[Tensor, ...]:
    """torch's ``unsafe_`` form of ``op`` (split, split_with_sizes, chunk): its pieces are
    not tracked as views (``views.untracked``); of a conj view, pieces of a copy of it
    (torch's conjugate fallback resolves it first)."""
    if views.is_conj(x):
        x = ad.copy(x)
    pieces = op(x, *args)
    if pieces and pieces[0].grad_fn is not None:  # their one Node: UnsafeSplitBackward0 ...
        named(pieces[0], "Unsafe" + pieces[0].grad_fn.name())
    return views.untracked(pieces)


def unsafe_split(x, split_size_or_sections, dim=0) -> tuple[Tensor, ...]:
    return _untracked(split, x, split_size_or_sections, dim)


def unsafe_split_with_sizes(x, split_sizes, dim=0) -> tuple[Tensor, ...]:
    return _untracked(split_with_sizes, x, split_sizes, dim)


def unsafe_chunk(x, chunks, dim=0) -> tuple[Tensor, ...]:
    return _untracked(chunk, x, chunks, dim)


def tensor_split(x, indices_or_sections, dim=0) -> tuple[Tensor, ...]:
    """Views of ``x`` along ``dim``: ``sections`` pieces as even as can be (the first
    ``n % sections`` one longer), or the pieces between ``indices`` (clamped as slices
    are). A tensor argument is an int64 0-d ``sections`` or 1-D ``indices``."""
    if x.ndim == 0:
        raise RuntimeError(
            "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims"
        )
    cuts = indices_or_sections
    if isinstance(cuts, Tensor):
        if cuts.dtype is not dt.int64:
            raise RuntimeError(
                "tensor_split expected tensor_indices_or_sections to have dtype of long, but "
                f"got {cuts.dtype.title}"
            )
        if cuts.ndim > 1:
            raise RuntimeError(
                "tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                f"one-dimensional tensor, but got a tensor with {cuts.ndim} dims"
            )
        cuts = host_data(cuts, "tensor_split() with tensor indices").tolist()
    dim = wrap_dim(dim, x.ndim)
    n = x._payload.shape[dim]
    if isinstance(cuts, int):
        if cuts <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {cuts}")
        size, longer = divmod(n, cuts)
        cuts = [i * size + min(i, longer) for i in range(1, cuts)]
    bounds = [0, *cuts, n]
    out = []
    for a, b in zip(bounds, bounds[1:]):
        start, stop, _ = slice(a, b).indices(n)
        out.append(_narrow(x, dim, start, max(stop - start, 0)))
    return tuple(out)


def _split_at_least(name, x, indices_or_sections, ndim, dim):
    """``hsplit``/``vsplit``/``dsplit``: ``tensor_split`` along ``dim`` of an ``x`` of at
    least ``ndim`` dims, whose size a number of sections must divide."""
    if x.ndim < ndim:
        raise RuntimeError(
            f"torch.{name} requires a tensor with at least {ndim} dimension, but got a tensor "
            f"with {x.ndim} dimensions!"
        )
    n = x._payload.shape[dim]
    if isinstance(indices_or_sections, int) and (
        indices_or_sections == 0 or n % indices_or_sections
    ):
        raise RuntimeError(
            f"torch.{name} attempted to split along dimension {dim}, but the size of the "
            f"dimension {n} is not divisible by the split_size {indices_or_sections}!"
        )
    return tensor_split(x, indices_or_sections, dim)


def hsplit(x, indices_or_sections) -> tuple[Tensor, ...]:
    return _split_at_least("hsplit", x, indices_or_sections, 1, 0 if x.ndim == 1 else 1)


def vsplit(x, indices_or_sections) -> tuple[Tensor, ...]:
    return _split_at_least("vsplit", x, indices_or_sections, 2, 0)


def dsplit(x, indices_or_sections) -> tuple[Tensor, ...]:
    return _split_at_least("dsplit", x, indices_or_sections, 3, 2)


def _dim_of(x, dim):
    """``dim`` wrapped; a 0-d ``x`` has none (torch's IndexError)."""
    if x.ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return wrap_dim(dim, x.ndim)


def unbind(x, dim=0) -> tuple[Tensor, ...]:
    """The slices of ``x`` along ``dim``, that dim removed (views)."""
    dim = _dim_of(x, dim)
    shape = tuple(x._payload.shape)
    outs = tuple(select_at(x, dim=dim, index=i) for i in range(shape[dim]))
    piece = shape[:dim] + (1,) + shape[dim + 1 :]
    return views.multi_output(outs, "Unbind", x, dim, [piece] * len(outs))


def unfold(x, dimension, size, step):
    """``Tensor.unfold``: the windows of ``size`` entries every ``step`` along
    ``dimension``, which then counts the windows, as a new last dim (a view)."""
    if x.ndim == 0:
        return reshape(unfold(reshape(x, 1), 0, size, step), size)
    d = wrap_dim(dimension, x.ndim)
    n = x._payload.shape[d]
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    shape, c = x._payload.shape, _c_strides(x._payload.shape)
    y = ad.strided(
        x,
        shape=shape[:d] + ((n - size) // step + 1,) + shape[d + 1 :] + (size,),
        strides=c[:d] + (c[d] * step,) + c[d + 1 :] + (c[d],),
        offset=0,
    )
    return named(y, "UnfoldBackward0")


def _c_strides(shape) -> tuple:
    """The strides of a C-contiguous array of ``shape``, in entries."""
    return tuple(math.prod(shape[k + 1 :]) for k in range(len(shape)))


def _new(factory):
    """``Tensor.new_<factory>``: a tensor of the sizes (varargs, a sequence or ``size=``)
    with ``x``'s dtype (or ``dtype``) on its device (or ``device``)."""

    def new(x, *sizes, size=None, dtype=None, device=None, requires_grad=False):
        d = x.dtype if dtype is None else dt.as_dtype(dtype)
        where = x.device if device is None else device
        shape = _shape_arg(sizes, size, "size")
        return factory(shape, dtype=d, device=where, requires_grad=requires_grad)

    new.__name__ = new.__qualname__ = "new_" + factory.__name__
    return new


new_zeros, new_ones, new_empty = (
    _new(f) for f in (factories.zeros, factories.ones, factories.empty)
)


def narrow(x, dim, start, length):
    """A view of ``length`` entries of ``x`` from ``start`` along ``dim``."""
    if x.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    dim = wrap_dim(dim, x.ndim)
    n = x._payload.shape[dim]
    start = int(start)
    if not -n <= start <= n:
        raise IndexError(
            f"start out of range (expected to be in range of [{-n}, {n}], but got {start})"
        )
    start = start + n if start < 0 else start
    if start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return _narrow(x, dim, start, length)


def narrow_copy(x, dim, start, length):
    """``narrow``, copied (not a view)."""
    return ad.copy(narrow(x, dim, start, length))


def triangle_mask(m, n, diagonal=0, lower=True) -> Tensor:
    """The bool ``(m, n)`` mask of ``tril`` (``lower``) or ``triu``, compared from an
    ``m`` and an ``n`` long iota (no ``m x n`` constant in a graph)."""
    rows = Tensor._wrap(np.arange(m, dtype=np.int64).reshape(m, 1) + diagonal)
    cols = Tensor._wrap(np.arange(n, dtype=np.int64).reshape(1, n))
    return ad.le(*operands(cols, rows)) if lower else ad.ge(*operands(cols, rows))


def _triangle(name, x, diagonal, lower):
    if x.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    shape = tuple(x._payload.shape)
    keep = expand_to(triangle_mask(*shape[-2:], diagonal, lower), shape)
    return ad.where(keep, x, expand_to(scalar_tensor(0, x.dtype), shape))


def tril(x, diagonal=0):
    return _triangle("tril", x, diagonal, True)


def triu(x, diagonal=0):
    return _triangle("triu", x, diagonal, False)


def diagonal(x, offset=0, dim1=0, dim2=1):
    """Diagonal ``offset`` of the (``dim1``, ``dim2``) matrices of ``x``, as the last dim
    (a view)."""
    d1, d2 = wrap_dim(dim1, x.ndim), wrap_dim(dim2, x.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    shape, c = x._payload.shape, _c_strides(x._payload.shape)
    r0, c0 = max(-offset, 0), max(offset, 0)
    length = max(min(shape[d1] - r0, shape[d2] - c0), 0)
    rest = [k for k in range(x.ndim) if k not in (d1, d2)]
    y = ad.strided(
        x,
        shape=tuple(shape[k] for k in rest) + (length,),
        strides=tuple(c[k] for k in rest) + (c[d1] + c[d2],),
        offset=r0 * c[d1] + c0 * c[d2] if length else 0,
    )
    return named(y, "DiagonalBackward0")


_diagonal = diagonal  # diag's argument, named as PyTorch names it, hides the function


def diag(x, diagonal=0):
    """A 1-D ``x`` as the ``diagonal``-th diagonal of a square matrix, or a 2-D ``x``'s
    ``diagonal``-th diagonal."""
    if x.ndim == 2:
        return named(_diagonal(x, diagonal).clone(), "DiagonalBackward0_copy")  # as torch's
    if x.ndim != 1:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {x.ndim}D")
    return _diagonal_matrices(x, diagonal)


def _diagonal_matrices(x, offset):
    """The ``(..., m, m)`` matrices (``m = n + |offset|``) with the vectors along the last
    dim (``n``) of ``x`` on their ``offset``-th diagonal, zeros elsewhere: one gather from
    ``x`` with a zero appended, which the entries off the diagonal take."""
    *batch, n = x._payload.shape
    size = n + abs(offset)
    rows, cols = np.divmod(np.arange(size * size, dtype=np.int64), size)
    entry = rows - max(-offset, 0)  # x[..., entry] sits on row `rows` of the diagonal
    on = (cols - rows == offset) & (entry >= 0) & (entry < n)
    zero = expand_to(scalar_tensor(0, x.dtype), (*batch, 1))
    padded = ad.concat(x, zero, dim=len(batch), sizes=(n, 1))
    index = expand_to(Tensor._wrap(np.where(on, entry, n), False), (*batch, size * size))
    return reshape(ad.gather(padded, index, dim=len(batch)), (*batch, size, size))


def diag_embed(x, offset=0, dim1=-2, dim2=-1):
    """The vectors along the last dim of ``x`` on the ``offset``-th diagonal of matrices
    in dims ``dim1`` (rows) and ``dim2`` of the result, which has one dim more."""
    d1, d2 = wrap_dim(dim1, x.ndim + 1), wrap_dim(dim2, x.ndim + 1)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return movedim(_diagonal_matrices(x, offset), (-2, -1), (d1, d2))


def diagflat(x, offset=0):
    """The entries of ``x`` (flattened) on the ``offset``-th diagonal of a square matrix."""
    return _diagonal_matrices(flatten(x), offset)


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The ``(2, N)`` indices of the lower triangle (``offset`` as ``tril``'s diagonal) of
    a ``row`` x ``col`` matrix, row by row; int64 unless ``dtype`` (int32) says."""
    return _triangle_indices("tril_indices", row, col, offset, dtype, device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The ``(2, N)`` indices of the upper triangle, as ``tril_indices``."""
    return _triangle_indices("triu_indices", row, col, offset, dtype, device)


def _triangle_indices(name, row, col, offset, dtype, device):
    for what, n in (("row", row), ("col", col)):
        if n < 0:
            raise RuntimeError(f"{what} must be non-negative, got{n}")
    if device is not None:
        check_device(device)
    d = dt.int64 if dtype is None else dt.as_dtype(dtype)
    if d not in (dt.int32, dt.int64):
        raise NotImplementedError(f"\"{name}\" not implemented for '{d.title}'")
    indices = np.tril_indices if name == "tril_indices" else np.triu_indices
    return Tensor._wrap(np.stack(indices(row, offset, col)).astype(d.np).reshape(2, -1))


def repeat(x, *sizes, repeats=None):
    """``Tensor.repeat``: ``x`` tiled ``sizes[i]`` times along dim ``i`` (leading sizes add
    dims): each dim gets a broadcast axis in front, then the two merge."""
    sizes = _shape_arg(sizes, repeats, "repeats")
    if len(sizes) < x.ndim:
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number "
            "of dimensions of tensor"
        )
    shape = (1,) * (len(sizes) - x.ndim) + tuple(x._payload.shape)
    out = tuple(r * s for r, s in zip(sizes, shape))
    for r in out:
        if r < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {r}: {list(out)}")
    paired = tuple(k for s in shape for k in (1, s))
    y = ad.reshape(x, shape=paired)
    y = expand_to(y, tuple(k for r, s in zip(sizes, shape) for k in (r, s)))
    # a copy, as torch's (all sizes 1: a view), named as torch names it
    return named(fresh(ad.reshape(y, shape=out), x), "RepeatBackward0")


def repeat_interleave(x, repeats=None, dim=None, *, output_size=None):
    """Each entry of ``x`` along ``dim`` (of flattened ``x`` without one) ``repeats`` times
    (an int, or a tensor of one count per entry). Tensor counts are read eagerly; under
    capture they need ``output_size`` (the index then comes from their cumsum)."""
    if repeats is None:  # repeat_interleave(repeats): 0..n-1, each repeats[i] times
        x, repeats = Tensor._wrap(np.arange(x._payload.shape[0] if x.ndim else 1)), x
    if dim is None:
        x, dim = flatten(x), 0
    dim = wrap_dim(dim, x.ndim)
    if isinstance(repeats, Tensor):
        if repeats.ndim > 1:
            raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
        n = x._payload.shape[dim]
        if repeats.numel() == 1:  # one count for every entry
            repeats = expand_to(ad.reshape(repeats, shape=(1,)), (n,))
        return take_index(x, _interleave_index(repeats, n, output_size), dim)
    if repeats < 0:
        raise RuntimeError("Repeats must be non-negative")
    shape = tuple(x._payload.shape)
    y = expand_to(unsqueeze(x, dim + 1), shape[: dim + 1] + (repeats,) + shape[dim + 1 :])
    out = ad.reshape(y, shape=shape[:dim] + (shape[dim] * repeats,) + shape[dim + 1 :])
    return fresh(out, x)  # a copy, as torch's (once each, or of one entry: a view)


def _interleave_index(repeats, n, output_size):
    """The gather index of ``repeat_interleave`` by the 1-D counts ``repeats``."""
    if repeats.dtype not in (dt.int64, dt.int32):
        raise NotImplementedError(
            f"\"repeat_interleave_cpu\" not implemented for '{repeats.dtype.title}'"
        )
    if repeats._payload.shape[0] != n:
        raise RuntimeError(
            f"repeats must have the same size as input along dim, but got "
            f"repeats.size(0) = {repeats._payload.shape[0]} and input.size(0) = "
            f"{n}"
        )
    if type(repeats._payload) is not np.ndarray and output_size is not None:
        # under capture: entry i of the output comes from the number of cumsums <= i
        ends = ad.cumsum(to_dtype(repeats, dt.int64), dim=0, reverse=False)
        at = Tensor._wrap(np.arange(output_size, dtype=np.int64).reshape(-1, 1))
        below = ad.cast(ad.le(*operands(ad.reshape(ends, shape=(1, n)), at)), dtype=dt.int64)
        index = ad.reduce_sum(below, dims=(1,), keepdim=False)
        check_range(index, 0, n, RuntimeError, "allocated size does not match required size")
        return index
    counts = host_data(repeats, "repeat_interleave() with tensor repeats", " (or pass output_size)")
    if (counts < 0).any():
        raise RuntimeError("repeats can not be negative")
    index = np.repeat(np.arange(n, dtype=np.int64), counts)
    if output_size is not None and output_size != len(index):
        raise RuntimeError("allocated size does not match required size")
    return Tensor._wrap(index)


def flip(x, *args, dims=None):
    """``x`` reversed along ``dims`` (a copy: a gather by a reversed iota per dim)."""
    dims = _shape_arg(args, dims, "dims")
    wrapped = [wrap_dim(d, x.ndim) for d in dims]
    for d in wrapped:
        if wrapped.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    shape = x._payload.shape
    dims = tuple(d for d in wrapped if x.ndim and shape[d] > 1)
    return _flip(x, dims=dims) if dims else ad.copy(x)


def _flip_composite(x, *, dims):
    """A gather by a reversed iota per dim."""
    for d in dims:
        n = x._payload.shape[d]
        x = take_index(x, Tensor._wrap(np.arange(n - 1, -1, -1, dtype=np.int64)), d)
    return x


# eagerly one reversed copy and torch's one FlipBackward0, whose gradient is the flip of
# ``g`` (a gather's was a scatter-add: 4.9x torch's forward and backward on 256 x 256)
_flip: ad.Fused = ad.Fused(
    "flip",
    lambda x, *, dims: np.flip(x, dims).copy(),
    _flip_composite,
    vjp=(lambda g, dims: _flip(g, dims=dims),),
    node_name="FlipBackward0",
)


def fliplr(x):
    if x.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(x, 1)


def flipud(x):
    if x.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(x, 0)


def roll(x, shifts, dims=None):
    """``x`` shifted circularly by ``shifts`` along ``dims`` (flattened without dims)."""
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = () if dims is None else (dims,) if isinstance(dims, int) else tuple(dims)
    if not shifts:
        raise RuntimeError("`shifts` required")
    if not dims and len(shifts) == 1:
        return reshape(roll(flatten(x), shifts, 0), tuple(x._payload.shape))
    if len(shifts) != len(dims):
        raise RuntimeError(
            f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}"
        )
    moves = []
    for s, d in zip(shifts, dims):
        d = wrap_dim(d, x.ndim)
        n = x._payload.shape[d] if x.ndim else 1
        if n and s % n:
            moves.append((s % n, d))
    if not moves:
        return ad.copy(x)
    return _roll(x, shifts=tuple(s for s, _ in moves), dims=tuple(d for _, d in moves))


def _roll_composite(x, *, shifts, dims):
    """The two pieces of each dim, concatenated in the other order."""
    for s, d in zip(shifts, dims):
        n = x._payload.shape[d]
        x = ad.concat(_narrow(x, d, n - s, s), _narrow(x, d, 0, n - s), dim=d, sizes=(s, n - s))
    return x


# eagerly np.roll and torch's one RollBackward0, whose gradient is ``g`` rolled back
_roll: ad.Fused = ad.Fused(
    "roll",
    lambda x, *, shifts, dims: np.ascontiguousarray(np.roll(x, shifts, dims)),
    _roll_composite,
    vjp=(
        lambda g, shifts, dims: _roll(
            g,
            shifts=tuple(-s % n for s, n in zip(shifts, (g.shape[d] for d in dims))),
            dims=dims,
        ),
    ),
    node_name="RollBackward0",
)


def view_as(x, other):
    return view(x, tuple(other._payload.shape))


def reshape_as(x, other):
    return reshape(x, tuple(other._payload.shape))


def ravel(x):
    """``x`` flattened to 1-D (torch's ``contiguous().view(-1)``)."""
    return _viewed(x, -1)


def rot90(x, k=1, dims=(0, 1)):
    """``x`` turned ``k`` quarter turns in the plane of ``dims``, from the first dim
    towards the second."""
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if x.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {x.ndim}")
    a, b = (wrap_dim(d, x.ndim) for d in dims)
    if a == b:
        raise RuntimeError(
            f"expected rotation dims to be different, but got dim0 = {dims[0]} and dim1 = {dims[1]}"
        )
    k %= 4
    if k == 1:
        return transpose(flip(x, b), a, b)
    if k == 2:
        return flip(x, a, b)
    if k == 3:
        return transpose(flip(x, a), a, b)
    return ad.copy(x)


def expand_as(x, other):
    return expand(x, tuple(other._payload.shape))


def numel(x) -> int:
    return x.numel()


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def is_floating_point(x) -> bool:
    return x.is_floating_point()


def is_complex(x) -> bool:
    return x.is_complex()


def is_signed(x) -> bool:
    """Whether ``x``'s dtype holds negative numbers (all but bool and uint8)."""
    return x.dtype.dclass not in ("bool", "uint")


def is_same_size(x, other) -> bool:
    return x._payload.shape == other._payload.shape


def is_nonzero(x) -> bool:
    """The truth of a one-element ``x`` (torch's error for any other)."""
    n = x.numel()
    if n != 1:
        what = "no values" if n == 0 else "more than one value"
        raise RuntimeError(f"Boolean value of Tensor with {what} is ambiguous")
    return bool(x)


def movedim(x, source, destination):
    """``x`` with the dims ``source`` moved to ``destination`` (ints or sequences), the
    others keeping their order (``moveaxis``)."""
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({list(src)} dims) should "
            f"contain the same number of dims as destination ({list(dst)} dims)"
        )
    n = x.ndim
    src = tuple(wrap_dim(d, n) for d in src)
    dst = tuple(wrap_dim(d, n) for d in dst)
    for name, dims in (("source", src), ("destination", dst)):
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({list(dims)})")
    order = [d for d in range(n) if d not in src]
    for s, d in sorted(zip(dst, src)):
        order.insert(s, d)
    return permute(x, *order)


def tile(x, dims):
    """``x`` repeated ``dims[i]`` times along dim ``i``; fewer dims than ``x`` has are
    padded with ones in front (``repeat`` pads ``x``)."""
    dims = _shape_arg((dims,) if isinstance(dims, int) else tuple(dims))
    return repeat(x, *((1,) * (x.ndim - len(dims)) + tuple(dims)))


def atleast_1d(*tensors):
    return _atleast(tensors, 1)


def atleast_2d(*tensors):
    return _atleast(tensors, 2)


def atleast_3d(*tensors):
    return _atleast(tensors, 3)


def _atleast(tensors, n):
    """Each tensor with dims added, as NumPy's ``atleast_<n>d``: one tensor for one, a
    tuple for several or for a sequence."""
    one = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    ts = tensors if one or len(tensors) != 1 else tuple(tensors[0])
    out = tuple(_dims_at_least(t, n) for t in ts)
    return out[0] if one else out


def _dims_at_least(t, n):
    """0-d becomes (1,) * n; (k,) becomes (1, k) or (1, k, 1); (j, k) becomes (j, k, 1)."""
    s = tuple(t._payload.shape)
    if len(s) >= n:
        return t
    if not s:
        return reshape(t, (1,) * n)
    new = (1, *s, 1)[:n] if len(s) == 1 else (*s, 1)
    return named(reshape(t, new), "UnsqueezeBackward0")  # torch's unsqueezes


def _stack_along(name, tensors, at_least, dim):
    tensors = _tensors(tensors)
    if not tensors:
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    return cat([_dims_at_least(t, at_least) for t in tensors], dim)


def hstack(tensors):
    """Concatenated along dim 1, or dim 0 where they are 0-d or 1-D."""
    tensors = _tensors(tensors)
    return _stack_along("hstack", tensors, 1, 0 if tensors and tensors[0].ndim <= 1 else 1)


def vstack(tensors):
    return _stack_along("vstack", tensors, 2, 0)


def dstack(tensors):
    return _stack_along("dstack", tensors, 3, 2)


def column_stack(tensors):
    """1-D (and 0-d) tensors as columns, then concatenated along dim 1."""
    tensors = _tensors(tensors)
    if not tensors:
        raise RuntimeError("column_stack expects a non-empty TensorList")
    return cat([reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t for t in tensors], 1)


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids of 0-d/1-D tensors: views, as torch's (``indexing="xy"`` swaps the
    first two dims). Without ``indexing`` torch warns and uses "ij"; so does staged, without
    the warning."""
    ts = (
        list(tensors[0])
        if len(tensors) == 1 and not isinstance(tensors[0], Tensor)
        else list(tensors)
    )
    if indexing not in ("ij", "xy"):
        raise RuntimeError(
            f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}'
        )
    for t in ts:
        if t.ndim > 1:
            raise RuntimeError(
                "torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: "
                f"a tensor of shape {list(t.shape)}"
            )
    sizes = [t.numel() for t in ts]
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, t in enumerate(ts):
        k = {0: 1, 1: 0}.get(i, i) if swap else i
        shape = [1] * len(ts)
        shape[k] = t.numel()
        out.append(expand(reshape(t, tuple(shape)), tuple(sizes)))
    return tuple(out)


def broadcast_shapes(*shapes):
    """The shape all ``shapes`` broadcast to (a ``Size``; torch's error where none)."""
    return Size(_broadcast_shapes(*((s,) if isinstance(s, int) else tuple(s) for s in shapes)))


def broadcast_tensors(*tensors):
    """Each tensor expanded (a view) to the shape they broadcast to."""
    shape = broadcast_shapes(*(tuple(t._payload.shape) for t in tensors))
    return tuple(expand_to(t, tuple(shape)) for t in tensors)


def unravel_index(indices, shape):
    """The coordinates in an array of ``shape`` of the flat ``indices`` (int64 tensors of
    ``indices``' shape, one per dim; an index out of range wraps, as torch's does)."""
    if not isinstance(indices, Tensor):
        raise TypeError(
            f"unravel_index(): argument 'indices' must be Tensor, not {type(indices).__name__}"
        )
    if indices.dtype.dclass not in ("int", "uint"):
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"expected 'shape' to be int or sequence of ints, but got {type(shape)}")
    for n in shape:
        if not isinstance(n, (int, np.integer)):
            raise TypeError(f"expected 'shape' sequence to only contain ints, but got {type(n)}")
    if any(n < 0 for n in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {tuple(shape)}")
    sizes = [int(n) for n in shape]
    coefs = [math.prod(sizes[i + 1 :]) for i in range(len(sizes))]
    as_int64 = lambda v: Tensor._wrap(np.array(v, np.int64), False)
    coords = indices.unsqueeze(-1).div(as_int64(coefs), rounding_mode="floor") % as_int64(sizes)
    return unbind(coords, -1)


def select(x, dim, index):
    """The slice at ``index`` along ``dim``, that dim removed (a view)."""
    dim = wrap_dim(dim, x.ndim)
    n = x._payload.shape[dim]
    if not -n <= index < n:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(x.shape)} at "
            f"dimension {dim}"
        )
    return select_at(x, dim=dim, index=index % n)


def cartesian_prod(*tensors):
    """Every combination of the entries of the 1-D ``tensors``, one per row (a single
    tensor is returned as it is)."""
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([reshape(g, (g.numel(),)) for g in grids], 1)


def combinations(input, r=2, with_replacement=False):
    """The ``r``-entry combinations of the 1-D ``input``'s entries, one per row, in
    ``itertools.combinations`` order (``with_replacement``: ``combinations_with_replacement``'s):
    a gather by indices the shape alone fixes."""
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return Tensor._wrap(np.zeros((0,), input.dtype.np))
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = np.array(list(pick(range(input.shape[0]), r)), np.int64).reshape(-1)
    return reshape(take_index(input, Tensor._wrap(rows), 0), (-1, r))


def block_diag(*tensors):
    """The tensors (0-d, 1-D as a row, or 2-D) down the diagonal of a matrix of zeros."""
    blocks = [_dims_at_least(t, 2) for t in tensors]
    for i, b in enumerate(blocks):
        if b.ndim != 2:
            raise RuntimeError(
                f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} "
                f"has {b.ndim} dimensions"
            )
    if not blocks:
        return Tensor._wrap(np.zeros((1, 0), dt.get_default_dtype().np))
    d = promote_types(*blocks)
    width = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        n, m = b.shape
        zeros = [Tensor._wrap(np.zeros((n, k), d.np)) for k in (left, width - left - m)]
        rows.append(cat([zeros[0], to_dtype(b, d), zeros[1]], 1))
        left += m
    return cat(rows, 0)
