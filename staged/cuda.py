"""``staged.cuda``: answers as ``torch.cuda`` does in a CPU-only torch build (Note [devices]
in ``staged/eager/devices.py``): nothing is available, seeding is a no-op, and calls that
need a GPU raise. Compiled steps run on NVIDIA GPUs through
``staged.compile(step, backend="cuda")`` instead."""

from __future__ import annotations

import warnings
from collections import OrderedDict

from . import amp as _amp
from . import dtypes as _dt
from .eager import devices as _devices
from .eager.legacy_types import CUDA_TYPES as _legacy_types


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def is_initialized() -> bool:
    return False


def manual_seed(seed) -> None:
    """A no-op, as in a CPU-only torch build (there is no CUDA generator to seed)."""


def manual_seed_all(seed) -> None:
    """A no-op, as in a CPU-only torch build."""


def seed() -> None:
    """A no-op, as in a CPU-only torch build."""


def seed_all() -> None:
    """A no-op, as in a CPU-only torch build."""


def get_rng_state_all() -> list:
    """[]: one state per CUDA device, and there are none (a CPU-only torch build's answer)."""
    return []


def set_rng_state_all(new_states) -> None:
    """Sets one state per CUDA device: with none, a CPU-only build's empty list is all it
    takes; a state for a device raises, as there (``set_rng_state``)."""
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def empty_cache() -> None:
    """A no-op: there is no CUDA memory to free."""


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return False


def is_tf32_supported() -> bool:
    return False


def get_arch_list() -> list[str]:
    return []


def memory_allocated(device=None) -> int:
    """0: no tensor lives in CUDA memory (as a CPU-only torch build answers)."""
    return 0


memory_reserved = max_memory_allocated = max_memory_reserved = memory_allocated


def _renamed(old: str, new: str):
    """``torch.cuda.<old>``: warns that it is ``<new>`` now, and answers 0."""

    def counter(device=None) -> int:
        warnings.warn(
            f"`torch.cuda.{old}` has been renamed to `torch.cuda.{new}`",
            FutureWarning,
            stacklevel=2,
        )
        return 0

    counter.__name__ = counter.__qualname__ = old
    return counter


memory_cached = _renamed("memory_cached", "memory_reserved")
max_memory_cached = _renamed("max_memory_cached", "max_memory_reserved")


def memory_stats(device=None) -> OrderedDict:
    return OrderedDict()


def _no_cuda(*args, **kwargs):
    _devices.check("cuda")


current_device = synchronize = get_device_name = get_device_properties = set_device = (
    get_device_capability
) = _no_cuda
init = get_rng_state = set_rng_state = initial_seed = current_stream = mem_get_info = _no_cuda
reset_peak_memory_stats = reset_max_memory_allocated = ipc_collect = _no_cuda


class _NoCuda:
    """A CUDA object torch's CPU build has as a class (for annotations and ``isinstance``)
    that cannot be made without CUDA."""

    def __init__(self, *args, **kwargs):
        _no_cuda()


class Stream(_NoCuda):
    """``torch.cuda.Stream``."""


class Event(_NoCuda):
    """``torch.cuda.Event``."""


class CUDAGraph(_NoCuda):
    """``torch.cuda.CUDAGraph``."""


class graph(_NoCuda):  # noqa: N801  (torch's name)
    """``torch.cuda.graph``: capturing a CUDA graph."""


def is_current_stream_capturing() -> bool:
    """False: no CUDA stream exists to capture."""
    return False


globals().update(_legacy_types)  # torch.cuda.FloatTensor ...: they raise, as in a CPU build


class amp:  # noqa: N801  (torch.cuda.amp, deprecated there: torch.amp with device "cuda")
    """``torch.cuda.amp.GradScaler`` and ``autocast``: ``staged.amp``'s for "cuda", which
    warn and disable themselves (no CUDA), as torch's do."""

    @staticmethod
    def GradScaler(init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, **kw):  # noqa: N802
        return _amp.GradScaler("cuda", init_scale, growth_factor, backoff_factor, **kw)

    @staticmethod
    def autocast(enabled=True, dtype=_dt.float16, cache_enabled=True):
        warnings.warn(
            "`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
            "`torch.amp.autocast('cuda', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
        return _amp.autocast("cuda", dtype, enabled, cache_enabled)
