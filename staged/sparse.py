"""Sparse COO and CSR tensors, ``torch.sparse``'s counterpart: ``staged.sparse_coo_tensor``,
``staged.sparse_csr_tensor``/``sparse_csc_tensor``, ``Tensor.to_sparse``/``to_sparse_csr``, and ``mm`` (with
CSR reductions), ``addmm``, ``sum``, ``softmax``, ``log_softmax``.

Note [sparse tensors]: a sparse COO tensor holds its indices as a NumPy array (int64,
``[sparse_dim, nnz]``, read-only: they are host data, like a shape) and its values as a
staged Tensor (``[nnz, *dense_shape]``), which carries autograd. Every op on it is a
composition of staged ops on the values, the indices entering as constants: ``S @ D``
gathers the rows of ``D`` at the column indices, scales them by the values and adds them
into the result's rows (index_add). So each op differentiates with respect to the values
and the dense operand, in reverse and forward mode, and compiles under ``staged.compile``,
with no rules of its own. The gradient with respect to the values is torch's gradient with
respect to the sparse operand (a sparse tensor of its pattern): a leaf built with
``requires_grad=True`` owns its values as a leaf, and ``S.grad`` is that pattern with the
values' gradient. ``SparseTensor`` subclasses ``Tensor`` (``isinstance(S, Tensor)`` holds,
as in torch, and ``D @ S``, ``D + S`` reach its reflected operators first); every other
``Tensor`` method raises NotImplementedError saying what is supported, and an op given one
where it needs dense data raises from its payload.
"""

from __future__ import annotations

import copy
import functools
import math
import warnings
from typing import Any

import numpy as np

from . import dtypes as dt
from ._where import at_user, sited
from .autodiff.avals import normalize_dims, wrap_dim
from .autograd import forward_ad
from .autograd.node import Node
from .eager import devices as _device
from .eager.factories import full, tensor, zeros
from .eager.interceptor import current_interceptor
from .eager.ops.data_dependent import host_data
from .eager.ops.layers import dense_embedding
from .eager.ops.linalg import _add_product
from .eager.ops.shape import cat
from .eager.ops.table import exports as _exports
from .eager.printing import add_suffixes, array_text
from .eager.tensor import Size, Tensor, sparse_coo, sparse_csc, sparse_csr, strided

_SUPPORTED = (
    "mm/matmul/@ and addmm with a dense or sparse operand, spmm, sum, softmax, log_softmax, "
    "t, transpose, coalesce, to_dense, * and / by a number (or * by a dense tensor of its shape or a "
    "sparse one), + and - of sparse tensors and dense + sparse, zero_, select/unbind/"
    "iteration/an int index along a sparse dim, stack along dim 0"
)


def _unsupported(what: str) -> NotImplementedError:
    return NotImplementedError(
        at_user(
            f"Could not run '{what}' with a sparse COO tensor (layout=torch.sparse_coo): "
            f"staged's sparse tensors support {_SUPPORTED}. Call .to_dense() first for a "
            "dense copy."
        )
    )


class SparseLayoutError(NotImplementedError, AttributeError):
    """What reading a dense tensor's fields (``_payload``, ``_requires_grad``...) of a
    sparse one raises: it has none (``getattr(S, "_payload", None)`` is None), and the op
    that reads them is told what to do."""


_NEEDS_DENSE = (
    "a sparse COO tensor (layout=torch.sparse_coo) was given where a dense (strided) one "
    f"is needed: staged's sparse tensors support {_SUPPORTED}; a staged.compile'd "
    "function takes them from its enclosing scope, not as arguments; autograd takes "
    "gradients with respect to their values (S._values()), or fills a leaf's S.grad in "
    "backward(). Call .to_dense() first for a dense copy."
)


