"""``staged.library`` (``torch.library``): custom operators, called as
``staged.ops.<namespace>.<name>`` (``staged/_custom_ops.py`` holds them and dispatches).

``custom_op`` wraps a function whose body is staged ops into an operator with torch 2.13's
semantics: its outputs may not alias its inputs, the args it names in ``mutates_args`` have
their versions bumped, and it is differentiable only through ``register_autograd``, built
on ``autograd.Function`` so that it is captured by ``staged.compile`` like any Function.
``Library``'s ``define``/``impl`` register kernels per dispatch key. Fake (meta) kernels
are kept but never run: staged needs none, capture running the real kernel on symbolic
tensors. Not here: ``opcheck``, ``register_vmap``, ``register_autocast``,
``register_torch_dispatch``, ``triton_op`` (staged has no dispatch modes or key sets).
"""

from __future__ import annotations

import collections.abc
import contextlib
import functools
import inspect
import logging
import sys
import typing
import weakref
from types import GenericAlias
from collections.abc import Callable, Iterable, Sequence

from ._custom_ops import (
    OpOverload,
    _tensors,
    add,
    below_autograd,
    fallthrough_kernel,
    lookup,
    parse_schema,
    remove,
)
from ._where import warn_user
from .autograd.function import Function
from .dtypes import DType
from .eager.devices import device as _device
from .eager.grad_mode import _state, no_grad
from .eager.tensor import Tensor

__all__ = [
    "CustomOpDef",
    "Library",
    "custom_op",
    "define",
    "fallthrough_kernel",
    "get_ctx",
    "impl",
    "infer_schema",
    "register_autograd",
    "register_fake",
    "register_kernel",
]

log = logging.getLogger(__name__)

_DEF_SITES: dict[str, str] = {}  # namespace -> where its live "DEF" Library was made
_impls: set[str] = set()  # "ns/name/key" of the kernels registered (torch's)
_keep_alive: list[Library] = []  # the Libraries the module-level functions made
_overridden = [False]  # torch warns once a process of a kernel overridden


def _site(depth: int) -> str:
    f = sys._getframe(depth + 1)
    return f"{f.f_code.co_filename}:{f.f_lineno}"


