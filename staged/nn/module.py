"""nn.Module: parameters, buffers and submodules registered by attribute, and
``__call__`` running PyTorch's hook machinery (``torch.nn.Module._call_impl``): forward
pre-hooks (may replace the inputs), the inputs captured for full backward hooks, the
forward, forward hooks (may replace the output), the output captured, then legacy backward
hooks on the output's Node. Global hooks (``register_module_*``) run before local ones."""

from __future__ import annotations

import functools
import itertools
import operator
import types
import warnings
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np

from .. import dtypes as dt
from .._native import is_function
from .._where import PLAIN, name_site, sited
from ..eager.interceptor import call_hook, current_interceptor
from ..eager.grad_mode import no_grad
from ..autograd.hooks import RemovableHandle
from ..eager import devices, legacy_types
from ..eager.factories import empty_like
from ..eager.meta import NO_DATA
from ..eager.tensor import Tensor, as_payload
from .backward_hooks import BackwardHook, legacy_hook_warning
from .parameter import Buffer, Parameter

_global_backward_pre_hooks: OrderedDict = OrderedDict()
_global_backward_hooks: OrderedDict = OrderedDict()
_global_is_full_backward_hook = None
_global_forward_pre_hooks: OrderedDict = OrderedDict()
_global_forward_hooks: OrderedDict = OrderedDict()
_global_forward_hooks_always_called: OrderedDict = OrderedDict()
_global_forward_hooks_with_kwargs: OrderedDict = OrderedDict()
_global_buffer_registration_hooks: OrderedDict = OrderedDict()
_global_module_registration_hooks: OrderedDict = OrderedDict()
_global_parameter_registration_hooks: OrderedDict = OrderedDict()
# capture -> the ids of the hooks registered while it traced (Module._guard)
_IN_TRACE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

_MIXED_BACKWARD_HOOKS = (
    "Cannot use both regular backward hooks and full backward hooks on "
    "a single Module. Please use only one of them."
)
_MIXED_GLOBAL_HOOKS = (
    "Cannot use both regular backward hooks and full backward hooks as a "
    "global Module hook. Please use only one of them."
)


_TICKS = itertools.count(1)  # ``next`` is atomic: two threads' changes never count as one


class Counted(OrderedDict):
    """An OrderedDict that counts every change of any dict of its class in the class's
    ``version``: a Module's ``_modules`` (``Children``), ``_parameters`` and ``_buffers``
    (``Registered``), so that a compiled step's guards on them hold in one comparison while
    nothing was added, replaced, deleted or moved (Note [children stamp] in
    staged/tracing/guards.py). Counted after the change: a check that read the count
    before it sees the change or a count it never stamped."""

    __slots__ = ()
    version = 0

    def _counted(self, result=None):
        type(self).version = next(_TICKS)
        return result

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self._counted()

    def __delitem__(self, key):
        super().__delitem__(key)
        self._counted()

    def pop(self, key, *default):
        n = len(self)
        value = super().pop(key, *default)
        return self._counted(value) if len(self) != n else value  # ``_drop``'s: no change

    def popitem(self, last=True):
        return self._counted(super().popitem(last))

    def clear(self):
        super().clear()
        self._counted()

    def update(self, *args, **kwargs):
        super().update(*args, **kwargs)
        self._counted()

    def setdefault(self, key, default=None):
        return self._counted(super().setdefault(key, default))

    def move_to_end(self, key, last=True):
        super().move_to_end(key, last)
        self._counted()

    def __reduce__(self):  # staged.save writes an OrderedDict, as torch's modules hold
        return OrderedDict, (), None, None, iter(self.items())


class Children(Counted):
    """A Module's ``_modules``."""

    __slots__ = ()


class Registered(Counted):
    """A Module's ``_parameters`` or ``_buffers``."""

    __slots__ = ()


_COUNTED = {"_parameters": Registered, "_buffers": Registered, "_modules": Children}


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()


def _register(hooks: OrderedDict, hook, prepend=False, *flags) -> RemovableHandle:
    """Add ``hook`` to ``hooks`` (first if ``prepend``), marking its id in each dict of
    ``flags``; the handle removes it from all of them."""
    handle = RemovableHandle(hooks, *(d for d, _ in flags))
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    for d, on in flags:
        if on:
            d[handle.id] = True
    icpt = current_interceptor()
    if icpt is not None:  # registered by the traced step itself (Module._guard)
        _IN_TRACE.setdefault(icpt, set()).add(handle.id)
    return handle


def register_module_forward_pre_hook(hook):
    """``hook(module, args)`` before every module's forward (before its own hooks)."""
    return _register(_global_forward_pre_hooks, hook)


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """``hook(module, args, output)`` after every module's forward (before its own)."""
    return _register(
        _global_forward_hooks,
        hook,
        False,
        (_global_forward_hooks_with_kwargs, with_kwargs),
        (_global_forward_hooks_always_called, always_call),
    )


def register_module_backward_hook(hook):
    """Legacy (deprecated) backward hook for every module; see ``register_backward_hook``."""
    global _global_is_full_backward_hook
    if _global_is_full_backward_hook is True:
        raise RuntimeError(_MIXED_GLOBAL_HOOKS)
    _global_is_full_backward_hook = False
    return _register(_global_backward_hooks, hook)


def register_module_full_backward_pre_hook(hook):
    """``hook(module, grad_output)`` for every module, before its own backward pre-hooks."""
    return _register(_global_backward_pre_hooks, hook)