class SparseTensor(Tensor):
    """A sparse COO tensor (``layout == staged.sparse_coo``): Note [sparse tensors]."""

    __slots__ = ("_idx", "_rows", "_vals", "_size", "_coalesced", "_owns")
    _idx: np.ndarray  # int64 [sparse_dim, nnz], read-only
    _rows: tuple  # its rows (one array object each: one constant each under capture)
    _vals: Tensor  # [nnz, *dense_size]
    _size: tuple
    _coalesced: bool
    _owns: bool  # the values are this tensor's own leaf (made with requires_grad)

    def __init__(self, *args, **kwargs) -> None:
        raise TypeError("make sparse tensors with staged.sparse_coo_tensor or Tensor.to_sparse")

    # --- what the dense machinery reads (these and Tensor's slots): raise, saying what to do
    def _host(self, overwrite: bool = False) -> np.ndarray:
        raise SparseLayoutError(at_user(_NEEDS_DENSE))

    def _aval(self) -> Any:
        raise SparseLayoutError(at_user(_NEEDS_DENSE))

    def numpy(self, *, force=False) -> np.ndarray:
        raise TypeError("can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() first.")

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return self.numpy()

    # --- metadata ------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        return Size(self._size)

    def size(self, dim=None) -> Any:
        return Size(self._size) if dim is None else self._size[dim]

    @property
    def dtype(self) -> dt.DType:
        return self._vals.dtype

    @property
    def ndim(self) -> int:
        return len(self._size)

    def dim(self) -> int:
        return len(self._size)

    ndimension = dim

    def numel(self) -> int:
        return math.prod(self._size)

    nelement = numel

    def __len__(self) -> int:
        if not self._size:
            raise TypeError("len() of a 0-d tensor")
        return self._size[0]

    @property
    def layout(self) -> Any:
        return sparse_coo

    @property
    def is_sparse(self) -> bool:
        return True

    def element_size(self) -> int:
        return self._vals.element_size()

    def sparse_dim(self) -> int:
        return self._idx.shape[0]

    def dense_dim(self) -> int:
        return len(self._size) - self._idx.shape[0]

    def _nnz(self) -> int:
        return self._idx.shape[1]

    def is_coalesced(self) -> bool:
        return self._coalesced

    def _indices(self) -> Tensor:
        return Tensor._wrap(self._idx)

    def _values(self) -> Tensor:
        return self._vals

    def indices(self) -> Tensor:
        if not self._coalesced:
            raise RuntimeError(
                "Cannot get indices on an uncoalesced tensor, please call .coalesce() first"
            )
        return self._indices()

    def values(self) -> Tensor:
        if not self._coalesced:
            raise RuntimeError(
                "Cannot get values on an uncoalesced tensor, please call .coalesce() first"
            )
        return self._vals

    # --- autograd: the values carry it ---------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._vals.requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> SparseTensor:
        if bool(requires_grad) == self._vals.requires_grad:
            return self
        if not self.is_leaf:
            raise RuntimeError("you can only change requires_grad flags of leaf variables.")
        if requires_grad:  # its own leaf, on the same data (the caller's values untouched)
            self._vals, self._owns = self._vals.detach().requires_grad_(), True
        else:
            self._vals.requires_grad_(False)
        return self

    @property
    def is_leaf(self) -> bool:
        return not self._vals.requires_grad or self._owns

    @property  # type: ignore[override]
    def grad_fn(self) -> Any:
        return None if self._owns else self._vals.grad_fn

    @property  # type: ignore[override]
    def grad(self) -> SparseTensor | None:
        """A leaf's gradient: torch's, the dense gradient at this tensor's (distinct)
        places, each duplicate of a place having had the same gradient."""
        if not self.is_leaf:
            warnings.warn(
                "The .grad attribute of a sparse Tensor that is not a leaf Tensor is being "
                "accessed. Its .grad attribute won't be populated during autograd.backward().",
                UserWarning,
                stacklevel=2,
            )
            return None
        g = self._vals.grad if self._owns else None
        if g is None or self._coalesced:
            return None if g is None else _make(self._idx, g, self._size, True)
        places, first = np.unique(self._flat(), return_index=True)
        idx = _unravel(places, self._size[: self.sparse_dim()])
        return _make(idx, g.index_select(0, _const(first)), self._size, True)

    @grad.setter
    def grad(self, value) -> None:
        if value is None:
            if self._owns:
                self._vals.grad = None
            return
        if not (isinstance(value, SparseTensor) and np.array_equal(value._idx, self._idx)):
            raise RuntimeError(
                "a sparse tensor's grad can only be set to None or a sparse tensor of its indices"
            )
        self._vals.grad = value._vals

    def detach(self) -> SparseTensor:
        return _make(self._idx, self._vals.detach(), self._size, self._coalesced)

    def clone(self, *, memory_format=None) -> SparseTensor:
        return _make(self._idx, self._vals.clone(), self._size, self._coalesced)

    def zero_(self) -> SparseTensor:
        """No entries left (torch's: ``nnz`` 0, coalesced), in place: what
        ``zero_grad(set_to_none=False)`` does to a sparse gradient."""
        self._idx = np.zeros((self.sparse_dim(), 0), np.int64)
        self._rows = tuple(self._idx)
        self._vals = zeros((0, *self._size[self.sparse_dim() :]), dtype=self.dtype)
        self._coalesced, self._owns = True, False
        return self

    # --- conversions ---------------------------------------------------------------------
    def to(self, *args, **kwargs) -> SparseTensor:  # type: ignore[override]
        """The values' ``to`` (a dtype, the CPU, ``copy=``); ``self`` where nothing changes."""
        return self._with_values(self._vals.to(*args, **kwargs))

    def cpu(self, memory_format=None) -> SparseTensor:
        return self

    def cuda(self, device=None, non_blocking=False, **_) -> SparseTensor:
        return self._with_values(self._vals.cuda(device, non_blocking))

    def type_as(self, other) -> SparseTensor:
        return self.to(other.dtype)

    def _with_values(self, values: Tensor) -> SparseTensor:
        if values is self._vals:
            return self
        return _make(self._idx, values, self._size, self._coalesced)

    def to_dense(self, dtype=None, *, masked_grad=None) -> Tensor:
        """The dense tensor, duplicates summed; differentiable with respect to the values."""
        if masked_grad is False:
            raise NotImplementedError(
                "to_dense(masked_grad=False): staged's sparse gradients are masked to the "
                "tensor's indices"
            )
        v = self._vals if dtype is None else self._vals.to(dtype)
        sd = self.sparse_dim()
        n = math.prod(self._size[:sd])
        flat = zeros((n, *self._size[sd:]), dtype=v.dtype).index_add(0, _const(self._flat()), v)
        return flat.reshape(self._size)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        if sparse_dim not in (None, self.sparse_dim()) or layout not in (None, sparse_coo):
            raise _unsupported(f"to_sparse(sparse_dim={sparse_dim}, layout={layout})")
        return self

    def to_sparse_coo(self) -> SparseTensor:
        return self

    def coalesce(self) -> SparseTensor:
        """Indices sorted and distinct, the values of duplicates summed."""
        return self if self._coalesced else self._merged()

    def _merged(self) -> SparseTensor:
        """The coalesced tensor, whatever ``_coalesced`` says (``_coalesced_`` may have set
        it on distinct indices out of order)."""
        places, inverse = np.unique(self._flat(), return_inverse=True)
        idx = _unravel(places, self._size[: self.sparse_dim()])
        return _make(idx, _segment_sum(self._vals, inverse, len(places)), self._size, True)

    def _flat(self) -> np.ndarray:
        return _ravel(self._idx, self._size)

    # --- ops -----------------------------------------------------------------------------
    def t(self) -> SparseTensor:
        if self.sparse_dim() > 2 or self.dense_dim():
            raise RuntimeError(
                f"t() expects a tensor with <= 2 sparse and 0 dense dimensions, but self is "
                f"{self.sparse_dim()} sparse and {self.dense_dim()} dense dimensions"
            )
        if self.ndim < 2:
            return self
        return self.transpose(0, 1)

    def transpose(self, dim0, dim1) -> SparseTensor:  # type: ignore[override]
        """Two sparse dims swapped (the indices' rows: uncoalesced, as torch's)."""
        sd = self.sparse_dim()
        d0, d1 = wrap_dim(dim0, self.ndim), wrap_dim(dim1, self.ndim)
        if d0 >= sd or d1 >= sd:
            raise _unsupported("transpose of a dense dim of a sparse tensor")
        order = list(range(self.ndim))
        order[d0], order[d1] = d1, d0
        idx = self._idx[order[:sd]]
        return _make(
            idx, self._vals, tuple(self._size[i] for i in order), d0 == d1 and self._coalesced
        )

    def sum(self, dim=None, keepdim=False, *, dtype=None) -> Tensor:  # type: ignore[override]
        if keepdim:
            raise _unsupported("sum(keepdim=True)")
        return sum(self, dim, dtype)

    def mm(self, mat2) -> Tensor:  # type: ignore[override]
        return mm(self, mat2)

    def matmul(self, other) -> Tensor:  # type: ignore[override]
        if isinstance(other, SparseTensor):
            return _sparse_sparse(self, other)
        return _sparse_dense(self, other)

    def select(self, dim, index) -> SparseTensor:  # type: ignore[override]
        """The entries at ``index`` along the sparse dim ``dim``: a sparse tensor of the
        rest (torch's, for a tensor of two sparse dims or more)."""
        sd = self.sparse_dim()
        dim = wrap_dim(dim, self.ndim)
        if sd < 2 or dim >= sd:
            raise _unsupported(
                f"select along dim {dim} of {sd} sparse dims (of a sparse one of two or more)"
            )
        size = self._size[dim]
        if not -size <= index < size:
            raise IndexError(
                f"select(): index {index} out of range for tensor of size {list(self._size)} "
                f"at dimension {dim}"
            )
        keep = np.flatnonzero(self._idx[dim] == index % size)
        idx = np.delete(self._idx[:, keep], dim, axis=0)
        idx.flags.writeable = False
        values = self._vals.index_select(0, _const(keep))
        return _make(idx, values, self._size[:dim] + self._size[dim + 1 :], self._coalesced)

    def unbind(self, dim=0) -> tuple:  # type: ignore[override]
        return tuple(self.select(dim, i) for i in range(self._size[wrap_dim(dim, self.ndim)]))

    def __iter__(self):
        if not self._size:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __getitem__(self, index) -> SparseTensor:  # type: ignore[override]
        if isinstance(index, int) and not isinstance(index, bool):
            return self.select(0, index)
        raise _unsupported("__getitem__")  # (but by an int: a row)

    __matmul__ = matmul

    def __rmatmul__(self, other) -> Tensor:
        return _dense_sparse(other, self)

    def __mul__(self, other) -> SparseTensor:  # type: ignore[override]
        if isinstance(other, SparseTensor):
            return _sparse_times_sparse(self, other)
        if isinstance(other, Tensor) and other.ndim:
            if tuple(other.shape) != self._size:
                raise _unsupported(
                    f"mul of a sparse tensor of size {list(self._size)} by a dense one of "
                    f"size {list(other.shape)} (they broadcast only between equal sizes)"
                )
            return self._with_values(self._vals * other[tuple(_const(r) for r in self._rows)])
        return self._with_values(self._vals * other)

    __rmul__ = __mul__

    def __truediv__(self, other) -> SparseTensor:  # type: ignore[override]
        if isinstance(other, Tensor) and other.ndim:
            raise _unsupported("div by a tensor that is not 0-d")
        return self._with_values(self._vals / other)

    def __neg__(self) -> SparseTensor:  # type: ignore[override]
        return self._with_values(-self._vals)

    def __add__(self, other) -> SparseTensor:  # type: ignore[override]
        if not isinstance(other, SparseTensor):
            raise RuntimeError(
                at_user("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
            )
        if other._size != self._size:
            raise RuntimeError(
                f"add: expected sizes of 'self' and 'other' to match, but {list(self._size)} "
                f"!= {list(other._size)}"
            )
        idx = np.concatenate([self._idx, other._idx], axis=1)
        return _make(idx, cat([self._vals, other._vals]), self._size, False)

    def __sub__(self, other) -> SparseTensor:  # type: ignore[override]
        return self + (-other if isinstance(other, SparseTensor) else other)

    def __radd__(self, other) -> Tensor:  # type: ignore[override]
        return other + self._dense_like(other, "add")

    def __rsub__(self, other) -> Tensor:  # type: ignore[override]
        return other - self._dense_like(other, "sub")

    def _dense_like(self, other, what: str) -> Tensor:
        """``self.to_dense()`` for ``other`` (+ or -) this: a dense tensor of its size."""
        if not isinstance(other, Tensor):
            raise _unsupported(f"{what} of a {type(other).__name__} and a sparse tensor")
        if tuple(other.shape) != self._size:
            raise RuntimeError(
                f"{what}: expected 'self' and 'other' to have same size, but self has size "
                f"{list(other.shape)} while other has size {list(self._size)} (FYI: "
                "dense-sparse addition does not currently support broadcasting)"
            )
        return self.to_dense()

    # --- printing, copying ---------------------------------------------------------------
    def __repr__(self) -> str:
        """torch's: ``tensor(indices=..., values=..., size=..., nnz=..., layout=...)``."""
        indent = " " * len("tensor(")
        parts = [
            f"indices=tensor({_text(self._idx, indent + 'indices=tensor(')})",
            f"{indent}values=tensor({_text(self._vals, indent + 'values=tensor(')})",
        ]
        return self._suffixed("tensor(" + ",\n".join(parts), sparse_coo)

    def _suffixed(self, text: str, layout) -> str:
        """``text`` (the fields) with torch's suffixes: size, nnz, dtype, layout, grad."""
        suffixes = [f"size={self._size}", f"nnz={self._nnz()}"]
        default = dt.get_default_dtype()
        if self.dtype not in (default, default.to_complex(), dt.int64, dt.bool_):
            suffixes.append(f"dtype={self.dtype}")
        suffixes.append(f"layout={layout}")
        fn = self.grad_fn
        if fn is not None:
            suffixes.append(f"grad_fn=<{fn.name()}>")
        elif self.requires_grad:
            suffixes.append("requires_grad=True")
        return add_suffixes(text, suffixes, len("tensor("), True)

    def __reduce_ex__(self, protocol):
        return (_rebuild, (self._idx, self._vals, self._size, self._coalesced, self._owns))

    def __deepcopy__(self, memo) -> SparseTensor:
        s = _make(
            self._idx, copy.deepcopy(self._vals, memo), self._size, self._coalesced, self._owns
        )
        memo[id(self)] = s
        return s


def _cast(name: str):
    def method(self) -> SparseTensor:
        return self._with_values(getattr(self._vals, name)())

    method.__name__ = name
    return method


for _name in (
    *("float", "double", "half", "bfloat16", "cfloat", "cdouble"),
    *("long", "int", "short", "char", "byte", "bool"),
):
    setattr(SparseTensor, _name, _cast(_name))  # Tensor.float() ...: the values cast


def _no_dense_field(self):
    raise SparseLayoutError(at_user(_NEEDS_DENSE))


for _name in Tensor.__slots__:  # _payload, _requires_grad, _base, _vc, ...
    if _name not in ("__weakref__", "__dict__", *vars(SparseTensor)):  # (grad_fn is its own)
        setattr(SparseTensor, _name, property(_no_dense_field))


# --- sparse gradients: F.embedding(sparse=True) -------------------------------------------
# Note [sparse gradients]: ``F.embedding(..., sparse=True)`` gives its weight torch's sparse
# gradient: a COO tensor of one entry per index looked up (those equal to ``padding_idx``
# left out), uncoalesced, whose values are the output's gradient rows. Only a leaf weight
# gets one, in an eager call: the Node goes straight to its AccumulateGrad, so no other
# Node's rule ever sees a sparse gradient. ``.grad`` accumulates as torch's (sparse +
# sparse stays sparse, with the entries of both; with a dense one it is dense: ``add_grads``
# and ``accumulate_grad`` in staged/autograd/accumulate.py); ``SparseAdam`` and ``SGD``
# update its rows, ``Adagrad`` and ``LBFGS`` its dense equivalent, the other optimizers
# raise torch's errors (``_check_sparse_grads`` in staged/optim/optimizer.py).
# Elsewhere (a weight computed by other ops, under staged.compile or vmap, a dual level
# open) the gradient is the dense one, the same values: torch's would be sparse.


class EmbeddingBackward0(Node):
    """``F.embedding(sparse=True)``'s Node: the weight's sparse gradient (Note [sparse
    gradients])."""

    __slots__ = ("index", "keep", "size", "by_freq")
    _plain = True

    def apply(self, grads):
        if self.by_freq:
            raise RuntimeError(
                "embedding_backward: scale_grad_by_freq not supported with sparse gradients"
            )
        rows = grads[0].reshape(-1, self.size[1])
        if self.keep is not None:
            rows = rows.index_select(0, _const(self.keep))
        return [_make(self.index, rows, self.size, False)]


def embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq):
    """``F.embedding(..., sparse=True)``: ``dense_embedding``'s values, the weight's
    gradient sparse (Note [sparse gradients])."""
    plain = (
        weight.grad_fn is None
        and current_interceptor() is None
        and type(weight._payload) is np.ndarray
        and type(input._payload) is np.ndarray
        and not forward_ad._seen()
    )
    if not plain:
        return dense_embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq)
    v = weight.shape[0]
    if padding_idx is not None:
        if not -v <= padding_idx < v:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= v
    out = dense_embedding(input, weight, None, max_norm, norm_type, False)
    if out.grad_fn is None:  # no gradient wanted
        return out
    flat = np.array(input._payload, dtype=np.int64).reshape(-1)
    node = EmbeddingBackward0(((weight._grad_accumulator(), 0),))
    node.keep = None if padding_idx is None else np.flatnonzero(flat != padding_idx)
    index = (flat if node.keep is None else flat[node.keep]).reshape(1, -1)
    index.flags.writeable = False
    node.index, node.size, node.by_freq = index, tuple(weight.shape), scale_grad_by_freq
    result = Tensor._wrap(out._payload, True)
    result.grad_fn = node
    return result


