"""``staged.profiler``, as ``torch.profiler``: ``profile`` (with ``activities``, a
``schedule`` of steps and ``on_trace_ready``), ``record_function`` and the event lists,
from ``staged.autograd.profiler``. A profiled compiled call shows its phases (argument
transfer, enqueue, device execution, result transfer): Note [compiled calls] in
``staged/runtime/profiled.py``, docs/profiling.md.

Example:
    >>> with staged.profiler.profile(activities=[ProfilerActivity.CPU]) as prof:
    ...     loss = step(x, y)
    >>> print(prof.key_averages().table(sort_by="cpu_time_total"))
"""

from __future__ import annotations

import enum
import gzip
import os
import shutil
import socket
import sys
import time
import warnings

from .autograd import profiler as _autograd
from .autograd.profiler import EventList, FunctionEvent, FunctionEventAvg, record_function

__all__ = [
    "EventList",
    "FunctionEvent",
    "FunctionEventAvg",
    "ProfilerAction",
    "ProfilerActivity",
    "profile",
    "record_function",
    "schedule",
    "tensorboard_trace_handler",
]


class ProfilerActivity(enum.Enum):
    """What a profile records; this build records the CPU only (eager ops run on NumPy)."""

    CPU = 0
    XPU = 1
    MTIA = 2
    CUDA = 3
    HPU = 4
    PrivateUse1 = 5


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """The action for each step number: ``skip_first`` steps, then cycles of ``wait``
    idle, ``warmup`` and ``active`` recorded steps (the last one saved), ``repeat``
    cycles (0: without end); ``skip_first_wait`` drops the first cycle's wait."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError("Invalid profiler schedule arguments")
    if warmup == 0:
        warnings.warn(
            "Profiler won't be using warmup, this can skew profiler results", stacklevel=2
        )
    cycle = wait + warmup + active

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        at = step % cycle
        if at < wait:
            return ProfilerAction.NONE
        if at < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if at < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return action


def _default_schedule_fn(step: int) -> ProfilerAction:
    """Without a schedule every step records."""
    return ProfilerAction.RECORD


def kineto_available() -> bool:
    """True: ``profile`` here takes what torch's Kineto-based profiler takes (activities,
    schedule, ``on_trace_ready``), which is what callers ask this to know."""
    return True


class profile(_autograd.profile):  # noqa: N801  (torch's name)
    """``torch.profiler.profile``: records while ``schedule(step_num)`` says so (always,
    without one), each ``step()`` advancing it inside a ``ProfilerStep*`` block, and
    hands itself to ``on_trace_ready`` as each recorded window ends (and at exit)."""

    def __init__(
        self,
        *,
        activities=None,
        schedule=None,
        on_trace_ready=None,
        record_shapes=False,
        profile_memory=False,
        with_stack=False,
        with_flops=False,
        with_modules=False,
        **kwargs,
    ):
        super().__init__(
            record_shapes=record_shapes,
            profile_memory=profile_memory,
            with_stack=with_stack,
            with_flops=with_flops,
        )
        wanted = set(activities) if activities else {ProfilerActivity.CPU}
        if ProfilerActivity.CPU not in wanted:
            raise AssertionError("No activities specified for the profiler")
        self.activities = {ProfilerActivity.CPU}
        self.schedule = schedule or _default_schedule_fn
        self.record_steps = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.current_action = self.schedule(0)
        self._step_block: record_function | None = None

    def start(self) -> None:
        self._transit(ProfilerAction.NONE, self.current_action)
        self._open_step()

    def stop(self) -> None:
        self._close_step()
        self._transit(self.current_action, None)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def step(self) -> None:
        """Ends this step and starts the next, recording as the schedule says."""
        self._close_step()
        before = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(before, self.current_action)
        self._open_step()

    def _transit(self, before, after) -> None:
        was, will = before in _RECORDING, after in _RECORDING
        if was and (not will or before is ProfilerAction.RECORD_AND_SAVE):
            super().__exit__(None, None, None)
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        if will and (not was or before is ProfilerAction.RECORD_AND_SAVE):
            self._events, self.function_events = [], None
            super().__enter__()

    def _open_step(self) -> None:
        if self.record_steps:
            self._step_block = record_function("ProfilerStep*")
            self._step_block.__enter__()

    def _close_step(self) -> None:
        if self._step_block is not None:
            self._step_block.__exit__(None, None, None)
            self._step_block = None


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False, **kwargs):
    """An ``on_trace_ready`` that writes each window's Chrome trace into ``dir_name`` as
    ``<worker_name>.<ns>.pt.trace.json`` (``.gz`` with ``use_gzip``; the worker named
    ``<host>_<pid>`` by default), as torch's."""
    worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"

    def handler_fn(prof) -> None:
        os.makedirs(dir_name, exist_ok=True)
        path = os.path.join(dir_name, f"{worker}.{time.time_ns()}.pt.trace.json")
        prof.export_chrome_trace(path)
        if use_gzip:
            with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.remove(path)

    return handler_fn


profiler = sys.modules[__name__]  # torch.profiler.profiler: this module (torch's submodule)
sys.modules[__name__ + ".profiler"] = profiler