class Library:
    """Operators of namespace ``ns`` defined (``kind`` "DEF": the namespace's one
    library; "FRAGMENT": one of many) or implemented ("IMPL"). Its definitions and kernels
    go when it is garbage collected (or ``_destroy``ed), as torch's do."""

    def __init__(self, ns: str, kind: str, dispatch_key: str = ""):
        if kind not in ("IMPL", "DEF", "FRAGMENT"):
            raise ValueError(f"Unsupported kind: {kind}")
        if ns == "prim" and kind in ("DEF", "FRAGMENT"):
            raise ValueError(
                f"{ns} is a reserved namespace. Please try creating a library with another name."
            )
        site = _site(1)
        if kind == "DEF":
            if ns in _DEF_SITES:
                raise RuntimeError(
                    f"Only a single TORCH_LIBRARY can be used to register the namespace {ns}; "
                    "please put all of your definitions in a single TORCH_LIBRARY block.  If "
                    "you were trying to specify implementations, consider using "
                    "TORCH_LIBRARY_IMPL (which can be duplicated).  If you really intended to "
                    "define operators for a single namespace in a distributed way, you can use "
                    "TORCH_LIBRARY_FRAGMENT to explicitly indicate this.  Previous "
                    f"registration of TORCH_LIBRARY was registered at {_DEF_SITES[ns]}; latest "
                    f"registration was registered at {site}"
                )
            _DEF_SITES[ns] = site
        self.ns, self.kind, self.dispatch_key = ns, kind, dispatch_key
        self._op_defs: list[OpOverload] = []
        self._op_impls: list[tuple[OpOverload, str, Callable, str]] = []
        self._destroy = weakref.finalize(
            self, _del_library, ns if kind == "DEF" else None, self._op_defs, self._op_impls
        )

    def __repr__(self) -> str:
        return f"Library(kind={self.kind}, ns={self.ns}, dispatch_key={self.dispatch_key})>"

    def define(self, schema: str, alias_analysis: str = "", *, tags=()) -> str:
        """Define the operator of ``schema`` (``"foo(Tensor x) -> Tensor"``) in this
        namespace; returns its name."""
        if alias_analysis not in ("", "FROM_SCHEMA", "CONSERVATIVE"):
            raise RuntimeError(f"Invalid alias_analysis type {alias_analysis}")
        parsed = parse_schema(schema, self.ns)
        overload = parsed.overload_name
        existing = lookup(parsed.name + (f".{overload}" if overload else ""))
        site = _site(1)
        if existing is not None:
            raise RuntimeError(
                f"Tried to register an operator ({parsed}) with the same name and overload "
                "name multiple times. Each overload's schema should only be registered with a "
                f"single call to def(). Duplicate registration: registered at {site}. Original "
                f"registration: registered at {existing._site}"
            )
        op = add(parsed)
        op._site = site
        self._op_defs.append(op)
        return schema.split("(")[0]

    def impl(self, op_name, fn, dispatch_key: str = "", *, with_keyset=False, allow_override=True):
        """Register ``fn`` as the kernel of ``op_name`` (a name, ``name.overload`` or an
        OpOverload) for ``dispatch_key`` ("CPU", "Autograd", "CompositeImplicitAutograd"...;
        by default the library's, else CompositeImplicitAutograd)."""
        if not callable(fn):
            raise TypeError(
                f"Input function is required to be a callable but found type {type(fn)}"
            )
        if with_keyset:
            raise NotImplementedError("staged has no dispatch key sets: with_keyset=True")
        dispatch_key = dispatch_key or self.dispatch_key
        if isinstance(op_name, OpOverload):
            op_name = op_name._opname + (
                "" if op_name._overloadname == "default" else f".{op_name._overloadname}"
            )
        elif not isinstance(op_name, str):
            raise RuntimeError(
                "impl should be passed either a name or an OpOverload object as the first "
                f"argument, got {type(op_name)}"
            )
        name = op_name.split("::")[-1]
        key = f"{self.ns}/{name}/{dispatch_key}"
        if not allow_override and key in _impls:
            raise RuntimeError(
                "This is not allowed since there's already a kernel registered from python "
                f"overriding {name}'s behavior for {dispatch_key} dispatch key and {self.ns} "
                "namespace."
            )
        op = lookup(op_name if "::" in op_name else f"{self.ns}::{op_name}")
        if op is None:
            raise RuntimeError(f"operator {self.ns}::{name} does not exist")
        dispatch_key = dispatch_key or "CompositeImplicitAutograd"
        kernels = op._kernels.setdefault(dispatch_key, [])
        if kernels and not _overridden[0]:
            _overridden[0] = True
            warn_user(
                "Warning only once for all operators,  other operators may also be "
                "overridden.\n  Overriding a previously registered kernel for the same "
                f"operator and the same dispatch key\n  operator: {op._schema}\n  dispatch "
                f"key: {dispatch_key}"
            )
        kernels.append(fn)
        _impls.add(key)
        self._op_impls.append((op, dispatch_key, fn, key))


def _del_library(def_ns, op_defs, op_impls) -> None:
    """Undo what a Library registered (its finalizer)."""
    for op, key, fn, impl_key in op_impls:
        kernels = op._kernels.get(key, [])
        if fn in kernels:
            kernels.remove(fn)
        _impls.discard(impl_key)
    for op in op_defs:
        remove(op)
    op_defs.clear()
    op_impls.clear()
    if def_ns is not None:
        _DEF_SITES.pop(def_ns, None)


def _parse_namespace(qualname: str) -> tuple[str, str]:
    splits = qualname.split("::")
    if len(splits) != 2:
        raise ValueError(
            f'Expected `qualname` to be of the form "namespace::name", but got {qualname}. '
            "The qualname passed to the torch.library APIs must consist of a namespace and a "
            "name, e.g. aten::sin"
        )
    return splits[0], splits[1]


def _library(namespace: str, lib: Library | None) -> Library:
    if lib is not None:
        return lib
    lib = Library(namespace, "FRAGMENT")
    _keep_alive.append(lib)
    return lib