def _make(idx: np.ndarray, values: Tensor, size, coalesced: bool, owns: bool = False):
    s = object.__new__(SparseTensor)
    s._idx, s._rows, s._vals = idx, tuple(idx), values
    s._size, s._coalesced, s._owns = tuple(size), coalesced, owns
    return s


def _rebuild(idx, values, size, coalesced, owns):
    return _make(idx, values, size, coalesced, owns)


def _ravel(idx: np.ndarray, size: tuple) -> np.ndarray:
    """Each index column's place among the first ``len(idx)`` dims of ``size``, row-major."""
    if len(idx) == 0 or idx.shape[1] == 0:
        return np.zeros(idx.shape[1], np.int64)
    return np.ravel_multi_index(tuple(idx), size[: len(idx)]).astype(np.int64)


def _unravel(places: np.ndarray, shape: tuple) -> np.ndarray:
    """``_ravel``'s inverse: index columns of ``places`` in ``shape``."""
    if not shape:
        return np.zeros((0, len(places)), np.int64)
    return np.stack(np.unravel_index(places, shape)).astype(np.int64).reshape(len(shape), -1)


def _const(a: np.ndarray) -> Tensor:
    """An index array as a tensor: a constant under ``staged.compile`` (one per array)."""
    return Tensor._wrap(a)


