"""Tensor: a payload (a NumPy array eagerly, a symbolic value under capture) plus the
autograd metadata PyTorch keeps: requires_grad, grad, grad_fn, version counter, views.

Note [version counters]: ``_vc`` is a one-element list shared by a tensor, its views and
``detach()`` (not ``.data``); in-place writes bump it. Inference tensors (made in
``inference_mode``) have none: ``_vc is None``. Views also carry ``_base`` and ``_view``
(``views.ViewMeta``, set only where ``_base`` is set; Note [views]).

Note [payloads]: everything in ``staged.eager`` treats the payload through what NumPy
arrays and symbolic values both have (``shape``, ``dtype``). Only the evaluator in
``dispatch`` runs NumPy on it; a payload that is neither an ndarray nor handled by an
active interceptor is materialised with ``np.asarray`` (device arrays left by compiled
steps) or raises (a symbolic value that escaped its trace).
"""

from __future__ import annotations

import copy
import itertools
import numbers
import operator
import weakref
from threading import get_ident
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _torch_function as _tf
from .. import dtypes as dt
from .._where import at_user, sited, warn_once, warn_user
from ..autodiff import Aval
from .aliases import register, replaced
from .grad_mode import _state
from . import interceptor as _interceptor
from .interceptor import current_interceptor
from .meta import Meta
from .printing import add_suffixes, array_text
from .strides import dense_strides

if TYPE_CHECKING:
    from builtins import bool as _bool
    from builtins import int as _int

    from .._ops import TensorOps as _TensorOps  # the table's methods (a generated stub)
    from . import devices as _device
else:
    _TensorOps = object

_serial = itertools.count().__next__
_DTYPES = {d.np: d for d in dt.ALL}  # NumPy dtype -> DType
_new_aval = tuple.__new__  # (a NamedTuple's __new__ is a Python function)
_new = object.__new__


