"""Optimizer base: param groups, per-parameter state, zero_grad, state_dict.

Updates run under ``no_grad`` (unless ``differentiable``: Note [implementation flags]) with
in-place tensor ops, so the same ``step()`` works eagerly and under ``staged.compile``
(where it is functionalized into the graph).

Note [hyper-parameters]: ``_update`` reads a group's hyper-parameters through a
``Hyper`` view. ``h.number(name)`` is the Python number eagerly; under capture it is a
0-d tensor of the parameters' dtype that is a live input of the graph (Note [live
inputs] in ``staged/tracing/capture.py``), so changing ``param_groups[i]["lr"]`` by hand
or by a scheduler takes effect at the next compiled call without a re-trace; so does a
tensor hyper-parameter (``lr=torch.tensor(0.01)``) filled in place, which the live input
reads as a number (``Numbers``), as torch's schedulers fill it. Numbers
torch computes in Python from several hyper-parameters (``1 - beta1``, ``1 - lr * wd``)
are live inputs of their own, so they round as eagerly. ``h.flag(name)`` is a branch of
the update (``if weight_decay:``, ``nesterov``): a compiled step re-traces when it flips.
An optimizer made inside the traced function (a differentiable one in a meta-learning
step, made anew by every call) is the call's own: its numbers are constants of the trace,
and its state lives and dies within the call.

Numbers torch computes in Python from the step count (bias corrections, NAdam's ``mu``)
are, under capture, 0-d tensors of the parameters' dtype made from ``state["step"]``, so
they are values of the graph too; eagerly they are Python floats, as torch's (``advance``).

Note [complex parameters]: torch's single-tensor steps of Adam, AdamW, Adamax, Adadelta,
Adagrad, ASGD, NAdam, RAdam, RMSprop and Rprop update a complex parameter as pairs of real
numbers: the parameter, its gradient and its state are viewed with ``torch.view_as_real``,
so each real and imaginary part has its own moments (Adam's second moment is per part, not
``|g|^2``). An optimizer with ``complex_as_real`` does the same in one place
(``_real_update``): its ``_update`` gets ``view_as_real`` of the parameter and gradient and
a ``RealParts`` view of the state, and state it makes shaped like the real view is kept
complex, as torch's (``state_dict`` has the same layout). SGD works on complex numbers
directly, as torch's; Adafactor, Muon and SparseAdam raise for them, as torch's.

Note [implementation flags]: torch's ``foreach``, ``fused`` and ``capturable`` choose one
of its kernels (a loop, multi-tensor, fused, CUDA-graph safe) for the same update. Here
there is one kernel, so each optimizer takes them with torch's signature and keeps them
in its groups (state_dicts round-trip with torch's keys), and they change only what torch's
do visibly: ``fused`` together with ``foreach`` or ``differentiable`` raises at
construction, a fused step wants floating point parameters, and a fused optimizer's
``state["step"]`` is float32 (``new_step``). ``capturable`` needs no device of its own:
every step here can be captured by ``staged.compile``. ``differentiable=True`` runs the
step with grad mode on, as torch's does, so autograd records the update (the parameters
may then be non-leaf tensors): the new parameters and state differentiate with respect to
the old ones and the gradients (meta-learning, hyper-gradients). Such a step updates copies
of the state tensors (``_recorded_update``) and a copy of an operand it overwrites later
(``saved_copy``), so no write ever hits a tensor autograd saved, where torch's steps raise
from their second on for some optimizers (AMSGrad, centered RMSprop, Adamax, Rprop).
"""

from __future__ import annotations

import copy
import functools
import math
import operator
import warnings
import weakref
from collections import defaultdict
from collections.abc import MutableMapping
from typing import Any

import numpy as np

from .._where import at_user
from ..autograd.hooks import RemovableHandle, add_hook
from ..dtypes import bfloat16, float16, float32, float64, get_default_dtype
from ..eager.interceptor import current_interceptor, tagged
from ..eager.legacy_types import type_name
from ..eager.factories import tensor
from ..eager.ops._operands import scalar_tensor
from ..eager.ops.shape import view_as_complex, view_as_real
from ..eager.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from ..eager.tensor import Tensor