def _text(x, pad: str) -> str:
    """``x``'s body as torch prints it inside a sparse tensor (an empty one with its size)."""
    if isinstance(x, Tensor):
        p = x._payload
        if type(p) is not np.ndarray and not hasattr(p, "__array__"):
            return repr(p)  # a symbolic value, inside a trace
        x = x._host()
    body = array_text(x, pad)
    return body + f", size={x.shape}" if x.size == 0 and x.ndim <= 1 else body


def _segment_sum(values: Tensor, segment: np.ndarray, n: int) -> Tensor:
    """``out[k] = sum of values[i] where segment[i] == k`` over ``n`` segments."""
    out = zeros((n, *values.shape[1:]), dtype=values.dtype)
    return out.index_add(0, _const(segment), values)


# --- making sparse tensors ----------------------------------------------------------------
def sparse_coo_tensor(
    indices,
    values,
    size=None,
    *,
    dtype=None,
    device=None,
    pin_memory=False,
    requires_grad=False,
    check_invariants=None,
    is_coalesced=None,
) -> SparseTensor:
    """A sparse COO tensor with ``values[k]`` at ``indices[:, k]`` (duplicates add up).

    ``indices`` (``[sparse_dim, nnz]``) are read now (host data: not inside a compiled
    function); ``values`` (``[nnz, *dense_size]``) keep their autograd graph, or with
    ``requires_grad=True`` become the new tensor's own leaf. The indices are always checked
    (torch's ``check_invariants``).

    Example:
        >>> S = staged.sparse_coo_tensor([[0, 1], [1, 0]], [2.0, 3.0], (2, 2))
        >>> S @ staged.ones(2, 1)
        tensor([[2.],
                [3.]])
    """
    if device is not None:
        _device.check(device)
    if pin_memory:
        raise RuntimeError("Cannot access accelerator device when none is available.")
    if isinstance(indices, Tensor):
        indices = host_data(indices, "sparse_coo_tensor()'s indices", " and pass its indices in")
    idx = np.array(indices)
    if idx.dtype.kind not in "biuf":
        raise TypeError(f"sparse_coo_tensor: indices must be integers, got {idx.dtype}")
    if idx.ndim != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(idx.shape)}")
    idx = idx.astype(np.int64)
    idx.flags.writeable = False
    if not isinstance(values, Tensor):
        values = tensor(values, dtype=dtype)
    elif dtype is not None:
        values = values.to(dtype)
    sd, nnz = idx.shape
    if values.ndim == 0 or values.shape[0] != nnz:
        raise RuntimeError(
            f"indices and values must have same nnz, but got nnz from indices: {nnz}, nnz "
            f"from values: {values.shape[0] if values.ndim else 1}"
        )
    dense = tuple(values.shape[1:])
    if size is None:
        size = (*(idx.max(axis=1) + 1 if nnz else np.zeros(sd, np.int64)), *dense)
    size = tuple(int(s) for s in size)
    if len(size) != sd + len(dense):
        raise RuntimeError(
            f"'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = {len(size)}, "
            f"sparse_dim = {sd}, dense_dim = {len(dense)}"
        )
    if size[sd:] != dense:
        raise RuntimeError(
            f"values has incorrect size, expected {[nnz, *size[sd:]]}, got {list(values.shape)}"
        )
    if nnz:
        for d, (lo, hi) in enumerate(zip(idx.min(axis=1), idx.max(axis=1))):
            if lo < 0:
                raise RuntimeError(f"found negative index {lo} for dim {d}")
            if hi >= size[d]:
                raise RuntimeError(
                    f"size is inconsistent with indices: for dim {d}, size is {size[d]} but "
                    f"found index {hi}"
                )
    s = _make(idx, values, size, nnz <= 1)
    if is_coalesced:
        _coalesced_(s, True)
    if requires_grad and not values.requires_grad:
        s.requires_grad_()
    return s