class Tensor(_TensorOps):
    """A multi-dimensional array with autograd, PyTorch's ``torch.Tensor``."""

    __slots__ = (
        "_payload",
        "_requires_grad",
        "grad_fn",
        "_output_nr",
        "_grad",
        "_vc",
        "_base",
        "_view",
        "_hooks",
        "_post_acc_hooks",
        "_retains_grad",
        "_grad_acc",
        "_serial",
        "_alias",
        "_aliases",
        "__weakref__",
        "__dict__",  # a user's attributes (``x.tag = 1``), as torch's tensors take them
    )

    __array_priority__ = 1000  # NumPy scalars on the left defer to Tensor operators

    # staged.autograd attaches backward, register_hook, register_post_accumulate_grad_hook
    # and _grad_accumulator; staged.eager.ops the operators and op methods;
    # staged.eager.legacy_types the constructor, torch's Tensor(*sizes) / Tensor(data) of
    # the default dtype (type checkers read them from the TYPE_CHECKING block at the end of
    # the class). Internal code makes tensors with _wrap or the factories.

    @classmethod
    def _wrap(cls, payload, requires_grad=False) -> Tensor:
        """A new tensor of ``payload``: no grad_fn, no views, a fresh version counter."""
        t = _new(cls)
        t._payload = payload
        t._requires_grad = requires_grad
        t.grad_fn = None
        t._output_nr = 0
        t._grad = None
        t._vc = [0]
        t._base = None
        t._hooks = None
        t._post_acc_hooks = None
        t._retains_grad = False
        t._grad_acc = None
        t._serial = _serial()
        return t

    @staticmethod
    def _init(t, payload, requires_grad):
        """(Re)initialise ``t``, made by a subclass's ``__new__``, as ``_wrap`` makes one."""
        made = Tensor._wrap(payload, requires_grad)
        for name in _WRAP_FIELDS:
            setattr(t, name, getattr(made, name))

    # --- metadata -----------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        return Size(self._payload.shape)

    def size(self, dim=None) -> Any:
        s = self._payload.shape
        if dim is None:
            return Size(s)
        return s[_dim("size", dim, len(s))]

    @property
    def dtype(self) -> dt.DType:
        npd = self._payload.dtype
        d = _DTYPES.get(npd)  # (from_numpy_dtype's lookup, less its call)
        return d if d is not None else dt.from_numpy_dtype(npd)

    @property
    def ndim(self) -> int:
        return len(self._payload.shape)

    def dim(self) -> int:
        return len(self._payload.shape)

    def numel(self) -> int:
        n = 1
        for s in self._payload.shape:
            n *= s
        return n

    ndimension = dim

    # --- memory, as torch reports it for a strided CPU tensor ---------------------------
    @property
    def layout(self) -> Layout:
        return strided

    @property
    def itemsize(self) -> int:
        return self._payload.dtype.itemsize

    def element_size(self) -> int:
        return self._payload.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self._payload.dtype.itemsize

    def stride(self, dim=None) -> Any:
        """Strides in elements: the NumPy array's (a view's are its base's) or a meta
        tensor's, inside vmap the physical value's without its batch dim (torch's), and
        contiguous (as torch's) for data still on a device (Note [payloads]) and for a new
        empty array, which NumPy gives zero strides."""
        p = self._payload
        if (type(p) is np.ndarray or type(p) is Meta) and (p.size or any(p.strides)):
            st = [s // p.itemsize for s in p.strides]
        elif isinstance(getattr(p, "value", None), Tensor):  # vmap's Batched payload
            st = list(p.value.stride())
            if p.bdim is not None:
                del st[p.bdim]
        elif getattr(p, "order", None) is not None:  # eager's layout of a traced value
            st = list(dense_strides(p.shape, p.order[::-1]))  # (Note [traced layouts])
        else:  # NumPy gives a new empty array zero strides; torch's are contiguous
            st, n = [], 1
            for s in reversed(p.shape):
                st.insert(0, n)
                n *= max(s, 1)
        return tuple(st) if dim is None else st[_dim("stride", dim, len(st))]

    def storage_offset(self) -> int:
        """How many elements into its storage (the NumPy base it views) the data starts."""
        p = self._payload
        if type(p) is not np.ndarray:
            return 0
        return (_address(p) - _address(storage(p))) // p.itemsize

    def data_ptr(self) -> int:
        return 0 if type(self._payload) is Meta else _address(self._host())

    def pin_memory(self, device=None) -> Tensor:
        """Raises as a CPU-only torch build does: there is no accelerator to pin for."""
        raise RuntimeError("Cannot access accelerator device when none is available.")

    def __len__(self) -> int:
        if not self._payload.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._payload.shape[0]

    def __iter__(self):
        """The slices along dim 0, as ``unbind(0)`` makes them (torch's)."""
        if not self._payload.shape:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __contains__(self, element) -> bool:
        if isinstance(element, (Tensor, numbers.Number)):
            return bool((self == element).any())
        raise RuntimeError(
            f"Tensor.__contains__ only supports Tensor or scalar, but you passed in a "
            f"{type(element)}."
        )

    def _aval(self) -> Aval:
        return _new_aval(Aval, (tuple(self._payload.shape), self.dtype))  # Aval(shape, dtype)

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def is_complex(self) -> bool:
        return self.dtype.is_complex

    # --- autograd metadata --------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value and not (self.dtype.is_floating_point or self.dtype.is_complex):
            raise RuntimeError(  # (torch's words here differ from requires_grad_()'s)
                at_user("only Tensors of floating point and complex dtype can require gradients")
            )
        self.requires_grad_(value)

    @sited
    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        # torch tests the grad_fn field here, not regenerating a stale view's (Note [stale views])
        if _grad_fn_field(self) is not None:
            if requires_grad:
                return self
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use "
                "a computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach()."
            )
        if requires_grad and self._vc is None and not _state.inference:
            raise RuntimeError(
                "Setting requires_grad=True on inference tensor outside "
                "InferenceMode is not allowed."
            )
        if requires_grad and not (self.dtype.is_floating_point or self.dtype.is_complex):
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def grad(self) -> Tensor | None:
        if self.grad_fn is not None and not self._retains_grad and self._grad is None:
            warn_user(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. "
                "Its .grad attribute won't be populated during autograd.backward(). If you "
                "indeed want the .grad field to be populated for a non-leaf Tensor, use "
                ".retain_grad() on the non-leaf Tensor."
            )
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    "assigned grad expected to be a Tensor or None but got grad of type "
                    + type(value).__name__
                )
            if tuple(value._payload.shape) != tuple(self._payload.shape):
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value.shape)}' to a "
                    f"tensor of size '{list(self.shape)}'. Please ensure that the gradient "
                    "and the tensor are the same size"
                )
            if value.dtype is not self.dtype:
                raise RuntimeError(
                    f"attempting to assign a gradient with dtype '{value.dtype.type_meta}' "
                    f"to a tensor with grad_dtype '{self.dtype.title}'. The gradient must "
                    "match the tensor's grad_dtype (defaults to the tensor's dtype). You can "
                    "set the tensor's grad_dtype attribute with a specific dtype, or None to "
                    "allow any dtype. Set grad_dtype with caution. Diverging the dtypes of a "
                    "tensor and its gradient may break downstream systems that assume they "
                    "match."
                )
        icpt = current_interceptor()
        if icpt is not None:
            icpt.note_grad_write(self)
        self._grad = value

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    @sited
    def retain_grad(self) -> None:
        if _grad_fn_field(self) is None:  # as torch: a stale view not yet read is a leaf here
            if not self._requires_grad:
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            return
        if self._retains_grad:
            return
        node = self.grad_fn
        if node._retain_grad is None:
            node._retain_grad = {}
        node._retain_grad[self._output_nr] = weakref.ref(self)
        self._retains_grad = True

    def detach(self) -> Tensor:
        """A new leaf sharing this tensor's data and version counter, outside the graph."""
        t = self._aliased()
        t._vc = self._vc
        return t

    @sited
    def detach_(self) -> Tensor:
        if self._base is not None:
            raise RuntimeError(
                "Can't detach views in-place. Use detach() instead. If you are using "
                "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is "
                "set as True, gradients are views of DDP buckets, and hence detach_() cannot "
                "be called on these gradients. To fix this error, please refer to the "
                "Optimizer.zero_grad() function in staged/optim/optimizer.py as the solution."
            )
        self.grad_fn = None
        self._requires_grad = False
        self._output_nr = 0
        return self

    @property
    def data(self) -> Tensor:
        t = self._aliased()  # a fresh version counter, as in PyTorch
        if self._vc is None:
            t._vc = None
        return t

    @data.setter
    def data(self, value: Tensor) -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type_label(value)}")
        icpt = current_interceptor()
        if icpt is not None:
            icpt.lift(self)  # under capture: a state update of a pre-trace tensor
        self._payload = value._payload
        if icpt is not None:
            icpt.lift(self)  # a concrete value set: a graph constant

    def _aliased(self) -> Tensor:
        """A tensor sharing this one's data outside the graph (``detach``, ``.data``).

        Note [aliases]: NumPy payloads share memory, so a write through the alias is a
        write to this tensor. Payloads that are replaced rather than written (symbolic under
        capture, a compiled step's device arrays) are kept in step through ``_alias``, the
        tensor whose data it is: under capture that tensor is lifted first (its data a
        state input, not a constant) and a write to the alias becomes its new value
        (``inplace.write``); a device array is brought home into that tensor
        (``_host``)."""
        root = getattr(self, "_alias", None)
        if root is None:
            root = self
        icpt = current_interceptor()
        if icpt is not None:
            icpt.lift(root)
        t = Tensor._wrap(self._payload, False)
        t._alias = root
        if type(t._payload) is not np.ndarray:
            register(root, t)  # device or symbolic: t follows root's writes (Note [aliased memory])
        return t

    @property
    def _version(self) -> int:
        """How many in-place changes this tensor's data (shared with its views) has seen."""
        if self._vc is None:
            raise RuntimeError("Inference tensors do not track version counter.")
        return self._vc[0]

    def _is_view(self) -> bool:
        """Whether this tensor is a view of another (its ``_base``)."""
        return self._base is not None

    def is_inference(self) -> bool:
        """Whether this tensor was made in ``inference_mode`` (it has no version counter)."""
        return self._vc is None

    # --- data access --------------------------------------------------------------------
    def _host(self, overwrite: bool = False) -> np.ndarray:
        """The host array of this tensor's data, brought home once; ``overwrite``: all of
        it is about to be written, so a payload without data (``has_data`` False: a
        compiled step's lost state, Note [state in place]) gives a new array."""
        p = self._payload
        if type(p) is not np.ndarray:
            root = getattr(self, "_alias", None)
            if root is not None and root._payload is p:  # one memory (Note [aliases])
                p = self._payload = root._host()
            elif hasattr(p, "tracer"):  # a traced value: its data where the trace has it,
                return np.asarray(p)  # the tensor staying traced (Note [argument data])
            elif overwrite and not getattr(p, "has_data", True):
                self._payload = np.empty(p.shape, p.dtype)
                replaced(self, p, self._payload)
            else:  # a device array left by a compiled step (Note [payloads]): copy it home once
                self._payload = p.__array__(copy=True)
                replaced(self, p, self._payload)  # with its aliases (Note [aliased memory])
                p = self._payload
        icpt = _interceptor.active
        if icpt is not None and icpt[0] == get_ident():  # Note [data reads]
            icpt[1].data_read(self)
        return p

    def numpy(self, *, force=False) -> np.ndarray:
        """A NumPy array over this tensor's memory: a new array object each call, as
        torch's, so that changing its ``shape`` or ``flags`` leaves the tensor alone;
        ``force`` resolves a conj view into a copy, as torch's."""
        if self._requires_grad and _state.grad_enabled and not force:
            raise RuntimeError(
                at_user(
                    "Can't call numpy() on Tensor that requires grad. Use "
                    "tensor.detach().numpy() instead."
                )
            )
        if self.is_conj():
            if force:
                return self.resolve_conj()._host()
            raise RuntimeError(
                "Can't call numpy() on Tensor that has conjugate bit set. Use "
                "tensor.resolve_conj().numpy() instead."
            )
        if type(self._payload) is Meta:
            raise TypeError(
                "can't convert meta device type tensor to numpy. Use Tensor.cpu() to copy "
                "the tensor to host memory first."
            )
        return self._host().view()

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule over this tensor's memory (``np.from_dlpack(t)``,
        ``jax.dlpack.from_dlpack``), with torch's refusal of one that requires grad."""
        if self._requires_grad:
            raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
        if self.is_conj():
            raise BufferError("Can't export tensors with the conjugate bit set")
        a = self._host().view()
        return a.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple:
        return (1, 0)  # kDLCPU, device 0

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """``np.asarray(t)``: ``numpy()``'s array (and its errors, as torch's), a copy where
        NumPy asks for one (``np.array(t)``)."""
        a = self.numpy()
        if dtype is not None:
            return a.astype(dtype, copy=bool(copy))
        return a.copy() if copy else a

    def __array_wrap__(self, array, context=None, return_scalar=False) -> Tensor:
        """A NumPy ufunc's result as a tensor over its memory (``np.sin(t)``), 0-d ones
        too, as torch's; a bool result becomes uint8, as torch's workaround does."""
        if array.dtype == np.bool_:
            array = array.astype(np.uint8)
        dt.from_numpy_dtype(array.dtype)  # torch.from_numpy's TypeError for others
        return Tensor._wrap(array)

    def _one(self, error: str, kind: type[Exception] = RuntimeError) -> np.ndarray:
        """The one element (a 0-d array), or ``kind(error)`` (formatted with the element
        count ``n``) for any other count; torch's error for a meta tensor's."""
        p = self._payload
        if type(p) is not Meta:
            p = self._host()
        if p.size != 1:
            raise kind(at_user(error.format(n=p.size)))
        if type(p) is Meta:
            raise RuntimeError(at_user("Tensor.item() cannot be called on meta tensors"))
        return p.reshape(())

    def item(self) -> Any:
        p = self._payload
        if type(p) is not np.ndarray and hasattr(p, "traced_item"):  # Note [traced items]
            if p.size != 1:
                raise RuntimeError(
                    at_user(f"a Tensor with {p.size} elements cannot be converted to Scalar")
                )
            return p.traced_item(self)
        return self._one("a Tensor with {n} elements cannot be converted to Scalar").item()

    def tolist(self) -> Any:
        return self._host().tolist()

    def __bool__(self) -> bool:
        if not self.numel():
            raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
        return bool(self._one("Boolean value of Tensor with more than one value is ambiguous"))

    def _number(self, kind: str) -> Any:
        """The one element for ``int()``/``float()``/``complex()``, with torch's errors:
        ValueError for another count, RuntimeError for a complex one not real."""
        v = self._one(_NOT_ONE, ValueError).item()
        if type(v) is complex and kind != "complex":
            if v.imag:
                raise RuntimeError(f"value cannot be converted to type {kind} without overflow")
            v = v.real
        return v

    def __float__(self) -> float:
        self._warn_scalar()
        return float(self._number("double"))

    def _warn_scalar(self) -> None:
        """torch's warning at ``float``/``complex`` of a tensor requiring grad: once a
        process, in grad mode only (not at ``LBFGS.step``'s ``float(loss)`` under
        ``no_grad``)."""
        if self._requires_grad and _state.grad_enabled:
            warn_once(
                "Converting a tensor with requires_grad=True to a scalar may lead to unexpected "
                "behavior.\nConsider using tensor.detach() first."
            )

    def __int__(self) -> int:
        return int(self._number("int64_t"))

    def __complex__(self) -> complex:
        self._warn_scalar()
        return complex(self._number("complex"))

    def __index__(self) -> int:
        if self.dtype.is_floating_point or self.dtype.is_complex or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __format__(self, spec: str) -> str:
        """A 0-d tensor formats as its number (``f"{loss:.4f}"``), as in PyTorch."""
        if self.ndim == 0:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    def __repr__(self) -> str:
        extra = []
        p = self._payload
        if type(p) is Meta:  # no data (Note [meta tensors])
            body, extra = "...", ["device='meta'", f"size={tuple(p.shape)}"]
        elif type(p) is not np.ndarray and not hasattr(p, "__array__"):
            body = repr(p)
        else:
            body = array_text(self._host(), f"{_shown_name(self)}(")
        # torch leaves unsaid the default dtype, and with data its complex twin, int64 and
        # bool (which the printed values show); an empty tensor says any other
        default = dt.get_default_dtype()
        unsaid = (
            (default,)
            if type(p) is Meta or not self.numel()
            else (default, default.to_complex(), dt.int64, dt.bool_)
        )
        if self.dtype not in unsaid:
            extra.append(f"dtype={self.dtype}")
        try:
            fn = self.grad_fn
            name = None if fn is None else fn.name().rpartition("::")[2]
        except RuntimeError:  # a stale view made under no_grad (Note [stale views])
            name = "Invalid"
        if name is not None:
            extra.append(f"grad_fn=<{name}>")
        elif self._requires_grad:
            extra.append("requires_grad=True")
        prefix = f"{_shown_name(self)}("
        return add_suffixes(prefix + body, extra, len(prefix))

    __hash__ = object.__hash__  # by identity, as torch's (``id``-based), at C speed

    # Note [storages in copies]: torch copies a tensor as its whole storage with its
    # offset, sizes and strides, set into a new tensor (``set_``: its version is 1).
    # ``deepcopy`` copies a storage once per call (its memo), so a tensor and its views
    # deep-copied together still share memory; ``pickle`` writes the storage again for
    # each tensor (they do not share once loaded); ``copy.copy`` shares the memory. Here
    # the storage is the NumPy array at the root of the payload's ``base`` chain
    # (``storage``).

    def __reduce_ex__(self, protocol):
        p = self._host()
        root, layout = _storage_layout(p)
        if layout is not None:
            root = root.view()  # (a new object: pickled again for each tensor, as torch's)
        state = self.__dict__  # a user's attributes: restored into the rebuilt tensor
        cls = own_class(self)
        args = (root, self._requires_grad, layout) + (() if cls is Tensor else (cls,))
        return (_rebuild, args, state or None)

    def __deepcopy__(self, memo) -> Tensor:
        if self.grad_fn is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the "
                "deepcopy protocol at the moment.  If you were attempting to deepcopy a module, "
                "this may be because of a torch.nn.utils.weight_norm usage, see "
                "https://github.com/pytorch/pytorch/pull/103001"
            )
        p = self._payload  # a meta tensor's is never written: shared
        if type(p) is not Meta:
            root, layout = _storage_layout(self._host())
            copied = memo.get(id(root))
            if copied is None:
                copied = memo[id(root)] = root.copy(order="K")
                memo.setdefault(id(memo), []).append(root)  # (copy's _keep_alive: ids stay)
            p = _view_of(copied, layout)
        t = own_class(self)._wrap(p, False)
        t._vc = [1]  # (torch's set_ into a new tensor)
        t._requires_grad = self._requires_grad
        if self._grad is not None:
            t._grad = self._grad.__deepcopy__(memo)
        memo[id(self)] = t  # (before the attributes: one may hold the tensor itself)
        if self.__dict__:
            t.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return t

    if TYPE_CHECKING:
        # Declared for type checkers only: the slots' types, and the methods, operators and
        # properties that staged.eager.ops, staged.eager.random.methods and staged.autograd
        # attach to the class at import time (setattr). Nothing here runs.
        _payload: Any
        _requires_grad: _bool
        grad_fn: Any
        _output_nr: _int
        _grad: Tensor | None
        _vc: list[_int] | None
        _base: Tensor | None
        _view: Any
        _hooks: dict[_int, Any] | None
        _post_acc_hooks: dict[_int, Any] | None
        _retains_grad: _bool
        _grad_acc: Any
        _serial: _int
        _alias: Tensor
        _aliases: list

        def __init__(self, *args, device=None) -> None: ...
        @property
        def T(self) -> Tensor: ...
        def __abs__(self) -> Tensor: ...
        def __add__(self, other) -> Tensor: ...
        def __and__(self, other) -> Tensor: ...
        def __eq__(self, other) -> Tensor: ...  # type: ignore[override]  # elementwise, as in torch
        def __floordiv__(self, other) -> Tensor: ...
        def __ge__(self, other) -> Tensor: ...
        def __getitem__(self, index) -> Tensor: ...
        def __gt__(self, other) -> Tensor: ...
        def __iadd__(self, other) -> Tensor: ...
        def __ifloordiv__(self, other) -> Tensor: ...
        def __imod__(self, other) -> Tensor: ...
        def __imul__(self, other) -> Tensor: ...
        def __ipow__(self, other) -> Tensor: ...
        def __invert__(self) -> Tensor: ...
        def __isub__(self, other) -> Tensor: ...
        def __itruediv__(self, other) -> Tensor: ...
        def __le__(self, other) -> Tensor: ...
        def __lt__(self, other) -> Tensor: ...
        def __matmul__(self, other) -> Tensor: ...
        def __mod__(self, other) -> Tensor: ...
        def __mul__(self, other) -> Tensor: ...
        def __ne__(self, other) -> Tensor: ...  # type: ignore[override]  # elementwise, as in torch
        def __neg__(self) -> Tensor: ...
        def __or__(self, other) -> Tensor: ...
        def __pos__(self) -> Tensor: ...
        def __pow__(self, other) -> Tensor: ...
        def __radd__(self, other) -> Tensor: ...
        def __rfloordiv__(self, other) -> Tensor: ...
        def __rmatmul__(self, other) -> Tensor: ...
        def __rmod__(self, other) -> Tensor: ...
        def __rmul__(self, other) -> Tensor: ...
        def __rpow__(self, other) -> Tensor: ...
        def __rsub__(self, other) -> Tensor: ...
        def __rtruediv__(self, other) -> Tensor: ...
        def __iand__(self, other) -> Tensor: ...
        def __ilshift__(self, other) -> Tensor: ...
        def __ior__(self, other) -> Tensor: ...
        def __irshift__(self, other) -> Tensor: ...
        def __ixor__(self, other) -> Tensor: ...
        def __lshift__(self, other) -> Tensor: ...
        def __rand__(self, other) -> Tensor: ...
        def __rlshift__(self, other) -> Tensor: ...
        def __ror__(self, other) -> Tensor: ...
        def __rrshift__(self, other) -> Tensor: ...
        def __rshift__(self, other) -> Tensor: ...
        def __rxor__(self, other) -> Tensor: ...
        def __xor__(self, other) -> Tensor: ...
        def __setitem__(self, index, value) -> None: ...
        def __sub__(self, other) -> Tensor: ...
        def __truediv__(self, other) -> Tensor: ...
        def _grad_accumulator(self) -> Any: ...  # an AccumulateGrad (staged.autograd)
        def backward(
            self, gradient=None, retain_graph=None, create_graph=False, inputs=None
        ) -> None: ...
        def bernoulli(self, p=None, *, generator=None) -> Tensor: ...
        def bernoulli_(self, p=0.5, *, generator=None) -> Tensor: ...
        def bfloat16(self) -> Tensor: ...
        def bool(self) -> Tensor: ...
        def byte(self) -> Tensor: ...
        def cauchy_(self, median=0.0, sigma=1.0, *, generator=None) -> Tensor: ...
        def cdouble(self) -> Tensor: ...
        def cfloat(self) -> Tensor: ...
        def char(self) -> Tensor: ...
        def cpu(self, memory_format=None) -> Tensor: ...
        def cuda(self, device=None, non_blocking=False, **_) -> Tensor: ...
        @property
        def device(self) -> _device.device: ...
        def double(self) -> Tensor: ...
        def equal(self, other) -> _bool: ...
        def exponential_(self, lambd=1.0, *, generator=None) -> Tensor: ...
        def float(self) -> Tensor: ...
        def geometric_(self, p, *, generator=None) -> Tensor: ...
        def get_device(self) -> _int: ...
        def half(self) -> Tensor: ...
        @property
        def imag(self) -> Tensor: ...
        def int(self) -> Tensor: ...
        def is_contiguous(self, memory_format: Any = None) -> _bool: ...
        @property
        def is_cpu(self) -> _bool: ...
        @property
        def is_cuda(self) -> _bool: ...
        @property
        def is_meta(self) -> _bool: ...
        @property
        def is_mps(self) -> _bool: ...
        @property
        def is_quantized(self) -> _bool: ...
        @property
        def is_sparse(self) -> _bool: ...
        @property
        def is_sparse_csr(self) -> _bool: ...
        @property
        def is_xpu(self) -> _bool: ...
        def is_pinned(self, device=None) -> _bool: ...
        def log_normal_(self, mean=1.0, std=2.0, *, generator=None) -> Tensor: ...
        def long(self) -> Tensor: ...
        def cholesky(self, upper: _bool = False) -> Tensor: ...
        def det(self) -> Tensor: ...
        def inverse(self) -> Tensor: ...
        def logdet(self) -> Tensor: ...
        def matrix_power(self, n: _int) -> Tensor: ...
        def slogdet(self) -> Any: ...
        def cholesky_inverse(self, upper: _bool = False) -> Tensor: ...
        def cholesky_solve(self, L: Tensor, upper: _bool = False) -> Tensor: ...
        def lu(self, pivot: _bool = True, get_infos: _bool = False) -> Any: ...
        def lu_solve(self, LU_data: Tensor, LU_pivots: Tensor) -> Tensor: ...
        def matrix_exp(self) -> Tensor: ...
        def orgqr(self, tau: Tensor) -> Tensor: ...
        def geqrf(self) -> Any: ...
        def ormqr(
            self, input2: Tensor, input3: Tensor, left: _bool = True, transpose: _bool = False
        ) -> Tensor: ...
        def pinverse(self, rcond=1e-15) -> Tensor: ...
        def triangular_solve(
            self, A: Tensor, upper=True, transpose=False, unitriangular=False
        ) -> Any: ...
        def qr(self, some: _bool = True) -> Any: ...
        def svd(self, some: _bool = True, compute_uv: _bool = True) -> Any: ...
        def stft(  # staged.spectral
            self,
            n_fft: _int,
            hop_length=None,
            win_length=None,
            window=None,
            center: _bool = True,
            pad_mode: str = "reflect",
            normalized: _bool = False,
            onesided=None,
            return_complex=None,
            align_to_window=None,
        ) -> Tensor: ...
        def istft(
            self,
            n_fft: _int,
            hop_length=None,
            win_length=None,
            window=None,
            center: _bool = True,
            normalized: _bool = False,
            onesided=None,
            length=None,
            return_complex: _bool = False,
        ) -> Tensor: ...
        @property
        def mH(self) -> Tensor: ...
        @property
        def mT(self) -> Tensor: ...
        @property
        def H(self) -> Tensor: ...
        @property
        def output_nr(self) -> _int: ...
        def multinomial(self, num_samples, replacement=False, *, generator=None) -> Tensor: ...
        def nelement(self) -> _int: ...
        def new_empty(self, *size, dtype=None, device=None, requires_grad=False) -> Tensor: ...
        def new_full(
            self, size, fill_value, dtype=None, device=None, requires_grad=False
        ) -> Tensor: ...
        def new_ones(self, *size, dtype=None, device=None, requires_grad=False) -> Tensor: ...
        def new_tensor(self, data, dtype=None, device=None, requires_grad=False) -> Tensor: ...
        def normal_(self, mean=0.0, std=1.0, *, generator=None) -> Tensor: ...
        def random_(self, from_=..., to=..., *, generator=None) -> Tensor: ...
        @property
        def real(self) -> Tensor: ...
        def register_hook(self, hook) -> Any: ...  # a RemovableHandle (staged.autograd)
        def register_post_accumulate_grad_hook(self, hook) -> Any: ...
        def set_(self, source=None, storage_offset=0, size=None, stride=None) -> Tensor: ...
        def short(self) -> Tensor: ...
        def to(
            self, *args, dtype=None, device=None, copy=False, non_blocking=False, **_
        ) -> Tensor: ...
        def type(self, dtype=None, non_blocking=False, **_) -> Any: ...
        def to_dense(self, dtype=None, *, masked_grad=None) -> Tensor: ...
        def to_sparse(
            self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None
        ) -> Tensor: ...  # a staged.sparse.SparseTensor
        def to_sparse_coo(self) -> Tensor: ...
        def to_sparse_csr(self, dense_dim=None) -> Tensor: ...  # a staged.sparse.SparseCsrTensor
        def to_sparse_csc(self, dense_dim=None) -> Tensor: ...  # a staged.sparse.SparseCscTensor
        def untyped_storage(self) -> Any: ...  # a staged.eager.storage.UntypedStorage
        def storage(self) -> Any: ...  # a staged.eager.storage.TypedStorage
        def type_as(self, other) -> Tensor: ...
        def as_subclass(self, cls) -> Any: ...
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None) -> Any: ...  # subclasses
        @classmethod
        def __torch_dispatch__(
            cls, func, types, args=(), kwargs=None
        ) -> Any: ...  # staged._torch_dispatch
        def uniform_(self, a=0.0, b=1.0, *, generator=None) -> Tensor: ...
        def where(self, condition, other) -> Tensor: ...
        def polygamma(self, n) -> Tensor: ...
        def polygamma_(self, n) -> Tensor: ...


