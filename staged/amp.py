"""``staged.amp``: torch.amp's ``GradScaler`` (dynamic loss scaling, torch's algorithm and
messages), ``autocast`` and ``custom_fwd``/``custom_bwd``, and torch's functions over the
autocast state (``staged.is_autocast_enabled`` ...).

``autocast("cpu")`` runs the ops on torch's CPU lists in bfloat16 (or float16), float32 or
the widest operand type, as torch does (Note [autocast] in ``staged/eager/autocast.py``).
On this CPU-only build ``autocast("cuda")`` warns and disables itself, as torch's does
without CUDA, and so does a ``GradScaler`` for "cuda" (the default device); ``"cpu"``
scales.

Note [scaler in a trace]: torch's ``scaler.step(opt)`` decides on the host (``.item()``)
whether the unscaled gradients held an inf or NaN, which a traced step cannot do. The
scale and growth tracker are 0-d tensors, as torch's, that a compiled step reads and writes
as state; ``unscale_`` notes a 0-d bool ``found`` with tensor ops; in a trace ``step``
runs ``opt.step()`` and then sets every parameter and optimizer state tensor it wrote to
``where(found, before, after)``, and ``update`` computes torch's ``_amp_update_scale_``
(backoff on an inf, growth after ``growth_interval`` clean steps, kept only if finite) in
the graph: no host read and no re-trace per call. The factors and interval are constants
of the graph, guarded (a new one re-traces). State the skipped step made (the first
call's, traced one-shot) is zeros where torch makes none: the next step is torch's for
Adam, AdamW, RMSprop, SGD without dampening; SGD with ``dampening`` (its buffer starts as
the gradient) and Adagrad with ``initial_accumulator_value`` differ after a first step
that overflows. ``load_state_dict`` writes the tensors in place, so a compiled step reads
the loaded values. Eager code decides on the host, as torch's.
"""

from __future__ import annotations

import collections.abc
import functools
import warnings

import numpy as np

from . import dtypes as dt
from .eager import autocast as _state
from .eager.grad_mode import no_grad
from .eager.interceptor import current_interceptor
from .eager.factories import zeros_like
from .eager.ops._operands import scalar_tensor
from .eager.ops.elementwise import where
from .eager.tensor import Tensor

_READY, _UNSCALED, _STEPPED = 0, 1, 2


class GradScaler:
    """torch's: the scale (float32) and growth tracker (int32) are 0-d tensors, as torch's,
    so a compiled step reads and updates them in its graph (Note [scaler in a trace])."""

    def __init__(
        self,
        device="cuda",
        init_scale=2.0**16,
        growth_factor=2.0,
        backoff_factor=0.5,
        growth_interval=2000,
        enabled=True,
    ):
        if enabled and str(device).startswith("cuda"):  # a CPU build, as torch's says
            warnings.warn(
                "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                stacklevel=2,
            )
            enabled = False
        self._enabled = enabled
        self._scale = scalar_tensor(np.float32(init_scale), dt.float32)
        self._growth_tracker = scalar_tensor(np.int32(0), dt.int32)
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._per_optimizer: dict = {}  # id(optimizer) -> [stage, found inf (a bool tensor)]

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        return self._scale.item() if self._enabled else 1.0

    def _get_growth_tracker(self) -> int:
        return self._growth_tracker.item() if self._enabled else 0

    def scale(self, outputs):
        """``outputs`` (a tensor, or nested lists and tuples of them) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def _state(self, optimizer) -> list:
        return self._per_optimizer.setdefault(id(optimizer), [_READY, None])

    def unscale_(self, optimizer) -> None:
        """Divide the optimizer's gradients by the scale, in place, noting any inf or NaN."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state[0] == _UNSCALED:
            raise RuntimeError(
                "unscale_() has already been called on this optimizer since the last update()."
            )
        if state[0] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        with no_grad():
            inv = self._scale.reciprocal()  # float32, as torch's double then float
            found = scalar_tensor(False, dt.bool_)
            grads = [
                p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None
            ]
            if any(g.dtype is dt.float16 for g in grads):  # torch's (its allow_fp16=False)
                raise ValueError("Attempting to unscale FP16 gradients.")
            for g in grads:  # times the float32 inverse, rounded once (Note [half by a scalar])
                found = found.logical_or(g.isfinite().all().logical_not())
                g.mul_(inv)
        state[:] = [_UNSCALED, found]

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step()`` unless the unscaled gradients held an inf or NaN; in a
        trace, the step with what it wrote kept only where they did not."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._state(optimizer)
        if state[0] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state[0] == _READY:
            self.unscale_(optimizer)
        if current_interceptor() is None:
            out = None if bool(state[1]) else optimizer.step(*args, **kwargs)
        else:
            out = _skipped_if(state[1], optimizer, args, kwargs)
        state[0] = _STEPPED
        return out

    def update(self, new_scale=None) -> None:
        """Back off after a step that found an inf or NaN; grow after ``growth_interval``
        clean steps in a row (torch's ``_amp_update_scale_``, in tensor ops)."""
        if not self._enabled:
            return
        with no_grad():
            if new_scale is not None:
                if isinstance(new_scale, Tensor):
                    self._scale.copy_(new_scale)
                else:
                    self._scale.fill_(float(new_scale))
            else:
                if not self._per_optimizer:
                    raise AssertionError("No inf checks were recorded prior to update.")
                self._guard_factors()
                found = functools.reduce(
                    Tensor.logical_or, (f for _, f in self._per_optimizer.values())
                )
                scale, tracker = self._scale, self._growth_tracker
                good = tracker + 1
                grow = good == self._growth_interval
                grown = scale * np.float32(self._growth_factor)
                kept = where(grow.logical_and(grown.isfinite()), grown, scale)
                self._scale.copy_(where(found, scale * np.float32(self._backoff_factor), kept))
                tracker.copy_(where(found.logical_or(grow), 0, good))
        self._per_optimizer = {}

    def _guard_factors(self) -> None:
        """In a trace, the factors and interval are the graph's constants: their change
        re-traces."""
        icpt = current_interceptor()
        if icpt is not None:
            icpt.guard(
                lambda: (self._growth_factor, self._backoff_factor, self._growth_interval),
                "GradScaler growth_factor, backoff_factor, growth_interval",
                key=(id(self), "factors"),
            )

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor) -> None:
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor) -> None:
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval) -> None:
        self._growth_interval = int(new_interval)

    def state_dict(self) -> dict:
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._get_growth_tracker(),
        }

    def load_state_dict(self, state_dict) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError(
                "The source state dict is empty, possibly because it was saved "
                "from a disabled instance of GradScaler."
            )
        scale, tracker = float(state_dict["scale"]), int(state_dict["_growth_tracker"])
        growth, backoff = float(state_dict["growth_factor"]), float(state_dict["backoff_factor"])
        interval = int(state_dict["growth_interval"])  # all read before anything changes
        with no_grad():  # in place: a compiled step reads and writes these tensors
            self._scale.fill_(scale)
            self._growth_tracker.fill_(tracker)
        self._growth_factor, self._backoff_factor, self._growth_interval = growth, backoff, interval