@functools.singledispatch
def define(qualname, schema, *, lib=None, tags=()):
    """Define the operator ``qualname`` ("ns::name") with ``schema`` ("(Tensor x) ->
    Tensor"); then give it kernels with ``impl``. (``define(lib, schema)``: the old form, a
    decorator defining and implementing.)"""
    if not isinstance(qualname, str):
        raise ValueError(
            f"define(qualname, schema): expected qualname to be instance of str, got "
            f"{type(qualname)}"
        )
    namespace, name = _parse_namespace(qualname)
    lib = _library(namespace, lib)
    if not (schema.startswith("(") and ") -> " in schema):
        raise ValueError(
            'define(qualname, schema, ...): expected schema to look like e.g. "(Tensor x) -> '
            f'Tensor" but got "{schema}"'
        )
    lib.define(name + schema, alias_analysis="", tags=tags)


@define.register
def _(lib: Library, schema, alias_analysis=""):
    def wrap(f):
        name = lib.define(schema, alias_analysis)
        lib.impl(name, f)
        return f

    return wrap


_DEVICE_KEYS = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta", "mps": "MPS", "xpu": "XPU"}


def _device_key(device_type: str) -> str:
    if device_type == "default":
        return "CompositeExplicitAutograd"
    return _DEVICE_KEYS.get(device_type, device_type)


@functools.singledispatch
def impl(qualname, types, func=None, *, lib=None):
    """Register ``func`` as the kernel of ``qualname`` for the device types ``types``
    ("cpu", "default": every device; a dispatch key name is taken as is). A decorator
    without ``func``. (``impl(lib, name, dispatch_key)``: the old decorator form.)"""
    return _impl(qualname, types, func, lib=lib)


@impl.register
def _(lib: Library, name: str, dispatch_key: str = ""):
    def wrap(f):
        lib.impl(name, f, dispatch_key)
        return f

    return wrap


def _impl(qualname, types, func=None, *, lib=None):
    keys = {_device_key(t) for t in ((types,) if isinstance(types, str) else types)}

    def register(func):
        use_lib = _library(_parse_namespace(qualname)[0], lib)
        for key in keys:
            use_lib.impl(qualname, func, key)

    if func is None:
        return register
    register(func)
    return None


# ---- custom_op ----------------------------------------------------------------------------

_OPDEF_LIBS: dict[str, Library] = {}  # each custom_op's Library: defining it again replaces it
OPDEFS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def custom_op(
    name: str,
    fn: Callable | None = None,
    /,
    *,
    mutates_args: str | Iterable[str],
    device_types: str | Sequence[str] | None = None,
    schema: str | None = None,
    tags=None,
):
    """Make ``fn`` (type-annotated, or with ``schema``) the operator ``name``
    ("ns::name"); a decorator without ``fn``. Returns its CustomOpDef."""

    def inner(fn):
        schema_str = infer_schema(fn, mutates_args=mutates_args) if schema is None else schema
        namespace, opname = name.split("::")
        result = CustomOpDef(namespace, opname, schema_str, fn, tags)
        if schema is not None:
            expected = {a.name for a in result._opoverload._schema.arguments if a.is_write}
            if expected != set(mutates_args):
                raise ValueError(
                    f"Attempted to create a custom op with `mutates_args={mutates_args}` and "
                    f"`schema={schema}. The schema suggests that the op mutates {expected}which "
                    "is different from what was provided to us in `mutates_args`. Please make "
                    "these consistent."
                )
        result.register_kernel(device_types)(fn)
        return result

    return inner if fn is None else inner(fn)