def _to_sparse(self: Tensor, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """``Tensor.to_sparse``: the nonzero entries (along the first ``sparse_dim`` dims: the
    places where any of the rest is nonzero), coalesced; differentiable."""
    if layout not in (None, sparse_coo) or blocksize is not None or dense_dim is not None:
        raise NotImplementedError(
            f"to_sparse(layout={layout}, blocksize={blocksize}, dense_dim={dense_dim}): "
            "staged has sparse COO tensors only (staged.sparse_coo)"
        )
    n = self.ndim
    sd = n if sparse_dim is None else sparse_dim
    if not 0 <= sd <= n:
        raise RuntimeError(
            f"dense_to_sparse: sparse_dim argument must be in [0,{n}] range, but {sd} is given"
        )
    a = host_data(self, "to_sparse()", " and use the sparse tensor inside it")
    if sd == 0:
        return _make(np.zeros((0, 1), np.int64), self.unsqueeze(0), self.shape, True)
    nonzero = (a != 0).reshape(*a.shape[:sd], -1).any(axis=-1)
    idx = np.ascontiguousarray(np.argwhere(nonzero).T, dtype=np.int64)
    idx.flags.writeable = False
    return _make(idx, self[tuple(_const(r) for r in idx)], self.shape, True)


Tensor.to_sparse_coo = lambda self: _to_sparse(self)  # type: ignore[method-assign]
Tensor.to_dense = lambda self, dtype=None, *, masked_grad=None: (  # type: ignore[method-assign]
    self if dtype is None else self.to(dtype)
)


# --- sparse CSR and CSC ----------------------------------------------------------------------
# Note [sparse compressed]: a 2-D CSR tensor (``layout == staged.sparse_csr``) is held as the
# COO tensor of its entries in row order: ``_idx`` is its rows (expanded from
# ``crow_indices``) over its ``col_indices`` as given (torch's invariant wants them sorted
# and distinct within a row, and checks it only with ``check_invariants=True``; PyTorch
# Geometric makes CSC tensors whose rows are not sorted, which work here as the entries
# they list), ``_vals`` its values; a CSC tensor likewise, its
# entries in column order (``ccol_indices``, ``row_indices``), so that ``t()`` turns one
# into the other with the entries in the same order, as torch's. COO's products,
# ``to_dense``, autograd and compilation serve them unchanged; the ops that keep the pattern
# (casts, clone, detach, ``*`` and ``/`` by a number) keep the layout, ``sparse.mm(A, D,
# reduce)`` reduces each row's products as torch's CSR kernel (its only layout for
# reductions), and every operation that staged has only for COO is refused, pointing at
# ``to_sparse_coo()``.
_COMPRESSED_SUPPORTED = (
    "crow_indices/col_indices (CSR), ccol_indices/row_indices (CSC), values, to_dense, "
    "to_sparse_coo/csr/csc, t(), mm/matmul/@ with a dense operand (sparse.mm of a CSR "
    "tensor with reduce='sum', 'mean', 'amax', 'amin'), sum(), casts, clone, detach, * and / "
    "by a number, * by a dense tensor of its shape, + of two of one layout"
)


def _compressed_unsupported(what: str, layout=None) -> NotImplementedError:
    name = "CSR" if layout in (None, sparse_csr) else "CSC"
    return NotImplementedError(
        at_user(
            f"Could not run '{what}' with a sparse {name} tensor (layout={layout or sparse_csr}): "
            f"staged's CSR and CSC tensors support {_COMPRESSED_SUPPORTED}. Call "
            ".to_sparse_coo() for the COO tensor of its entries, or .to_dense()."
        )
    )


class _Compressed(SparseTensor):
    """A 2-D sparse CSR or CSC tensor: Note [sparse compressed]."""

    __slots__ = ()
    _dim = 0  # the compressed dim: 0 (rows: CSR) or 1 (columns: CSC)
    _layout: Any = sparse_csr
    _fields = ("crow_indices", "col_indices")

    @property
    def layout(self) -> Any:
        return self._layout

    @property
    def is_sparse(self) -> bool:
        return False  # torch's: COO only

    def _compressed_indices(self) -> Tensor:
        d = self._dim
        counts = np.bincount(self._idx[d], minlength=self._size[d])
        return Tensor._wrap(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))

    def _plain_indices(self) -> Tensor:
        return Tensor._wrap(self._idx[1 - self._dim])

    def values(self) -> Tensor:
        return self._vals

    def _with_values(self, values: Tensor) -> SparseTensor:
        if values is self._vals:
            return self
        return _make_compressed(type(self), self._idx, values, self._size)

    def detach(self) -> SparseTensor:
        return _make_compressed(type(self), self._idx, self._vals.detach(), self._size)

    def clone(self, *, memory_format=None) -> SparseTensor:
        return _make_compressed(type(self), self._idx, self._vals.clone(), self._size)

    @property  # type: ignore[override]
    def grad(self) -> SparseTensor | None:
        g = self._vals.grad if self._owns else None
        return None if g is None else _make_compressed(type(self), self._idx, g, self._size)

    @grad.setter
    def grad(self, value) -> None:
        SparseTensor.grad.fset(self, value)  # type: ignore[attr-defined]

    def t(self) -> SparseTensor:
        """The transpose: a CSR tensor's is CSC and a CSC tensor's CSR, its entries in the
        same order (torch's)."""
        idx = np.ascontiguousarray(self._idx[::-1])
        idx.flags.writeable = False
        other = SparseCscTensor if type(self) is SparseCsrTensor else SparseCsrTensor
        return _make_compressed(other, idx, self._vals, self._size[::-1])

    def to_sparse_coo(self) -> SparseTensor:
        return _make(self._idx, self._vals, self._size, self._nnz() <= 1)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        if layout in (sparse_csr, sparse_csc) and blocksize is None and not dense_dim:
            return _to_compressed(self, _LAYOUTS[layout])
        if layout not in (None, sparse_coo) or sparse_dim not in (None, 2):
            raise _compressed_unsupported(
                f"to_sparse(sparse_dim={sparse_dim}, layout={layout})", self._layout
            )
        return self.to_sparse_coo()

    def __mul__(self, other) -> SparseTensor:  # type: ignore[override]
        if isinstance(other, SparseTensor):
            raise _compressed_unsupported("mul of two sparse tensors", self._layout)
        return SparseTensor.__mul__(self, other)

    __rmul__ = __mul__

    def __add__(self, other) -> SparseTensor:  # type: ignore[override]
        if type(other) is not type(self):
            what = f"add of a {self._layout} tensor and a {getattr(other, 'layout', type(other))}"
            raise _compressed_unsupported(what, self._layout)
        total = SparseTensor.__add__(self.to_sparse_coo(), other.to_sparse_coo())
        return _compressed_of(total, type(self))

    def __rmatmul__(self, other) -> Tensor:
        return _dense_sparse(other, self.to_sparse_coo())

    def __repr__(self) -> str:
        """torch's: ``tensor(crow_indices=..., col_indices=..., values=..., size=..., ...)``."""
        indent = " " * len("tensor(")
        fields = (*(getattr(self, n)() for n in self._fields), self._vals)
        names = (*self._fields, "values")
        parts = [f"{n}=tensor({_text(t, indent + n + '=tensor(')})" for n, t in zip(names, fields)]
        return self._suffixed("tensor(" + f",\n{indent}".join(parts), self._layout)

    def __reduce_ex__(self, protocol):
        return (_make_compressed, (type(self), self._idx, self._vals, self._size, self._owns))

    def __deepcopy__(self, memo) -> SparseTensor:
        values = copy.deepcopy(self._vals, memo)
        s = _make_compressed(type(self), self._idx, values, self._size, self._owns)
        memo[id(self)] = s
        return s


class SparseCsrTensor(_Compressed):
    """A 2-D sparse CSR tensor (``layout == staged.sparse_csr``): Note [sparse compressed]."""

    __slots__ = ()

    @property
    def is_sparse_csr(self) -> bool:
        return True

    crow_indices = _Compressed._compressed_indices
    col_indices = _Compressed._plain_indices


class SparseCscTensor(_Compressed):
    """A 2-D sparse CSC tensor (``layout == staged.sparse_csc``): Note [sparse compressed]."""

    __slots__ = ()
    _dim = 1
    _layout = sparse_csc
    _fields = ("ccol_indices", "row_indices")
    ccol_indices = _Compressed._compressed_indices
    row_indices = _Compressed._plain_indices


_LAYOUTS = {sparse_csr: SparseCsrTensor, sparse_csc: SparseCscTensor}


def _refuse_compressed(name: str):
    def method(self, *args, **kwargs):
        raise _compressed_unsupported(name, self._layout)

    method.__name__ = name
    return method


for _name in (
    *("indices", "_indices", "coalesce", "is_coalesced", "_coalesced_", "transpose"),
    *("select", "unbind", "__iter__", "__getitem__"),
):
    setattr(_Compressed, _name, _refuse_compressed(_name))


def _make_compressed(cls, idx: np.ndarray, values: Tensor, size, owns: bool = False):
    s = object.__new__(cls)
    s._idx, s._rows, s._vals = idx, tuple(idx), values
    s._size, s._coalesced, s._owns = tuple(size), False, owns
    return s


def _compressed_of(S: SparseTensor, cls) -> _Compressed:
    """The ``cls`` (CSR or CSC) tensor of a 2-D COO tensor with no dense dims: its entries
    coalesced, in the compressed dim's order."""
    if S.ndim != 2 or S.dense_dim():
        raise RuntimeError(
            f"to_sparse_{cls._layout.name[7:]}: expected a 2-D sparse tensor with no dense "
            f"dims, got {S.sparse_dim()} sparse and {S.dense_dim()} dense dims (staged's "
            "CSR and CSC tensors are 2-D)"
        )
    if cls._dim == 1:  # column order: its transpose's row order
        T = _make(np.ascontiguousarray(S._idx[::-1]), S._vals, S._size[::-1], False)
        return _compressed_of(T, SparseCsrTensor).t()  # type: ignore[return-value]
    flat = S._flat()
    if not np.all(flat[1:] > flat[:-1]):
        S = S._merged()
    return _make_compressed(cls, S._idx, S._vals, S._size)


def _to_compressed(self: Tensor, cls, dense_dim=None) -> Tensor:
    """``Tensor.to_sparse_csr``/``to_sparse_csc``: a 2-D tensor's entries in that layout."""
    if dense_dim:
        raise _compressed_unsupported(f"to_sparse(dense_dim={dense_dim})", cls._layout)
    if type(self) is cls:
        return self
    if isinstance(self, _Compressed):
        self = self.to_sparse_coo()
    elif self.ndim != 2:
        raise RuntimeError(
            f"to_sparse_{cls._layout.name[7:]}: staged's CSR and CSC tensors are 2-D, got a "
            f"{self.ndim}-D tensor (torch's batched ones are not supported)"
        )
    return _compressed_of(self if isinstance(self, SparseTensor) else _to_sparse(self), cls)