def register_module_full_backward_hook(hook):
    """``hook(module, grad_input, grad_output)`` for every module, before its own."""
    global _global_is_full_backward_hook
    if _global_is_full_backward_hook is False:
        raise RuntimeError(_MIXED_GLOBAL_HOOKS)
    _global_is_full_backward_hook = True
    return _register(_global_backward_hooks, hook)


def register_module_buffer_registration_hook(hook):
    """``hook(module, name, buffer)`` on every ``register_buffer``; may return a new buffer."""
    return _register(_global_buffer_registration_hooks, hook)


def register_module_module_registration_hook(hook):
    """``hook(module, name, submodule)`` on every submodule registration; may replace it."""
    return _register(_global_module_registration_hooks, hook)


def register_module_parameter_registration_hook(hook):
    """``hook(module, name, param)`` on every ``register_parameter``; may replace it."""
    return _register(_global_parameter_registration_hooks, hook)


def _registered(hooks, module, name, value):
    for hook in hooks.values():
        out = hook(module, name, value)
        if out is not None:
            value = out
    return value


_HOOK_DICTS = (
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_backward_hooks",
    "_backward_pre_hooks",
    "_state_dict_hooks",
    "_state_dict_pre_hooks",
    "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
)

_EXTRA_STATE_KEY_SUFFIX = "_extra_state"
_META_NO_OP = (
    "for {}: copying from a non-meta parameter in the checkpoint to a meta parameter in the "
    "current model, which is a no-op. (Did you mean to pass `assign=True` to assign items in "
    "the state dictionary to their corresponding key in the module instead of copying them "
    "in place?)"
)


def _moved(t: Tensor, meta: bool) -> Tensor:
    """``t`` on meta (``meta``) or the CPU, for ``Module.to``: from meta raises torch's
    error, pointing at ``to_empty``."""
    if t.is_meta == meta:
        return t
    if t.is_meta:
        raise NotImplementedError(
            f"{NO_DATA} Please use staged.nn.Module.to_empty() instead of "
            "staged.nn.Module.to() when moving module from meta to a different device."
        )
    return t.to("meta")


# the hooks a module's call runs, guarded under capture (Module._guard)
_HOOKS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")
_GLOBAL_HOOKS = (
    _global_forward_pre_hooks,
    _global_forward_hooks,
    _global_backward_pre_hooks,
    _global_backward_hooks,
)
_VALUES = (bool, int, float, complex, str, type(None), np.generic)
_FUNCTIONS = (types.BuiltinFunctionType, functools.partial)  # and is_function's


def _is_value(v) -> bool:
    """A module attribute guarded by value (``is`` for a function): a number, a string,
    None, a tuple of those (``kernel_size``), a function (an activation)."""
    return (
        isinstance(v, _VALUES + _FUNCTIONS)
        or is_function(v)
        or (type(v) is tuple and all(isinstance(x, _VALUES) for x in v))
    )


_READS: dict[type, frozenset] = {}  # Module class -> _library_reads


def _library_reads(cls: type) -> frozenset:
    """The public names staged's own classes of the module class ``cls`` use in their code:
    the attributes its layers keep and read. An attribute the user adds is read by the
    user's code, and guarded where the step reads it (Note [source guards] in
    staged/tracing/guards.py)."""
    names = _READS.get(cls)
    if names is None:
        codes = [
            f.__code__
            for c in cls.__mro__
            if c.__module__.startswith("staged.") and c not in (Module, object)
            for v in vars(c).values()
            for f in (v.fget if isinstance(v, property) else getattr(v, "__func__", v),)
            if isinstance(f, types.FunctionType)
        ]
        names = _READS[cls] = frozenset(
            n for c in codes for n in _code_names(c) if n[:1] != "_"
        ) - {"training"}
    return names


def _code_names(code):
    """The names ``code`` and the code nested in it use: attributes, globals, strings."""
    yield from code.co_names
    for c in code.co_consts:
        if isinstance(c, str):
            yield c
        elif isinstance(c, types.CodeType):
            yield from _code_names(c)


def _members(get, n: int, obj) -> tuple:
    """``get(obj)``: ``n`` values, then hook dicts; the values alone while no dict holds a
    hook (the common case), which a guard compares by ``is``, at C speed."""
    t = get(obj)
    return t if any(t[n:]) else t[:n]


_SERIAL_OR_NONE = itertools.repeat("_serial"), itertools.repeat(None)  # getattr's 2nd, 3rd


def _show_state(objs: tuple) -> str:
    """``Module._state_objects`` as ``bias#3, weight#2``."""
    n = len(objs) // 2
    return ", ".join(f"{k}#{s}" for k, s in sorted(zip(objs[:n], objs[n:]))) or "none"


def _guard_members(icpt, get, names, what: str, key) -> None:
    """Guard the values ``get()`` (``_members``) returns, of ``names`` (hook dicts last,
    compared by their items): a re-trace names each member with its value, a hook dict by
    its ids. The hooks the step registers itself are not among those a call must find: a
    step that registers a hook and removes it again is traced once."""
    own = _IN_TRACE.get(icpt, ())
    n = len(names) - len(_HOOKS)
    value = get()
    if len(value) > n:
        value = (
            *value[:n],
            *(
                OrderedDict((k, h) for k, h in v.items() if k not in own)
                if isinstance(v, dict)
                else v
                for v in value[n:]
            ),
        )
        if not any(value[n:]):
            value = value[:n]

    def show(values) -> str:
        return (
            ", ".join(
                f"{k.strip('_')}={list(v)}" if isinstance(v, dict) else f"{k}={v!r}"
                for k, v in zip(names, values)
                if not isinstance(v, dict) or v
            )
            or "none"
        )

    icpt.guard(get, what, key=key, value=value, show=show)


