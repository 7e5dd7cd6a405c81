"""``staged.amp``: torch.amp's ``GradScaler`` (dynamic loss scaling, torch's algorithm and
messages) and ``autocast``.

``autocast`` with ``enabled=True`` raises: staged does not run ops in lower precision on
its own, and silently computing in float32 under a block that asks for bfloat16 would give
other numbers than torch. Cast the model and inputs (``model.to(staged.bfloat16)``) for
lower-precision arithmetic, or pass ``enabled=False``. A ``GradScaler`` for "cuda" (the
default device) warns and disables itself, as torch's does without CUDA; ``"cpu"`` scales.
"""

from __future__ import annotations

import warnings

import numpy as np

from .eager.grad_mode import no_grad
from .eager.tensor import Tensor

_READY, _UNSCALED, _STEPPED = 0, 1, 2


class GradScaler:
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
        self._scale = float(init_scale)
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval, self._growth_tracker = int(growth_interval), 0
        self._per_optimizer: dict = {}  # id(optimizer) -> [stage, found inf]

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        return self._scale if self._enabled else 1.0

    def scale(self, outputs):
        """``outputs`` (a tensor, or nested lists and tuples of them) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * np.float32(self._scale)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def _state(self, optimizer) -> list:
        return self._per_optimizer.setdefault(id(optimizer), [_READY, False])

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
        inv = np.float32(np.float64(1.0) / np.float32(self._scale))  # torch's float32 reciprocal
        found = False
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        found = found or not bool(p.grad.isfinite().all())
                        p.grad.mul_(inv)
        state[:] = [_UNSCALED, found]

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step()`` unless the unscaled gradients held an inf or NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._state(optimizer)
        if state[0] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state[0] == _READY:
            self.unscale_(optimizer)
        out = None if state[1] else optimizer.step(*args, **kwargs)
        state[0] = _STEPPED
        return out

    def update(self, new_scale=None) -> None:
        """Back off after a step that found an inf or NaN; grow after ``growth_interval``
        clean steps in a row."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if isinstance(new_scale, Tensor) else new_scale)
        else:
            if not self._per_optimizer:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(found for _, found in self._per_optimizer.values()):
                self._scale = float(np.float32(self._scale) * np.float32(self._backoff_factor))
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale = float(np.float32(self._scale) * np.float32(self._growth_factor))
                    self._growth_tracker = 0
        self._per_optimizer = {}

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
            "scale": self._scale,
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._growth_tracker,
        }

    def load_state_dict(self, state_dict) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError(
                "The source state dict is empty, possibly because it was saved "
                "from a disabled instance of GradScaler."
            )
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])


class autocast:
    """torch's ``autocast`` context and decorator: only ``enabled=False`` runs (see the
    module doc)."""

    def __init__(self, device_type="cuda", dtype=None, enabled=True, cache_enabled=None):
        self.device_type, self.fast_dtype, self._enabled = device_type, dtype, enabled

    def __enter__(self):
        if self._enabled:
            raise NotImplementedError(
                f"staged.autocast(device_type={self.device_type!r}): mixed-precision "
                "autocast is not implemented, and computing in float32 instead would give "
                "other numbers than torch. Pass enabled=False, or cast the model and inputs "
                "(model.to(staged.bfloat16)) to compute in lower precision"
            )
        return self

    def __exit__(self, *exc) -> None:
        return None

    def __call__(self, fn):
        def wrapped(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        return wrapped


def is_autocast_available(device_type: str) -> bool:
    return False


def is_autocast_enabled(device_type=None) -> bool:
    """False: staged runs no autocast."""
    return False