class CustomOpDef:
    """A function made a custom operator by ``custom_op``: call it as the function; its
    methods register more of its behaviour."""

    def __init__(self, namespace: str, name: str, schema: str, fn: Callable, tags=None):
        self._namespace, self._name, self._schema = namespace, name, schema
        self._tags = tuple(tags or ())
        self._init_fn = fn
        self._backend_fns: dict[str | None, Callable] = {}
        self._abstract_fn: Callable | None = None
        self._setup_context_fn: Callable | None = None
        self._backward_fn: Callable | None = None
        self._disabled_kernel: set = set()
        parsed = parse_schema(name + schema, namespace)
        if any(a.kwarg_only and a.type.startswith("Tensor") for a in parsed.arguments):
            raise NotImplementedError(
                "custom_op with kwarg-only Tensor args. Please make your tensors not "
                f"kwarg-only. Got: {name + schema}"
            )
        old = _OPDEF_LIBS.pop(self._qualname, None)
        if old is not None:
            old._destroy()
        self._lib = _OPDEF_LIBS[self._qualname] = Library(namespace, "FRAGMENT")
        self._lib.define(name + schema)
        self._opoverload = typing.cast(OpOverload, lookup(self._qualname))
        self._opoverload._bumps = parsed.is_mutable
        self._lib.impl(name, _autograd_kernel(self._opoverload, self), "Autograd")
        OPDEFS[self._qualname] = self

    @property
    def _qualname(self) -> str:
        return f"{self._namespace}::{self._name}"

    def __repr__(self) -> str:
        return f"<CustomOpDef({self._qualname})>"

    def __call__(self, *args, **kwargs):
        return self._opoverload(*args, **kwargs)

    @contextlib.contextmanager
    def set_kernel_enabled(self, device_type: str, enabled: bool = True):
        """Within the block, the kernel registered for ``device_type`` disabled (the
        function ``custom_op`` wrapped runs instead) or enabled again."""
        action = "enable" if enabled else "disable"
        originally_disabled = device_type in self._disabled_kernel
        if device_type not in self._backend_fns:
            log.warning(
                "Attempted to %s kernel for %s but no kernel was registered for this device type.",
                action,
                device_type,
            )
        if not enabled:
            if originally_disabled:
                log.warning(
                    "Attempted to disable kernel for %s but it was already disabled.", device_type
                )
            else:
                self._disabled_kernel.add(device_type)
        elif not originally_disabled:
            log.warning(
                "Attempted to enable kernel for  %s but it was already enabled.", device_type
            )
        else:
            self._disabled_kernel.remove(device_type)
        try:
            yield
        finally:
            if originally_disabled:
                self._disabled_kernel.add(device_type)
            else:
                self._disabled_kernel.discard(device_type)

    def register_kernel(self, device_types, fn: Callable | None = None, /) -> Callable:
        """Register ``fn`` as the op's implementation for ``device_types`` ("cpu", ...;
        None: every device). A decorator without ``fn``."""

        def inner(fn):
            many = not (device_types is None or isinstance(device_types, str))
            for device_type in list(device_types) if many else [device_types]:
                if device_type not in self._backend_fns:
                    key = "CompositeExplicitAutograd" if device_type is None else device_type
                    self._lib.impl(self._name, self._backend_impl(device_type), _device_key(key))
                self._backend_fns[device_type] = fn
            return fn

        schema = self._opoverload._schema
        if device_types is not None and not any(
            a.type.startswith("Tensor") for a in schema.arguments
        ):
            if not any(a.type.startswith("Device") for a in schema.arguments):
                raise ValueError(
                    "Functions without tensor inputs are required to have a `device: "
                    "torch.device` argument"
                )
        return inner if fn is None else inner(fn)

    def _backend_impl(self, device_type):
        """The kernel of ``device_type``: the registered function (or, disabled, the one
        ``custom_op`` wrapped), its outputs checked not to alias its inputs."""

        def backend_impl(*args, **kwargs):
            fn = self._backend_fns[device_type]
            run = self._init_fn if device_type in self._disabled_kernel else fn
            result = run(*args, **kwargs)
            if not _is_view_op(self._opoverload):
                _check_aliasing(self._name, fn, args, kwargs, result)
            return result

        return backend_impl

    def register_fake(self, fn: Callable, /) -> Callable:
        """Keep ``fn`` as the op's fake (meta) implementation (staged never needs one)."""
        self._abstract_fn = fn
        return fn

    def register_autograd(self, backward: Callable, /, *, setup_context=None) -> None:
        """Differentiate the op with ``backward(ctx, *grads)`` (one gradient per input, None
        for a non-tensor), given what ``setup_context(ctx, inputs, output)`` saved."""
        _check_functional(self, self._opoverload)
        self._backward_fn = backward
        self._setup_context_fn = setup_context