def _compressed_tensor(cls, what, compressed, plain, values, size, dtype, layout, device, pin_memory, requires_grad, check_invariants):  # fmt: skip
    """A CSR or CSC tensor from its indices, read now (host data) and checked: always in
    bounds, and with ``check_invariants`` sorted and distinct within each compressed
    row or column, as torch's (unsorted ones, which torch's default takes and PyTorch
    Geometric makes, work here as the entries they list)."""
    names = cls._fields
    if layout not in (None, cls._layout):
        raise _compressed_unsupported(f"{what}(layout={layout})", cls._layout)
    if device is not None:
        _device.check(device)
    if pin_memory:
        raise RuntimeError("Cannot access accelerator device when none is available.")
    comp, plain = (
        np.asarray(
            host_data(a, f"{what}()'s {n}", " and pass its indices in")
            if isinstance(a, Tensor)
            else a
        )
        for a, n in zip((compressed, plain), names)
    )
    if comp.dtype.kind not in "iu" or plain.dtype.kind not in "iu":
        raise RuntimeError(
            f"{what}: {names[0]} and {names[1]} must be integers, got {comp.dtype} and "
            f"{plain.dtype}"
        )
    if comp.ndim != 1 or plain.ndim != 1:
        raise RuntimeError(
            f"{what}: staged's CSR and CSC tensors are 2-D: {names[0]} and {names[1]} must "
            f"be 1-D, got {comp.ndim}-D and {plain.ndim}-D"
        )
    if not isinstance(values, Tensor):
        values = tensor(values, dtype=dtype)
    elif dtype is not None:
        values = values.to(dtype)
    if values.ndim != 1:
        raise RuntimeError(
            f"{what}: values must be 1-D (staged's CSR and CSC tensors have no dense dims), "
            f"got {values.ndim}-D"
        )
    nnz, n = len(plain), len(comp) - 1
    if n < 0 or comp[0] != 0 or comp[-1] != nnz or np.any(np.diff(comp) < 0):
        raise RuntimeError(
            f"{what}: {names[0]} must start at 0, never decrease and end at nnz = {nnz} (the "
            f"length of {names[1]}), got {comp.tolist()[:8]}"
        )
    if values.shape[0] != nnz:
        raise RuntimeError(
            f"{what}: {names[1]} and values must have one length, got {nnz} and {values.shape[0]}"
        )
    d = cls._dim
    if size is None:
        m = int(plain.max()) + 1 if nnz else 0
        size = (n, m) if d == 0 else (m, n)
    size = tuple(int(k) for k in size)
    if len(size) != 2 or size[d] != n:
        raise RuntimeError(
            f"{what}: size {list(size)} does not fit {n} compressed {('rows', 'columns')[d]} "
            f"(len({names[0]}) - 1); staged's CSR and CSC tensors are 2-D"
        )
    if nnz and (plain.min() < 0 or plain.max() >= size[1 - d]):
        raise RuntimeError(
            f"{what}: {names[1]} must be in [0, {size[1 - d]}), got values from "
            f"{plain.min()} to {plain.max()}"
        )
    expanded = np.repeat(np.arange(n, dtype=np.int64), np.diff(comp))
    place = expanded * size[1 - d] + plain
    if check_invariants and np.any(place[1:] <= place[:-1]):
        raise RuntimeError(
            f"{what}: {names[1]} must be sorted and distinct within each compressed "
            f"{('row', 'column')[d]} (check_invariants=True)"
        )
    idx = np.stack([expanded, plain] if d == 0 else [plain, expanded]).astype(np.int64)
    idx.flags.writeable = False
    s = _make_compressed(cls, idx, values, size)
    if requires_grad and not values.requires_grad:
        s.requires_grad_()
    return s


def sparse_csr_tensor(
    crow_indices,
    col_indices,
    values,
    size=None,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=False,
    requires_grad=False,
    check_invariants=None,
) -> SparseTensor:
    """A 2-D sparse CSR tensor: row ``i``'s entries are ``values[crow[i]:crow[i+1]]`` at
    the columns ``col_indices[crow[i]:crow[i+1]]``. The indices are read now (host data)
    and always checked to be in bounds (torch checks them only with
    ``check_invariants=True``: unchecked ones would read out of bounds)."""
    return _compressed_tensor(
        SparseCsrTensor, "sparse_csr_tensor", crow_indices, col_indices, values, size,
        dtype, layout, device, pin_memory, requires_grad, check_invariants,
    )  # fmt: skip


def sparse_csc_tensor(
    ccol_indices,
    row_indices,
    values,
    size=None,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=False,
    requires_grad=False,
    check_invariants=None,
) -> SparseTensor:
    """A 2-D sparse CSC tensor: column ``j``'s entries are ``values[ccol[j]:ccol[j+1]]`` at
    the rows ``row_indices[ccol[j]:ccol[j+1]]``; the indices always checked."""
    return _compressed_tensor(
        SparseCscTensor, "sparse_csc_tensor", ccol_indices, row_indices, values, size,
        dtype, layout, device, pin_memory, requires_grad, check_invariants,
    )  # fmt: skip


def _dense_to_sparse(self: Tensor, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """``Tensor.to_sparse``: COO, or CSR with ``layout=staged.sparse_csr``."""
    if layout in (sparse_csr, sparse_csc) and blocksize is None and sparse_dim is None:
        return _to_compressed(self, _LAYOUTS[layout], dense_dim)
    return _to_sparse(self, sparse_dim, layout=layout, blocksize=blocksize, dense_dim=dense_dim)


def _mm_reduce(S: SparseCsrTensor, D, reduce: str) -> Tensor:
    """``sparse.mm(S, D, reduce)``: each row's products ``values[k] * D[col[k]]`` reduced
    (a row without entries gives zeros, as torch's)."""
    how = _REDUCTIONS.get(reduce)
    if how is None:
        raise RuntimeError(
            f"sparse.mm: reduce argument must be either sum, mean, amax or amin, got {reduce}"
        )
    if not isinstance(D, Tensor) or isinstance(D, SparseTensor) or D.ndim != 2:
        raise RuntimeError("sparse.mm with reduce: expected a 2-D dense second operand")
    n, m = S._size
    if D.shape[0] != m:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({n}x{m} and {D.shape[0]}x{D.shape[1]})"
        )
    if how == "sum":
        return _sparse_dense(S, D)
    rows, cols = S._rows
    products = S._vals.unsqueeze(1) * D.index_select(0, _const(cols))
    where = _const(rows).unsqueeze(1).expand(-1, D.shape[1])
    out = zeros((n, D.shape[1]), dtype=products.dtype)
    return out.scatter_reduce(0, where, products, how, include_self=False)


_REDUCTIONS = {
    "sum": "sum",
    "mean": "mean",
    "max": "amax",
    "amax": "amax",
    "min": "amin",
    "amin": "amin",
}


def _coalesced_(self: SparseTensor, coalesced: bool) -> SparseTensor:
    """torch's in-place flag that the indices need no coalescing, which programs set to
    read them in their order (PyTorch Geometric's ``to_edge_index``). Set True, it is
    checked that no place repeats (torch trusts it: a repeated place would then count
    once where it counts twice); distinct indices out of order are allowed, as staged's
    ops need them only distinct (a CSR conversion sorts them itself)."""
    if coalesced and not self._coalesced:
        flat = self._flat()
        if len(np.unique(flat)) != len(flat):
            raise RuntimeError(
                "the indices repeat a place, so the tensor is not coalesced (is_coalesced="
                "True, _coalesced_(True)); call .coalesce()"
            )
    self._coalesced = bool(coalesced)
    return self