# the fields ``Tensor._wrap`` sets (views add ``_view``; aliases ``_alias``/``_aliases``)
_WRAP_FIELDS = tuple(
    n
    for n in Tensor.__slots__
    if n not in ("_view", "_alias", "_aliases", "__weakref__", "__dict__")
)


_grad_fn_field = Tensor.__dict__["grad_fn"].__get__  # the slot, even under a property


def own_class(t) -> type[Tensor]:
    """The class a copy of ``t`` has: a user's subclass that takes part in the torch function
    protocol (the class a stale view stands for, ``views.stale_twin``), else Tensor."""
    cls = type(t)
    if cls is Tensor or not _tf.takes_part(cls):
        return Tensor
    return getattr(cls, "_fresh_class", cls)


def _shown_name(t) -> str:
    """What ``repr`` calls ``t``: ``tensor``, or a user's subclass by name (torch's)."""
    cls = own_class(t)
    return "tensor" if cls is Tensor else cls.__name__


def _rebuild(array, requires_grad, layout=None, cls=Tensor):
    t = cls._wrap(_view_of(array, layout), False)
    t._vc = [1]  # (torch's set_ into a new tensor)
    t._requires_grad = requires_grad
    return t


def storage(p: np.ndarray) -> np.ndarray:
    """The array at the root of ``p``'s chain of NumPy bases: the memory ``p`` views (an
    ``as_strided`` view reaches it through NumPy's ``DummyArray``)."""
    while True:
        b = p.base
        if type(b) is not np.ndarray:
            b = getattr(b, "base", None)  # as_strided's DummyArray holds the array
            if type(b) is not np.ndarray:
                return p
        p = b