def _is_view_op(op: OpOverload) -> bool:
    return any("(" in r.text and not r.is_write for r in op._schema.returns)


def _check_aliasing(name, fn, args, kwargs, result) -> None:
    """torch's check that a custom op's outputs are not, nor share data with, its inputs
    or each other (staged's views share their base's version counter)."""
    seen = {id(t._vc) for t in _tensors(args, kwargs) if t._vc is not None}
    for t in _tensors(result if isinstance(result, tuple) else (result,), {}):
        key = id(t._vc) if t._vc is not None else id(t)
        if key in seen:
            raise RuntimeError(
                f"{name} (with implementation in {inspect.getmodule(fn)}): The output of this "
                "custom operator (1) must not also be an input to this custom operator and (2) "
                "may not alias any inputs to this custom operator or other returns. The most "
                "common way to trigger this error is if we have y = custom_op(x) and y and x "
                "are the same Tensor. Please instead return a clone of the offending output "
                "tensor(s) (e.g. return x.clone()) or refactor the custom operator to not "
                "return y."
            )
        seen.add(key)


def _check_functional(who, op: OpOverload) -> None:
    schema = op._schema
    if schema.is_mutable or not schema.returns:
        raise RuntimeError(
            f"Cannot register autograd formula for non-functional operator {who} with schema "
            f"{schema}. Please create a functional operator and register an autograd formula "
            "for that."
        )


# ---- the autograd kernel ------------------------------------------------------------------


class _Metadata:
    """What the generated Function's ``apply`` passes its forward and backward besides
    the tensors: keyword-only args, and where lists of tensors were flattened."""

    def __init__(self, kwargs, spec):
        self.kwargs, self.spec = kwargs, spec
        self.out_spec: tuple = ()
        self.single = True


def _flatten(values) -> tuple[list, tuple]:
    """``values`` with each list of tensors spread out, and where (the spec)."""
    flat: list = []
    spec: list[int | None] = []
    for v in values:
        if isinstance(v, (list, tuple)) and all(isinstance(t, Tensor) for t in v):
            flat.extend(v)
            spec.append(len(v))
        else:
            flat.append(v)
            spec.append(None)
    return flat, tuple(spec)


def _unflatten(flat, spec) -> list:
    out, i = [], 0
    for n in spec:
        out.append(flat[i] if n is None else list(flat[i : i + n]))
        i += 1 if n is None else n
    return out


def _fill_defaults(schema, args, kwargs) -> tuple[tuple, dict]:
    inputs = [a.default for a in schema.arguments if not a.kwarg_only]
    inputs[: len(args)] = args
    keyword = {a.name: kwargs.get(a.name, a.default) for a in schema.arguments if a.kwarg_only}
    return tuple(inputs), keyword