def _convert_indices_from_coo_to_csr(input, size, *, out_int32=False) -> Tensor:
    """torch's ``crow_indices`` of the row indices ``input`` (sorted, as torch assumes) of
    ``size`` rows."""
    rows = host_data(input, "_convert_indices_from_coo_to_csr()").astype(np.int64)
    if rows.size and (rows.min() < 0 or rows.max() >= size):
        raise RuntimeError(
            f"_convert_indices_from_coo_to_csr: row indices must be in [0, {size}), got "
            f"{rows.min()} to {rows.max()}"
        )
    crow = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=size))])
    return Tensor._wrap(crow.astype(np.int32 if out_int32 else np.int64))


def _convert_indices_from_csr_to_coo(
    crow_indices, col_indices, *, out_int32=False, transpose=False
):
    """torch's COO indices ``[rows, cols]`` (``[cols, rows]`` with ``transpose``) of CSR
    indices."""
    crow = host_data(crow_indices, "_convert_indices_from_csr_to_coo()")
    col = host_data(col_indices, "_convert_indices_from_csr_to_coo()")
    counts = np.diff(crow)
    if crow.ndim != 1 or len(crow) < 1 or np.any(counts < 0) or crow[-1] != len(col):
        raise RuntimeError(
            "_convert_indices_from_csr_to_coo: crow_indices must never decrease and end at "
            "the length of col_indices"
        )
    rows = np.repeat(np.arange(len(counts)), counts)
    idx = np.stack([col, rows] if transpose else [rows, col])
    return Tensor._wrap(idx.astype(np.int32 if out_int32 else np.int64))


SparseTensor._coalesced_ = _coalesced_  # type: ignore[attr-defined]
Tensor.to_sparse = _dense_to_sparse  # type: ignore[method-assign]
Tensor.to_sparse_csr = lambda self, dense_dim=None: _to_compressed(self, SparseCsrTensor, dense_dim)  # type: ignore[method-assign]
Tensor.to_sparse_csc = lambda self, dense_dim=None: _to_compressed(self, SparseCscTensor, dense_dim)  # type: ignore[method-assign]
SparseTensor.to_sparse_csr = Tensor.to_sparse_csr  # type: ignore[method-assign]
SparseTensor.to_sparse_csc = Tensor.to_sparse_csc  # type: ignore[method-assign]


# --- products -------------------------------------------------------------------------------
def _sparse_dense(S: SparseTensor, D) -> Tensor:
    """``S @ D``: ``D``'s rows at the column indices, scaled by the values, added into the
    result's rows (``D`` a vector or a matrix)."""
    if not isinstance(D, Tensor):
        raise TypeError(f"matmul: expected a dense tensor, got {type(D).__name__}")
    if S.ndim != 2 or S.dense_dim():
        raise RuntimeError(
            f"a sparse matrix product takes a 2-D sparse tensor with no dense dims, got "
            f"{S.sparse_dim()} sparse and {S.dense_dim()} dense dims"
        )
    if D.ndim not in (1, 2):
        raise RuntimeError(f"sparse @ dense: expected a 1-D or 2-D dense tensor, got {D.ndim}-D")
    n, m = S._size
    if D.shape[0] != m:
        raise RuntimeError(f"addmm: Argument #3 (dense): Expected dim 0 size {m}, got {D.shape[0]}")
    if D.dtype is not S.dtype:
        raise RuntimeError(f"expected scalar type {S.dtype.title} but found {D.dtype.title}")
    rows, cols = S._rows
    v = S._vals if D.ndim == 1 else S._vals.unsqueeze(1)
    out = zeros((n, *D.shape[1:]), dtype=D.dtype)
    return out.index_add(0, _const(rows), v * D.index_select(0, _const(cols)))


def _sparse_sparse(A: SparseTensor, B: SparseTensor) -> SparseTensor:
    """``A @ B`` of two sparse matrices: sparse, of the product's nonzero entries (as
    ``(A @ B.to_dense()).to_sparse()``: differentiable with respect to both values)."""
    if B.ndim != 2 or B.dense_dim():
        raise RuntimeError(f"sparse @ sparse: expected a 2-D sparse tensor, got {B.ndim}-D")
    return _to_sparse(_sparse_dense(A, B.to_dense()))


def _sparse_times_sparse(A: SparseTensor, B: SparseTensor) -> SparseTensor:
    """``A * B`` of two sparse tensors of one size: the entries both have (torch's
    pattern: their intersection), the values multiplied."""
    if A._size != B._size or A.sparse_dim() != B.sparse_dim():
        raise RuntimeError(
            f"mul: expected sparse tensors of one size and sparse dims, got {list(A._size)} "
            f"and {list(B._size)}"
        )
    A, B = A.coalesce(), B.coalesce()
    places, ia, ib = np.intersect1d(A._flat(), B._flat(), assume_unique=True, return_indices=True)
    idx = _unravel(places, A._size[: A.sparse_dim()])
    idx.flags.writeable = False
    values = A._vals.index_select(0, _const(ia)) * B._vals.index_select(0, _const(ib))
    return _make(idx, values, A._size, True)


def _stack(tensors, dim=0) -> SparseTensor:
    """``torch.stack`` of sparse tensors of one size: a new leading sparse dim."""
    first = tensors[0]
    if any(isinstance(t, _Compressed) for t in tensors):
        raise _compressed_unsupported("stack")
    if dim != 0 or any(
        not isinstance(t, SparseTensor)
        or t._size != first._size
        or t.sparse_dim() != first.sparse_dim()
        for t in tensors
    ):
        raise _unsupported("stack of sparse tensors other than along dim 0 of ones of one size")
    idx = np.concatenate(
        [np.vstack([np.full((1, t._nnz()), i, np.int64), t._idx]) for i, t in enumerate(tensors)],
        axis=1,
    )
    idx.flags.writeable = False
    coalesced = all(t._coalesced for t in tensors)
    return _make(idx, cat([t._vals for t in tensors]), (len(tensors), *first._size), coalesced)


def _dense_sparse(D, S: SparseTensor) -> Tensor:
    """``D @ S``, as ``(S.t() @ D.t()).t()``."""
    if not isinstance(D, Tensor) or D.ndim not in (1, 2) or S.ndim != 2:
        what = D.ndim if isinstance(D, Tensor) else type(D).__name__
        raise RuntimeError(f"dense @ sparse: expected a 1-D or 2-D dense tensor, got {what}")
    if D.shape[-1] != S._size[0]:
        rows = D.shape[0] if D.ndim == 2 else 1
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({rows}x{D.shape[-1]} and "
            f"{S._size[0]}x{S._size[1]})"
        )
    if D.ndim == 1:
        return _sparse_dense(S.t(), D)
    return _sparse_dense(S.t(), D.t()).t()


_DENSE = _exports()  # the table's staged.mm, staged.matmul, ...: dense operands