def _skipped_if(found, optimizer, args, kwargs):
    """``optimizer.step()`` in a trace, with every parameter and optimizer state tensor it
    wrote set back to its value before it where ``found`` (a 0-d bool tensor) holds: the
    graph decides per call what eager code decides on the host; state the step made is
    zeros there (Note [scaler in a trace])."""
    params = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
    with no_grad():
        before = {(id(p), None): p.detach().clone() for p in params}
        for p in params:
            for k, v in optimizer.state.get(p, {}).items():
                if isinstance(v, Tensor):
                    before[id(p), k] = v.detach().clone()
    out = optimizer.step(*args, **kwargs)
    with no_grad():
        for p in params:
            p.copy_(where(found, before[id(p), None], p))
            state = optimizer.state.get(p, {})
            for k, v in state.items():
                if not isinstance(v, Tensor):
                    continue
                kept = before.get((id(p), k))
                if kept is None:  # made by this step: a new tensor, not a write into it
                    state[k] = where(found, zeros_like(v), v)
                else:
                    v.copy_(where(found, kept, v))
    return out


class autocast:
    """torch's ``autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``: a
    context manager and decorator under which the ops on torch's lists for
    ``device_type`` run in ``dtype`` (bfloat16 by default on the CPU), float32 or their
    widest operand type. Regions nest; ``enabled=False`` turns it off inside one. The
    state is per thread, as torch's."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else dtype
        self.device = device_type
        if not is_autocast_available(device_type):
            raise RuntimeError(
                f"User specified an unsupported autocast device_type '{device_type}'"
            )
        self._cache_enabled = (
            is_autocast_cache_enabled() if cache_enabled is None else cache_enabled
        )
        if enabled and device_type == "cuda":  # a CPU-only build, as torch's says
            warnings.warn(
                "CUDA is not available or torch_xla is imported. Disabling autocast.",
                stacklevel=2,
            )
            enabled = False
        elif enabled and self.fast_dtype not in (dt.bfloat16, dt.float16):
            name = device_type.upper()
            warnings.warn(
                f"In {name} autocast, but the target dtype is not supported. Disabling "
                f"autocast.\n{name} Autocast only supports dtypes of torch.bfloat16, "
                "torch.float16 currently.",
                stacklevel=2,
            )
            enabled = False
        self._enabled = enabled

    def __enter__(self):
        self.prev_cache_enabled = is_autocast_cache_enabled()
        self.prev = is_autocast_enabled(self.device)
        self.prev_fastdtype = get_autocast_dtype(self.device)
        set_autocast_enabled(self.device, self._enabled)
        set_autocast_dtype(self.device, self.fast_dtype)
        _state.increment_nesting()
        set_autocast_cache_enabled(self._cache_enabled)
        return self

    def __exit__(self, *exc) -> None:
        if _state.decrement_nesting() == 0:  # the outermost region: drop the cached casts
            _state.clear_cache()
        set_autocast_enabled(self.device, self.prev)
        set_autocast_dtype(self.device, self.prev_fastdtype)
        set_autocast_cache_enabled(self.prev_cache_enabled)

    def __call__(self, func):
        if not callable(func):
            raise TypeError(
                f"autocast()(func) requires a callable, but got {type(func).__name__}. "
                "Did you mean to use autocast as a context manager? For example:\n"
                "    with torch.autocast(device_type=...):\n"
                "        output = model(input)"
            )

        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return decorate_autocast


def is_autocast_available(device_type: str) -> bool:
    """Whether torch has autocast for ``device_type`` (only "cpu" casts staged's tensors:
    they are all on the CPU)."""
    return _state.device_type(device_type) in _state.AVAILABLE


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    return _state.is_enabled(device_type)


def set_autocast_enabled(device_type, enabled=None) -> None:
    """``set_autocast_enabled(device_type, enabled)``; torch's older
    ``set_autocast_enabled(enabled)`` is for "cuda"."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    if not isinstance(enabled, bool):
        raise TypeError(
            "set_autocast_enabled(): argument 'enabled' (position 2) must be bool, not "
            f"{type(enabled).__name__}"
        )
    _state.set_enabled(device_type, enabled)