class _RequiredParameter:
    """The default of a hyper-parameter that must be given (torch's ``required``, which
    hand-written optimizers take from here)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


# the step hooks of every optimizer (torch.optim.optimizer's registries)
_global_optimizer_pre_hooks: dict = {}
_global_optimizer_post_hooks: dict = {}


def register_optimizer_step_pre_hook(hook) -> RemovableHandle:
    """``hook(optimizer, args, kwargs)`` before every optimizer's step, before its own pre
    hooks; it may return ``(new_args, new_kwargs)`` for the step (``args[0]`` is the
    optimizer)."""
    return add_hook(_global_optimizer_pre_hooks, hook)


def register_optimizer_step_post_hook(hook) -> RemovableHandle:
    """``hook(optimizer, args, kwargs)`` after every optimizer's step, after its own post
    hooks."""
    return add_hook(_global_optimizer_post_hooks, hook)


def _hooked(step):
    """``step`` with the step hooks around it, as torch's ``profile_hook_step``: the global
    pre hooks, the optimizer's pre hooks, the step, its post hooks, the global post hooks;
    it notes the step for the schedulers (``note_step``). Under ``staged.compile`` they run
    when the step is traced. Every ``step`` an optimizer class defines is wrapped; only the
    one ``type(self).step`` finds runs the hooks, so a subclass's step calling its base's
    runs them once."""

    @functools.wraps(step)
    def hooked(self, *args, **kwargs):
        if type(self).step is not hooked:
            return step(self, *args, **kwargs)
        note_step(self)
        args = (self, *args)
        icpt = current_interceptor()  # a hook is the user's code (Note [hooks' reads])
        for hook in (*_global_optimizer_pre_hooks.values(), *self._hooks("step_pre").values()):
            if icpt is not None:
                icpt.hook(hook, self)
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(
                        f"{step} must return None or a tuple of (new_args, new_kwargs), but "
                        f"got {result}."
                    )
                args, kwargs = result
        out = step(*args, **kwargs)
        for hook in (*self._hooks("step_post").values(), *_global_optimizer_post_hooks.values()):
            if icpt is not None:
                icpt.hook(hook, self)
            hook(self, args, kwargs)
        return out

    return hooked


class Optimizer:
    complex_as_real = False  # Note [complex parameters]
    # state a checkpoint may hold as a number, kept as a 0-d tensor (torch's __setstate__)
    _scalar_state: tuple = ("step",)
    _opt_called = False  # stepped since a scheduler was made on it (``note_step``)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = _hooked(cls.__dict__["step"])

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        self.state: defaultdict = defaultdict(dict)  # as torch's: opt.state[p]["k"] = v works
        self._live: dict = {}  # (group index, name, dtype) -> its live input (Note [hyper-...])
        icpt = current_interceptor()  # the trace this optimizer is made in, if any
        self._made_in = None if icpt is None else weakref.ref(icpt)
        self.param_groups: list = []
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of "
                f"Tensors or dicts, but got {type_name(params.dtype)}"
            )
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)
        if self.defaults.get("fused"):  # Note [implementation flags]
            if self.defaults["differentiable"]:
                raise RuntimeError("`fused` does not support `differentiable`")
            if self.defaults["foreach"]:
                raise RuntimeError("`fused` and `foreach` cannot be `True` together.")

    def add_param_group(self, group: dict) -> None:
        """Add ``group`` (its ``params``: tensors, or ``(name, tensor)`` pairs as
        ``named_parameters()`` gives, whose names go to ``group["param_names"]``)."""
        group = dict(group)
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        group["params"] = [p[1] if isinstance(p, tuple) else p for p in params]
        names = [p[0] for p in params if isinstance(p, tuple)]
        if names:
            if len(names) != len(params):
                raise ValueError(
                    "all optimizer params should be with/without names. Some param names "
                    "are missing"
                )
            group["param_names"] = names
        for p in group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"optimizer can only optimize Tensors, but one of the params "
                    f"is {type(p).__name__}"
                )
            if not (self.defaults.get("differentiable") or p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        for g in self.param_groups:
            if ("param_names" in g) != ("param_names" in group):
                raise ValueError(
                    "all optimizer param groups should be with/without names. cannot add "
                    f"param group {'with' if names else 'without'} names to the optimizer"
                )
        if len({id(p) for p in group["params"]}) != len(group["params"]):
            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; in future, "
                "this will cause an error; see github.com/pytorch/pytorch/issues/40967 for "
                "more information",
                stacklevel=3,
            )
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    with no_grad():
                        p.grad.zero_()

    @_hooked
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        icpt = current_interceptor()  # under capture: it restores what the step writes
        if icpt is not None and self._made_in is not None and self._made_in() is icpt:
            icpt = None  # made by the traced call itself (Note [hyper-parameters])
        if icpt is not None:
            icpt.preserve(self.state)
            icpt.guard(  # a group added, a parameter put in or taken out: the trace is stale
                self._group_params,
                f"{type(self).__name__}.param_groups params",
                key=(id(self), "params"),
                show=lambda groups: "; ".join(", ".join(f"#{s}" for s in g) for g in groups),
            )
        self._check_sparse_grads()
        differentiable = bool(self.defaults.get("differentiable"))  # torch reads the defaults
        update = self._recorded_update if differentiable else self._real_update
        with set_grad_enabled(differentiable), tagged(phase="optimizer"):  # Note [phases]
            for i, group in enumerate(self.param_groups):
                views = {}
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if group.get("fused") and not p.is_floating_point():
                        raise RuntimeError(
                            "`fused=True` requires all the params to be floating point "
                            f"Tensors of supported devices: {_FUSED_DEVICES} but "
                            f"{p.dtype} and {p.device.type}"
                        )
                    dtype = p.dtype.to_real()
                    h = views.get(dtype) or views.setdefault(dtype, Hyper(self, i, dtype, icpt))
                    fresh = p not in self.state
                    state = self.state[p]
                    if icpt is not None:
                        icpt.preserve(state)
                    grad = p.grad
                    if type(grad) is not Tensor and not self._sparse_updates:
                        grad = dense_grad(grad)
                    update(p, grad, state, h)
                    if fresh and not state:  # SGD without momentum: torch's keeps none
                        del self.state[p]
        return loss

    # Note [sparse gradients] in staged/sparse.py: the optimizers that take a sparse
    # gradient (SGD, Adagrad, LBFGS) update with its dense equivalent, the same values as
    # torch's sparse updates; SparseAdam updates its rows (``_sparse_updates``); the others
    # raise torch's error, before any parameter changed.
    _sparse_updates = False
    _takes_sparse = False

    def _sparse_refusal(self, group) -> str | None:
        """Why ``group`` cannot be updated with a sparse gradient (torch's words), or None."""
        if not self._takes_sparse:
            return f"{type(self).__name__} does not support sparse gradients"
        if group.get("weight_decay"):
            return self._sparse_decay_refusal
        return None

    _sparse_decay_refusal = "weight_decay option is not compatible with sparse gradients"

    def _check_sparse_grads(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if type(g) is not Tensor and g is not None and g.is_sparse:
                    why = self._sparse_refusal(group)
                    if why is not None:
                        raise RuntimeError(why)

    def _group_params(self) -> tuple:
        """The serial numbers of each group's parameters (what a compiled step updates)."""
        return tuple(tuple(map(_SERIAL, g["params"])) for g in self.param_groups)

    def _update(self, p, grad, state, h: Hyper):
        raise NotImplementedError

    def _real_update(self, p, grad, state, h: Hyper):
        """``_update``, on the real views of a complex parameter where torch's update is
        (Note [complex parameters])."""
        if self.complex_as_real:
            p, grad, state = real_parts(p, grad, state)
        self._update(p, grad, state, h)

    def _recorded_update(self, p, grad, state, h: Hyper):
        """``_update`` in a differentiable step (Note [implementation flags]) on copies of
        the state tensors, written back after it (new ones: copied once). The tensors that
        autograd saves are the copies, which no later step overwrites (torch's raise
        there)."""
        kept = {k: v for k, v in state.items() if isinstance(v, Tensor)}
        state.update({k: v.clone() for k, v in kept.items()})
        self._real_update(p, grad, state, h)
        for k, v in state.items():
            if isinstance(v, Tensor):
                state[k] = kept[k].copy_(v) if k in kept else v.clone()

    def _hooks(self, kind: str) -> dict:
        """This optimizer's state dict hooks of ``kind`` (made on first use)."""
        return self.__dict__.setdefault(f"_optimizer_{kind}_hooks", {})

    def register_step_pre_hook(self, hook) -> RemovableHandle:
        """``hook(optimizer, args, kwargs)`` before each ``step``; it may return
        ``(new_args, new_kwargs)`` for the step (``args[0]`` is the optimizer)."""
        return add_hook(self._hooks("step_pre"), hook)

    def register_step_post_hook(self, hook) -> RemovableHandle:
        """``hook(optimizer, args, kwargs)`` after each ``step``."""
        return add_hook(self._hooks("step_post"), hook)

    def register_state_dict_pre_hook(self, hook, prepend=False) -> RemovableHandle:
        """``hook(optimizer)`` before ``state_dict`` builds its result."""
        return add_hook(self._hooks("state_dict_pre"), hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False) -> RemovableHandle:
        """``hook(optimizer, state_dict)`` on ``state_dict``'s result; what it returns
        (unless None) is returned instead."""
        return add_hook(self._hooks("state_dict_post"), hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False) -> RemovableHandle:
        """``hook(optimizer, state_dict)`` on a shallow copy of what ``load_state_dict`` was
        given; what it returns (unless None) is loaded instead."""
        return add_hook(self._hooks("load_state_dict_pre"), hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False) -> RemovableHandle:
        """``hook(optimizer)`` after ``load_state_dict`` loaded."""
        return add_hook(self._hooks("load_state_dict_post"), hook, prepend)

    def state_dict(self) -> dict:
        """``{"state": {index: {name: value}}, "param_groups": [{..., "params": [index]}]}``
        as in PyTorch: parameters are numbered across groups in order; state tensors are
        the optimizer's own (not copies). The state dict hooks run as torch's."""
        for hook in list(self._hooks("state_dict_pre").values()):
            hook(self)
        index: dict[int, int] = {}
        groups: list[dict[str, Any]] = []
        for g in self.param_groups:
            for p in g["params"]:
                index.setdefault(id(p), len(index))
            groups.append(
                {
                    **{k: v for k, v in g.items() if k != "params"},
                    "params": [index[id(p)] for p in g["params"]],
                }
            )
        state = {index[id(p)]: s for p, s in self.state.items() if id(p) in index}
        out = {"state": state, "param_groups": groups}
        for hook in list(self._hooks("state_dict_post").values()):
            out = _unless_none(hook(self, out), out)
        return out

    def load_state_dict(self, state_dict: dict) -> None:
        """Load what ``state_dict()`` (here or in PyTorch) returned; tensors may be NumPy
        arrays. The state becomes the loaded one, as torch's (other parameters' and other
        keys dropped); values are copied into existing state tensors of the same shape, so
        a compiled step that holds them stays valid. A Python number where the optimizer
        keeps a 0-d tensor (``_scalar_state``: an old checkpoint's ``step``) becomes one,
        as torch's ``__setstate__`` does. Everything is checked and converted before
        anything changes: a state dict refused leaves the optimizer as it was. The load
        state dict hooks run as torch's (the pre-hooks on a shallow copy)."""
        state_dict = dict(state_dict)
        for hook in list(self._hooks("load_state_dict_pre").values()):
            state_dict = _unless_none(hook(self, state_dict), state_dict)
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(own["params"]) for g, own in zip(groups, self.param_groups)):
            raise ValueError(
                "loaded state dict contains a parameter group that doesn't match "
                "the size of optimizer's group"
            )
        params = {
            i: (p, own)
            for g, own in zip(groups, self.param_groups)
            for i, p in zip(g["params"], own["params"])
        }
        saved_state = {int(i): s for i, s in state_dict["state"].items()}
        stray = [i for i in saved_state if i not in params]
        if stray:
            raise ValueError(
                f"loaded state dict has state for parameter(s) {stray} that no parameter "
                "group lists"
            )
        loaded = {}  # id(p) -> (p, {name: value converted})
        for i, saved in saved_state.items():
            p, group = params[i]
            own = self.state.get(p, {})
            loaded[id(p)] = (
                p,
                {k: self._converted(k, own.get(k), v, p, group) for k, v in saved.items()},
            )
        new_groups = [{k: copy.deepcopy(v) for k, v in g.items() if k != "params"} for g in groups]
        for p in [p for p in self.state if id(p) not in loaded]:
            del self.state[p]
        for p, values in loaded.values():
            own = self.state.setdefault(p, {})
            for k in [k for k in own if k not in values]:
                del own[k]
            for k, v in values.items():
                own[k] = _stored(own.get(k), v)
        for g, own in zip(new_groups, self.param_groups):
            own.update(g)
        for hook in list(self._hooks("load_state_dict_post").values()):
            hook(self)

    def _converted(self, key, current, value, p, group):
        """State ``value`` of ``p`` under ``key`` as it will be stored: cast to ``p``'s
        dtype (``current``'s where that is a tensor; a ``step`` as saved), a number of
        ``_scalar_state`` as a 0-d tensor of a fresh step's dtype."""
        if key in self._scalar_state and isinstance(value, (int, float)):
            value = new_step(group.get("fused"), float(value))
        return _cast(
            value,
            current.dtype if isinstance(current, Tensor) else None if key == "step" else p.dtype,
        )

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {k}: {v}" for k, v in sorted(g.items()) if k != "params")
        return "\n".join(lines) + "\n)"


def real_parts(p, grad, state):
    """A complex parameter, its gradient (or None) and its state as its update reads them
    with torch's ``view_as_real`` (Note [complex parameters]); a real one as it is."""
    if not p.is_complex():
        return p, grad, state
    pr = view_as_real(p)
    return pr, None if grad is None else view_as_real(grad), RealParts(state, tuple(pr.shape))


class RealParts(MutableMapping):
    """A complex parameter's ``state`` as its update reads it: a complex tensor as its
    ``view_as_real`` (so in-place updates reach it); a real tensor of the parameter's real
    view shape ``shape`` that the update stores is kept as a complex tensor of its own, as
    torch keeps it (Note [complex parameters])."""

    __slots__ = ("state", "shape")

    def __init__(self, state: dict, shape: tuple):
        self.state, self.shape = state, shape

    def __getitem__(self, key):
        v = self.state[key]
        return view_as_real(v) if isinstance(v, Tensor) and v.is_complex() else v

    def __setitem__(self, key, value):
        if (
            isinstance(value, Tensor)
            and value.is_floating_point()
            and tuple(value.shape) == self.shape
        ):
            value = view_as_complex(value.contiguous()).clone()
        self.state[key] = value

    def __delitem__(self, key):
        del self.state[key]

    def __iter__(self):
        return iter(self.state)

    def __len__(self):
        return len(self.state)


class Hyper:
    """Param group ``index``'s hyper-parameters as the update of its ``dtype`` parameters
    reads them (Note [hyper-parameters])."""

    __slots__ = ("opt", "index", "group", "dtype", "icpt")

    def __init__(self, opt: Optimizer, index: int, dtype, icpt):
        self.opt, self.index, self.dtype, self.icpt = opt, index, dtype, icpt
        self.group = opt.param_groups[index]

    def number(self, name: str, get=None):
        """``get(group)`` (default: ``group[name]``, ``beta1`` from ``betas`` and the like
        (``_MEMBERS``), ``-name`` negated): a Python number eagerly; under capture a 0-d
        tensor the compiled step reads anew at every call."""
        get = get or _getter(name)
        if self.icpt is None:
            return get(self.group)
        opt, i = self.opt, self.index
        key = (i, name, self.dtype)
        probe = _Reads(self.group)
        value = get(probe)
        t = opt._live.get(key)
        if t is None:
            t = opt._live[key] = scalar_tensor(value, opmath(self.dtype))

        def read():
            return get(Numbers(opt.param_groups[i]))

        # what it is computed from, for a saved step (Note [hyper-parameters of a saved step])
        read.reads = tuple((id(opt), i, k) for k in sorted(probe.keys))  # type: ignore[attr-defined]
        self.icpt.live(t, read, f"{type(opt).__name__}.param_groups[{i}].{name}")
        return t

    def one_minus(self, name: str):
        """``1 - group[name]``, computed in Python as torch does (``number``)."""
        get = _getter(name)
        return self.number(f"1 - {name}", lambda g: 1 - get(g))

    @property
    def eager(self) -> bool:
        """Whether the update runs eagerly (its numbers are Python numbers)."""
        return self.icpt is None and current_interceptor() is None

    def one_minus_power(self, name: str, step):
        """``1 - group[name] ** step`` (a bias correction): eagerly torch's double (with
        ``advance``'s Python float or float64 count), or torch's differentiable Adam's
        float32 (with the step's own); else ``-expm1(step * log(group[name]))``, the log
        taken on the host in double: ``1 - 0.999 ** step`` in float32 cancels (1.3e-5 off at
        step 1), this is within 2 ulps."""
        if type(step) is float or step.dtype is float64:
            return 1 - self.number(name) ** step
        if self.eager:  # torch's differentiable Adam: in the step's dtype (the power rounded)
            base = scalar_tensor(self.number(name), step.dtype).to(float64)
            return 1 - (base ** step.to(float64)).to(step.dtype)
        get = _getter(name)
        log = self.number(f"log {name}", lambda g: math.log(get(g)) if get(g) else -math.inf)
        return -(step * log).expm1()

    def flag(self, name: str) -> bool:
        """``bool(group[name])``, a branch of the update: under capture the trace is reused
        only while it stays the same."""
        return bool(self.fixed(name, same=_same_truth))

    def fixed(self, name: str, same=operator.eq):
        """``group[name]`` where it shapes the update (Muon's loop count): under capture
        the trace is reused only while it stays ``same``."""
        if self.icpt is not None:
            opt, i = self.opt, self.index
            self.icpt.guard(
                lambda: opt.param_groups[i][name],
                f"{type(opt).__name__}.param_groups[{i}]['{name}']",
                key=(id(opt), i, name),
                same=same,
            )
        return self.group[name]


class Numbers:
    """A param group whose tensor hyper-parameters (``lr=torch.tensor(0.01)``, which the
    caller or a scheduler fills in place; ``betas`` of two tensors) read as Python numbers,
    for the getters of live inputs: a compiled call takes their values at that call, not
    the tensor objects of the trace (nor makes them inputs of the graph)."""

    __slots__ = ("group",)

    def __init__(self, group: dict):
        self.group = group

    def __getitem__(self, name):
        v = self.group[name]
        if type(v) is tuple:
            return tuple(x.item() if isinstance(x, Tensor) else x for x in v)
        return v.item() if isinstance(v, Tensor) else v


class _Reads(Numbers):
    """A param group that notes the keys read from it (``keys``): what a live input's value
    is computed from (``1 - lr * weight_decay`` from ``lr`` and ``weight_decay``), which a
    saved step checks its hyper-parameters by (Note [hyper-parameters of a saved step])."""

    __slots__ = ("keys",)

    def __init__(self, group: dict):
        super().__init__(group)
        self.keys: set = set()

    def __getitem__(self, name):
        self.keys.add(name)
        return super().__getitem__(name)


def _same_truth(a, b) -> bool:
    return bool(a) == bool(b)


_WHAT = {"lr": "learning rate", "eps": "epsilon value"}
_SERIAL = operator.attrgetter("_serial")
# the devices torch's fused kernels run on, as its error lists them
_FUSED_DEVICES = ["mps", "cuda", "xpu", "hpu", "cpu", "mtia", "privateuseone"]


def check_tensor_lr(lr) -> None:
    """torch's first check: a tensor ``lr`` holds one number."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")


def check_args(**values) -> None:
    """torch's constructor checks, in the order given: each value ``>= 0`` (``rho`` also
    ``<= 1``, each of ``betas`` in ``[0, 1)``), else ``ValueError("Invalid learning rate:
    -1")``; a tensor ``lr`` first (``check_tensor_lr``)."""
    check_tensor_lr(values.get("lr"))
    for name, v in values.items():
        if name == "betas":
            for i, b in enumerate(v):
                if not 0.0 <= b < 1.0:
                    raise ValueError(f"Invalid beta parameter at index {i}: {b}")
        elif not 0.0 <= v <= (1.0 if name == "rho" else math.inf):
            raise ValueError(f"Invalid {_WHAT.get(name, name + ' value')}: {v}")


# names of the members of a group's tuples: Adam's betas, Rprop's etas and step_sizes,
# Muon's ns_coefficients, Adafactor's eps
_MEMBERS = {
    "beta1": ("betas", 0),
    "beta2": ("betas", 1),
    "etaminus": ("etas", 0),
    "etaplus": ("etas", 1),
    "step_size_min": ("step_sizes", 0),
    "step_size_max": ("step_sizes", 1),
    "ns_a": ("ns_coefficients", 0),
    "ns_b": ("ns_coefficients", 1),
    "ns_c": ("ns_coefficients", 2),
    "eps2": ("eps", 1),
}


@functools.cache
def _getter(name: str):
    """``group -> value`` for ``name``: a key, a member of a pair (``_MEMBERS``), or
    ``-name``."""
    if name.startswith("-"):
        get = _getter(name[1:])
        return lambda g: -get(g)
    if name in _MEMBERS:
        key, i = _MEMBERS[name]
        return lambda g: g[key][i]
    return lambda g: g[name]


# -- pieces of the updates, in torch's arithmetic -------------------------------------------
def new_step(fused=False, value=0.0) -> Tensor:
    """A fresh ``state["step"]`` (or one loaded as a number): a 0-d tensor of the default
    dtype, as torch's (float32 for its fused kernels: Note [implementation flags])."""
    return scalar_tensor(value, float32 if fused else get_default_dtype())


def advance(state: dict, dtype, h: Hyper | None = None, own: bool = False) -> Tensor | float:
    """Count a step in ``state["step"]``; the count in ``dtype``, or with ``h`` as torch
    computes with it: eagerly a Python float (torch's ``_get_value``), so the scalars made
    from it are Python's arithmetic, as torch's (not 0-d tensor ops: half an eager Adam
    step's ops; NumPy's float64 ``pow`` is not C's), rounded once where they meet the
    tensors (``1 - 0.999 ** 1`` in float32 is 1.3e-5 off, and Adam's step with it); in an
    eager differentiable step float64, or with ``own`` the step's own dtype, as torch's
    differentiable Adam computes with the step tensor. Under capture it stays ``dtype``: a
    compiled step runs on backends without float64."""
    state["step"].add_(1)
    dtype = opmath(dtype)  # (a half count stops at 256 or 2048)
    if h is not None and h.icpt is None:
        if not is_grad_enabled():
            if current_interceptor() is None:
                return float(state["step"].item())
            dtype = float64
        elif current_interceptor() is None:  # an eager differentiable step
            dtype = state["step"].dtype if own else float64
    return state["step"].to(dtype)


def sqrt(x):
    """``x ** 0.5`` of a scalar of the update: ``math.sqrt`` of a Python float (an eager
    count's, ``advance``), as torch's ``_dispatch_sqrt``; else the tensor's ``sqrt``."""
    return math.sqrt(x) if type(x) is float else x.sqrt()


def opmath(dtype):
    """The dtype torch's kernels compute a ``dtype`` tensor's update in, and take its Python
    numbers at (``opmath_type``): float32 for float16 and bfloat16. A compiled step's
    hyper-parameters are 0-d tensors of it: rounded to bfloat16, momentum 0.9 was
    0.8984375, and a step count stopped at 256."""
    return float32 if dtype is float16 or dtype is bfloat16 else dtype


def dense_grad(grad):
    """``grad``, a sparse one as its dense tensor (Note [sparse gradients] in sparse.py)."""
    return grad.to_dense() if type(grad) is not Tensor and grad.is_sparse else grad


def decayed_grad(p, grad, h: Hyper, decoupled: bool = False):
    """``grad`` negated under ``maximize``, plus L2 weight decay; or with ``decoupled``
    (AdamW's rule) the gradient as is and ``p`` shrunk by ``1 - lr * weight_decay``."""
    if h.flag("maximize"):
        grad = -grad
    if h.flag("weight_decay"):
        if decoupled:
            p.mul_(h.number("1 - lr * weight_decay", lambda g: 1 - g["lr"] * g["weight_decay"]))
        else:
            grad = grad.add(p, alpha=h.number("weight_decay"))
    return grad


def saved_copy(x: Tensor) -> Tensor:
    """``x``, or in a differentiable step (grad mode on) a copy of it: an operand that
    autograd saves and the update then overwrites (Note [implementation flags])."""
    return x.clone() if is_grad_enabled() else x


def lerp_(avg, end, weight) -> None:
    """``avg.lerp_(end, weight)`` (Note [fused multiply-add]). An ``end``
    of another dtype raises ``RuntimeError`` as torch's ``lerp_`` does: state made before
    the parameter's dtype changed (``model.double()`` after the optimizer was made)."""
    if avg.dtype != end.dtype:
        raise RuntimeError(
            at_user(
                f"the optimizer's state is {avg.dtype} but the gradient is {end.dtype}: the "
                "parameter's dtype changed after the optimizer made its state (as by "
                "model.double() after creating it); create the optimizer after converting "
                "the model"
            )
        )
    if isinstance(weight, Tensor) and weight.dtype is not avg.dtype:  # a half avg's opmath
        avg.copy_(avg.float().lerp(end.float(), weight).to(avg.dtype))  # weight, as torch's
    else:
        avg.lerp_(end, weight)


def ema_(avg, x, h: Hyper, name: str) -> None:
    """``avg.lerp_(x, 1 - group[name])``: a moving average of ``x``."""
    lerp_(avg, x, h.one_minus(name))


def ema_sq_(avg, x, h: Hyper, name: str) -> None:
    """``avg.mul_(d).addcmul_(x, x.conj(), value=1 - d)`` with ``d = group[name]``."""
    avg.mul_(h.number(name)).addcmul_(x, x.conj(), value=h.one_minus(name))


def note_step(opt: Optimizer) -> None:
    """Note a step for the schedulers on ``opt`` (``_hooked``): one stepped before ``opt``
    was since the first of them was made warns, as torch's (``LRScheduler.step``)."""
    if "_opt_called" in vars(opt):
        opt._opt_called = True


def _unless_none(result, value):
    return value if result is None else result


def _cast(value, dtype):
    """A loaded state ``value`` as a tensor cast to ``dtype`` (unless None); lists
    (LBFGS's history) element by element; other values as they are."""
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype) for v in value)
    if not isinstance(value, Tensor) and not hasattr(value, "shape"):
        return value  # a Python number
    # NumPy's dtype (staged.tensor of a foreign tensor would round float64 to float32)
    value = value.detach() if isinstance(value, Tensor) else tensor(np.asarray(value))
    return value.to(dtype) if dtype is not None else value


def _stored(current, value):
    """``value`` (``_cast``'s) copied into ``current`` when that is a tensor of its shape,
    else a copy of it (the state never aliases the state dict loaded)."""
    if isinstance(value, (list, tuple)):
        return type(value)(_stored(None, v) for v in value)
    if not isinstance(value, Tensor):
        return value
    if isinstance(current, Tensor) and tuple(current.shape) == tuple(value.shape):
        with no_grad():
            current.copy_(value)
        return current
    return value.clone()