@sited
def mm(mat1, mat2, reduce="sum") -> Tensor:
    """``torch.sparse.mm``: sparse @ dense or dense @ sparse (dense @ dense too), a dense
    result differentiable with respect to both (Note [sparse tensors])."""
    if isinstance(mat1, SparseCsrTensor) and reduce != "sum":
        return _mm_reduce(mat1, mat2, reduce)
    if reduce != "sum":
        raise RuntimeError(
            f"sparse.mm(reduce={reduce!r}): reductions other than sum take a sparse CSR "
            "first operand (mat1.to_sparse_csr()), as torch's"
        )
    if isinstance(mat1, SparseTensor):
        if isinstance(mat2, SparseTensor):
            return _sparse_sparse(mat1, mat2)
        if mat2.ndim != 2:
            raise RuntimeError(f"mm: expected 2D tensors, got {mat1.ndim}D and {mat2.ndim}D")
        return _sparse_dense(mat1, mat2)
    if isinstance(mat2, SparseTensor):
        if mat1.ndim != 2:
            raise RuntimeError(f"mm: expected 2D tensors, got {mat1.ndim}D and {mat2.ndim}D")
        return _dense_sparse(mat1, mat2)
    return _DENSE["mm"](mat1, mat2)


@sited
def _matmul(input, other) -> Tensor:
    if isinstance(input, SparseTensor):
        return input.matmul(other)
    return other.__rmatmul__(input)


@sited
def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0) -> Tensor:
    """``beta * mat + alpha * (mat1 @ mat2)``, ``mat1`` sparse (or dense)."""
    if not isinstance(mat1, SparseTensor):
        return _DENSE["addmm"](mat, mat1, mat2, beta=beta, alpha=alpha)
    return _add_product(mat, mm(mat1, mat2), beta, alpha)


@sited
def sum(input, dim=None, dtype=None) -> Tensor:
    """``torch.sparse.sum``: of all entries (a 0-d dense tensor), or over ``dim``: sparse
    while sparse dims remain, else dense."""
    if not isinstance(input, SparseTensor):
        raise RuntimeError(
            f"sparse.sum expects a sparse COO tensor, got layout={strided}: use staged.sum"
        )
    S = input
    v = S._vals if dtype is None else S._vals.to(dtype)
    if dim is None:
        return v.sum()
    if isinstance(S, _Compressed):
        raise _compressed_unsupported(f"sum(dim={dim})", S._layout)
    sd = S.sparse_dim()
    dims = normalize_dims(dim, S.ndim)
    dense_axes = [d - sd + 1 for d in dims if d >= sd]  # the values' axes
    if dense_axes:
        v = v.sum(dense_axes)
    keep = [d for d in range(sd) if d not in dims]
    if not keep:
        return v.sum(0)
    size = tuple(s for d, s in enumerate(S._size) if d not in dims)
    places, inverse = np.unique(_ravel(S._idx[keep], size), return_inverse=True)
    idx = _unravel(places, size[: len(keep)])
    return _make(idx, _segment_sum(v, inverse, len(places)), size, True)


def _softmax(input, dim: int, dtype, log: bool) -> SparseTensor:
    """Softmax over the specified entries along ``dim`` (the unspecified ones count as
    -inf, as in torch): per group of entries sharing every other index."""
    what = "sparse.log_softmax" if log else "sparse.softmax"
    if not isinstance(input, SparseTensor):
        raise NotImplementedError(f"{what} expects a sparse COO tensor, got a dense one")
    if isinstance(input, _Compressed):
        raise _compressed_unsupported(what, input._layout)
    S = input.coalesce()
    v = S._vals if dtype is None else S._vals.to(dtype)
    sd = S.sparse_dim()
    d = wrap_dim(dim, S.ndim)
    if d >= sd:  # along a dense dim: the values' own softmax
        out = v.log_softmax(d - sd + 1) if log else v.softmax(d - sd + 1)
        return S._with_values(out)
    others = [k for k in range(sd) if k != d]
    places = _ravel(S._idx[others], tuple(S._size[k] for k in others))
    distinct, group = np.unique(places, return_inverse=True)  # entries sharing the others
    groups = len(distinct)
    spread = _const(group.reshape(-1, *(1,) * (v.ndim - 1))).expand(*v.shape)
    top = full((groups, *v.shape[1:]), -math.inf, dtype=v.dtype)
    top = top.scatter_reduce(0, spread, v.detach(), "amax")  # for range only: it cancels out
    g = _const(group)
    shifted = v - top.index_select(0, g)
    total = _segment_sum(shifted.exp(), group, groups).index_select(0, g)
    return S._with_values(shifted - total.log() if log else shifted.exp() / total)


@sited
def softmax(input, dim: int, *, dtype=None) -> SparseTensor:
    """``torch.sparse.softmax``: a sparse tensor of ``input``'s (coalesced) indices."""
    return _softmax(input, dim, dtype, log=False)


@sited
def log_softmax(input, dim: int, *, dtype=None) -> SparseTensor:
    """``torch.sparse.log_softmax``: a sparse tensor of ``input``'s (coalesced) indices."""
    return _softmax(input, dim, dtype, log=True)


def _either(name: str, sparse_fn, operands: int):
    """The table's ``staged.<name>``, which calls ``sparse_fn`` instead where one of the
    first ``operands`` arguments is sparse."""
    dense = _DENSE[name]

    @functools.wraps(dense)
    def call(*args, **kwargs):
        for a in args[:operands]:
            if isinstance(a, SparseTensor):
                return sparse_fn(*args, **kwargs)
        return dense(*args, **kwargs)

    return call


def _stacked():
    """The table's ``staged.stack``, which stacks sparse tensors too."""
    dense = _DENSE["stack"]

    @functools.wraps(dense)
    def call(tensors, *args, **kwargs):
        if tensors and isinstance(tensors[0], SparseTensor):
            return sited(_stack)(tensors, *args, **kwargs)
        return dense(tensors, *args, **kwargs)

    return call


spmm = mm  # torch.spmm
# staged/__init__.py puts them in place of the table's: they take sparse operands too
TOP_LEVEL = {
    "mm": _either("mm", mm, 2),
    "matmul": _either("matmul", _matmul, 2),
    "addmm": _either("addmm", addmm, 2),
    "sum": _either("sum", sited(lambda input, *a, **k: input.sum(*a, **k)), 1),
    "stack": _stacked(),
}

# Every other method of Tensor raises on a sparse tensor, naming itself (the methods above,
# the device flags and Python's own slots excepted): refuse_dense_methods.
_KEEP = {
    "__array_priority__",
    "__annotations__",
    "__doc__",
    "__format__",
    "__hash__",
    "__module__",
    "__slots__",
    "__weakref__",
    "device",
    "get_device",
    "is_cpu",
    "is_cuda",
    "is_xpu",
    "is_mps",
    "is_meta",
    "is_quantized",
    "is_sparse_csr",
    "is_floating_point",
    "is_complex",
}


def _refuse_method(name: str):
    def method(self, *args, **kwargs):
        raise _unsupported(name)

    method.__name__ = name
    return method


def _refuse_property(name: str) -> property:
    def get(self):
        raise _unsupported(name)

    return property(get)


def _not_in_place(self, other):
    return NotImplemented  # S += x is S = S + x, which says what it supports


def refuse_dense_methods() -> None:
    """Make every Tensor method that SparseTensor does not define raise, naming itself:
    called by ``staged/__init__.py`` once every module has added its Tensor methods."""
    for name, attr in list(vars(Tensor).items()):
        if name in vars(SparseTensor) or name in _KEEP:
            continue
        if name.startswith("_") and not name.startswith("__"):
            continue
        if name.startswith("__i") and f"__{name[3:]}" in vars(Tensor):  # __iadd__, ...
            setattr(SparseTensor, name, _not_in_place)
        elif isinstance(attr, property):
            setattr(SparseTensor, name, _refuse_property(name))
        elif callable(attr):
            setattr(SparseTensor, name, _refuse_method(name))