_compile: Any = None  # staged.compile, installed by staged/__init__.py (set_compiler)


def set_compiler(compile_fn) -> None:
    """Give ``Module.compile`` the function that compiles (``nn`` sits below the runtime)."""
    global _compile
    _compile = compile_fn


class _WrappedHook:
    """A load_state_dict pre-hook, called with its module first where it has one (held
    weakly, as torch's; pickled as torch pickles it)."""

    def __init__(self, hook, module=None):
        self.hook = hook
        functools.update_wrapper(self, hook)
        self.with_module = module is not None
        if module is not None:
            self.module = weakref.ref(module)

    def __call__(self, *args, **kwargs):
        if self.with_module:
            module = self.module()
            if module is None:
                raise RuntimeError("You are trying to call the hook of a dead Module!")
            return self.hook(module, *args, **kwargs)
        return self.hook(*args, **kwargs)

    def __getstate__(self) -> dict:
        result = {"hook": self.hook, "with_module": self.with_module}
        if self.with_module:
            result["module"] = self.module()
        return result

    def __setstate__(self, state: dict):
        self.hook = state["hook"]
        self.with_module = state["with_module"]
        if self.with_module:
            if state["module"] is None:
                raise RuntimeError("You are trying to revive the hook of a dead Module!")
            self.module = weakref.ref(state["module"])


def _typename(v) -> str:
    """What torch.typename says of ``v`` in errors: ``torch.FloatTensor`` for a tensor."""
    return v.type() if isinstance(v, Tensor) else type(v).__name__


def to_arguments(args, kwargs) -> tuple:
    """``(device, dtype, non_blocking, memory_format)`` of a call ``to(*args, **kwargs)`` in
    any of torch's forms: ``(device=None, dtype=None, non_blocking=False, copy=False)``,
    ``(dtype, non_blocking=False, copy=False)``, ``(tensor, non_blocking=False, copy=False)``,
    ``memory_format`` by keyword; the device and dtype as given, None where absent."""
    kw = dict(kwargs)
    device, dtype = kw.pop("device", None), kw.pop("dtype", None)
    non_blocking, memory_format = kw.pop("non_blocking", False), kw.pop("memory_format", None)
    kw.pop("copy", None)
    if kw:
        raise TypeError(f"to() got an unexpected keyword argument {next(iter(kw))!r}")
    rest = list(args)
    if rest and isinstance(rest[0], Tensor):
        t = rest.pop(0)
        device, dtype = t.device, t.dtype
    else:
        first = rest[0] if rest else False
        if (
            first is None
            or isinstance(first, (str, devices.device, int))
            and type(first) is not bool
        ):
            device = rest.pop(0)
        if rest and not isinstance(rest[0], (bool, str)):
            dtype = rest.pop(0)
    if rest and isinstance(rest[0], bool):
        non_blocking = rest.pop(0)
    if rest and isinstance(rest[0], bool):
        rest.pop(0)  # copy: a Module's tensors are cast in place
    if rest:
        got = ", ".join(type(a).__name__ for a in args)
        raise TypeError(
            f"to() received an invalid combination of arguments - got ({got}), but expected "
            "(device=None, dtype=None, non_blocking=False, copy=False), (dtype, "
            "non_blocking=False, copy=False) or (tensor, non_blocking=False, copy=False)"
        )
    return device, dtype, non_blocking, memory_format