def _autograd_kernel(op: OpOverload, info) -> Callable:
    """torch's generated Autograd kernel of a custom op: where grad mode is on and an
    input requires grad, an ``autograd.Function`` whose forward runs the kernels below
    Autograd and ``info._setup_context_fn``, and whose backward is
    ``info._backward_fn`` (raising where none was registered); otherwise the kernels below
    Autograd under no_grad."""
    schema = op._schema
    keyword_only = any(a.kwarg_only for a in schema.arguments)

    def forward(ctx, *args):
        meta = args[-1]
        args = tuple(_unflatten(args[:-1], meta.spec))
        result = below_autograd(op, args, meta.kwargs)
        if info._setup_context_fn:
            inputs, keyword = _fill_defaults(schema, args, meta.kwargs)
            if keyword_only:
                info._setup_context_fn(
                    ctx=ctx, inputs=inputs, keyword_only_inputs=keyword, output=result
                )
            else:
                info._setup_context_fn(ctx=ctx, inputs=inputs, output=result)
        meta.single = not isinstance(result, tuple)
        flat, meta.out_spec = _flatten((result,) if meta.single else result)
        ctx._pt_metadata = meta
        return tuple(flat)

    def backward(ctx, *grads):
        if info._backward_fn is None:
            raise RuntimeError(
                f"Trying to backward through {op} but no autograd formula was registered. "
                "Please use register_autograd to add one."
            )
        meta = ctx._pt_metadata
        grads = _unflatten(grads, meta.out_spec)
        prev = ctx.needs_input_grad
        try:
            ctx.needs_input_grad = tuple(_unflatten(prev[:-1], meta.spec))
            result = info._backward_fn(ctx, *grads)
        finally:
            ctx.needs_input_grad = prev
        result = result if isinstance(result, tuple) else (result,)
        if all(n is None for n in meta.spec):
            return (*result, None)
        return (*_flatten_grads(result, meta.spec), None)

    name = f"GeneratedBackwardFor_{op._namespace}_{op._opname}_{op._overloadname}"
    generated = type(
        name, (Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)}
    )

    def kernel(*args, **kwargs):
        if _state.grad_enabled and any(t._requires_grad for t in _tensors(args, {})):
            flat, spec = _flatten(args)
            meta = _Metadata(kwargs, spec)
            out = _unflatten(generated.apply(*flat, meta), meta.out_spec)
            return out[0] if meta.single else tuple(out)
        with no_grad():
            return below_autograd(op, args, kwargs)

    return kernel


def _flatten_grads(result, spec) -> list:
    """A backward's gradients flattened as its inputs were (a list of gradients, or None,
    for a list of tensors)."""
    flat = []
    for g, n in zip(result, spec, strict=False):
        if n is None:
            flat.append(g)
        elif g is None:
            flat.extend([None] * n)
        elif isinstance(g, (list, tuple)) and len(g) == n:
            flat.extend(g)
        else:
            raise RuntimeError(
                "Expected the return from backward to be of the same structure as the "
                f"inputs. Got: {result} (return from backward), {spec} (inputs)"
            )
    if len(result) != len(spec):
        raise RuntimeError(
            "Expected the return from backward to be of the same structure as the inputs. "
            f"Got: {result} (return from backward), {spec} (inputs)"
        )
    return flat


# ---- registration by name ----------------------------------------------------------------


def _resolve(op, registration_name: str):
    """The CustomOpDef of ``op`` (a name, OpOverload or CustomOpDef), or its name."""
    if not isinstance(op, (str, OpOverload, CustomOpDef)):
        raise ValueError(f"{registration_name}({op}): got unexpected type for op: {type(op)}")
    if isinstance(op, OpOverload):
        op = op._name
    return op if isinstance(op, CustomOpDef) else OPDEFS.get(op, op)


def register_kernel(op, device_types, func: Callable | None = None, /, *, lib=None):
    """Register ``func`` as ``op``'s implementation for ``device_types`` (None: every
    device). A decorator without ``func``."""
    op = _resolve(op, "register_kernel")
    if isinstance(op, CustomOpDef):
        return op.register_kernel(device_types, func)
    types = "CompositeExplicitAutograd" if device_types is None else device_types
    return _impl(op, types, func, lib=lib)


def register_fake(
    op, func: Callable | None = None, /, *, lib=None, _stacklevel=1, allow_override=True
):
    """Register ``func`` as ``op``'s fake (meta) implementation: kept, never run (staged
    traces the real kernel). A decorator without ``func``."""
    op = _resolve(op, "register_fake")
    if isinstance(op, CustomOpDef):
        return op.register_fake if func is None else op.register_fake(func)

    def register(func):
        if lookup(op) is None:
            raise RuntimeError(f"operator {op} does not exist")
        namespace, name = _parse_namespace(op)
        _library(namespace, lib).impl(name, func, "Meta")
        return func

    return register if func is None else register(func)