def _storage_layout(p: np.ndarray) -> tuple[np.ndarray, tuple | None]:
    """``p``'s storage and where ``p`` lies in it (byte offset, shape, strides, dtype), or
    ``p`` itself and None where its storage is not one contiguous block."""
    root = storage(p)
    if root is p or not (root.flags.c_contiguous or root.flags.f_contiguous):
        return p, None
    return root, (_address(p) - _address(root), p.shape, p.strides, p.dtype)


def _view_of(root: np.ndarray, layout: tuple | None) -> np.ndarray:
    if layout is None:
        return root
    offset, shape, strides, dtype = layout
    return np.ndarray(shape, dtype, root, offset, strides)


def _dim(name: str, dim, ndim: int) -> int:
    """``dim`` of ``size(dim)``/``stride(dim)`` checked as torch's: its TypeError and
    IndexError, naming the user's line (never the shape's own IndexError)."""
    if type(dim) is not int:
        try:
            dim = operator.index(dim)
        except TypeError:
            raise TypeError(
                at_user(f"{name}(): argument 'dim' (position 1) must be int, not {type_label(dim)}")
            ) from None
    if ndim == 0:
        raise IndexError(at_user(f"Dimension specified as {dim} but tensor has no dimensions"))
    if not -ndim <= dim < ndim:
        raise IndexError(
            at_user(
                f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], "
                f"but got {dim})"
            )
        )
    return dim