class Module:
    """Base class of layers and models, PyTorch's ``torch.nn.Module``."""

    training: bool
    dump_patches: bool = False
    _version: int = 1  # state_dict's metadata, for _load_from_state_dict to read (torch's)
    call_super_init: bool = False  # pass __init__'s arguments on to the next class (mixins)
    _compiled_call_impl: Any = None  # set by compile()
    T_destination = TypeVar("T_destination", bound=dict[str, Any])

    def __init_subclass__(cls, **kwargs):
        """A built-in layer's constructor names the user's line in its errors (``Linear(-1,
        2)``'s), as its call does; a user's class is left as written."""
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None and cls.__module__.startswith("staged.") and not hasattr(init, "sited"):
            cls.__init__ = sited(init, moded=False)  # type: ignore[method-assign]

    def __init__(self, *args, **kwargs):
        if self.call_super_init is False and kwargs:
            raise TypeError(
                f"{type(self).__name__}.__init__() got an unexpected keyword argument "
                f"'{next(iter(kwargs))}'"
            )
        if self.call_super_init is False and args:
            raise TypeError(
                f"{type(self).__name__}.__init__() takes 1 positional argument but "
                f"{len(args) + 1} were given"
            )
        for name in _HOOK_DICTS:
            object.__setattr__(self, name, OrderedDict())
        for name, counted in _COUNTED.items():
            object.__setattr__(self, name, counted())
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_is_full_backward_hook", None)
        if self.call_super_init:
            super().__init__(*args, **kwargs)

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_compiled_call_impl", None)  # a copy or an unpickled module runs eagerly
        return state

    def __setstate__(self, state):
        """Unpickling, of staged's modules and of torch's (``torch.save(model)``: Note [safe
        globals] in staged/serialization.py): torch's fields renamed, missing ones made
        empty."""
        state = dict(state)
        if "_non_persistent" in state:  # staged's name before torch's (until 2026-12-07)
            state["_non_persistent_buffers_set"] = set(state.pop("_non_persistent"))
        self.__dict__.update(state)
        for name in _HOOK_DICTS:
            if self.__dict__.get(name) is None:
                object.__setattr__(self, name, OrderedDict())
        for name, counted in _COUNTED.items():
            object.__setattr__(self, name, counted(self.__dict__.get(name) or ()))
        self.__dict__.setdefault("_non_persistent_buffers_set", set())
        self.__dict__.setdefault("_is_full_backward_hook", None)
        self.__dict__.setdefault("training", True)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    # -- calling -------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if self._compiled_call_impl is not None:
            return self._compiled_call_impl(*args, **kwargs)
        return self._call_impl(*args, **kwargs)

    def _call_impl(self, *args, **kwargs):
        icpt = current_interceptor()
        if icpt is not None:  # a compiled step is reused only while these still hold
            self._guard(icpt)
        if not (
            self._backward_hooks
            or self._backward_pre_hooks
            or self._forward_hooks
            or self._forward_pre_hooks
            or _global_backward_pre_hooks
            or _global_backward_hooks
            or _global_forward_hooks
            or _global_forward_pre_hooks
        ):
            try:
                return self.forward(*args, **kwargs)
            except PLAIN as e:
                name_site(e)  # a built-in layer's error names the user's model(x) line
                raise
        state = {"args": args, "kwargs": kwargs, "result": None, "called": set()}
        try:
            return self._call_with_hooks(state)
        except Exception as e:
            self._run_always_called_hooks(state)
            name_site(e)
            raise

    def _call_with_hooks(self, state):
        args, kwargs = state["args"], state["kwargs"]
        full, legacy = self._backward_hooks_by_kind()
        pre = [*_global_backward_pre_hooks.values(), *self._backward_pre_hooks.values()]
        for hook_id, hook in (*_global_forward_pre_hooks.items(), *self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                r = call_hook(hook, self, args, kwargs)
                if r is not None:
                    if not (isinstance(r, tuple) and len(r) == 2):
                        raise RuntimeError(
                            f"forward pre-hook must return None or a tuple of "
                            f"(new_args, new_kwargs), but got {r}."
                        )
                    args, kwargs = r
            else:
                r = call_hook(hook, self, args)
                if r is not None:
                    args = r if isinstance(r, tuple) else (r,)
            state["args"], state["kwargs"] = args, kwargs
        bw_hook = None
        if full or pre:
            bw_hook = BackwardHook(self, full, pre)
            args = state["args"] = bw_hook.setup_input_hook(args)  # always_call hooks get these
        result = state["result"] = self.forward(*args, **kwargs)
        for hook_id, hook in (*_global_forward_hooks.items(), *self._forward_hooks.items()):
            if (
                hook_id in self._forward_hooks_always_called
                or hook_id in _global_forward_hooks_always_called
            ):
                state["called"].add(hook_id)
            if (
                hook_id in self._forward_hooks_with_kwargs
                or hook_id in _global_forward_hooks_with_kwargs
            ):
                r = call_hook(hook, self, args, kwargs, result)
            else:
                r = call_hook(hook, self, args, result)
            if r is not None:
                result = state["result"] = r
        if bw_hook is not None:
            if not isinstance(result, (Tensor, tuple)):
                warnings.warn(
                    "For backward hooks to be called, module output should be a "
                    f"Tensor or a tuple of Tensors but received {type(result)}",
                    stacklevel=3,
                )
            result = bw_hook.setup_output_hook(result)
        if legacy:
            self._attach_legacy_hooks(legacy, args, result)
        return result

    def _backward_hooks_by_kind(self):
        """(full, legacy) backward hooks, global ones first."""
        full, legacy = [], []
        for is_full, hooks in (
            (_global_is_full_backward_hook, _global_backward_hooks),
            (self._is_full_backward_hook, self._backward_hooks),
        ):
            if is_full is not None and hooks:
                (full if is_full else legacy).extend(hooks.values())
        return full, legacy

    def _attach_legacy_hooks(self, hooks, args, result):
        """Hook the Node of the first tensor of the output (one level of dicts opened)."""
        var = result
        while not isinstance(var, Tensor):
            var = (
                next(v for v in var.values() if isinstance(v, Tensor))
                if isinstance(var, dict)
                else var[0]
            )
        node = var.grad_fn
        if node is None:
            return
        for hook in hooks:
            node.register_hook(lambda gi, go, hook=hook: hook(self, gi, go))
        msg = legacy_hook_warning(args, result, node)
        if msg:
            warnings.warn(msg, FutureWarning, stacklevel=4)

    def _run_always_called_hooks(self, state):
        """After an exception: the ``always_call`` forward hooks that have not run yet."""
        for hooks, always, local in (
            (_global_forward_hooks, _global_forward_hooks_always_called, False),
            (self._forward_hooks, self._forward_hooks_always_called, True),
        ):
            for hook_id, hook in hooks.items():
                if hook_id not in always or hook_id in state["called"]:
                    continue
                try:
                    if local and hook_id in self._forward_hooks_with_kwargs:
                        r = hook(self, state["args"], state["kwargs"], state["result"])
                    else:
                        r = hook(self, state["args"], state["result"])
                    if r is not None:
                        state["result"] = r
                except Exception as e:
                    where = "module" if local else "global module"
                    warnings.warn(
                        f"{where} forward hook with ``always_call=True`` raised an "
                        f"exception that was silenced as another error was raised "
                        f"in forward: {e}",
                        stacklevel=3,
                    )

    def _guard(self, icpt) -> None:
        """Tell a capture that its trace holds only while what it saw of this module stays:
        the training flag, the parameter and buffer objects, the values of the public
        attributes staged's own code of the module reads (``Dropout.p``, ``eps``) and the
        module's and the global forward and backward hooks."""
        name = type(self).__name__
        for d in (*(getattr(self, h) for h in _HOOKS), *_GLOBAL_HOOKS):
            for hook in d.values():  # Note [hooks' reads] in staged/tracing/capture.py
                icpt.hook(hook, self)
        icpt.guard(
            self._state_objects,
            f"{name} parameters/buffers",
            key=(id(self), "state"),
            same=operator.eq,  # names, then int serials or None: == is exact, at C speed
            show=_show_state,
        )
        # on the values the call entered with: ``model.eval()`` ... ``model.train()`` in
        # the step (Note [attribute writes] in staged/tracing/guards.py)
        with icpt.entered(self):
            icpt.guard(  # read at C speed
                functools.partial(getattr, self, "training"),
                f"{name}.training",
                key=(id(self), "training"),
            )
            d, reads = self.__dict__, _library_reads(type(self))
            names = (*sorted(k for k in d if k in reads and _is_value(d[k])), *_HOOKS)
            _guard_members(
                icpt,
                functools.partial(
                    _members, operator.attrgetter(*names), len(names) - len(_HOOKS), self
                ),
                names,
                f"{name} attributes/hooks",
                (id(self), "members"),
            )
        # the global dicts are never rebound: tuple() of their tuple is that tuple
        _guard_members(
            icpt,
            functools.partial(_members, tuple, 0, _GLOBAL_HOOKS),
            _HOOKS,
            "global module hooks",
            "global module hooks",
        )

    def _state_objects(self) -> tuple:
        """The names of the parameters and buffers, then their tensors' serials (None for
        a None entry), in one flat tuple: changes when one is replaced by another object."""
        p, b, serial = self._parameters, self._buffers, _SERIAL_OR_NONE
        if b:
            return (*p, *b, *map(getattr, p.values(), *serial), *map(getattr, b.values(), *serial))
        return (*p, *map(getattr, p.values(), *serial))  # the common case, without b's maps

    # what it reads that can change: Counted dicts (Note [children stamp] in tracing/guards.py)
    _state_objects.counted_reads = ("_parameters", "_buffers")  # type: ignore[attr-defined]

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """``hook(module, args)`` before forward; a non-None return replaces ``args`` (a
        non-tuple is wrapped). With ``with_kwargs``: ``hook(module, args, kwargs)`` returning
        None or ``(args, kwargs)``."""
        return _register(
            self._forward_pre_hooks,
            hook,
            prepend,
            (self._forward_pre_hooks_with_kwargs, with_kwargs),
        )

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """``hook(module, args, output)`` (``with_kwargs``: ``(module, args, kwargs,
        output)``) after forward; a non-None return replaces the output. ``always_call``
        runs it even when forward raises."""
        return _register(
            self._forward_hooks,
            hook,
            prepend,
            (self._forward_hooks_with_kwargs, with_kwargs),
            (self._forward_hooks_always_called, always_call),
        )

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """``hook(module, grad_output)`` when the gradients of the outputs are computed; may
        return a replacement ``grad_output``."""
        return _register(self._backward_pre_hooks, hook, prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """``hook(module, grad_input, grad_output)`` once the gradients of the inputs are
        computed (of the outputs, if no input requires grad); may return a replacement
        ``grad_input``."""
        if self._is_full_backward_hook is False:
            raise RuntimeError(_MIXED_BACKWARD_HOOKS)
        object.__setattr__(self, "_is_full_backward_hook", True)
        return _register(self._backward_hooks, hook, prepend)

    def register_backward_hook(self, hook):
        """Deprecated: ``hook(module, grad_input, grad_output)`` on the Node of the output's
        first tensor, so its arguments are that Node's (right only for single-Node
        modules). Use ``register_full_backward_hook``."""
        if self._is_full_backward_hook is True:
            raise RuntimeError(_MIXED_BACKWARD_HOOKS)
        object.__setattr__(self, "_is_full_backward_hook", False)
        return _register(self._backward_hooks, hook)

    # -- registration --------------------------------------------------------------------
    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._drop(name, params)
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._drop(name, self._modules)
            self.add_module(name, value)
        elif isinstance(value, Buffer):
            if params is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            self._drop(name, self._buffers)
            self.register_buffer(name, value, value.persistent)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as parameter "
                    f"'{name}' (torch.nn.Parameter or None expected)"
                )
            params[name] = None
        elif params is not None and name in self._modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as child module '{name}' "
                    "(staged.nn.Module or None expected)"
                )
            self._modules[name] = _registered(_global_module_registration_hooks, self, name, None)
        elif params is not None and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as buffer '{name}' "
                    "(Tensor or None expected)"
                )
            icpt = current_interceptor()
            if icpt is not None:  # a trace that fails puts the old buffer back
                icpt.preserve(self._buffers)
            self._buffers[name] = _registered(_global_buffer_registration_hooks, self, name, value)
        else:
            if name in _COUNTED and isinstance(value, dict):
                value = _COUNTED[name](value)
            object.__setattr__(self, name, value)
            if name in _COUNTED or name == "__dict__":  # new registries: counted
                for counted in (Children, Registered):
                    counted.version = next(_TICKS)

    def _drop(self, name, keep):
        """Forget ``name`` everywhere but in ``keep``, the dict it is being set in: a
        re-assigned parameter, buffer or submodule keeps its place in the order that
        ``named_parameters``, ``state_dict`` and optimizers see, as torch."""
        self.__dict__.pop(name, None)
        for d in (self._parameters, self._buffers, self._modules):
            if d is not keep:
                d.pop(name, None)

    def __getattr__(self, name):
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            if key in d and name in d[key]:
                return d[key][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for d in (self._parameters, self._buffers, self._modules):
            if name in d:
                del d[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        self._check_name(name, "parameter", "_parameters")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{_typename(param)}' object to parameter "
                f"'{name}' (torch.nn.Parameter or None required)"
            )
        self._drop(name, self._parameters)
        self._parameters[name] = _registered(
            _global_parameter_registration_hooks, self, name, param
        )

    def register_buffer(self, name, tensor, persistent=True):
        self._check_name(name, "buffer", "_buffers")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{_typename(tensor)}' object to buffer "
                f"'{name}' (torch Tensor or None required)"
            )
        self._drop(name, self._buffers)
        self._buffers[name] = _registered(_global_buffer_registration_hooks, self, name, tensor)
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        self._check_name(name, "module", "_modules")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._drop(name, self._modules)
        self._modules[name] = _registered(_global_module_registration_hooks, self, name, module)

    register_module = add_module

    def _check_name(self, name, kind: str, registry: str) -> None:
        """torch's checks of a name to register: a string, no dot, not empty, and not an
        attribute of another kind (a method, a property such as a parametrized tensor's;
        assigning through ``__setattr__`` forgets plain attributes first)."""
        if registry not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
        if "." in name:
            got = f", got: {name}" if kind == "module" else ""  # torch's wording
            raise KeyError(f'{kind} name can\'t contain "."{got}')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if name not in self.__dict__[registry] and hasattr(self, name):
            raise KeyError(f"attribute '{name}' already exists")

    # -- traversal -----------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        memo = set() if memo is None else memo
        if self in memo and remove_duplicate:
            return
        memo.add(self)
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(
                    memo, prefix + ("." if prefix else "") + name, remove_duplicate
                )

    def modules(self, remove_duplicate=True):
        for _, m in self.named_modules(remove_duplicate=remove_duplicate):
            yield m

    def get_submodule(self, target: str) -> Module:
        """The submodule at the dotted path ``target`` (``""``: this module)."""
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def set_submodule(self, target: str, module: Module, strict: bool = False) -> None:
        """Put ``module`` at the dotted path ``target``, replacing a submodule or (unless
        ``strict``) adding one to an existing parent."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        atoms = target.split(".")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent = self.get_submodule(".".join(atoms[:-1]))
        if strict and not hasattr(parent, atoms[-1]):
            raise AttributeError(parent._get_name() + " has no attribute `" + atoms[-1] + "`")
        if hasattr(parent, atoms[-1]) and not isinstance(getattr(parent, atoms[-1]), Module):
            raise AttributeError("`" + atoms[-1] + "` is not an nn.Module")
        setattr(parent, atoms[-1], module)

    def _get_attribute(self, target: str) -> tuple:
        """``(module, name, value)`` of the attribute at the dotted path ``target``."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        return mod, name, getattr(mod, name)

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at the dotted path ``target``."""
        _, name, param = self._get_attribute(target)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at the dotted path ``target``."""
        mod, name, buffer = self._get_attribute(target)
        if name not in mod._buffers:
            raise AttributeError("`" + name + "` is not a buffer")
        return buffer

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and m not in seen:
                seen.add(m)
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, attr, prefix="", recurse=True, remove_duplicate=True):
        seen = set()
        mods = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        for mod_prefix, m in mods:
            for name, v in getattr(m, attr).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                seen.add(id(v))
                yield mod_prefix + ("." if mod_prefix else "") + name, v

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def __hash__(self):
        return id(self)

    # -- state ---------------------------------------------------------------------------
    def get_extra_state(self) -> Any:
        """Override (with ``set_extra_state``) to save more than parameters and buffers:
        ``state_dict`` then holds what it returns under ``<prefix>_extra_state``."""
        raise RuntimeError(
            "Reached a code path in Module.get_extra_state() that should never be called. "
            "Please file an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml "
            "to report this bug."
        )

    def set_extra_state(self, state: Any) -> None:
        """Override (with ``get_extra_state``): ``load_state_dict`` passes it the value
        saved under ``<prefix>_extra_state``."""
        raise RuntimeError(
            "Reached a code path in Module.set_extra_state() that should never be called. "
            "Please file an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml "
            "to report this bug."
        )

    def _register_state_dict_hook(self, hook):
        """The older post-hook: ``hook(module, state_dict, prefix, local_metadata)``; what
        it returns replaces the state dict, at the module ``state_dict`` was called on."""
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError(
                "Cannot register the same function as the state dict post hook that was "
                "previously registered via register_state_dict_post_hook"
            )
        return _register(self._state_dict_hooks, hook)

    def register_state_dict_post_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata)`` after this module (and its
        submodules) wrote its entries; it may change ``state_dict`` in place, and must
        return None."""
        hook._from_public_api = True
        return _register(self._state_dict_hooks, hook)

    def register_state_dict_pre_hook(self, hook):
        """``hook(module, prefix, keep_vars)`` before this module writes its entries."""
        return _register(self._state_dict_pre_hooks, hook)

    def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:
        """This module's own entries (not its submodules'): parameters, persistent buffers
        and the extra state of a class that overrides ``get_extra_state``."""
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if type(self).get_extra_state is not Module.get_extra_state:
            destination[prefix + _EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """Parameters and persistent buffers by dotted name (detached unless ``keep_vars``),
        in an OrderedDict whose ``_metadata`` holds each module's ``_version``, running
        the state_dict pre- and post-hooks of every module, as torch's."""
        if args:
            warnings.warn(
                "Positional args are being deprecated, use kwargs instead. Refer to "
                "https://pytorch.org/docs/main/generated/torch.nn.Module.html#torch.nn.Module.state_dict"
                " for details.",
                FutureWarning,
                stacklevel=2,
            )
            if destination is None:
                destination = args[0]
            if len(args) > 1 and prefix == "":
                prefix = args[1]
            if len(args) > 2 and keep_vars is False:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(
                    destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars
                )
        for hook in self._state_dict_hooks.values():
            result = hook(self, destination, prefix, local_metadata)
            if not getattr(hook, "_from_public_api", False):
                if result is not None:
                    destination = result
            elif result is not None:
                raise RuntimeError("state_dict post-hook must return None")
        return destination

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        """The older pre-hook: ``register_load_state_dict_pre_hook``'s, without the module
        unless ``with_module``."""
        return _register(
            self._load_state_dict_pre_hooks, _WrappedHook(hook, self if with_module else None)
        )

    def register_load_state_dict_pre_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` before this module loads its entries; it may change
        ``state_dict`` (a copy) and the lists in place."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook):
        """``hook(module, incompatible_keys)`` after this module and its submodules loaded;
        it may change ``incompatible_keys.missing_keys``/``unexpected_keys`` in place (a
        strict load then checks what is left), and must return None."""
        return _register(self._load_state_dict_post_hooks, hook)

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ) -> None:
        """Copy this module's own entries (not its submodules') from ``state_dict``, noting
        missing and unexpected keys and errors in the lists; NumPy arrays are accepted."""
        for hook in self._load_state_dict_pre_hooks.values():
            hook(
                state_dict,
                prefix,
                local_metadata,
                strict,
                missing_keys,
                unexpected_keys,
                error_msgs,
            )
        persistent = {
            k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set
        }
        local_state = {
            k: v
            for k, v in itertools.chain(self._parameters.items(), persistent.items())
            if v is not None
        }
        assign = local_metadata.get("assign_to_params_buffers", False)
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if isinstance(value, (np.ndarray, np.generic)):
                value = Tensor._wrap(as_payload(value))
            elif not isinstance(value, Tensor):
                error_msgs.append(
                    f'While copying the parameter named "{key}", expected staged.Tensor or '
                    f"Tensor-like object from checkpoint but received {type(value)}"
                )
                continue
            if len(param.shape) == 0 and len(value.shape) == 1 and value.shape[0] == 1:
                value = value[0]  # a torch 0.3 checkpoint's scalar
            if value.shape != param.shape:
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape {value.shape} from "
                    f"checkpoint, the shape in current model is {param.shape}."
                )
                continue
            try:
                with no_grad():
                    if not assign:
                        if param.is_meta and not value.is_meta:
                            warnings.warn(_META_NO_OP.format(key), stacklevel=4)
                        param.copy_(value)
                    elif isinstance(param, Parameter) and not isinstance(value, Parameter):
                        setattr(self, name, Parameter(value, requires_grad=param.requires_grad))
                    else:
                        if isinstance(param, Parameter):
                            value.requires_grad_(param.requires_grad)
                        setattr(self, name, value)
            except Exception as ex:
                error_msgs.append(
                    f'While copying the parameter named "{key}", whose dimensions in the model '
                    f"are {param.size()} and whose dimensions in the checkpoint are "
                    f"{value.size()}, an exception occurred : {ex.args}."
                )
        extra_key = prefix + _EXTRA_STATE_KEY_SUFFIX
        if type(self).set_extra_state is not Module.set_extra_state:
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            for key in state_dict:
                if key.startswith(prefix) and key != extra_key:
                    head = key[len(prefix) :].split(".", 1)
                    if (
                        (head[0] not in self._modules)
                        if len(head) > 1
                        else (head[0] not in local_state)
                    ):
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy values into parameters and buffers (``assign=True``: put the state dict's
        tensors in their place, keeping each parameter's ``requires_grad``), running every
        module's load pre- and post-hooks, as torch's; NumPy arrays are accepted too."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)  # a copy the hooks and overrides may change
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module, local_state_dict, prefix=""):
            local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(
                local_state_dict, prefix, local_metadata, True, missing, unexpected, errors
            )
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    load(
                        child,
                        {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)},
                        child_prefix,
                    )
            incompatible = _IncompatibleKeys(missing, unexpected)
            for hook in module._load_state_dict_post_hooks.values():
                if hook(module, incompatible) is not None:
                    raise AssertionError(
                        "Hooks registered with ``register_load_state_dict_post_hook`` are not "
                        "expected to return new values, if incompatible_keys need to be "
                        "modified, it should be done inplace."
                    )

        load(self, state_dict)
        if strict:
            if unexpected:
                errors.insert(
                    0,
                    "Unexpected key(s) in state_dict: {}. ".format(
                        ", ".join(f'"{k}"' for k in unexpected)
                    ),
                )
            if missing:
                errors.insert(
                    0,
                    "Missing key(s) in state_dict: {}. ".format(
                        ", ".join(f'"{k}"' for k in missing)
                    ),
                )
        if errors:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                + "\n\t".join(errors)
            )
        return _IncompatibleKeys(missing, unexpected)

    # -- modes and utilities -------------------------------------------------------------
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        object.__setattr__(self, "training", mode)
        for m in self.children():  # through their own train(): an override runs, as torch's
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    with no_grad():
                        p.grad.zero_()

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def to(self, *args, **kwargs):
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(tensor)``: floating
        and complex parameters and buffers (and their grads) cast to ``dtype`` in place, as
        torch's; a device must be the CPU or meta (Note [devices]): to meta, parameters
        keep their metadata only; from meta, ``to_empty`` gives them memory."""
        device, dtype = to_arguments(args, kwargs)[:2]
        if device is not None:
            meta = devices.on_meta(device)
            if any(t.is_meta != meta for t in self._tensors()):
                self._apply(functools.partial(_moved, meta=meta))
        if dtype is None:
            return self
        dtype = dt.as_dtype(dtype)
        if not (dtype.is_floating_point or dtype.is_complex):
            raise TypeError(
                f"nn.Module.to only accepts floating point or complex dtypes, but "
                f"got desired dtype={dtype}"
            )
        return self._cast(dtype, complex_too=True)

    def type(self, dst_type):
        """Every parameter and buffer (and grad) cast to ``dst_type`` in place: a dtype, a
        legacy type such as ``staged.DoubleTensor``, or its name, as torch's."""
        return self._cast(legacy_types.dtype_of(dst_type), every=True)

    def _cast(self, dtype, complex_too=False, every=False):
        """Parameters, buffers and grads that are floating (and complex if ``complex_too``;
        all of them if ``every``) cast to ``dtype`` in place (the Parameter objects stay; their
        data is set, as torch's ``param.data = ...``, which is no in-place write: no
        ``_version`` bump)."""

        def cast(v):
            if (
                v is not None
                and (every or v.dtype.is_floating_point or complex_too and v.dtype.is_complex)
                and v.dtype is not dtype
            ):
                v._payload = (v._payload if v.is_meta else v._host()).astype(dtype.np)

        for m in self.modules():
            for d in (m._parameters, m._buffers):
                for v in d.values():
                    cast(v)
                    if v is not None:
                        cast(v._grad)
        return self

    def float(self):
        return self._cast(dt.float32)

    def double(self):
        return self._cast(dt.float64)

    def half(self):
        return self._cast(dt.float16)

    def bfloat16(self):
        return self._cast(dt.bfloat16)

    def _tensors(self):
        """Every parameter, grad and buffer of this module and its submodules."""
        for m in self.modules():
            for d in (m._parameters, m._buffers):
                for v in d.values():
                    if v is not None:
                        yield v
                        if v._grad is not None:
                            yield v._grad

    def _apply(self, fn, recurse=True):
        """``fn(tensor)`` for every parameter (its data set in place: the Parameter object
        stays), its grad, and every buffer (replaced), submodules first (torch's)."""
        if recurse:
            for m in self.children():
                m._apply(fn)
        for p in self._parameters.values():
            if p is None:
                continue
            with no_grad():
                p.data = fn(p)
                if p.grad is not None:
                    p.grad.data = fn(p.grad)
        for k, b in self._buffers.items():
            if b is not None:
                self._buffers[k] = fn(b)
        return self

    def to_empty(self, *, device, recurse=True):
        """Parameters and buffers (of submodules too, if ``recurse``) replaced by
        uninitialized ones of the same shape and dtype on ``device`` (the CPU)."""
        return self._apply(lambda t: empty_like(t, device=device), recurse=recurse)

    def share_memory(self):
        """Every parameter, grad and buffer moved to shared memory (``share_memory_``)."""
        return self._apply(lambda t: t.share_memory_())

    def cpu(self):
        return self

    def cuda(self, device=None):
        devices.check("cuda" if device is None else device)

    def xpu(self, device=None):
        devices.check("xpu")  # a CPU build has none, whatever the index

    def ipu(self, device=None):
        devices.check("ipu")

    def mtia(self, device=None):
        devices.check("mtia")

    def compile(self, *args, **kwargs) -> None:
        """Compile this module's calls in place: ``module(x)`` then runs
        ``staged.compile(module._call_impl, *args, **kwargs)`` (hooks and forward), as
        torch's ``Module.compile`` runs ``torch.compile``."""
        self._compiled_call_impl = _compile(self._call_impl, *args, **kwargs)

    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        for name, m in self._modules.items():
            sub = repr(m).replace("\n", "\n  ")
            lines.append(f"({name}): {sub}")
        main = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                return main + lines[0] + ")"
            main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"

    def __dir__(self):
        keys = set(super().__dir__()) | set(self._parameters) | set(self._buffers)
        return sorted(k for k in keys | set(self._modules) if not k[0].isdigit())