def register_autograd(op, backward: Callable, /, *, setup_context=None, lib=None) -> None:
    """Differentiate ``op`` with ``backward(ctx, *grads)`` given what
    ``setup_context(ctx, inputs, output)`` saved (as ``CustomOpDef.register_autograd``)."""
    op = _resolve(op, "register_autograd")
    if isinstance(op, CustomOpDef):
        op.register_autograd(backward, setup_context=setup_context)
        return
    overload = lookup(op)
    if overload is None:
        namespace, name = _parse_namespace(op)
        raise AttributeError(f"'_OpNamespace' '{namespace}' object has no attribute '{name}'")
    _check_functional(overload, overload)
    if any(a.kwarg_only and a.type.startswith("Tensor") for a in overload._schema.arguments):
        raise NotImplementedError(
            "register_autograd with kwarg-only Tensor args. In the original definition of the "
            f"op, please make your tensors not kwarg-only. Got: {overload._schema}"
        )
    info = _Info(backward, setup_context)
    namespace, name = _parse_namespace(op)
    _library(namespace, lib).impl(name, _autograd_kernel(overload, info), "Autograd")


class _Info:
    """The backward and setup_context an autograd kernel calls."""

    def __init__(self, backward_fn, setup_context_fn):
        self._backward_fn, self._setup_context_fn = backward_fn, setup_context_fn


def get_ctx():
    """The fake-implementation context: None, as staged never runs fake implementations."""
    return None


# ---- infer_schema -------------------------------------------------------------------------


def _derived(base, cpp: str, list_base: bool, optional_base_list: bool, optional_list_base: bool):
    result = [(base, cpp), (typing.Optional[base], f"{cpp}?")]  # noqa: UP045  (torch's keys)

    def seqs(typ):
        return (
            typing.Sequence[typ],
            typing.List[typ],  # noqa: UP006
            GenericAlias(collections.abc.Sequence, (typ,)),
            GenericAlias(list, (typ,)),
        )

    if list_base:
        result.extend((s, f"{cpp}[]") for s in seqs(base))
    if optional_base_list:
        result.extend((s, f"{cpp}?[]") for s in seqs(typing.Optional[base]))  # noqa: UP045
    if optional_list_base:
        result.extend((typing.Optional[s], f"{cpp}[]?") for s in seqs(base))  # noqa: UP045
    return result


_NUMBER = typing.Union[int, float, bool]  # noqa: UP007  (torch.types.Number)
SUPPORTED_PARAM_TYPES = dict(
    pair
    for line in (
        (Tensor, "Tensor", True, True, False),
        (int, "SymInt", True, False, True),
        (float, "float", True, False, True),
        (bool, "bool", True, False, True),
        (str, "str", False, False, False),
        (_NUMBER, "Scalar", True, False, False),
        (DType, "ScalarType", False, False, False),
        (_device, "Device", False, False, False),
    )
    for pair in _derived(*line)
)
SUPPORTED_RETURN_TYPES = {
    Tensor: "Tensor",
    typing.List[Tensor]: "Tensor[]",  # noqa: UP006
    list[Tensor]: "Tensor[]",
    int: "SymInt",
    float: "float",
    bool: "bool",
    _NUMBER: "Scalar",
}