def type_label(v) -> str:
    """``v``'s type as torch's errors name it (``numpy.ndarray``, ``list``)."""
    cls = type(v)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__name__}"


_NOT_ONE = "only one element tensors can be converted to Python scalars"


class Size(tuple):
    """``tensor.shape``: a tuple, printed as PyTorch prints it."""

    def __repr__(self):
        return f"{dt.PACKAGE}.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


class Layout:
    """A memory layout: ``staged.strided``, or ``staged.sparse_coo`` (``staged.sparse``)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"torch.{self.name}"

    def __reduce__(self):
        return self.name


strided = Layout("strided")
sparse_coo = Layout("sparse_coo")  # staged.sparse's tensors
sparse_csr = Layout("sparse_csr")  # staged.sparse's 2-D CSR tensors
# torch's other compressed layouts: no staged tensor has them (they compare unequal to all)
sparse_csc, sparse_bsr, sparse_bsc = (
    Layout("sparse_csc"),
    Layout("sparse_bsr"),
    Layout("sparse_bsc"),
)
_mkldnn = Layout("_mkldnn")


def as_payload(data, dtype=None) -> np.ndarray:
    """A NumPy array from Python data with PyTorch's dtype inference: Python floats take
    the default dtype, ints int64, NumPy arrays keep theirs. Casts that overflow give inf
    silently, as in PyTorch (Note [NumPy warnings])."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _as_payload(data, dtype)