def get_autocast_dtype(device_type: str):
    return _state.get_dtype(device_type)


def set_autocast_dtype(device_type: str, dtype) -> None:
    _state.set_dtype(device_type, dtype)


def is_autocast_cache_enabled() -> bool:
    return _state.is_cache_enabled()


def set_autocast_cache_enabled(enabled: bool) -> None:
    _state.set_cache_enabled(enabled)


def clear_autocast_cache() -> None:
    _state.clear_cache()


def autocast_increment_nesting() -> int:
    return _state.increment_nesting()


def autocast_decrement_nesting() -> int:
    return _state.decrement_nesting()


def _deprecated(old: str, new: str, fn):
    """torch's deprecated per-device forms (``is_autocast_cpu_enabled`` ...), warning as
    torch's do."""

    @functools.wraps(fn)
    def call(*args):
        warnings.warn(
            f"torch.{old}() is deprecated. Please use torch.{new} instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        return fn(*args)

    call.__name__ = call.__qualname__ = old
    return call


is_autocast_cpu_enabled = _deprecated(
    "is_autocast_cpu_enabled", "is_autocast_enabled('cpu')", lambda: is_autocast_enabled("cpu")
)
set_autocast_cpu_enabled = _deprecated(
    "set_autocast_cpu_enabled",
    "set_autocast_enabled('cpu', enabled)",
    lambda enabled: set_autocast_enabled("cpu", enabled),
)
get_autocast_cpu_dtype = _deprecated(
    "get_autocast_cpu_dtype", "get_autocast_dtype('cpu')", lambda: get_autocast_dtype("cpu")
)
set_autocast_cpu_dtype = _deprecated(
    "set_autocast_cpu_dtype",
    "set_autocast_dtype('cpu', dtype)",
    lambda dtype: set_autocast_dtype("cpu", dtype),
)
get_autocast_gpu_dtype = _deprecated(
    "get_autocast_gpu_dtype", "get_autocast_dtype('cuda')", lambda: get_autocast_dtype("cuda")
)


# --- custom autograd Functions under autocast ---------------------------------------------
def _cast(value, device_type: str, dtype):
    """``value`` with its floating tensors but float64 ones cast to ``dtype``, through
    mappings and iterables (torch's ``autocast_mode._cast``)."""
    if isinstance(value, Tensor):
        eligible = value.is_floating_point() and value.dtype is not dt.float64
        return value.to(dtype) if eligible and device_type == "cpu" else value
    if isinstance(value, (str, bytes, np.ndarray)):
        return value
    if isinstance(value, collections.abc.Mapping):
        return {
            _cast(k, device_type, dtype): _cast(v, device_type, dtype) for k, v in value.items()
        }
    if isinstance(value, collections.abc.Iterable):
        cast = (_cast(v, device_type, dtype) for v in value)
        return type(value)(cast) if isinstance(value, (list, tuple)) else cast
    return value


def _check_device_type(device_type) -> None:
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """torch's decorator of a custom ``Function``'s ``forward``: with ``cast_inputs``, an
    autocast region casts its floating tensor arguments to that dtype and runs it with
    autocast off; ``custom_bwd`` runs ``backward`` in the autocast state ``forward`` saw."""
    _check_device_type(device_type)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        args[0]._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            args[0]._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        args[0]._fwd_used_autocast = False
        if not is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)
        with autocast(device_type=device_type, enabled=False):
            return fwd(
                *_cast(args, device_type, cast_inputs), **_cast(kwargs, device_type, cast_inputs)
            )

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """torch's decorator of a custom ``Function``'s ``backward`` (see ``custom_fwd``)."""
    _check_device_type(device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        with autocast(device_type, args[0]._dtype, args[0]._fwd_used_autocast):
            return bwd(*args, **kwargs)

    return decorate_bwd