def infer_schema(
    prototype_function: Callable, /, *, mutates_args, op_name: str | None = None, tags=()
) -> str:
    """torch's schema string of ``prototype_function`` from its type hints, the args named
    in ``mutates_args`` (or all Tensors, for "unknown") written as mutated."""
    sig = inspect.signature(prototype_function)
    if type(mutates_args) is not str:
        mutates_args = tuple(mutates_args)

    def error_fn(what):
        raise ValueError(f"infer_schema(func): {what} Got func with signature {sig})")

    def resolve(ty):
        if isinstance(ty, str):
            try:
                return eval(ty, prototype_function.__globals__)  # noqa: S307  (as torch)
            except Exception as e:
                error_fn(
                    f"Unsupported type annotation {ty}. It is not a type. ({type(e).__name__}: {e})"
                )
        origin = typing.get_origin(ty)
        if origin is not None and any(isinstance(a, str) for a in typing.get_args(ty)):
            return GenericAlias(origin, tuple(resolve(a) for a in typing.get_args(ty)))
        return ty

    params, seen, kwarg_only = [], set(), False
    for idx, (name, param) in enumerate(sig.parameters.items()):
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            error_fn("We do not support positional-only args, varargs, or varkwargs.")
        if param.kind == param.KEYWORD_ONLY and not kwarg_only:
            params.append("*")
            kwarg_only = True
        if param.annotation is inspect.Parameter.empty:
            error_fn(f"Parameter {name} must have a type annotation.")
        annotation = resolve(param.annotation)
        if annotation not in SUPPORTED_PARAM_TYPES:
            if getattr(annotation, "__origin__", None) is tuple:
                items = typing.get_args(annotation)
                if not items:
                    as_list: object = list
                elif len(items) == 1 or len(items) == 2 and items[1] is Ellipsis:
                    as_list = list[items[0]]  # type: ignore[valid-type]
                else:
                    as_list = list[typing.Union[items]]  # type: ignore[valid-type]  # noqa: UP007
                supported = as_list in SUPPORTED_PARAM_TYPES
                example = f"For example, {as_list}.\n\n" if supported else "\n\n"
                error_fn(
                    f"Parameter {name} has unsupported type {param.annotation}. We do not "
                    "support Tuple inputs in schema. As a workaround, please try to use List "
                    f"instead. {example}The valid types are: {SUPPORTED_PARAM_TYPES.keys()}."
                )
            error_fn(
                f"Parameter {name} has unsupported type {param.annotation}. "
                f"The valid types are: {SUPPORTED_PARAM_TYPES.keys()}."
            )
        schema_type = SUPPORTED_PARAM_TYPES[annotation]
        if type(mutates_args) is str:
            if mutates_args != "unknown":
                raise ValueError(
                    "mutates_args must either be a sequence of the names of the arguments that "
                    "are mutated or the string 'unknown'. "
                )
            if schema_type.startswith("Tensor"):
                schema_type = f"Tensor(a{idx}!){schema_type[len('Tensor') :]}"
        elif name in mutates_args:
            if not schema_type.startswith("Tensor"):
                error_fn(
                    f"Parameter {name} is in mutable_args but only Tensors or collections of "
                    "Tensors can be mutated"
                )
            schema_type = f"Tensor(a{idx}!){schema_type[len('Tensor') :]}"
        seen.add(name)
        if param.default is inspect.Parameter.empty:
            params.append(f"{schema_type} {name}")
            continue
        default = param.default
        if default is None or isinstance(default, (int, float, bool)):
            default_repr = str(default)
        elif isinstance(default, (str, _device)):
            default_repr = f'"{default}"'
        elif isinstance(default, DType):
            default_repr = str(default).split(".")[-1]
        else:
            error_fn(
                f"Parameter {name} has an unsupported default value type {type(default)}. "
                "Please file an issue on GitHub so we can prioritize this."
            )
        params.append(f"{schema_type} {name}={default_repr}")
    if mutates_args != "unknown":
        not_seen = set(mutates_args) - seen
        if not_seen:
            error_fn(
                f"{not_seen} in mutates_args were not found in the custom op's signature. "
                "mutates_args should contain the names of all args that the custom op mutates, "
                "or just the string 'unknown' if you don't know."
            )
    ret = _parse_return(resolve(sig.return_annotation), error_fn)
    if op_name is not None:
        return f"{op_name}({', '.join(params)}) -> {ret}"
    return f"({', '.join(params)}) -> {ret}"


def _parse_return(annotation, error_fn) -> str:
    if annotation is None:
        return "()"
    if annotation is inspect.Parameter.empty:
        error_fn("No return type annotation was provided. Please add one.")
    if typing.get_origin(annotation) is not tuple:
        if annotation not in SUPPORTED_RETURN_TYPES:
            error_fn(
                f"Return has unsupported type {annotation}. "
                f"The valid types are: {SUPPORTED_RETURN_TYPES}."
            )
        return SUPPORTED_RETURN_TYPES[annotation]
    args = typing.get_args(annotation)
    for arg in args:
        if arg not in SUPPORTED_RETURN_TYPES:
            error_fn(
                f"Return has unsupported type {annotation}. "
                f"The valid types are: {SUPPORTED_RETURN_TYPES}."
            )
    output = ", ".join(SUPPORTED_RETURN_TYPES[a] for a in args)
    return f"(({output}))" if len(args) == 1 else f"({output})"