def first_leaf(data):
    """The first non-sequence in nested lists and tuples (``data`` itself if it is one)."""
    while isinstance(data, (list, tuple)) and data:
        data = data[0]
    return data


def _inferred(data) -> dt.DType:
    """torch's dtype of nested lists whose first item is a NumPy scalar: each item's dtype
    (a NumPy scalar's own, a Python number's torch default), promoted. (Lists that start
    with a Python number are read by NumPy alone: a Python walk of every item costs 4-6x
    NumPy's conversion.)"""
    out = None
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
            continue
        d = dt.from_numpy_dtype(x.dtype) if isinstance(x, np.generic) else dt._scalar_dtype(x)
        out = d if out is None else dt._promote_pair(out, d)
    return out or dt.get_default_dtype()


def _check_fits(a: np.ndarray, dtype: dt.DType) -> None:
    """Numbers out of an integer ``dtype``'s range raise, as torch's: NaN, inf and floats
    beyond it, and integers beyond it (an unsigned one takes integers down to -max,
    wrapping them as two's complement: -1 is 255). Complex numbers for a real ``dtype``
    raise torch's TypeError."""
    if a.dtype.kind == "c" and dtype._category < 3:
        raise TypeError("must be real number, not complex")
    if a.size and a.dtype.kind in "iuf" and dtype._category == 1:
        info = np.iinfo(dtype.np)
        low = -int(info.max) if info.min == 0 and a.dtype.kind != "f" else info.min
        if not (low <= a.min() and a.max() <= info.max):  # NaN compares false
            raise RuntimeError(f"value cannot be converted to type {dtype.name} without overflow")


def _ragged(data, dim: int = 0) -> Exception | None:
    """PyTorch's error for the first nested sequence whose length differs from its
    siblings' (a TypeError where a number stands among sequences), or None."""
    if not isinstance(data, (list, tuple)):
        return None
    subs = [x for x in data if isinstance(x, (list, tuple))]
    n = len(subs[0]) if subs else 0
    for x in data if subs else ():
        if not isinstance(x, (list, tuple)):
            return TypeError(f"expected sequence of length {n} at dim {dim + 1}, got a number")
        if len(x) != n:
            return ValueError(f"expected sequence of length {n} at dim {dim + 1} (got {len(x)})")
    return next(filter(None, (_ragged(x, dim + 1) for x in subs)), None)


def _past_int64(a: np.ndarray) -> bool:
    return bool(a.size) and not -(2.0**63) <= a.min() <= a.max() < 2.0**63


def _ints_past(data) -> bool:
    """Whether ``data`` (a number or nested lists) is Python ints only, some past int64's
    range, which the int64 tensor torch infers for them cannot hold."""
    leaves = [data] if not isinstance(data, (list, tuple)) else list(_leaves(data))
    return all(isinstance(x, int) for x in leaves) and any(
        not -(2**63) <= x < 2**63 for x in leaves
    )


def _leaves(data):
    for x in data:
        if isinstance(x, (list, tuple)):
            yield from _leaves(x)
        else:
            yield x


def check_array(a: np.ndarray) -> None:
    """torch's checks of a NumPy array it reads or shares (``tensor_from_numpy``): strides
    whole and non-negative, native byte order, a dtype torch has."""
    item = a.itemsize or 1
    if any(s % item for s in a.strides):
        raise ValueError(
            "given numpy array strides not a multiple of the element byte size. Copy the "
            "numpy array to reallocate the memory."
        )
    if any(s < 0 for s in a.strides):
        raise ValueError(
            "At least one stride in the given numpy array is negative, and tensors with "
            "negative strides are not currently supported. (You can probably work around "
            "this by making a copy of your array  with array.copy().) "
        )
    if not a.dtype.isnative:
        raise ValueError(
            "given numpy array has byte order different from the native byte order. "
            "Conversion between byte orders is currently not supported."
        )
    if a.dtype.kind not in "biufc" and a.dtype not in _DTYPES:
        raise TypeError(
            f"can't convert np.ndarray of type numpy.{a.dtype.type.__name__}. The only "
            "supported types are: float64, float32, float16, complex64, complex128, int64, "
            "int32, int16, int8, uint64, uint32, uint16, uint8, and bool."
        )


def _as_payload(data, dtype):
    if isinstance(data, Tensor):
        data = data._host()
    elif isinstance(data, np.ndarray):
        check_array(data)
    if hasattr(data, "__array__"):  # NumPy's, a torch or JAX tensor: its dtype is kept
        a = np.array(data)
    else:
        try:
            a = np.array(data)
        except ValueError:
            raise _ragged(data) or ValueError("can't build a tensor from this data") from None
        if dtype is not None and a.dtype.kind in "biufc":
            _check_fits(a, dt.as_dtype(dtype))  # cast once, below: through the default
            # dtype would round (0.1 in float64)
        elif first_leaf(data).__class__.__module__ == "numpy":
            a = a.astype(_inferred(data).np)  # NumPy scalars keep their dtypes, as torch
        elif (a.dtype.kind in "uO" or a.dtype == np.float64 and _past_int64(a)) and _ints_past(
            data
        ):  # Python ints past int64's range, no float among them: NumPy's uint64, float64
            raise ValueError("Overflow when unpacking long long")  # or objects; torch's error
        elif a.dtype == np.float64:
            a = a.astype(dt.get_default_dtype().np)
        elif a.dtype == np.complex128:
            a = a.astype(dt.get_default_dtype().to_complex().np)
        elif a.dtype.kind == "i":
            a = a.astype(np.int64)
        elif a.dtype.kind in "US":
            raise ValueError(f"too many dimensions '{type(a.flat[0]).__name__.rstrip('_')}'")
        elif a.dtype.kind == "O":
            raise TypeError(f"can't build a tensor from {type(data).__name__} of mixed objects")
    if dtype is not None:
        a = dt.narrowed(a, dt.as_dtype(dtype).np)
    else:
        dt.from_numpy_dtype(a.dtype)  # raises for dtypes staged has none for
    return a
